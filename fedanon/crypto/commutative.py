"""Commutative deterministic ciphers for Protocol A (dissertation §4.5.2).

Protocol A needs E_a(E_b(x)) = E_b(E_a(x)) and determinism: after every party has added
its layer, equal plaintexts are equal ciphertexts, whoever encrypted first. Both
implementations are Pohlig-Hellman exponentiation ciphers, E_k(x) = x^k, in a group of
prime order q: commutative because exponents commute, invertible with k^-1 mod q, and
semantically hiding for elements hashed into the group under the DDH assumption.

* `EcCipher` ("ec", the default): secp256k1 (prime order, cofactor 1) through libsecp256k1
  (coincurve). About 128-bit security; tens of thousands of operations per second per core.
  Elements travel as 32-byte x-coordinates: x(k·P) depends only on x(P), so the cipher is
  well defined on x-coordinates, one byte shorter than compressed points, and still
  commutative and invertible.
* `PohligHellmanCipher` ("ph"): the quadratic residues modulo the 3072-bit RFC 3526 MODP
  safe prime with gmpy2. About 128-bit security as well, but ~300x SLOWER (≈100-150
  exponentiations/s per core): the conservative, classical option of the dissertation.

Cipher inputs are *group elements*: call `hash_to_group` on the raw values first and keep
a `GroupDictionary` (element -> value) to map decrypted elements back (§4.5.2).
"""

from __future__ import annotations

import hashlib
import os
import struct
from abc import ABC, abstractmethod
from typing import ClassVar, Iterable, Sequence

import functools

import gmpy2
from fedanon.crypto.secp256k1 import CONTEXT, ffi, lib

from fedanon.crypto import parallel
from fedanon.crypto.errors import EncodingError, KeyFormatError

#: Text the CLI shows for `--cipher`.
CIPHER_HELP = (
    "commutative cipher for Protocol A: 'ec' (default; secp256k1, ~128-bit security, fast: "
    "tens of thousands of ops/s per core) or 'ph' (Pohlig-Hellman over the 3072-bit RFC 3526 "
    "MODP group, ~128-bit security, conservative but ~300x SLOWER: ~100-150 ops/s per core)"
)


class CommutativeCipher(ABC):
    """One party's secret key of a commutative, deterministic, invertible cipher.

    Subclasses are cheap to pickle (`to_bytes`) so batches can run in worker processes.
    """

    name: ClassVar[str]
    security_bits: ClassVar[int]
    element_bytes: ClassVar[int]
    #: Smallest batch worth sending to worker processes (IPC vs. work per item).
    _min_parallel: ClassVar[int] = parallel.DEFAULT_MIN_PARALLEL

    @classmethod
    @abstractmethod
    def generate(cls) -> "CommutativeCipher":
        """A fresh random key (one per party and column in Protocol A)."""

    @classmethod
    @abstractmethod
    def from_bytes(cls, data: bytes) -> "CommutativeCipher":
        """Restore a key from `to_bytes()`; `KeyFormatError` if malformed."""

    @abstractmethod
    def to_bytes(self) -> bytes:
        """Serialized secret key (keep it secret: it decrypts)."""

    @classmethod
    @abstractmethod
    def _hash_chunk(cls, values: Sequence[bytes]) -> list[bytes]:
        """Serial hash-to-group of one chunk."""

    @abstractmethod
    def _encrypt_chunk(self, elements: Sequence[bytes]) -> list[bytes]:
        """Serial encryption of one chunk."""

    @abstractmethod
    def _decrypt_chunk(self, elements: Sequence[bytes]) -> list[bytes]:
        """Serial decryption of one chunk."""

    @classmethod
    def hash_to_group(cls, values: Sequence[bytes], workers: int | None = None) -> list[bytes]:
        """Map raw values to group elements with unknown discrete logs (keyless, deterministic).

        `workers`: None/0 = all cores (small batches stay in-process), 1 = serial.
        """
        return parallel.map_batches(functools.partial(_hash_chunk, cls), values, workers=workers,
                                    min_parallel=cls._min_parallel * 4)

    def encrypt_many(self, elements: Sequence[bytes], workers: int | None = None) -> list[bytes]:
        """Add this key's layer to group elements, in input order (parallel like `hash_to_group`)."""
        return parallel.map_batches(functools.partial(_encrypt_chunk, self), elements, workers=workers,
                                    min_parallel=self._min_parallel)

    def decrypt_many(self, elements: Sequence[bytes], workers: int | None = None) -> list[bytes]:
        """Remove this key's layer, in input order; layers may be removed in any order."""
        return parallel.map_batches(functools.partial(_decrypt_chunk, self), elements, workers=workers,
                                    min_parallel=self._min_parallel)

    @classmethod
    def join(cls, elements: Sequence[bytes]) -> bytes:
        """Fixed-width concatenation for the wire (no per-element framing needed)."""
        w = cls.element_bytes
        for i, e in enumerate(elements):
            if len(e) != w:
                raise EncodingError(f"element #{i} has {len(e)} bytes, expected {w} for {cls.name!r}")
        return b"".join(elements)

    @classmethod
    def split(cls, data: bytes) -> list[bytes]:
        """Inverse of `join`; a length that is not a multiple of the element size is refused."""
        w = cls.element_bytes
        if len(data) % w:
            raise EncodingError(f"{len(data)} bytes is not a whole number of {w}-byte {cls.name!r} elements")
        return [data[i: i + w] for i in range(0, len(data), w)]

    def __reduce__(self):  # pickling for process pools: the key bytes are enough
        return (type(self).from_bytes, (self.to_bytes(),))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_bytes() == self.to_bytes()  # type: ignore[union-attr]

    def __hash__(self) -> int:
        return hash((type(self).name, self.to_bytes()))


# --- secp256k1 ------------------------------------------------------------------------------

_SECP_P = 2**256 - 2**32 - 977
_SECP_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
_COMPRESSED = 258  # SECP256K1_EC_COMPRESSED
_EC_DST = b"fedanon/commutative/secp256k1/try-and-increment/v1"


class EcCipher(CommutativeCipher):
    """Pohlig-Hellman on secp256k1 x-coordinates: E_k(x(P)) = x(k·P).

    Scalar multiplication is libsecp256k1's constant-time `tweak_mul`.
    """

    name = "ec"
    security_bits = 128
    element_bytes = 32

    __slots__ = ("_k", "_kinv", "_kb", "_kinvb")

    def __init__(self, k: int) -> None:
        if not 1 <= k < _SECP_N:
            raise KeyFormatError("secp256k1 key must be a scalar in [1, n-1]")
        self._k = k
        self._kinv = pow(k, -1, _SECP_N)
        self._kb = ffi.new("unsigned char[32]", k.to_bytes(32, "big"))
        self._kinvb = ffi.new("unsigned char[32]", self._kinv.to_bytes(32, "big"))

    @classmethod
    def generate(cls) -> "EcCipher":
        while True:
            k = int.from_bytes(os.urandom(32), "big")
            if 1 <= k < _SECP_N:
                return cls(k)

    @classmethod
    def from_bytes(cls, data: bytes) -> "EcCipher":
        if not isinstance(data, (bytes, bytearray)) or len(data) != 32:
            raise KeyFormatError("serialized 'ec' commutative key must be 32 bytes")
        return cls(int.from_bytes(data, "big"))

    def to_bytes(self) -> bytes:
        return self._k.to_bytes(32, "big")

    @classmethod
    def _hash_chunk(cls, values: Sequence[bytes]) -> list[bytes]:
        # Try-and-increment: x = SHA-256(DST | counter | value) until x is the x-coordinate
        # of a curve point (about 2 tries). Nobody knows the discrete log of the result,
        # which is what makes the exponentiation cipher hiding. Not constant-time, but the
        # party only hashes its own values locally.
        ctx = CONTEXT
        parse = lib.secp256k1_ec_pubkey_parse
        pk = ffi.new("secp256k1_pubkey *")
        sha = hashlib.sha256
        out: list[bytes] = []
        for v in values:
            ctr = 0
            while True:
                x = sha(_EC_DST + struct.pack(">I", ctr) + v).digest()
                if parse(ctx, pk, b"\x02" + x, 33):
                    out.append(x)
                    break
                ctr += 1
        return out

    def _apply(self, elements: Sequence[bytes], scalar) -> list[bytes]:
        ctx = CONTEXT
        parse = lib.secp256k1_ec_pubkey_parse
        mul = lib.secp256k1_ec_pubkey_tweak_mul
        ser = lib.secp256k1_ec_pubkey_serialize
        pk = ffi.new("secp256k1_pubkey *")
        ob = ffi.new("unsigned char[33]")
        ol = ffi.new("size_t *")
        buf = ffi.buffer(ob)
        out: list[bytes] = []
        for i, e in enumerate(elements):
            if len(e) != 32 or not parse(ctx, pk, b"\x02" + e, 33):
                raise EncodingError(
                    f"element #{i} ({len(e)} bytes) is not a secp256k1 x-coordinate; was it hashed to the group?"
                )
            mul(ctx, pk, scalar)
            ol[0] = 33
            ser(ctx, ob, ol, pk, _COMPRESSED)
            out.append(buf[1:33])
        return out

    def _encrypt_chunk(self, elements: Sequence[bytes]) -> list[bytes]:
        return self._apply(elements, self._kb)

    def _decrypt_chunk(self, elements: Sequence[bytes]) -> list[bytes]:
        return self._apply(elements, self._kinvb)


# --- Pohlig-Hellman modulo the RFC 3526 3072-bit MODP prime ---------------------------------

#: RFC 3526 §4, 3072-bit MODP group: p = 2^3072 - 2^3008 - 1 + 2^64 * (floor(2^2942 pi) + 1690314).
MODP_3072_P = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AAAC42DAD33170D04507A33A85521ABDF1CBA64ECFB850458DBEF0A8AEA71575D060C7DB3970F85A6E1E4C7"
    "ABF5AE8CDB0933D71E8C94E04A25619DCEE3D2261AD2EE6BF12FFA06D98A0864D87602733EC86A64521F2B18177B200C"
    "BBE117577A615D6C770988C0BAD946E208E24FA074E5AB3143DB5BFCE0FD108E4B82D120A93AD2CAFFFFFFFFFFFFFFFF",
    16,
)
MODP_3072_Q = (MODP_3072_P - 1) // 2
_PH_BYTES = 384
_PH_DST = b"fedanon/commutative/modp3072/v1"
_P = gmpy2.mpz(MODP_3072_P)
_Q = gmpy2.mpz(MODP_3072_Q)


def _expand(value: bytes, n_bytes: int) -> bytes:
    """SHAKE-256 as an extendable-output hash, so the group element is close to uniform."""
    return hashlib.shake_256(_PH_DST + value).digest(n_bytes)


class PohligHellmanCipher(CommutativeCipher):
    """E_e(x) = x^e mod p in the order-q subgroup of quadratic residues (p = 2q + 1 safe prime).

    SLOW, CONSERVATIVE OPTION: each operation is a full 3072-bit modular exponentiation
    (≈ 100-150/s per core with gmpy2, ~300x slower than `EcCipher`). Use it when a
    finite-field group is required by policy; use "ec" otherwise.
    """

    name = "ph"
    security_bits = 128
    element_bytes = _PH_BYTES
    _min_parallel = 16  # each item costs ~10 ms, so even small batches pay off

    __slots__ = ("_e", "_einv")

    def __init__(self, e: int) -> None:
        if not 1 <= e < MODP_3072_Q:
            raise KeyFormatError("Pohlig-Hellman key must be an exponent in [1, q-1]")
        self._e = gmpy2.mpz(e)
        self._einv = gmpy2.invert(self._e, _Q)  # q is prime, so every e in [1, q-1] inverts

    @classmethod
    def generate(cls) -> "PohligHellmanCipher":
        while True:
            e = int.from_bytes(os.urandom(_PH_BYTES + 16), "big") % MODP_3072_Q  # +128 bits: unbiased
            if e > 1:
                return cls(e)

    @classmethod
    def from_bytes(cls, data: bytes) -> "PohligHellmanCipher":
        if not isinstance(data, (bytes, bytearray)) or len(data) != _PH_BYTES:
            raise KeyFormatError(f"serialized 'ph' commutative key must be {_PH_BYTES} bytes")
        return cls(int.from_bytes(data, "big"))

    def to_bytes(self) -> bytes:
        return int(self._e).to_bytes(_PH_BYTES, "big")

    @classmethod
    def _hash_chunk(cls, values: Sequence[bytes]) -> list[bytes]:
        # Hash to Z_p* (with 128 extra bits so the reduction mod p is unbiased), then square:
        # squaring maps onto the quadratic residues, the prime-order subgroup.
        out: list[bytes] = []
        for v in values:
            h = gmpy2.mpz(int.from_bytes(_expand(v, _PH_BYTES + 16), "big")) % _P
            y = gmpy2.powmod(h, 2, _P)
            if y <= 1:  # h in {0, 1, p-1}: probability ~2^-3070
                raise EncodingError("value hashed to a degenerate group element")
            out.append(int(y).to_bytes(_PH_BYTES, "big"))
        return out

    @staticmethod
    def _parse(elements: Sequence[bytes]) -> Iterable[gmpy2.mpz]:
        for i, e in enumerate(elements):
            if len(e) != _PH_BYTES:
                raise EncodingError(f"element #{i} has {len(e)} bytes, expected {_PH_BYTES} for 'ph'")
            x = gmpy2.mpz(int.from_bytes(e, "big"))
            # Membership in the QR subgroup (Legendre symbol 1) keeps the cipher a
            # permutation of the subgroup and stops small-subgroup probing of the key.
            if not 1 < x < _P or gmpy2.legendre(x, _P) != 1:
                raise EncodingError(f"element #{i} is not in the quadratic-residue subgroup mod p")
            yield x

    def _apply(self, elements: Sequence[bytes], exp: gmpy2.mpz) -> list[bytes]:
        return [int(gmpy2.powmod(x, exp, _P)).to_bytes(_PH_BYTES, "big") for x in self._parse(elements)]

    def _encrypt_chunk(self, elements: Sequence[bytes]) -> list[bytes]:
        return self._apply(elements, self._e)

    def _decrypt_chunk(self, elements: Sequence[bytes]) -> list[bytes]:
        return self._apply(elements, self._einv)


def _hash_chunk(cls: type[CommutativeCipher], values: Sequence[bytes]) -> list[bytes]:
    return cls._hash_chunk(values)


def _encrypt_chunk(cipher: CommutativeCipher, elements: Sequence[bytes]) -> list[bytes]:
    return cipher._encrypt_chunk(elements)


def _decrypt_chunk(cipher: CommutativeCipher, elements: Sequence[bytes]) -> list[bytes]:
    return cipher._decrypt_chunk(elements)


_CIPHERS: dict[str, type[CommutativeCipher]] = {"ec": EcCipher, "ph": PohligHellmanCipher}
DEFAULT_CIPHER = "ec"


def get_commutative_cipher(name: str = DEFAULT_CIPHER) -> type[CommutativeCipher]:
    """The cipher *class* for a CLI/config name; call `.generate()` or `.from_bytes()` on it."""
    try:
        return _CIPHERS[name]
    except KeyError:
        raise KeyFormatError(
            f"unknown commutative cipher {name!r}; choose one of {sorted(_CIPHERS)}"
        ) from None


def cipher_names() -> list[str]:
    """Names accepted by `get_commutative_cipher`, default first."""
    return [DEFAULT_CIPHER] + sorted(n for n in _CIPHERS if n != DEFAULT_CIPHER)


class GroupDictionary:
    """A party's secret map group element -> original value (§4.5.2).

    Hashing to the group is one-way, so after the last layer is stripped a party can only
    recover its values by looking the elements up in the dictionary it built while
    hashing. Distinct values hashing to the same element would silently merge two values;
    that has negligible probability but is checked anyway.
    """

    __slots__ = ("_cipher", "_map")

    def __init__(self, cipher: type[CommutativeCipher] | CommutativeCipher = EcCipher) -> None:
        self._cipher = cipher if isinstance(cipher, type) else type(cipher)
        self._map: dict[bytes, bytes] = {}

    def encode(self, values: Sequence[bytes], workers: int | None = None) -> list[bytes]:
        """Hash values to the group, remembering each element's value; returns the elements."""
        elements = self._cipher.hash_to_group(values, workers=workers)
        m = self._map
        for v, e in zip(values, elements):
            old = m.setdefault(e, v)
            if old != v:
                raise EncodingError(f"hash collision between values {old!r} and {v!r}")
        return elements

    def decode(self, elements: Sequence[bytes]) -> list[bytes]:
        """Map fully decrypted elements back to values; an unknown element is a protocol error."""
        m = self._map
        try:
            return [m[e] for e in elements]
        except KeyError as exc:
            raise EncodingError(
                "a decrypted element is not in this party's dictionary (wrong key or not this party's value)"
            ) from exc

    def __len__(self) -> int:
        return len(self._map)

    def __contains__(self, element: object) -> bool:
        return element in self._map
