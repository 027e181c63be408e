"""Commutative ciphers (Protocol A): commutativity, any-order decryption, determinism, keys."""

import gmpy2
import pytest

from fedanon.crypto.commutative import (
    CIPHER_HELP, MODP_3072_P, MODP_3072_Q, CommutativeCipher, EcCipher, GroupDictionary,
    PohligHellmanCipher, cipher_names, get_commutative_cipher,
)
from fedanon.crypto.errors import EncodingError, KeyFormatError

VALUES = [b"47", b"male", b"81675", b"", b"\xff" * 100, "Zürich".encode()]


@pytest.fixture(params=["ec", "ph"])
def cls(request) -> type[CommutativeCipher]:
    return get_commutative_cipher(request.param)


def test_commutativity_and_decryption_in_any_order(cls):
    a, b, c = cls.generate(), cls.generate(), cls.generate()
    x = cls.hash_to_group(VALUES, workers=1)
    abc = c.encrypt_many(b.encrypt_many(a.encrypt_many(x, workers=1), workers=1), workers=1)
    cab = b.encrypt_many(a.encrypt_many(c.encrypt_many(x, workers=1), workers=1), workers=1)
    assert abc == cab
    assert len(set(abc)) == len(VALUES)
    assert all(len(e) == cls.element_bytes for e in abc)
    for order in ((a, b, c), (c, a, b), (b, c, a)):
        y = abc
        for k in order:
            y = k.decrypt_many(y, workers=1)
        assert y == x


def test_determinism_and_dictionary_round_trip(cls):
    k = cls.generate()
    d = GroupDictionary(cls)
    x = d.encode(VALUES + VALUES, workers=1)
    assert x[: len(VALUES)] == x[len(VALUES):]
    assert len(d) == len(VALUES)
    e1, e2 = k.encrypt_many(x, workers=1), k.encrypt_many(x, workers=1)
    assert e1 == e2 and e1 != x
    assert d.decode(k.decrypt_many(e1, workers=1)) == VALUES + VALUES


def test_wrong_key_fails_to_decrypt(cls):
    k, wrong = cls.generate(), cls.generate()
    d = GroupDictionary(cls)
    x = d.encode(VALUES)
    back = wrong.decrypt_many(k.encrypt_many(x, workers=1), workers=1)
    assert back != x
    with pytest.raises(EncodingError, match="not in this party's dictionary"):
        d.decode(back)


def test_key_serialization_and_pickling(cls):
    import pickle

    k = cls.generate()
    k2 = cls.from_bytes(k.to_bytes())
    k3 = pickle.loads(pickle.dumps(k))
    x = cls.hash_to_group([b"v"])
    assert k.encrypt_many(x) == k2.encrypt_many(x) == k3.encrypt_many(x)
    assert k == k2 and k != cls.generate()
    with pytest.raises(KeyFormatError):
        cls.from_bytes(b"\x00" * 5)
    with pytest.raises(KeyFormatError):
        cls.from_bytes(b"\x00" * len(k.to_bytes()))  # zero key is not invertible


def test_non_group_elements_are_rejected(cls):
    k = cls.generate()
    with pytest.raises(EncodingError, match="#0"):
        k.encrypt_many([b"\x01" * 7])
    if cls is PohligHellmanCipher:
        # p-1 is a non-residue (p = 3 mod 4): a small-subgroup element must be refused.
        with pytest.raises(EncodingError, match="quadratic-residue"):
            k.encrypt_many([(MODP_3072_P - 1).to_bytes(384, "big")])
    else:
        # x = 5 is not on secp256k1 (5^3 + 7 = 132 is a non-residue mod p).
        with pytest.raises(EncodingError, match="not a secp256k1"):
            k.encrypt_many([(5).to_bytes(32, "big")])


def test_rfc3526_prime_is_a_safe_prime_of_3072_bits():
    assert MODP_3072_P.bit_length() == 3072
    assert gmpy2.is_prime(MODP_3072_P, 25) and gmpy2.is_prime(MODP_3072_Q, 25)


def test_ec_hash_to_group_gives_points_on_the_curve():
    p = 2**256 - 2**32 - 977
    for x in EcCipher.hash_to_group([str(i).encode() for i in range(50)]):
        xi = int.from_bytes(x, "big")
        assert xi < p and pow(xi**3 + 7, (p - 1) // 2, p) == 1


def test_parallel_batches_equal_serial_results_in_order():
    k = EcCipher.generate()
    values = [str(i).encode() for i in range(6000)]
    x1 = EcCipher.hash_to_group(values, workers=1)
    x2 = EcCipher.hash_to_group(values, workers=2)
    assert x1 == x2
    e1 = k.encrypt_many(x1, workers=1)
    assert k.encrypt_many(x1, workers=2) == e1
    assert k.decrypt_many(e1, workers=2) == x1


def test_factory_and_help():
    assert cipher_names()[0] == "ec"
    assert get_commutative_cipher() is EcCipher
    assert get_commutative_cipher("ph") is PohligHellmanCipher
    assert "SLOWER" in CIPHER_HELP and "SLOW" in PohligHellmanCipher.__doc__
    with pytest.raises(KeyFormatError, match="unknown commutative cipher 'rsa'"):
        get_commutative_cipher("rsa")


def test_wire_join_and_split(cls):
    x = cls.hash_to_group(VALUES)
    blob = cls.join(x)
    assert len(blob) == len(VALUES) * cls.element_bytes
    assert cls.split(blob) == x
    with pytest.raises(EncodingError, match="whole number"):
        cls.split(blob[:-1])
    with pytest.raises(EncodingError, match="#1"):
        cls.join([x[0], b"short"])


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(values=st.lists(st.binary(max_size=64), min_size=1, max_size=20, unique=True))
def test_ec_round_trip_for_arbitrary_values(values):
    a, b = EcCipher.generate(), EcCipher.generate()
    d = GroupDictionary(EcCipher)
    x = d.encode(values, workers=1)
    ab = b.encrypt_many(a.encrypt_many(x, workers=1), workers=1)
    assert ab == a.encrypt_many(b.encrypt_many(x, workers=1), workers=1)
    assert len(set(ab)) == len(values)
    assert d.decode(a.decrypt_many(b.decrypt_many(ab, workers=1), workers=1)) == values
