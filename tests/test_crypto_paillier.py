"""Own Paillier (3072-bit, DJN randomizers, CRT decryption) and class-count packing."""

import random

import numpy as np

import phe
import pytest

from fedanon.crypto.counters import counter_values
from fedanon.crypto.errors import DecryptionError, KeyFormatError, SlotOverflowError
from fedanon.crypto.paillier import (
    CountPacker, PaillierPrivateKey, PaillierPublicKey, generate_paillier_keypair,
)


@pytest.fixture(scope="module")
def sk() -> PaillierPrivateKey:
    return generate_paillier_keypair(3072)


def test_key_size_and_round_trip(sk):
    pk = sk.public_key
    assert pk.bits == 3072 and pk.hs is not None
    for m in (0, 1, 2, 12345, pk.max_plaintext):
        c = pk.encrypt(m)
        assert sk.decrypt(c) == m
    assert pk.encrypt(1) != pk.encrypt(1)  # probabilistic
    assert sk.decrypt(pk.encrypt(7, fast=False)) == 7


def test_cross_check_with_phe(sk):
    pk = sk.public_key
    phe_pk = phe.PaillierPublicKey(int(pk.n))
    phe_sk = phe.PaillierPrivateKey(phe_pk, int(sk.p), int(sk.q))
    for m in (0, 1, 99991, 2**200 + 3):
        assert sk.decrypt(phe_pk.raw_encrypt(m)) == m
        assert phe_sk.raw_decrypt(int(pk.encrypt(m))) == m


def test_additive_homomorphism_and_per_class_sums(sk):
    pk = sk.public_key
    a, b = pk.encrypt(20), pk.encrypt(22)
    assert sk.decrypt(pk.add(a, b)) == 42
    assert sk.decrypt(pk.add_plain(a, 5)) == 25
    assert sk.decrypt(pk.mul_plain(a, 3)) == 60
    assert sk.decrypt(pk.rerandomize(a)) == 20
    rng = random.Random(3)
    bits = [rng.randint(0, 1) for _ in range(120)]
    classes = [rng.randrange(7) for _ in range(120)]
    cts = pk.encrypt_many(counter_values(bits), workers=1)
    sums = pk.sum_by_class(cts, classes, 8)
    expected = [sum(b for b, c in zip(bits, classes) if c == j) for j in range(8)]
    assert [sk.decrypt(s) for s in sums] == expected  # class 7 is empty -> 0
    assert sk.decrypt(pk.sum(cts)) == sum(bits)


def test_parallel_encrypt_and_decrypt_keep_order(sk):
    pk = sk.public_key
    ms = list(range(80))
    cts = pk.encrypt_many(ms, workers=2)
    assert sk.decrypt_many(cts, workers=2) == ms


def test_packing_round_trip_at_slot_boundaries(sk):
    pk = sk.public_key
    packer = CountPacker(pk, max_count=30162)
    assert packer.slot_bits == 15 and packer.slots == 1535 // 15  # half a plaintext: below both factors
    top = (1 << 15) - 1
    counts = [0, top, 1, 0, top] * 20 + [top] * 3  # 103 counts: two packed ciphertexts
    sums = pk.encrypt_many(counts, workers=1)
    packed = packer.pack(sums, upper_bounds=[top] * len(counts))
    assert len(packed) == 2
    assert packer.unpack(sk, packed, len(counts)) == counts
    assert packer.pack_plain(counts) == [sk.decrypt(c) for c in packed]
    single = packer.pack([pk.encrypt(0)])
    assert packer.unpack(sk, single, 1) == [0]


def test_slot_overflow_is_refused_with_a_clear_error(sk):
    pk = sk.public_key
    packer = CountPacker(pk, max_count=255)
    with pytest.raises(SlotOverflowError, match="class #1 may hold up to 256 rows"):
        packer.pack([pk.encrypt(1), pk.encrypt(1)], upper_bounds=[3, 256])
    with pytest.raises(SlotOverflowError, match="count #0 = 256"):
        packer.pack_plain([256])
    # Without bounds, an overflow of a block's first slot carries out of the block and is caught
    # when unpacking (lower slots would carry silently: that is why `pack` takes upper bounds).
    packed = packer.pack([pk.encrypt(256), pk.encrypt(1)])
    with pytest.raises(SlotOverflowError, match="overflowed"):
        packer.unpack(sk, packed, 2)
    with pytest.raises(SlotOverflowError):
        pk.encrypt(pk.n)


def test_serialization_and_bad_input(sk):
    pk = sk.public_key
    pk2 = PaillierPublicKey.from_bytes(pk.to_bytes())
    assert pk2 == pk
    sk2 = PaillierPrivateKey.from_bytes(sk.to_bytes())
    c = pk2.encrypt(5)
    assert sk2.decrypt(c) == 5
    blob = pk.ciphertexts_to_bytes([c, pk.encrypt(6)])
    assert len(blob) == 2 * pk.ciphertext_bytes
    assert [sk.decrypt(x) for x in pk.ciphertexts_from_bytes(blob)] == [5, 6]
    with pytest.raises(DecryptionError):
        pk.ciphertexts_from_bytes(blob[:-1])
    with pytest.raises(DecryptionError):
        sk.decrypt(0)
    with pytest.raises(KeyFormatError):
        PaillierPublicKey.from_bytes(b"\x00\x00")
    with pytest.raises(KeyFormatError, match=">= 3072"):
        generate_paillier_keypair(1024)
    with pytest.raises(KeyFormatError, match="do not match"):
        PaillierPrivateKey(pk, 3, 5)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(data=st.data(), max_count=st.integers(min_value=1, max_value=2**40))
def test_plain_packing_round_trips_for_any_counts(sk, data, max_count):
    packer = CountPacker(sk.public_key, max_count)
    counts = data.draw(st.lists(st.integers(0, (1 << packer.slot_bits) - 1), min_size=1, max_size=400))
    blocks = packer.pack_plain(counts)
    assert len(blocks) == -(-len(counts) // packer.slots)
    assert all(0 <= b < sk.public_key.n for b in blocks)
    assert packer.unpack_plain(blocks, len(counts)) == counts


def test_fixed_base_table_matches_plain_exponentiation(sk):
    from fedanon.crypto.paillier import _randbits

    pk = sk.public_key
    table = pk._table()
    b = pk.randomizer_bits
    for a in (0, 1, 63, 64, (1 << b) - 1, int(_randbits(b)), int(_randbits(b))):
        assert table.pow(a) == pow(int(pk.hs), a, int(pk.nsquare))


def test_key_holder_crt_encryption_is_the_public_encryption(sk, monkeypatch):
    """The key holder's CRT path computes exactly (1 + m·n)·h_s^a mod n² -- the public key's
    ciphertext for the same exponent a -- so its ciphertexts have the same distribution."""
    from fedanon.crypto import paillier

    pk = sk.public_key
    for m in (0, 1, 2, 40000, pk.max_plaintext):
        a = paillier._randbits(pk.randomizer_bits)
        monkeypatch.setattr(paillier, "_randbits", lambda bits, a=a: a)
        assert sk.encrypt(m) == pk.encrypt(m)
        monkeypatch.undo()
        assert sk.decrypt(sk.encrypt(m)) == m
    many = sk.encrypt_many([1, 0, 1, 5] * 40, workers=2)
    assert [sk.decrypt(c) for c in many] == [1, 0, 1, 5] * 40
    assert len(set(many)) == len(many)  # fresh randomness per ciphertext


def test_public_and_crt_tables_share_one_bounded_cache(sk, monkeypatch):
    """Both kinds of fixed-base table live in the one cache with one eviction rule (least
    recently used beyond the bound): a process never holds more tables than the bound."""
    from fedanon.crypto import paillier

    monkeypatch.setattr(paillier, "_table_cache", paillier.OrderedDict())
    monkeypatch.setattr(paillier, "_TABLE_CACHE_SIZE", 1)
    pk = sk.public_key
    pk.encrypt(1)
    public_table = pk._table()
    sk.encrypt(1)
    assert len(paillier._table_cache) == 1 and public_table not in paillier._table_cache.values()
    monkeypatch.setattr(paillier, "_TABLE_CACHE_SIZE", 2)
    pk.encrypt(1)
    sk.encrypt(1)
    pk.encrypt(1)  # the public table is now the most recently used: the next one evicts the CRT pair
    paillier._cached_table(("other",), lambda: "x")
    assert list(paillier._table_cache.values())[0] is pk._table() and len(paillier._table_cache) == 2
    assert sk.decrypt(sk.encrypt(5)) == 5 and sk.decrypt(pk.encrypt(6)) == 6


def test_every_comb_shape_gives_the_plain_power(sk):
    """The comb is exact for every shape a batch may pick: rows that do not divide the
    exponent (a partial last row), blocks that do not divide the columns, one row or one
    block, and the extreme exponents; column patterns from bytes match the integer's bits."""
    from gmpy2 import mpz

    from fedanon.crypto import fixedbase

    pk = sk.public_key
    exponents = [0, 1, 2, (1 << pk._rbits) - 1, 1 << (pk._rbits - 1)] + \
        [random.getrandbits(pk._rbits) for _ in range(3)]
    raw = np.array([list(e.to_bytes(192, "big")) for e in exponents], dtype=np.uint8)
    for rows, blocks in [(1, 1), (2, 7), (5, 3), (7, 4), (8, 4), (11, 8), (13, 8), (16, 1)]:
        shape = fixedbase.CombShape(pk._rbits, rows, blocks)
        comb = fixedbase.Comb(pk.hs, pk.nsquare, shape)
        patterns = fixedbase.column_patterns(raw, shape).tolist()
        for e, u in zip(exponents, patterns):
            want = pow(pk.hs, mpz(e), pk.nsquare)
            assert comb.pow(e) == want and comb.pow_patterns(u) == want, (rows, blocks, e)
    with pytest.raises(ValueError):
        fixedbase.Comb(pk.hs, pk.nsquare, fixedbase.CombShape(8, 2, 1)).pow(256)
    odd = fixedbase.random_exponents(50, 13)  # exponents of a bit length that is no whole byte
    assert (odd[:, 0] < 1 << 5).all()


def test_batch_comb_fits_the_batch_size():
    """A few encryptions get a small table (cheap to build); a pool worker's share of a
    table's row counters the largest allowed, which costs fewer multiplications in all."""
    from fedanon.crypto import fixedbase

    shapes = [fixedbase.shape_for(n, 1536) for n in (1, 10, 100, 1_000, 6_300, 100_000)]
    entries = [s.entries for s in shapes]
    assert entries == sorted(entries) and entries[0] <= 256 and entries[-1] <= fixedbase.MAX_ENTRIES
    worker = fixedbase.shape_for(6_300, 1536)
    assert worker.columns + worker.block_columns < 1536 // 10  # fewer steps than 10-bit windows
    for n in (1, 50, 6_300):
        best = fixedbase.shape_for(n, 1536)
        assert all(best.cost(n) <= fixedbase.CombShape(1536, r, v).cost(n) for r in range(1, 17) for v in (1, 2, 4, 8)
                   if fixedbase.CombShape(1536, r, v).entries <= fixedbase.MAX_ENTRIES)


def test_batches_of_any_size_decrypt(sk):
    """encrypt_many picks its comb from the batch: small and large batches, public and CRT."""
    pk = sk.public_key
    for values in ([1, 0, 3], [1, 0] * 300):
        assert [sk.decrypt(c) for c in pk.encrypt_many(values, workers=1)] == values
        assert [sk.decrypt(c) for c in sk.encrypt_many(values, workers=2)] == values


def test_small_decryption_is_exact_below_the_bound_and_only_there(sk):
    """`decrypt_small` (one half-size exponentiation) equals `decrypt` for every plaintext below
    2^small_plaintext_bits -- the largest packed value included -- and is wrong, not lucky,
    for a plaintext above the larger factor: which is why packing stays below the bound."""
    pk = sk.public_key
    bound = 1 << pk.small_plaintext_bits
    assert pk.small_plaintext_bits == 1535 and bound < max(sk.p, sk.q)
    for m in (0, 1, 2, 30162, bound - 1, bound // 3, random.getrandbits(pk.small_plaintext_bits)):
        c = pk.encrypt(m)
        assert sk.decrypt_small(c) == m == sk.decrypt(c)
    big = int(max(sk.p, sk.q)) + 5
    assert sk.decrypt_small(pk.encrypt(big)) == 5  # reduced mod the larger factor
    assert sk.decrypt_many([pk.encrypt(7), pk.encrypt(bound - 1)], workers=1, small=True) == [7, bound - 1]
    with pytest.raises(DecryptionError):
        sk.decrypt_small(0)
    packer = CountPacker(pk, max_count=1)  # 1-bit slots: every bit of the packed half is used
    ones = [1] * packer.slots
    assert packer.pack_plain(ones) == [bound - 1]
    assert packer.unpack(sk, packer.pack(pk.encrypt_many(ones, workers=1)), len(ones)) == ones


def test_randomizer_exponent_has_the_documented_length(sk, monkeypatch):
    """Every batch ciphertext is exactly (1 + m·n)·h_s^a mod n² for an exponent a of
    `randomizer_bits` (320) bits: recorded as drawn and recomputed with plain powmod, for the
    public and the key holder's CRT path. Catches a randomizer of another length (e.g. the old
    1536 bits, or one too short) and a wrong combination of message and randomizer."""
    from gmpy2 import mpz

    from fedanon.crypto import fixedbase, paillier

    pk = sk.public_key
    assert pk.randomizer_bits == paillier.RANDOMIZER_BITS == 320
    drawn: list[tuple[int, np.ndarray]] = []
    real = fixedbase.random_exponents

    def recording(count: int, exp_bits: int) -> np.ndarray:
        raw = real(count, exp_bits)
        drawn.append((exp_bits, raw.copy()))
        return raw

    monkeypatch.setattr(fixedbase, "random_exponents", recording)
    values = [1, 0, 7, 1, 0] * 30
    for encrypt in (pk.encrypt_many, sk.encrypt_many):
        cts = encrypt(values, workers=1)
        bits, raw = drawn.pop()
        assert bits == 320 and raw.shape == (len(values), 40)
        for m, c, row in zip(values, cts, raw):
            a = int.from_bytes(bytes(row), "big")
            assert a < 1 << 320
            assert c == (1 + m * pk.n) * pow(pk.hs, mpz(a), pk.nsquare) % pk.nsquare
            assert sk.decrypt(c) == m
    assert max(int.from_bytes(bytes(r), "big") for r in raw).bit_length() > 300  # the top bits are used


def test_randomizer_exponent_length_below_twice_the_security_level_is_refused(sk):
    """Below 2·128 bits the kangaroo attack on h_s^a costs under 2^128: refused, as is a length
    above ⌈|n|/2⌉ (DJN's own); the chosen length survives pickling (pool workers encrypt with it)
    and does not change the key's bytes (decryption does not depend on it)."""
    import pickle

    pk = sk.public_key
    for bad in (0, 128, 255, pk.bits // 2 + 1):
        with pytest.raises(KeyFormatError, match="randomizer exponent"):
            PaillierPublicKey(pk.n, pk.hs, randomizer_bits=bad)
    long = PaillierPublicKey(pk.n, pk.hs, randomizer_bits=1536)
    assert pickle.loads(pickle.dumps(long)).randomizer_bits == 1536
    assert long.to_bytes() == pk.to_bytes() and PaillierPublicKey.from_bytes(pk.to_bytes()).randomizer_bits == 320
    short = PaillierPublicKey(pk.n, pk.hs, randomizer_bits=256)
    for key in (long, short):
        assert [sk.decrypt(c) for c in key.encrypt_many([3, 0, 1], workers=1)] == [3, 0, 1]
