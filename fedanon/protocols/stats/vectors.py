"""Signed integer vectors under the key holder's Paillier key, packed: encrypt, add, decrypt.

Why packed: one 3072-bit Paillier encryption or decryption costs milliseconds, and a table can
have thousands of cells. So every ciphertext carries `SLOTS` values in fixed-width slots of
`SLOT_BITS` bits (Horner's scheme on the plaintext): the parties encrypt, and the key holder
decrypts, one ciphertext per `SLOTS` cells, and adding two packed ciphertexts adds every slot.

Why biased: counts plus noise can be negative. Every addend puts `BIAS` + v into a slot
(|v| < `LIMIT` = 2⁵³ is checked when encrypting: counts are far below it, and a noise value
beyond it has probability below e^(−2⁵³/scale), so every sum fits an int64); the sum of
`addends` vectors holds
addends·`BIAS` + Σv per slot, which stays below 2^`SLOT_BITS` for up to `MAX_ADDENDS`
addends, so no slot ever carries into its neighbour, and the key holder subtracts the biases.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from fedanon.crypto.paillier import PaillierPrivateKey, PaillierPublicKey
from fedanon.errors import ProtocolError

SLOT_BITS = 72
BIAS = 1 << 62
LIMIT = 1 << 53
#: the sum of this many biased slots stays below 2^SLOT_BITS (2^10 · 2^63 ≤ 2^73 would not)
MAX_ADDENDS = 1 << 9
#: slots per ciphertext: 42 · 72 = 3024 bits, below the 3072-bit modulus
SLOTS = 42


def packed_length(size: int) -> int:
    """How many ciphertexts carry `size` values."""
    return -(-size // SLOTS)


def _check(key: PaillierPublicKey) -> None:
    if key.bits <= SLOTS * SLOT_BITS:
        raise ProtocolError(f"a {key.bits}-bit Paillier key cannot carry {SLOTS} slots of {SLOT_BITS} bits")


def encrypt_vector(key: PaillierPublicKey, values: np.ndarray) -> bytes:
    """Enc of `values`, biased and packed `SLOTS` to a ciphertext, fixed-width, in order."""
    _check(key)
    plain = [int(v) for v in np.asarray(values, dtype=np.int64).tolist()]
    if any(abs(v) >= LIMIT for v in plain):
        raise ProtocolError("a count plus noise is too large to encrypt")
    packed = []
    for start in range(0, len(plain), SLOTS):
        m = 0
        for v in reversed(plain[start:start + SLOTS]):  # slot 0 holds the first value, in the lowest bits
            m = (m << SLOT_BITS) | (v + BIAS)
        packed.append(m)
    return key.ciphertexts_to_bytes(key.encrypt_many(packed, workers=1))


def add_vectors(key: PaillierPublicKey, blobs: Sequence[bytes], size: int, what: str) -> bytes:
    """The element-wise homomorphic sum of several packed vectors of `size` values each."""
    if len(blobs) > MAX_ADDENDS:
        raise ProtocolError(f"{what}: {len(blobs)} vectors, more than the {MAX_ADDENDS} a slot can add up")
    total: list = []
    for i, blob in enumerate(blobs):
        cts = key.ciphertexts_from_bytes(blob)
        if len(cts) != packed_length(size):
            raise ProtocolError(f"{what}: vector {i} holds {len(cts)} ciphertexts, expected {packed_length(size)}")
        total = cts if not total else [key.add(a, b) for a, b in zip(total, cts)]
    return key.ciphertexts_to_bytes(total)


def decrypt_vector(key: PaillierPrivateKey, blob: bytes, size: int, addends: int) -> np.ndarray:
    """The signed sums (int64) of a packed vector that `addends` biased vectors were added into."""
    if not 1 <= addends <= MAX_ADDENDS:
        raise ProtocolError(f"cannot unpack a sum of {addends} vectors")
    cts = key.public_key.ciphertexts_from_bytes(blob)
    if len(cts) != packed_length(size):
        raise ProtocolError(f"the summed counts hold {len(cts)} ciphertexts, expected {packed_length(size)}")
    mask, offset = (1 << SLOT_BITS) - 1, addends * BIAS
    out: list[int] = []
    for m in key.decrypt_many(cts, workers=1):
        m = int(m)
        for _ in range(SLOTS):
            out.append((m & mask) - offset)
            m >>= SLOT_BITS
    return np.array(out[:size], dtype=np.int64)


def fold_ciphertexts(key: PaillierPublicKey, blob: bytes, size: int, cells: Mapping[int, int]) -> bytes:
    """Add single-value ciphertexts (one count each, `cells`: position -> Enc(count)) into the
    slots at those positions of a packed vector of `size` values, under encryption.

    Why: a party that puts another party's per-cell ciphertexts into canonical order (the join
    of a vertical split, `joined.py`) must pack them without decrypting. Moving a count into slot
    s multiplies its plaintext by 2^(SLOT_BITS·s): Horner's scheme over a block's slots, highest
    first, costs SLOT_BITS squarings per slot. The slot's bias is the packed vector's own, so the
    sum of the vectors unpacks as before (a folded count must be below `LIMIT` like any value).
    The packed vector's fresh randomness rerandomizes the result: whoever made the single
    ciphertexts cannot tell where they went."""
    cts = key.ciphertexts_from_bytes(blob)
    if len(cts) != packed_length(size):
        raise ProtocolError(f"folding into {len(cts)} ciphertexts, expected {packed_length(size)}")
    blocks: dict[int, dict[int, int]] = {}
    for position, ct in cells.items():
        if not 0 <= position < size:
            raise ProtocolError(f"a folded count's position {position} is outside the {size} values")
        blocks.setdefault(position // SLOTS, {})[position % SLOTS] = ct
    shift = 1 << SLOT_BITS
    for block, slots in blocks.items():
        acc = None  # Enc(Σ count·2^(SLOT_BITS·slot)) over this block's folded slots
        for slot in range(max(slots), -1, -1):
            if acc is not None:
                acc = key.mul_plain(acc, shift)
            if slot in slots:
                acc = slots[slot] if acc is None else key.add(acc, slots[slot])
        cts[block] = key.add(cts[block], acc)
    return key.ciphertexts_to_bytes(cts)
