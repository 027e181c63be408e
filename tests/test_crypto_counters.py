"""Protocol C's counter-cipher interface: both schemes give the true class sizes."""

import random

import pytest

from fedanon.crypto.counters import (
    COUNTER_SCHEMES, counter_private_key_from_bytes, counter_public_key_from_bytes, counter_values,
    generate_counter_key,
)
from fedanon.crypto.errors import DecryptionError, KeyFormatError


@pytest.fixture(scope="module", params=COUNTER_SCHEMES)
def key(request):
    return generate_counter_key(request.param)


def test_helper_message_decrypts_to_the_true_class_sizes(key):
    rng = random.Random(11)
    real = [rng.random() < 0.75 for _ in range(400)]  # 25 % pseudotuples
    pub = counter_public_key_from_bytes(key.public_key.to_bytes())  # as received by a party
    cts = pub.encrypt_counters(real, workers=1)
    assert all(isinstance(c, bytes) for c in cts)
    loaded = pub.load(cts)
    for n_classes in (1, 7, 250):
        class_ids = [rng.randrange(n_classes) for _ in real]
        message = pub.class_sums(loaded, class_ids, n_classes)
        expected = [0] * n_classes
        for r, j in zip(real, class_ids):
            expected[j] += r
        assert key.decrypt_class_counts(message, n_classes) == expected


def test_message_size_paillier_packed_elgamal_per_class(key):
    pub = key.public_key
    loaded = pub.load(pub.encrypt_counters([1] * 300, workers=1))
    message = pub.class_sums(loaded, list(range(300)), 300)  # 300 singleton classes
    if key.scheme == "paillier":
        assert len(message) == 7 + pub.key.ciphertext_bytes  # 1-bit slots: one ciphertext for all
    else:
        assert len(message) == 9 + 19 * 66  # 1-bit slots, 16 per 66-byte ciphertext (2^16 lookup table)
    assert key.decrypt_class_counts(message, 300) == [1] * 300
    # sums up to 300 (9-bit slots): Paillier still packs, ElGamal sends one ciphertext per class
    big = pub.sums_message(pub.sum_by_class(loaded, [0] * 300, 1), [300])
    assert key.decrypt_class_counts(big, 1) == [300]
    if key.scheme == "elgamal":
        assert len(big) == 9 + 66


def test_packed_sums_in_a_new_order_and_rolled_up(key):
    pub = key.public_key
    values = [1, 0, 1, 1, 0, 0, 1, 1, 1, 0, 1]
    loaded = pub.load(pub.encrypt_counters(values, workers=1))
    order = [10, 3, 0, 7, 1, 9, 2, 8, 4, 6, 5]
    message = pub.sums_message(loaded, [3] * len(values), order)  # the final row counters: 2-bit slots
    assert key.decrypt_class_counts(message, len(values)) == [values[j] for j in order]
    fine = pub.sum_by_class(loaded, [0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 3], 5)  # class 4 empty
    coarse = pub.sum_by_class(fine, [0, 0, 1, 1, 1], 2)  # roll-up of encrypted sums
    assert key.decrypt_class_counts(pub.sums_message(coarse, [6, 5]), 2) == [4, 3]


def test_elgamal_packed_block_overflow_is_refused():
    key = generate_counter_key("elgamal")  # (Paillier's packing: tests/test_crypto_paillier.py)
    pub = key.public_key
    loaded = pub.load([pub.key.encrypt(2), pub.key.encrypt(1)])
    lying = pub.sums_message(loaded, [1, 1])  # claims sums <= 1: 1-bit slots, the 2 carries out
    with pytest.raises(DecryptionError, match="above its bound"):
        key.decrypt_class_counts(lying, 2)


def test_keys_round_trip_and_bad_messages(key):
    again = counter_private_key_from_bytes(key.to_bytes())
    pub = key.public_key
    msg = pub.class_sums(pub.load(pub.encrypt_counters([1, 0, 1], workers=1)), [0, 0, 1], 2)
    assert again.decrypt_class_counts(msg, 2) == [1, 1]
    with pytest.raises(DecryptionError):
        key.decrypt_class_counts(msg, 3)
    with pytest.raises(DecryptionError):
        key.decrypt_class_counts(b"\x00" + msg[1:], 2)
    with pytest.raises(KeyFormatError):
        generate_counter_key("rsa")
    with pytest.raises(KeyFormatError):
        counter_public_key_from_bytes(b"\x01abc")


def test_final_counter_decryption_and_invalid_counters(key):
    rng = random.Random(2)
    real = [rng.random() < 0.8 for _ in range(3500)]  # > 2 packed Paillier blocks
    pub = key.public_key
    cts = pub.encrypt_counters(real, workers=2)
    assert key.decrypt_counters(cts) == [int(r) for r in real]
    assert key.decrypt_counters([]) == []
    if key.scheme == "paillier":
        bad = pub.key.ciphertexts_to_bytes([pub.key.encrypt(2)])
    else:
        bad = pub.key.encrypt(2)
    with pytest.raises(DecryptionError, match="not 0 or 1"):
        key.decrypt_counters(cts[:5] + [bad] + cts[5:9])


def test_key_holder_counters_take_the_public_path_but_encrypt_with_the_crt(key, monkeypatch):
    """The key holder's counters: the same plaintexts (`counter_values`) and, for the same
    randomness, the very ciphertexts the parties' public-key path gives -- computed with the
    factors (Paillier's CRT encryption), not with the public key."""
    from fedanon.crypto import paillier

    bits = [True, False, 1, 0, True]
    assert counter_values(bits) == [1, 0, 1, 0, 1]
    if key.scheme != "paillier":
        assert key.decrypt_counters(key.encrypt_counters(bits, workers=1)) == [1, 0, 1, 0, 1]
        return
    crt_calls = []
    real_crt = paillier.PaillierPrivateKey.encrypt_many

    def spy(self, ms, workers=None, **kwargs):
        crt_calls.append(list(ms))
        return real_crt(self, ms, workers=workers, **kwargs)

    monkeypatch.setattr(paillier.PaillierPrivateKey, "encrypt_many", spy)
    from fedanon.crypto import fixedbase

    fixed = fixedbase.random_exponents(1, 1536)  # the same exponent for every counter, on both paths
    monkeypatch.setattr(fixedbase, "random_exponents", lambda count, bits_: fixed.repeat(count, axis=0))
    assert key.encrypt_counters(bits, workers=1) == key.public_key.encrypt_counters(bits, workers=1)
    assert crt_calls == [[1, 0, 1, 0, 1]]
