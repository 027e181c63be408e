"""AES-SIV deterministic cell encryption: RFC 5297 vectors, determinism, context binding."""

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from fedanon.crypto.deterministic import KEY_BYTES, DeterministicCipher, generate_key
from fedanon.crypto.errors import DecryptionError, KeyFormatError
from fedanon.errors import FedanonError

H = bytes.fromhex


def test_rfc5297_a1_deterministic_vector_through_our_cipher():
    key = H("fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")
    ad = H("101112131415161718191a1b1c1d1e1f2021222324252627")
    pt = H("112233445566778899aabbccddee")
    expected = H("85632d07c6e8f37f950acd320a2ecc9340c02b9690c4dc04daef7f6afe5c")
    c = DeterministicCipher(key, context=ad)
    assert c.encrypt(pt) == expected
    assert c.decrypt(expected) == pt
    assert c.encrypt_many([pt, pt]) == [expected, expected]


def test_rfc5297_a2_nonce_based_vector_of_the_underlying_primitive():
    key = H("7f7e7d7c7b7a797877767574737271704041424344454647" "48494a4b4c4d4e4f")
    ad1 = H("00112233445566778899aabbccddeeffdeaddadadeaddadaffeeddccbbaa99887766554433221100")
    ad2 = H("102030405060708090a0")
    nonce = H("09f911029d74e35bd84156c5635688c0")
    pt = H("7468697320697320736f6d6520706c61696e7465787420746f20656e6372797074207573696e67205349562d414553")
    expected = H(
        "7bdb6e3b432667eb06f4d14bff2fbd0fcb900f2fddbe404326601965c889bf17"
        "dba77ceb094fa663b7a3f748ba8af829ea64ad544a272e9c485b62a3fd5c0d"
    )
    assert AESSIV(key).encrypt(pt, [ad1, ad2, nonce]) == expected


def test_deterministic_and_round_trip_for_many_values():
    c = DeterministicCipher(generate_key(), b"run-7/age")
    values = [str(v).encode() for v in range(500)] + [b"", b"\x00" * 40]
    ct = c.encrypt_many(values)
    assert ct == c.encrypt_many(values)
    assert len(set(ct)) == len(values)
    assert all(len(x) == len(v) + 16 for x, v in zip(ct, values))
    assert c.decrypt_many(ct) == values


def test_context_separates_columns_and_runs():
    key = generate_key()
    a, b = DeterministicCipher(key, b"run/age"), DeterministicCipher(key, b"run/zip")
    assert a.encrypt(b"47") != b.encrypt(b"47")
    with pytest.raises(DecryptionError):
        b.decrypt(a.encrypt(b"47"))


def test_wrong_key_and_tampering_raise_a_fedanon_error():
    c = DeterministicCipher(generate_key(), b"ctx")
    other = DeterministicCipher(generate_key(), b"ctx")
    ct = c.encrypt(b"male")
    with pytest.raises(DecryptionError):
        other.decrypt(ct)
    bad = bytearray(ct)
    bad[-1] ^= 1
    with pytest.raises(FedanonError):
        c.decrypt(bytes(bad))
    with pytest.raises(DecryptionError, match="#1 of 2"):
        c.decrypt_many([ct, bytes(bad)])
    with pytest.raises(DecryptionError):
        c.decrypt(b"short")


def test_key_size_is_checked():
    assert len(generate_key()) == KEY_BYTES == 64
    assert generate_key() != generate_key()
    with pytest.raises(KeyFormatError, match="64 bytes"):
        DeterministicCipher(b"\x00" * 16)
