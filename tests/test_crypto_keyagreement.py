"""X25519 key transport relayed by a helper, and binding public keys to TLS certificates."""

import datetime as dt

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID

from fedanon.crypto.errors import AuthenticationError, DecryptionError
from fedanon.crypto.keyagreement import KeyAgreementIdentity, sign_public_key, verify_public_key


def test_seal_open_between_two_primaries_and_helper_cannot_read():
    p1, p2, helper = (KeyAgreementIdentity.generate() for _ in range(3))
    secret = b"column key " + bytes(range(64))
    sealed = p1.seal("p2", p2.public_bytes(), secret, b"run-1/keys")
    assert secret not in sealed
    assert p2.open("p1", p1.public_bytes(), sealed, b"run-1/keys") == secret
    # The helper relays it but neither its own key nor a guessed sender helps it.
    with pytest.raises(DecryptionError):
        helper.open("p1", p1.public_bytes(), sealed, b"run-1/keys")
    # The sender's public key is authenticated: a message from the helper posing as p1 fails.
    forged = helper.seal("p2", p2.public_bytes(), b"evil", b"run-1/keys")
    with pytest.raises(DecryptionError):
        p2.open("p1", p1.public_bytes(), forged, b"run-1/keys")
    # Sealing is randomized (fresh salt and nonce), so repeated keys are not linkable.
    assert p1.seal("p2", p2.public_bytes(), secret, b"run-1/keys") != sealed


def test_open_rejects_tampering_wrong_context_and_wrong_sender():
    p1, p2, p3 = (KeyAgreementIdentity.generate(n) for n in ("p1", "p2", "p3"))
    sealed = p1.seal("p2", p2.public_bytes(), b"k" * 64, b"ctx")
    for i in (0, 5, len(sealed) // 2, len(sealed) - 1):
        bad = bytearray(sealed)
        bad[i] ^= 0x01
        with pytest.raises(DecryptionError):
            p2.open("p1", p1.public_bytes(), bytes(bad), b"ctx")
    with pytest.raises(DecryptionError):
        p2.open("p1", p1.public_bytes(), sealed, b"other-ctx")
    with pytest.raises(DecryptionError, match="claims sender"):
        p2.open("p3", p3.public_bytes(), sealed, b"ctx")
    with pytest.raises(DecryptionError, match="addressed to"):
        p3.open("p1", p1.public_bytes(), sealed, b"ctx")
    with pytest.raises(DecryptionError):
        p2.open("p1", p1.public_bytes(), sealed[:20], b"ctx")
    assert p2.open("p1", p1.public_bytes(), sealed, b"ctx") == b"k" * 64


def test_low_order_public_keys_are_refused():
    from fedanon.crypto.errors import KeyFormatError

    p1, p2 = KeyAgreementIdentity.generate("p1"), KeyAgreementIdentity.generate("p2")
    sealed = p1.seal("p2", p2.public_bytes(), b"x", b"c")
    for bad in (bytes(32), (1).to_bytes(32, "little")):
        with pytest.raises(KeyFormatError, match="low-order"):
            p1.seal("p2", bad, b"x", b"c")
        with pytest.raises(KeyFormatError, match="low-order"):
            p2.open("p1", bad, sealed, b"c")
    with pytest.raises(KeyFormatError, match="32 bytes"):
        p1.seal("p2", b"short", b"x", b"c")


def test_private_key_round_trip():
    a = KeyAgreementIdentity.generate("a")
    b = KeyAgreementIdentity.from_private_bytes(a.private_bytes(), "a")
    assert b.public_bytes() == a.public_bytes()
    peer = KeyAgreementIdentity.generate("z")
    assert peer.open("a", a.public_bytes(), b.seal("z", peer.public_bytes(), b"x", b""), b"") == b"x"


def _ca():
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "run-ca")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def _leaf(ca_key, ca_cert, party, key):
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, party)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(party), x509.DNSName("localhost")]), False)
            .sign(ca_key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


@pytest.mark.parametrize("make_key", [
    lambda: ec.generate_private_key(ec.SECP256R1()),
    lambda: ed25519.Ed25519PrivateKey.generate(),
    lambda: rsa.generate_private_key(65537, 2048),
], ids=["ec-p256", "ed25519", "rsa"])
def test_public_key_is_bound_to_the_tls_identity(make_key):
    ca_key, ca_cert = _ca()
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    key_pem, cert_pem = _leaf(ca_key, ca_cert, "p1", make_key())
    ident = KeyAgreementIdentity.generate("p1")
    sig = sign_public_key(key_pem, ident.public_bytes(), b"run-9")
    verify_public_key(cert_pem, ca_pem, "p1", ident.public_bytes(), sig, b"run-9")
    # A helper substituting its own X25519 key is caught ...
    forged = KeyAgreementIdentity.generate().public_bytes()
    with pytest.raises(AuthenticationError, match="invalid"):
        verify_public_key(cert_pem, ca_pem, "p1", forged, sig, b"run-9")
    # ... as is a replay into another run, a wrong name, and a certificate from another CA.
    with pytest.raises(AuthenticationError):
        verify_public_key(cert_pem, ca_pem, "p1", ident.public_bytes(), sig, b"run-10")
    with pytest.raises(AuthenticationError, match="do not include 'p2'"):
        verify_public_key(cert_pem, ca_pem, "p2", ident.public_bytes(), sig, b"run-9")
    # The CA's own certificate is not a party identity, even if it signed the key.
    ca_key_pem = ca_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    ca_sig = sign_public_key(ca_key_pem, ident.public_bytes(), b"run-9")
    with pytest.raises(AuthenticationError, match="CA certificate"):
        verify_public_key(ca_pem, ca_pem, "run-ca", ident.public_bytes(), ca_sig, b"run-9")
    other_ca_pem = _ca()[1].public_bytes(serialization.Encoding.PEM)
    with pytest.raises(AuthenticationError, match="not issued by the run CA"):
        verify_public_key(cert_pem, other_ca_pem, "p1", ident.public_bytes(), sig, b"run-9")


def test_works_with_the_run_ca_of_fedanon_parties(tmp_path):
    certs = pytest.importorskip("fedanon.parties.pki.certs")
    certs.init_ca(tmp_path)
    cert_path, key_path = certs.issue(tmp_path, "hospital-a", hosts=["127.0.0.1"])
    ca_pem = (tmp_path / certs.CA_CERT).read_bytes()
    ident = KeyAgreementIdentity.generate("hospital-a")
    sig = sign_public_key(key_path.read_bytes(), ident.public_bytes(), b"run-42")
    verify_public_key(cert_path.read_bytes(), ca_pem, "hospital-a", ident.public_bytes(), sig, b"run-42")
    with pytest.raises(AuthenticationError):
        verify_public_key(cert_path.read_bytes(), ca_pem, "hospital-b", ident.public_bytes(), sig, b"run-42")
