"""Exponential ElGamal on secp256k1: a fast additively homomorphic counter cipher.

Protocol C only ever adds small counters (0/1 per row) and decrypts class sizes, which are
at most the number of rows. Exponential ElGamal, Enc(m) = (r·G, m·G + r·H) with H = x·G,
does exactly that: adding ciphertexts adds the exponents, and the key holder recovers
m·G = C2 - x·C1 and then m by a baby-step/giant-step table, which is cheap because m is
small. At the same ≈ 128-bit security it is far cheaper than Paillier-3072: encryption is
one fixed-base and one variable-base scalar multiplication (libsecp256k1, constant time),
a ciphertext is 66 bytes instead of 768, and addition is a point addition. It is offered
as Protocol C's fast option; Paillier stays the dissertation's choice.

Wire format of one ciphertext: two compressed points (33 + 33 bytes). The trivial
encryption of 0 (the identity, e.g. an empty class) is 66 zero bytes.
"""

from __future__ import annotations

import functools
import os
from typing import Sequence

import numpy as np

from fedanon.crypto.secp256k1 import CONTEXT, ffi, lib

from fedanon.crypto import parallel
from fedanon.crypto.errors import DecryptionError, KeyFormatError, SlotOverflowError

_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_COMPRESSED = 258
POINT_BYTES = 33
CIPHERTEXT_BYTES = 2 * POINT_BYTES
IDENTITY = bytes(CIPHERTEXT_BYTES)
#: Baby-step table size: counts below this decrypt with one lookup.
DEFAULT_BABY_STEPS = 1 << 16


def _ctx():
    return CONTEXT


def _random_scalar() -> int:
    while True:
        k = int.from_bytes(os.urandom(32), "big")
        if 1 <= k < _N:
            return k


def _ser(pk) -> bytes:
    ob = ffi.new("unsigned char[33]")
    ol = ffi.new("size_t *", 33)
    lib.secp256k1_ec_pubkey_serialize(_ctx(), ob, ol, pk, _COMPRESSED)
    return bytes(ffi.buffer(ob))


def _parse_into(pk, data: bytes, what: str) -> None:
    if len(data) != POINT_BYTES or not lib.secp256k1_ec_pubkey_parse(_ctx(), pk, data, POINT_BYTES):
        raise DecryptionError(f"{what} is not a valid compressed secp256k1 point")


def _base_mult(k: int):
    pk = ffi.new("secp256k1_pubkey *")
    if not lib.secp256k1_ec_pubkey_create(_ctx(), pk, k.to_bytes(32, "big")):
        raise KeyFormatError("scalar out of range")
    return pk


@functools.lru_cache(maxsize=1)
def _generator():
    """G itself (the row counters' m = 1), made once: combine only reads it."""
    return _base_mult(1)


def _combine(points: list) -> object | None:
    """Sum of parsed points; None for the identity (only with negligible probability)."""
    if not points:
        return None
    if len(points) == 1:
        return points[0]
    out = ffi.new("secp256k1_pubkey *")
    arr = ffi.new("secp256k1_pubkey *[]", points)
    if not lib.secp256k1_ec_pubkey_combine(_ctx(), out, arr, len(points)):
        return None
    return out


class ElGamalPublicKey:
    """H = x·G; encrypts counters and adds ciphertexts."""

    __slots__ = ("_h_bytes", "_h")

    def __init__(self, h_bytes: bytes) -> None:
        self._h = ffi.new("secp256k1_pubkey *")
        try:
            _parse_into(self._h, h_bytes, "ElGamal public key")
        except DecryptionError as exc:
            raise KeyFormatError(str(exc)) from None
        self._h_bytes = bytes(h_bytes)

    def to_bytes(self) -> bytes:
        return self._h_bytes

    @classmethod
    def from_bytes(cls, data: bytes) -> "ElGamalPublicKey":
        return cls(data)

    def __reduce__(self):
        return (ElGamalPublicKey, (self._h_bytes,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ElGamalPublicKey) and other._h_bytes == self._h_bytes

    def __hash__(self) -> int:
        return hash(self._h_bytes)

    def encrypt(self, m: int) -> bytes:
        """(r·G, m·G + r·H) for a fresh r; m must be in [0, n)."""
        if not 0 <= m < _N:
            raise SlotOverflowError(f"ElGamal plaintext must be in [0, n), got {m}")
        ctx = _ctx()
        r = _random_scalar()
        c1 = _base_mult(r)
        rh = ffi.new("secp256k1_pubkey *", self._h[0])
        lib.secp256k1_ec_pubkey_tweak_mul(ctx, rh, r.to_bytes(32, "big"))
        c2 = rh if m == 0 else _combine([_generator() if m == 1 else _base_mult(m), rh])
        if c2 is None:  # m·G = -r·H: probability 2^-256
            return self.encrypt(m)
        return _ser(c1) + _ser(c2)

    def _encrypt_chunk(self, ms: Sequence[int]) -> list[bytes]:
        return [self.encrypt(m) for m in ms]

    def encrypt_many(self, ms: Sequence[int], workers: int | None = None,
                     progress: parallel.ChunkProgress | None = None) -> list[bytes]:
        """Encrypt a batch over all cores (`workers=None`), results in input order."""
        return parallel.map_batches(functools.partial(_encrypt_chunk, self), ms, workers=workers,
                                    min_parallel=1024, progress=progress)

    def rerandomize(self, c: bytes) -> bytes:
        return add(c, self.encrypt(0))


def _encrypt_chunk(pk: ElGamalPublicKey, ms: Sequence[int]) -> list[bytes]:
    return pk._encrypt_chunk(ms)


class CiphertextVector:
    """Ciphertexts parsed once into libsecp256k1's internal form (64-byte points in two arrays).

    Decompressing a point costs ~6 µs; the helper sums the same row counters for every
    node the search visits, so it parses them once and then only adds. Per-class sums are
    again a `CiphertextVector` (no serialize/parse round trip when a coarser node's sums
    are rolled up from a finer node's), and serialized only for the wire. Summing builds
    each class's array of point pointers with numpy (address arithmetic over the parsed
    array) and hands it to one `secp256k1_ec_pubkey_combine` call per class, so there is no
    Python work per row.
    """

    __slots__ = ("_c1", "_c2", "_n", "_live")

    def __init__(self, ciphertexts: Sequence[bytes]) -> None:
        n = len(ciphertexts)
        self._alloc(n)
        ctx, parse = _ctx(), lib.secp256k1_ec_pubkey_parse
        for i, c in enumerate(ciphertexts):
            if c == IDENTITY:
                self._live[i] = False
                continue
            if (len(c) != CIPHERTEXT_BYTES or not parse(ctx, self._c1 + i, c[:33], 33)
                    or not parse(ctx, self._c2 + i, c[33:], 33)):
                raise DecryptionError(f"ElGamal ciphertext #{i} is malformed")

    def _alloc(self, n: int) -> None:
        self._n = n
        self._c1 = ffi.new("secp256k1_pubkey[]", max(n, 1))
        self._c2 = ffi.new("secp256k1_pubkey[]", max(n, 1))
        self._live = np.ones(n, dtype=bool)  # False: the identity (trivial Enc(0))

    @classmethod
    def _empty(cls, n: int) -> "CiphertextVector":
        out = cls.__new__(cls)
        out._alloc(n)
        return out

    def __len__(self) -> int:
        return self._n

    def _pointers(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Addresses of the parsed C1 and C2 points of `rows` (uint64, for pointer arrays)."""
        size = ffi.sizeof("secp256k1_pubkey")
        base1 = int(ffi.cast("uintptr_t", self._c1))
        base2 = int(ffi.cast("uintptr_t", self._c2))
        offsets = rows.astype(np.uint64) * np.uint64(size)
        return offsets + np.uint64(base1), offsets + np.uint64(base2)

    def class_sums(self, class_ids: Sequence[int] | np.ndarray, n_classes: int) -> "CiphertextVector":
        """Homomorphic per-class sums as a new vector; empty classes hold the identity (Enc(0))."""
        ids = np.asarray(class_ids, dtype=np.int64)
        if ids.shape != (self._n,):
            raise ValueError(f"{self._n} ciphertexts but {ids.size} class ids")
        if self._n and (ids.min() < 0 or ids.max() >= n_classes):
            raise ValueError(f"class ids must lie in [0, {n_classes})")
        live = np.flatnonzero(self._live)
        live_ids = ids[live]
        order = live[np.argsort(live_ids, kind="stable")]
        counts = np.bincount(live_ids, minlength=n_classes)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1])).tolist()
        p1, p2 = self._pointers(order)
        a1 = ffi.from_buffer("secp256k1_pubkey *[]", p1)
        a2 = ffi.from_buffer("secp256k1_pubkey *[]", p2)
        out = CiphertextVector._empty(n_classes)
        out._live[:] = counts > 0
        ctx, combine = _ctx(), lib.secp256k1_ec_pubkey_combine
        sizes = counts.tolist()
        for j in np.flatnonzero(counts).tolist():
            s, c = starts[j], sizes[j]
            if not combine(ctx, out._c1 + j, a1 + s, c) or not combine(ctx, out._c2 + j, a2 + s, c):
                raise DecryptionError("ElGamal sum hit the point at infinity (probability ~2^-256)")
        return out

    def subset_sum(self, rows: Sequence[int] | np.ndarray) -> "CiphertextVector":
        """A one-element vector: the homomorphic sum of the ciphertexts at `rows` (two
        point-combine calls over those rows only; the identity if none is live)."""
        idx = np.asarray(rows, dtype=np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= self._n):
            raise ValueError(f"rows must lie in [0, {self._n})")
        live = idx[self._live[idx]] if idx.size else idx
        out = CiphertextVector._empty(1)
        out._live[0] = False
        if live.size:
            p1, p2 = self._pointers(live)
            a1 = ffi.from_buffer("secp256k1_pubkey *[]", p1)
            a2 = ffi.from_buffer("secp256k1_pubkey *[]", p2)
            ctx, combine = _ctx(), lib.secp256k1_ec_pubkey_combine
            if not combine(ctx, out._c1, a1, int(live.size)) or not combine(ctx, out._c2, a2, int(live.size)):
                raise DecryptionError("ElGamal sum hit the point at infinity (probability ~2^-256)")
            out._live[0] = True
        return out

    def packed(self, slot_bits: int, slots: int, order: Sequence[int] | None = None) -> "CiphertextVector":
        """Horner packing: block b holds Enc(Σ_i m_{b·slots+i} · 2^{slot_bits·(slots-1-i)}).

        Homomorphic (public) work: per element `slot_bits` point doublings and one addition.
        The key holder then needs one decryption per block instead of one per element; the
        caller must guarantee every element fits `slot_bits` bits.
        """
        idx = list(range(self._n)) if order is None else [int(j) for j in order]
        blocks = -(-len(idx) // slots)
        out = CiphertextVector._empty(blocks)
        ctx, combine = _ctx(), lib.secp256k1_ec_pubkey_combine
        pair = ffi.new("secp256k1_pubkey *[2]")
        tmp = ffi.new("secp256k1_pubkey[2]")
        live = self._live
        for b in range(blocks):
            for half, (src, dst) in enumerate(((self._c1, out._c1), (self._c2, out._c2))):
                acc_live = False
                for j in idx[b * slots:(b + 1) * slots]:
                    if acc_live:
                        for _ in range(slot_bits):  # acc = 2·acc
                            pair[0] = pair[1] = dst + b
                            if not combine(ctx, tmp, pair, 2):
                                raise DecryptionError("ElGamal packing hit the point at infinity")
                            dst[b] = tmp[0]
                    if live[j]:
                        if acc_live:
                            pair[0], pair[1] = dst + b, src + j
                            if not combine(ctx, tmp, pair, 2):
                                raise DecryptionError("ElGamal packing hit the point at infinity")
                            dst[b] = tmp[0]
                        else:
                            dst[b] = src[j]
                        acc_live = True
                out._live[b] = acc_live
        return out

    def serialize(self, order: Sequence[int] | None = None) -> bytes:
        """Wire form (66 bytes each, the identity as zeros), in `order` if given."""
        idx = range(self._n) if order is None else order
        buf = ffi.new("unsigned char[]", max(1, CIPHERTEXT_BYTES * len(idx)))
        ol = ffi.new("size_t *")
        ctx, ser, live = _ctx(), lib.secp256k1_ec_pubkey_serialize, self._live
        for k, j in enumerate(idx):
            if live[j]:
                at = buf + CIPHERTEXT_BYTES * k
                ol[0] = POINT_BYTES
                ser(ctx, at, ol, self._c1 + j, _COMPRESSED)
                ol[0] = POINT_BYTES
                ser(ctx, at + POINT_BYTES, ol, self._c2 + j, _COMPRESSED)
        return bytes(ffi.buffer(buf, CIPHERTEXT_BYTES * len(idx)))

    def blobs(self, order: Sequence[int] | None = None) -> list[bytes]:
        data = self.serialize(order)
        w = CIPHERTEXT_BYTES
        return [data[i: i + w] for i in range(0, len(data), w)]

    def sum(self) -> bytes:
        return self.class_sums(np.zeros(self._n, dtype=np.int64), 1).serialize()

    def sum_by_class(self, class_ids: Sequence[int], n_classes: int) -> list[bytes]:
        """Homomorphic per-class sums as wire bytes; empty classes give the identity (Enc(0))."""
        return self.class_sums(class_ids, n_classes).blobs()


def add(c1: bytes, c2: bytes) -> bytes:
    """Enc(a) ⊕ Enc(b) = Enc(a + b)."""
    return CiphertextVector([c1, c2]).sum()


def sum_by_class(ciphertexts: Sequence[bytes] | CiphertextVector, class_ids: Sequence[int],
                 n_classes: int) -> list[bytes]:
    vec = ciphertexts if isinstance(ciphertexts, CiphertextVector) else CiphertextVector(ciphertexts)
    return vec.sum_by_class(class_ids, n_classes)


class _DiscreteLogTable:
    """Baby steps j·G (j < T) keyed by compressed encoding, giant step -T·G."""

    def __init__(self, size: int) -> None:
        self.size = size
        ctx = _ctx()
        table: dict[bytes, int] = {}
        g = _base_mult(1)
        cur = ffi.new("secp256k1_pubkey *", g[0])
        ob = ffi.new("unsigned char[33]")
        ol = ffi.new("size_t *")
        buf = ffi.buffer(ob)
        arr = ffi.new("secp256k1_pubkey *[2]")
        nxt = ffi.new("secp256k1_pubkey *")
        for j in range(1, size):
            ol[0] = 33
            lib.secp256k1_ec_pubkey_serialize(ctx, ob, ol, cur, _COMPRESSED)
            table[bytes(buf)] = j
            arr[0], arr[1] = cur, g
            lib.secp256k1_ec_pubkey_combine(ctx, nxt, arr, 2)
            cur, nxt = nxt, cur
        self.table = table
        self.giant = _base_mult(_N - size)  # -T·G

    def solve(self, point, max_value: int) -> int:
        ctx = _ctx()
        cur = ffi.new("secp256k1_pubkey *", point[0])
        giant = self.giant
        out = ffi.new("secp256k1_pubkey *")
        arr = ffi.new("secp256k1_pubkey *[2]")
        for step in range(max_value // self.size + 1):
            j = self.table.get(_ser(cur))
            if j is not None:
                return step * self.size + j
            arr[0], arr[1] = cur, giant
            if not lib.secp256k1_ec_pubkey_combine(ctx, out, arr, 2):
                return (step + 1) * self.size  # cur == T·G exactly
            cur, out = out, cur
        raise DecryptionError(f"ElGamal plaintext exceeds the expected maximum {max_value}")


_dlog_tables: dict[int, _DiscreteLogTable] = {}


class ElGamalPrivateKey:
    """The key holder's x; decrypts small sums."""

    __slots__ = ("_x", "_xb", "public_key")

    def __init__(self, x: int) -> None:
        if not 1 <= x < _N:
            raise KeyFormatError("ElGamal private key must be a scalar in [1, n-1]")
        self._x = x
        self._xb = x.to_bytes(32, "big")
        self.public_key = ElGamalPublicKey(_ser(_base_mult(x)))

    def to_bytes(self) -> bytes:
        return self._xb

    @classmethod
    def from_bytes(cls, data: bytes) -> "ElGamalPrivateKey":
        if len(data) != 32:
            raise KeyFormatError("ElGamal private key must be 32 bytes")
        return cls(int.from_bytes(data, "big"))

    def __reduce__(self):
        return (ElGamalPrivateKey.from_bytes, (self._xb,))

    def decrypt(self, c: bytes, max_value: int = DEFAULT_BABY_STEPS - 1,
                baby_steps: int = DEFAULT_BABY_STEPS) -> int:
        """m with m·G = C2 - x·C1, for 0 <= m <= max_value (else `DecryptionError`)."""
        if c == IDENTITY:
            return 0
        ctx = _ctx()
        c1 = ffi.new("secp256k1_pubkey *")
        c2 = ffi.new("secp256k1_pubkey *")
        if len(c) != CIPHERTEXT_BYTES:
            raise DecryptionError(f"ElGamal ciphertext must be {CIPHERTEXT_BYTES} bytes, got {len(c)}")
        _parse_into(c1, c[:33], "ElGamal ciphertext C1")
        _parse_into(c2, c[33:], "ElGamal ciphertext C2")
        lib.secp256k1_ec_pubkey_tweak_mul(ctx, c1, self._xb)  # S = x·C1
        if lib.secp256k1_ec_pubkey_cmp(ctx, c1, c2) == 0:
            return 0
        lib.secp256k1_ec_pubkey_negate(ctx, c1)
        m_point = _combine([c2, c1])
        if m_point is None:
            return 0
        table = _dlog_tables.get(baby_steps)
        if table is None:
            table = _dlog_tables[baby_steps] = _DiscreteLogTable(baby_steps)
        return table.solve(m_point, max_value)

    def decrypt_many(self, cs: Sequence[bytes], max_value: int = DEFAULT_BABY_STEPS - 1,
                     workers: int | None = 1) -> list[int]:
        """Decrypt a batch; `workers=None` spreads it over all cores (one scalar multiplication
        each, the key holder's main cost in Protocol C)."""
        return parallel.map_batches(functools.partial(_decrypt_chunk, self, max_value), cs, workers=workers,
                                    min_parallel=256)

    def encrypt(self, m: int) -> bytes:
        """Enc(m) as the public key makes it, (r·G, m·G + r·H), computed with x: the second point
        is (m + r·x)·G, so both are fixed-base multiplications (libsecp256k1's precomputed
        generator table), about twice as fast as the public key's variable-base r·H. The
        ciphertexts have the same distribution; for the key holder's own encryptions."""
        if not 0 <= m < _N:
            raise SlotOverflowError(f"ElGamal plaintext must be in [0, n), got {m}")
        while True:
            r = _random_scalar()
            t = (m + r * self._x) % _N
            if t:  # t = 0 (the identity as C2): probability 2^-256
                return _ser(_base_mult(r)) + _ser(_base_mult(t))

    def encrypt_many(self, ms: Sequence[int], workers: int | None = None,
                     progress: parallel.ChunkProgress | None = None) -> list[bytes]:
        """`encrypt` over a batch, over all cores (`workers=None`), results in input order."""
        return parallel.map_batches(functools.partial(_private_encrypt_chunk, self), ms, workers=workers,
                                    min_parallel=1024, progress=progress)


def _private_encrypt_chunk(sk: ElGamalPrivateKey, ms: Sequence[int]) -> list[bytes]:
    return [sk.encrypt(m) for m in ms]


def _decrypt_chunk(sk: ElGamalPrivateKey, max_value: int, cs: Sequence[bytes]) -> list[int]:
    """`ElGamalPrivateKey.decrypt` over a batch with the C objects allocated once: the scalar
    multiplication x·C1 dominates, the rest is kept to the calls it needs."""
    table = _dlog_tables.get(DEFAULT_BABY_STEPS)
    if table is None:
        table = _dlog_tables[DEFAULT_BABY_STEPS] = _DiscreteLogTable(DEFAULT_BABY_STEPS)
    ctx, xb, lookup = _ctx(), sk._xb, table.table.get
    parse, tweak, negate = lib.secp256k1_ec_pubkey_parse, lib.secp256k1_ec_pubkey_tweak_mul, lib.secp256k1_ec_pubkey_negate
    combine, serialize, cmp = lib.secp256k1_ec_pubkey_combine, lib.secp256k1_ec_pubkey_serialize, lib.secp256k1_ec_pubkey_cmp
    c1, c2, m = (ffi.new("secp256k1_pubkey *") for _ in range(3))
    pair = ffi.new("secp256k1_pubkey *[2]", [c2, c1])
    ob = ffi.new("unsigned char[33]")
    ol = ffi.new("size_t *")
    buf = ffi.buffer(ob)
    out = []
    for i, c in enumerate(cs):
        if c == IDENTITY:
            out.append(0)
            continue
        if len(c) != CIPHERTEXT_BYTES or not parse(ctx, c1, c[:33], 33) or not parse(ctx, c2, c[33:], 33):
            raise DecryptionError(f"ElGamal ciphertext #{i} of the batch is malformed")
        tweak(ctx, c1, xb)  # x·C1
        if cmp(ctx, c1, c2) == 0:
            out.append(0)
            continue
        negate(ctx, c1)
        if not combine(ctx, m, pair, 2):
            out.append(0)
            continue
        ol[0] = 33
        serialize(ctx, ob, ol, m, _COMPRESSED)
        j = lookup(bytes(buf))
        out.append(j if j is not None else table.solve(m, max_value))
    return out


def generate_elgamal_keypair() -> ElGamalPrivateKey:
    """A fresh key pair; the private key stays with Protocol C's key holder."""
    return ElGamalPrivateKey(_random_scalar())
