"""Signed integer vectors under the key holder's Paillier key: encrypt, add, decrypt.

Counts plus noise can be negative, so a value v travels as v mod n and decrypts back to the
signed value by reading the upper half of [0, n) as negative. With a 3072-bit n no sum of
counts and noise comes near n/2, so the reading is exact.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fedanon.crypto.paillier import PaillierPrivateKey, PaillierPublicKey
from fedanon.errors import ProtocolError


def encrypt_vector(key: PaillierPublicKey, values: np.ndarray) -> bytes:
    """Enc(v mod n) of every value, fixed-width, in order."""
    n = int(key.n)
    return key.ciphertexts_to_bytes(key.encrypt_many([int(v) % n for v in np.asarray(values).tolist()]))


def add_vectors(key: PaillierPublicKey, blobs: Sequence[bytes], size: int, what: str) -> bytes:
    """The element-wise homomorphic sum of several encrypted vectors of `size` values each."""
    total: list = []
    for i, blob in enumerate(blobs):
        cts = key.ciphertexts_from_bytes(blob)
        if len(cts) != size:
            raise ProtocolError(f"{what}: vector {i} holds {len(cts)} values, expected {size}")
        total = cts if not total else [key.add(a, b) for a, b in zip(total, cts)]
    return key.ciphertexts_to_bytes(total)


def decrypt_vector(key: PaillierPrivateKey, blob: bytes, size: int) -> np.ndarray:
    """The signed plaintexts of an encrypted vector (int64)."""
    public = key.public_key
    cts = public.ciphertexts_from_bytes(blob)
    if len(cts) != size:
        raise ProtocolError(f"the summed counts hold {len(cts)} values, expected {size}")
    n, half = int(public.n), int(public.n) // 2
    values = [int(m) for m in key.decrypt_many(cts)]
    return np.array([m - n if m > half else m for m in values], dtype=np.int64)
