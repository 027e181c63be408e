"""A keyed pseudorandom permutation of 16-byte blocks (AES-256 applied to each block alone).

Used where a value only ever needs to be compared, never decrypted, and fits one block (e.g.
short tuple identifiers become join tokens): distinct blocks map to distinct outputs, and
without the key the outputs are indistinguishable from random. Each block is enciphered on its
own (ECB over independent blocks), which is exactly a PRP per block; it is never used for
messages longer than one block. The subkey is derived from the caller's key and context with
HMAC-SHA256, so one column key never enciphers under two purposes.
"""

from __future__ import annotations

import hashlib
import hmac

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

BLOCK_BYTES = 16


def permute_blocks(key: bytes, context: bytes, blocks: bytes) -> bytes:
    """Every 16-byte block of `blocks` through the PRP keyed by (key, context), in one call."""
    if len(blocks) % BLOCK_BYTES:
        raise ValueError(f"{len(blocks)} bytes are not whole {BLOCK_BYTES}-byte blocks")
    subkey = hmac.new(key, context, hashlib.sha256).digest()
    encryptor = Cipher(algorithms.AES(subkey), modes.ECB()).encryptor()
    return encryptor.update(blocks) + encryptor.finalize()
