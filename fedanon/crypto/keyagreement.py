"""Pairwise key transport among the primaries that a relaying helper cannot read.

In Protocols B and C the primaries must share secret column keys, but in a star topology
every message passes through the helper. Each primary therefore holds an X25519 key pair
for the run; a message from A to B is sealed with a key derived from the static-static
Diffie-Hellman secret of A and B, so the helper only relays opaque bytes. Static-static DH
also authenticates the sender implicitly — provided the public keys themselves are
authentic. That is what `sign_public_key` / `verify_public_key` are for: each party signs
its X25519 public key with the private key behind its TLS certificate, and the others
check the signature against the certificate issued by the run CA, so a helper cannot
substitute its own public key (man in the middle).

Sealed format (all lengths big-endian u16)::

    version(1) | len(sender) sender | len(recipient) recipient | salt(16) | nonce(12) | AES-256-GCM(ct+tag)

HKDF-SHA256(shared, salt, info = label | sender | recipient | sender_pub | recipient_pub |
context) gives a fresh 256-bit AEAD key per message (random salt), so GCM nonces never
repeat under a key. The header and context are associated data: a message re-addressed,
replayed into another context or altered in any byte fails with `DecryptionError`.
"""

from __future__ import annotations

import datetime as _dt
import os
import struct

from cryptography import x509
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import NameOID

from fedanon.crypto.errors import AuthenticationError, DecryptionError, KeyFormatError

PUBLIC_KEY_BYTES = 32
_VERSION = 1
_SALT = 16
_NONCE = 12
_KDF_LABEL = b"fedanon/keyagreement/v1/x25519-hkdf-sha256-aes256gcm"
_SIGN_LABEL = b"fedanon/keyagreement/v1/public-key-binding"


def _lp(data: bytes) -> bytes:
    """Length-prefix so concatenated fields cannot be re-split ambiguously."""
    if len(data) > 0xFFFF:
        raise KeyFormatError(f"field too long for key agreement ({len(data)} bytes)")
    return struct.pack(">H", len(data)) + data


def _load_public(public: bytes, who: str) -> X25519PublicKey:
    if not isinstance(public, (bytes, bytearray)) or len(public) != PUBLIC_KEY_BYTES:
        raise KeyFormatError(f"X25519 public key of {who!r} must be {PUBLIC_KEY_BYTES} bytes")
    return X25519PublicKey.from_public_bytes(bytes(public))


class KeyAgreementIdentity:
    """The X25519 key pair of one primary for one run.

    `name` is optional; when set, it is written into (and authenticated with) every sealed
    message, and `open` checks both the sender's claimed name and that the message was
    addressed to this name. The cryptographic checks — only the holder of the recipient's
    private key can open it, and only the holder of `sender_public`'s private key can have
    sealed it — hold either way.
    """

    __slots__ = ("_private", "_public", "name")

    def __init__(self, private_key: X25519PrivateKey, name: str = "") -> None:
        self._private = private_key
        self._public = private_key.public_key().public_bytes_raw()
        self.name = name

    @classmethod
    def generate(cls, name: str = "") -> "KeyAgreementIdentity":
        """A fresh key pair; make one per run so old runs' secrets stay independent."""
        return cls(X25519PrivateKey.generate(), name)

    @classmethod
    def from_private_bytes(cls, raw: bytes, name: str = "") -> "KeyAgreementIdentity":
        """Restore from `private_bytes()` (32 raw bytes)."""
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != 32:
            raise KeyFormatError("X25519 private key must be 32 raw bytes")
        return cls(X25519PrivateKey.from_private_bytes(bytes(raw)), name)

    def private_bytes(self) -> bytes:
        """Raw private key; only for persisting a daemon's run state locally."""
        return self._private.private_bytes_raw()

    def public_bytes(self) -> bytes:
        """The 32-byte public key to publish (sign it with `sign_public_key`)."""
        return self._public

    def _key(self, peer_public: bytes, sender: str, recipient: str, sender_pub: bytes,
             recipient_pub: bytes, salt: bytes, context: bytes, who: str) -> bytes:
        try:
            shared = self._private.exchange(_load_public(peer_public, who))
        except ValueError:  # OpenSSL refuses low-order points (all-zero shared secret)
            shared = bytes(32)
        if shared == bytes(32):
            # Low-order peer point: the "shared" secret would be public.
            raise KeyFormatError(f"X25519 public key of {who!r} is a low-order point")
        info = (_KDF_LABEL + _lp(sender.encode()) + _lp(recipient.encode()) + sender_pub
                + recipient_pub + _lp(context))
        return HKDF(hashes.SHA256(), 32, salt, info).derive(shared)

    def seal(self, recipient: str, recipient_public: bytes, plaintext: bytes, context: bytes) -> bytes:
        """Encrypt `plaintext` for `recipient` only; the relaying helper learns just its length."""
        sender = self.name
        salt, nonce = os.urandom(_SALT), os.urandom(_NONCE)
        header = bytes([_VERSION]) + _lp(sender.encode()) + _lp(recipient.encode())
        key = self._key(recipient_public, sender, recipient, self._public, bytes(recipient_public),
                        salt, context, recipient)
        ct = AESGCM(key).encrypt(nonce, plaintext, header + _lp(context))
        return header + salt + nonce + ct

    def open(self, sender: str, sender_public: bytes, sealed: bytes, context: bytes) -> bytes:
        """Decrypt a message sealed by `sender`; `DecryptionError` on any mismatch or tampering."""
        try:
            if sealed[0] != _VERSION:
                raise ValueError("version")
            pos = 1
            n = struct.unpack_from(">H", sealed, pos)[0]
            claimed_sender = sealed[pos + 2: pos + 2 + n].decode()
            pos += 2 + n
            n = struct.unpack_from(">H", sealed, pos)[0]
            recipient = sealed[pos + 2: pos + 2 + n].decode()
            pos += 2 + n
            header = sealed[:pos]
            salt = sealed[pos: pos + _SALT]
            nonce = sealed[pos + _SALT: pos + _SALT + _NONCE]
            ct = sealed[pos + _SALT + _NONCE:]
            if len(salt) != _SALT or len(nonce) != _NONCE or len(ct) < 16:
                raise ValueError("short")
        except (IndexError, ValueError, struct.error, UnicodeDecodeError) as exc:
            raise DecryptionError(f"sealed message from {sender!r} is malformed") from exc
        # An unnamed sender identity binds only its public key (which is what authenticates
        # it); a named one must match the name the caller expects.
        if claimed_sender and claimed_sender != sender:
            raise DecryptionError(f"sealed message claims sender {claimed_sender!r}, expected {sender!r}")
        if self.name and recipient != self.name:
            raise DecryptionError(f"sealed message is addressed to {recipient!r}, not to {self.name!r}")
        key = self._key(sender_public, claimed_sender, recipient, bytes(sender_public), self._public,
                        salt, context, sender)
        try:
            return AESGCM(key).decrypt(nonce, ct, header + _lp(context))
        except InvalidTag as exc:
            raise DecryptionError(
                f"sealed message from {sender!r} did not authenticate (wrong party, wrong context, or tampered)"
            ) from exc


# --- binding X25519 public keys to TLS identities ----------------------------------------

def _binding_message(public_bytes: bytes, context: bytes) -> bytes:
    return _SIGN_LABEL + _lp(context) + _lp(public_bytes)


def sign_public_key(private_key_pem: bytes, public_bytes: bytes, context: bytes) -> bytes:
    """Sign an X25519 public key (for this run `context`) with a party's TLS private key.

    Supports EC (ECDSA-SHA256), RSA (PSS-SHA256) and Ed25519/Ed448 certificate keys.
    """
    try:
        key = serialization.load_pem_private_key(private_key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFormatError(f"cannot load TLS private key PEM: {exc}") from exc
    msg = _binding_message(public_bytes, context)
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(msg, ec.ECDSA(hashes.SHA256()))
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(msg, padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.MAX_LENGTH), hashes.SHA256())
    if isinstance(key, (ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)):
        return key.sign(msg)
    raise KeyFormatError(f"unsupported TLS key type for signing: {type(key).__name__}")


def _cert_names(cert: x509.Certificate) -> set[str]:
    names = {a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)}
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names.update(san.get_values_for_type(x509.DNSName))
        names.update(str(u) for u in san.get_values_for_type(x509.UniformResourceIdentifier))
    except x509.ExtensionNotFound:
        pass
    return {str(n) for n in names}


def verify_public_key(cert_pem: bytes, ca_cert_pem: bytes, expected_name: str, public_bytes: bytes,
                      signature: bytes, context: bytes) -> None:
    """Check that `public_bytes` was signed for `context` by the party named `expected_name`.

    The certificate must be issued directly by the run CA, be currently valid and carry
    `expected_name` as its common name or a DNS/URI subject alternative name. Raises
    `AuthenticationError` otherwise.
    """
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        ca = x509.load_pem_x509_certificate(ca_cert_pem)
    except ValueError as exc:
        raise AuthenticationError(f"cannot parse certificate PEM for {expected_name!r}: {exc}") from exc
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise AuthenticationError(f"certificate of {expected_name!r} is not issued by the run CA") from exc
    try:
        if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            raise AuthenticationError(f"certificate presented for {expected_name!r} is a CA certificate")
    except x509.ExtensionNotFound:
        pass
    now = _dt.datetime.now(_dt.timezone.utc)
    if not (cert.not_valid_before_utc <= now <= cert.not_valid_after_utc):
        raise AuthenticationError(f"certificate of {expected_name!r} is outside its validity period")
    names = _cert_names(cert)
    if expected_name not in names:
        raise AuthenticationError(f"certificate names {sorted(names)} do not include {expected_name!r}")
    key = cert.public_key()
    msg = _binding_message(public_bytes, context)
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, msg, ec.ECDSA(hashes.SHA256()))
        elif isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, msg, padding.PSS(padding.MGF1(hashes.SHA256()), padding.PSS.MAX_LENGTH),
                       hashes.SHA256())
        elif isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
            key.verify(signature, msg)
        else:
            raise AuthenticationError(f"unsupported certificate key type {type(key).__name__} for {expected_name!r}")
    except InvalidSignature as exc:
        raise AuthenticationError(
            f"signature on the key-agreement public key of {expected_name!r} is invalid"
        ) from exc
