"""A keyed pseudorandom permutation of 16-byte blocks (AES-256 applied to each block alone).

Used where a value only ever needs to be compared, never decrypted, and fits one block (e.g.
short tuple identifiers become join tokens): distinct blocks map to distinct outputs, and
without the key the outputs are indistinguishable from random. Each block is enciphered on its
own (ECB over independent blocks), which is exactly a PRP per block; it is never used for
messages longer than one block. The subkey is derived from the caller's key and context with
HMAC-SHA256, so one column key never enciphers under two purposes.

The same derivation (`derive_key`) and a keyed pseudorandom function of byte strings
(`prf_uint64`, HMAC-SHA256 truncated to 64 bits) serve the protocols' DP sampling of a
vertical split: every party keeps a person when PRF(key, TID) falls below β·2⁶⁴, under a
key all primaries derive from a key they share and the helper lacks.
"""

from __future__ import annotations

import hashlib
import hmac

from typing import Sequence

import numpy as np
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK_BYTES = 16


def derive_key(key: bytes, context: bytes) -> bytes:
    """A 256-bit subkey for one purpose: HMAC-SHA256(key, context), a PRF of the context under
    `key`, so subkeys of different contexts are independent and reveal nothing of `key`."""
    return hmac.new(key, context, hashlib.sha256).digest()


def prf_uint64(key: bytes, context: bytes, values: Sequence[bytes]) -> np.ndarray:
    """A pseudorandom 64-bit integer per value: the first 8 bytes of HMAC-SHA256 under the
    subkey of `context`, big-endian. Equal values give equal outputs (every party holding the
    key computes the same); without the key the outputs look independent and uniform."""
    subkey = derive_key(key, context)
    out = np.empty(len(values), dtype=np.uint64)
    new, sha256 = hmac.new, hashlib.sha256
    for i, value in enumerate(values):
        out[i] = int.from_bytes(new(subkey, value, sha256).digest()[:8], "big")
    return out


def permute_blocks(key: bytes, context: bytes, blocks: bytes) -> bytes:
    """Every 16-byte block of `blocks` through the PRP keyed by (key, context), in one call."""
    if len(blocks) % BLOCK_BYTES:
        raise ValueError(f"{len(blocks)} bytes are not whole {BLOCK_BYTES}-byte blocks")
    subkey = derive_key(key, context)
    encryptor = Cipher(algorithms.AES(subkey), modes.ECB()).encryptor()
    return encryptor.update(blocks) + encryptor.finalize()
