"""Deterministic authenticated encryption of cells (Protocols B and C).

Protocols B and C need *equal plaintexts to give equal ciphertexts* so that the helper can
join, group and generalize on ciphertext, yet the helper must not learn the values and
must not be able to forge or swap cells unnoticed. AES-SIV (RFC 5297) is the standard
misuse-resistant deterministic AEAD for exactly this: the synthetic IV is a PRF of
(associated data, plaintext), so determinism leaks only equality, and every ciphertext is
authenticated.

The *context* (e.g. run id + column name) is bound in as associated data: the same value
in two columns or two runs encrypts differently, so a helper cannot correlate columns or
replay ciphertexts from another run, and a cell moved to another column fails to decrypt.
"""

from __future__ import annotations

import os
from typing import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

from fedanon.crypto.errors import DecryptionError, KeyFormatError

#: AES-256-SIV: 512 bits of key (256 for S2V/CMAC, 256 for CTR) — 256-bit security.
KEY_BYTES = 64
#: Key sizes AES-SIV accepts (AES-128/192/256-SIV); all are >= 128-bit security.
ALLOWED_KEY_BYTES = (32, 48, 64)
#: Ciphertext expansion: the 16-byte synthetic IV.
OVERHEAD_BYTES = 16


def generate_key() -> bytes:
    """A fresh uniformly random AES-256-SIV key from the OS CSPRNG."""
    return os.urandom(KEY_BYTES)


class DeterministicCipher:
    """AES-SIV with a fixed key and a fixed associated-data context.

    One instance per (key, column): keep the context stable for a column over the run,
    because it is part of what makes two ciphertexts equal.
    """

    __slots__ = ("_aead", "_ad")

    def __init__(self, key: bytes, context: bytes = b"") -> None:
        if not isinstance(key, (bytes, bytearray)) or len(key) not in ALLOWED_KEY_BYTES:
            got = len(key) if isinstance(key, (bytes, bytearray)) else type(key).__name__
            raise KeyFormatError(
                f"AES-SIV key must be {KEY_BYTES} bytes (AES-256-SIV; 32/48 also accepted), got {got}"
            )
        if not isinstance(context, (bytes, bytearray)):
            raise KeyFormatError(f"AES-SIV context must be bytes, got {type(context).__name__}")
        self._aead = AESSIV(bytes(key))
        # An empty context means "no associated data" (RFC 5297 with zero AD components),
        # which keeps the cipher identical to plain AES-SIV for interoperability.
        self._ad: list[bytes] | None = [bytes(context)] if context else None

    def encrypt(self, value: bytes) -> bytes:
        """Encrypt one cell; equal (value, key, context) always give the same bytes."""
        return self._aead.encrypt(value, self._ad)

    def decrypt(self, ciphertext: bytes) -> bytes:
        """Decrypt one cell or raise `DecryptionError` if it does not authenticate."""
        try:
            return self._aead.decrypt(ciphertext, self._ad)
        except (InvalidTag, ValueError) as exc:
            raise DecryptionError(
                "AES-SIV ciphertext did not authenticate (wrong key, wrong column/run context, or tampered)"
            ) from exc

    def encrypt_many(self, values: Sequence[bytes]) -> list[bytes]:
        """Encrypt a batch in input order (AES-NI makes one core enough for ADULT-sized columns)."""
        enc = self._aead.encrypt
        ad = self._ad
        return [enc(v, ad) for v in values]

    def decrypt_many(self, ciphertexts: Sequence[bytes]) -> list[bytes]:
        """Decrypt a batch in input order; the first bad ciphertext aborts with its index."""
        dec = self._aead.decrypt
        ad = self._ad
        out: list[bytes] = []
        for i, c in enumerate(ciphertexts):
            try:
                out.append(dec(c, ad))
            except (InvalidTag, ValueError) as exc:
                raise DecryptionError(
                    f"AES-SIV ciphertext #{i} of {len(ciphertexts)} did not authenticate "
                    "(wrong key, wrong column/run context, or tampered)"
                ) from exc
        return out
