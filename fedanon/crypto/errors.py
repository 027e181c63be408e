"""Errors raised by the crypto layer.

They all derive from `fedanon.errors.FedanonError` so that a tampered message or a
misconfigured key surfaces as one clear line in the CLI rather than as a low-level
library exception (e.g. `cryptography.exceptions.InvalidTag`) that means nothing to
a data steward.
"""

from __future__ import annotations

from fedanon.errors import FedanonError, InputError, PeerError, ProtocolError


class CryptoError(FedanonError):
    """Base class of all crypto-layer failures."""


class DecryptionError(CryptoError, ProtocolError):
    """A ciphertext did not authenticate: wrong key, wrong context/party, or tampering."""


class AuthenticationError(CryptoError, PeerError):
    """A peer's public key or certificate could not be authenticated."""


class KeyFormatError(CryptoError, InputError):
    """Serialized key material is malformed, of the wrong size or of the wrong kind."""


class SlotOverflowError(CryptoError, ProtocolError):
    """A packed homomorphic counter would not fit its slot (the sum would be corrupted)."""


class EncodingError(CryptoError, ProtocolError):
    """A byte string is not a valid group element / ciphertext for this cipher."""
