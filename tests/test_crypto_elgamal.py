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
