"""Exponential ElGamal on secp256k1 as Protocol C's fast counter cipher."""

import random

import pytest

from fedanon.crypto.counters import counter_values
from fedanon.crypto.elgamal import (
    CIPHERTEXT_BYTES, IDENTITY, CiphertextVector, ElGamalPrivateKey, ElGamalPublicKey, add,
    generate_elgamal_keypair, sum_by_class,
)
from fedanon.crypto.errors import DecryptionError, KeyFormatError


@pytest.fixture(scope="module")
def sk() -> ElGamalPrivateKey:
    return generate_elgamal_keypair()


def test_round_trip_and_probabilistic(sk):
    pk = sk.public_key
    for m in (0, 1, 2, 65535, 65536, 150_001):
        assert sk.decrypt(pk.encrypt(m), max_value=200_000) == m
    a, b = pk.encrypt(1), pk.encrypt(1)
    assert a != b and len(a) == CIPHERTEXT_BYTES
    assert sk.decrypt(pk.rerandomize(a)) == 1


def test_additive_homomorphism_and_class_sums(sk):
    pk = sk.public_key
    assert sk.decrypt(add(pk.encrypt(20), pk.encrypt(22))) == 42
    assert sk.decrypt(add(pk.encrypt(5), IDENTITY)) == 5
    rng = random.Random(5)
    bits = [rng.randint(0, 1) for _ in range(300)]
    classes = [rng.randrange(9) for _ in range(300)]
    vec = CiphertextVector(pk.encrypt_many(counter_values(bits), workers=1))
    sums = vec.sum_by_class(classes, 10)
    expected = [sum(b for b, c in zip(bits, classes) if c == j) for j in range(10)]
    assert sk.decrypt_many(sums) == expected
    assert sums[9] == IDENTITY
    assert sk.decrypt(vec.sum()) == sum(bits)
    assert sum_by_class(pk.encrypt_many([1, 1, 1], workers=1), [0, 1, 0], 2) != []


def test_wrong_key_and_tampering_do_not_yield_the_count(sk):
    pk = sk.public_key
    other = generate_elgamal_keypair()
    c = pk.encrypt(3)
    with pytest.raises(DecryptionError, match="exceeds"):
        other.decrypt(c, max_value=1000)
    bad = bytearray(c)
    bad[40] ^= 1
    with pytest.raises(DecryptionError):  # invalid point, or a valid one far from any small count
        sk.decrypt(bytes(bad), max_value=1000)
    with pytest.raises(DecryptionError, match="#1"):
        CiphertextVector([c, b"\x05" * CIPHERTEXT_BYTES])


def test_parallel_encrypt_and_keys_serialize(sk):
    pk = sk.public_key
    cts = pk.encrypt_many([i % 3 for i in range(3000)], workers=2)
    assert [sk.decrypt(c) for c in cts[:30]] == [i % 3 for i in range(30)]
    assert ElGamalPublicKey.from_bytes(pk.to_bytes()) == pk
    assert ElGamalPrivateKey.from_bytes(sk.to_bytes()).decrypt(cts[4]) == 1
    with pytest.raises(KeyFormatError):
        ElGamalPublicKey.from_bytes(b"\x05" * 33)


def test_private_key_encryption_is_a_valid_fresh_public_encryption(sk):
    """The key holder's shortcut ((m + r·x)·G as the second point) must give ciphertexts the
    public key's holders can add to theirs, that decrypt to m, and that are fresh each time;
    a wrong combination (e.g. r·x without m, or m·G without r·H) fails one of these."""
    pk = sk.public_key
    values = [0, 1, 2, 7, 65535, 65536, 150_001]
    mine = sk.encrypt_many(values, workers=1)
    assert [sk.decrypt(c, max_value=200_000) for c in mine] == values
    assert len(set(mine + sk.encrypt_many(values, workers=1))) == 2 * len(values)
    other = generate_elgamal_keypair()
    with pytest.raises(DecryptionError):
        other.decrypt(mine[1], max_value=10)  # under another key it is not a small count
    assert sk.decrypt(add(mine[3], pk.encrypt(35))) == 42
    vec = CiphertextVector(mine[:4] + pk.encrypt_many([1, 1], workers=1))
    assert sk.decrypt_many(vec.sum_by_class([0, 0, 1, 1, 0, 1], 2)) == [2, 10]


def test_batch_decryption_equals_one_by_one(sk):
    """The batch path (C objects reused across ciphertexts) answers as `decrypt` does:
    identities, values in and beyond the baby-step table, and refuses a malformed one."""
    pk = sk.public_key
    values = [0, 1, 5, 65535, 65536, 70_000, 3]
    cts = pk.encrypt_many(values, workers=1) + [IDENTITY]
    assert sk.decrypt_many(cts, max_value=100_000, workers=1) == [sk.decrypt(c, 100_000) for c in cts] \
        == values + [0]
    with pytest.raises(DecryptionError):
        sk.decrypt_many(cts[:2] + [b"\x02" + bytes(65)], workers=1)
    with pytest.raises(DecryptionError):
        sk.decrypt_many(pk.encrypt_many([200_000], workers=1), max_value=100_000, workers=1)
