"""One interface for Protocol C's hidden row counters: Paillier (default) or ElGamal (fast).

Protocol C's roles only need four things from the counter cipher, and they need them as
bytes they can put on the wire:

1. every party encrypts one counter per row (1 real, 0 pseudotuple) under the key
   holder's public key — `encrypt_counters`;
2. the helper loads those ciphertexts once (`load`) and, for every node the search tests,
   turns its grouping into one message with the encrypted class sizes — `class_sums`;
3. the key holder decrypts that message into the class sizes — `decrypt_class_counts`;
4. finally the key holder learns which output rows are real — `decrypt_counters` (for
   Paillier packed locally, so ~37,700 ADULT counters cost ~50 half-size decryptions, not 37,700).

With Paillier the message is packed: the slot width is the bit length of the largest
class (in rows, pseudotuples included — the helper knows this and it bounds the true
count), so one 3072-bit ciphertext carries ~95-1500 class sizes in its lower half (decrypted
with one half-size exponentiation) and an overflow is impossible by construction. With
ElGamal each class is one 66-byte ciphertext, decrypted by a table lookup. Message:
magic(1) | scheme-specific header | ciphertexts. Besides the class sizes the key holder
learns only the bit length of the largest class (pseudotuples included). Permuting the classes before calling `class_sums` is the protocol's job.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from typing import ClassVar, Sequence

import gmpy2
import numpy as np
from gmpy2 import mpz

from fedanon.crypto import elgamal, paillier
from fedanon.crypto.errors import DecryptionError, KeyFormatError
from fedanon.crypto.paillier_rows import SharedPaillierRows
from fedanon.crypto.parallel import ChunkProgress

COUNTER_SCHEMES = ("paillier", "elgamal")
DEFAULT_COUNTER_SCHEME = "paillier"
#: Text the CLI can show for the counter-cipher option.
COUNTER_HELP = (
    "homomorphic counter cipher of Protocol C: 'paillier' (default, the dissertation's "
    "choice; 3072-bit, class sizes packed ~95 per ciphertext) or 'elgamal' (exponential "
    "ElGamal on secp256k1, same ~128-bit security, encryption ~30-60x faster, 66-byte ciphertexts)"
)
_TAG = {"paillier": 0x50, "elgamal": 0x45}


def counter_values(real: Sequence[bool | int]) -> list[int]:
    """The plaintexts of the row counters: 1 for a real row, 0 for a pseudotuple (one mapping
    for every scheme and for both the parties' and the key holder's encryption)."""
    return [1 if b else 0 for b in real]


class CounterPublicKey(ABC):
    """What every party and the helper hold."""

    scheme: ClassVar[str]

    @abstractmethod
    def to_bytes(self) -> bytes:
        """Serialized public key, prefixed with the scheme tag."""

    def encrypt_counters(self, real: Sequence[bool | int], workers: int | None = None,
                         progress: ChunkProgress | None = None) -> list[bytes]:
        """Enc(1) for real rows, Enc(0) for pseudotuples, in row order, as bytes."""
        return self.encrypt_values(counter_values(real), workers=workers, progress=progress)

    @abstractmethod
    def encrypt_values(self, values: Sequence[int], workers: int | None = None,
                       progress: ChunkProgress | None = None) -> list[bytes]:
        """Enc(v) of small non-negative integers, one fixed-width ciphertext each, as bytes
        (the key holder's per-class answers in Protocol C's entropy metrics)."""

    @abstractmethod
    def load(self, ciphertexts: Sequence[bytes], workers: int | None = 1) -> object:
        """Parse the row counters once; pass the result to every `class_sums` call.

        `workers` other than 1 lets a scheme spread the per-class sums over that many
        cores (None: all); call `unload` when done with the result.
        """

    def unload(self, loaded: object) -> None:
        """Free what `load` or `share_sums` holds beyond memory (Paillier over cores: a shared-memory block)."""

    def share_sums(self, sums: object, workers: int | None = None) -> object:
        """`sums` (from `sum_by_class`) in the form `load` gives: for sums that many later
        `sum_by_class` calls roll up from (the helper's bottom node), so that a scheme can
        spread those over `workers` cores (None: all). Call `unload` when done with it.

        By default the sums as they are (ElGamal: one combine call per class needs no worker).
        """
        return sums

    @abstractmethod
    def sum_by_class(self, loaded: object, class_ids: Sequence[int], n_classes: int) -> object:
        """Encrypted per-class sums, in a form `sum_by_class` accepts again (roll-up: sums of
        a finer node's classes give a coarser node's) and `sums_message` sends."""

    def subset_sum(self, loaded: object, rows: Sequence[int]) -> object:
        """One encrypted sum (a one-element `sum_by_class` result) of the entries at `rows` of
        `loaded` (row counters or sums): work for those entries only."""
        ids = [1] * len(loaded)  # type: ignore[arg-type]
        for r in rows:
            ids[int(r)] = 0
        return self.sum_by_class(loaded, ids, 2)

    def difference(self, total: object, part: object) -> object | None:
        """Enc(t − p) from one-element sums Enc(t) and Enc(p) (`subset_sum` results), t ≥ p; None
        where the scheme offers no cheap subtraction (the caller then sums directly)."""
        return None

    def grouped_sums(self, ciphertexts: Sequence[bytes], groupings: Sequence[tuple[Sequence[int], int]],
                     workers: int | None = 1) -> list[object]:
        """For freshly received ciphertexts and several groupings of them (class id per
        ciphertext, class count): the `sum_by_class` result of each. A scheme may spread the
        groupings over `workers` cores (None: all)."""
        loaded = self.load(ciphertexts)
        try:
            return [self.sum_by_class(loaded, np.asarray(ids, dtype=np.int64).tolist(), n) for ids, n in groupings]
        finally:
            self.unload(loaded)

    @abstractmethod
    def ciphertexts(self, sums: object) -> list[bytes]:
        """Each sum of `sums` (from `sum_by_class`) as one ciphertext's bytes, the form
        `encrypt_values` gives: to `load` together with other ciphertexts."""

    @abstractmethod
    def sums_message(self, sums: object, upper_bounds: Sequence[int], order: Sequence[int] | None = None) -> bytes:
        """The message with `sums` (in `order`, e.g. a random permutation); `upper_bounds[j]`
        bounds sum j (rows summed into it, pseudotuples included)."""

    def class_sums(self, loaded: object, class_ids: Sequence[int], n_classes: int) -> bytes:
        """The helper's message to the key holder: encrypted sizes of classes 0..n_classes-1."""
        sizes = [0] * n_classes
        for j in class_ids:
            sizes[j] += 1
        return self.sums_message(self.sum_by_class(loaded, class_ids, n_classes), sizes)


class CounterPrivateKey(ABC):
    """What only the key holder holds."""

    scheme: ClassVar[str]

    @property
    @abstractmethod
    def public_key(self) -> CounterPublicKey:
        ...

    @abstractmethod
    def to_bytes(self) -> bytes:
        ...

    def encrypt_counters(self, real: Sequence[bool | int], workers: int | None = None,
                         progress: ChunkProgress | None = None) -> list[bytes]:
        """As the public key's, by the same path (`counter_values`, then `encrypt_values`): a scheme
        that encrypts faster with what only the key holder knows overrides `encrypt_values` only."""
        return self.encrypt_values(counter_values(real), workers=workers, progress=progress)

    def encrypt_values(self, values: Sequence[int], workers: int | None = None,
                       progress: ChunkProgress | None = None) -> list[bytes]:
        """As the public key's; a scheme may use what only the key holder knows to be faster."""
        return self.public_key.encrypt_values(values, workers=workers, progress=progress)

    @abstractmethod
    def decrypt_class_counts(self, message: bytes, n_classes: int, workers: int | None = 1) -> list[int]:
        """True class sizes (real rows only) from a `class_sums` message."""

    @abstractmethod
    def decrypt_counters(self, ciphertexts: Sequence[bytes], workers: int | None = None) -> list[int]:
        """The final step: 1 for real rows, 0 for pseudotuples, in the given order.

        `DecryptionError` if a counter is not 0 or 1.
        """


def _check_bits(values: list[int]) -> list[int]:
    for i, v in enumerate(values):
        if v not in (0, 1):
            raise DecryptionError(f"row counter #{i} decrypts to {v}, not 0 or 1")
    return values


# --- Paillier ---------------------------------------------------------------------------------

#: `grouped_sums` goes to the pool from this many multiplications (ciphertexts × groupings) on:
#: ~40 ms of work, against a shared-memory block and a round trip of a few ms.
_GROUPED_MIN_WORK = 4096


class PaillierCounterPublicKey(CounterPublicKey):
    scheme = "paillier"

    def __init__(self, key: paillier.PaillierPublicKey) -> None:
        self.key = key

    def to_bytes(self) -> bytes:
        return bytes([_TAG["paillier"]]) + self.key.to_bytes()

    def encrypt_values(self, values: Sequence[int], workers: int | None = None,
                       progress: ChunkProgress | None = None) -> list[bytes]:
        w = self.key.ciphertext_bytes
        cts = self.key.encrypt_many(list(values), workers=workers, progress=progress)
        return [int(c).to_bytes(w, "big") for c in cts]

    def load(self, ciphertexts: Sequence[bytes], workers: int | None = 1) -> object:
        rows = self.key.ciphertexts_from_bytes(b"".join(ciphertexts))
        if workers == 1:
            return rows
        return SharedPaillierRows(self.key, rows, workers)

    def unload(self, loaded: object) -> None:
        if isinstance(loaded, SharedPaillierRows):
            loaded.close()

    def share_sums(self, sums: object, workers: int | None = None) -> object:
        if workers == 1 or isinstance(sums, SharedPaillierRows):
            return sums
        return SharedPaillierRows(self.key, list(sums), workers)  # type: ignore[call-overload]

    def sum_by_class(self, loaded: object, class_ids: Sequence[int], n_classes: int) -> object:
        if isinstance(loaded, SharedPaillierRows):
            return loaded.sum_by_class(class_ids, n_classes)
        return self.key.sum_by_class(loaded, class_ids, n_classes)  # type: ignore[arg-type]

    def grouped_sums(self, ciphertexts: Sequence[bytes], groupings: Sequence[tuple[Sequence[int], int]],
                     workers: int | None = 1) -> list[object]:
        # each grouping is one pool task over the ciphertexts shared once (the work is one
        # multiplication per ciphertext and grouping: worth the pool from ~2 groupings of a few
        # hundred ciphertexts on)
        rows = self.key.ciphertexts_from_bytes(b"".join(ciphertexts))
        min_rows = _GROUPED_MIN_WORK // max(1, len(groupings))
        shared = SharedPaillierRows(self.key, rows, workers, min_rows=min_rows)
        try:
            return list(shared.sums_by_groupings([(ids, n) for ids, n in groupings]))
        finally:
            shared.close()

    def difference(self, total: object, part: object) -> object | None:
        # one inversion mod n²: the result is the very product of the entries in `total` but not
        # in `part` -- the same ciphertext a direct sum of those entries gives
        (t,), (p,) = total, part  # type: ignore[misc]
        try:
            return [mpz(t) * gmpy2.invert(mpz(p), self.key.nsquare) % self.key.nsquare]
        except ZeroDivisionError:  # p shares a factor with n: no inverse (never for ciphertexts)
            return None

    def subset_sum(self, loaded: object, rows: Sequence[int]) -> object:
        if isinstance(loaded, SharedPaillierRows):  # shared with the pool: many entries go to its workers
            return loaded.subset_sum(rows)
        # a list (a cached node's sums): in this process, shipping them to the pool would cost more
        values = loaded  # a list of sums, or the bottom's SharedPaillierRows (indexable)
        return paillier.class_products(((values[int(r)], 0) for r in rows), 1, self.key.nsquare)  # type: ignore[index]

    def ciphertexts(self, sums: object) -> list[bytes]:
        w = self.key.ciphertext_bytes
        return [int(c).to_bytes(w, "big") for c in sums]  # type: ignore[attr-defined]

    def sums_message(self, sums: object, upper_bounds: Sequence[int], order: Sequence[int] | None = None) -> bytes:
        values: list = list(sums)  # type: ignore[call-overload]
        bounds = list(upper_bounds)
        if order is not None:
            values = [values[j] for j in order]
            bounds = [bounds[j] for j in order]
        packer = paillier.CountPacker(self.key, max(1, max(bounds, default=1)))
        packed = packer.pack(values, upper_bounds=bounds, workers=None)
        return bytes([_TAG["paillier"]]) + struct.pack(">HI", packer.slot_bits, len(values)) + \
            self.key.ciphertexts_to_bytes(packed)


class PaillierCounterPrivateKey(CounterPrivateKey):
    scheme = "paillier"

    def __init__(self, key: paillier.PaillierPrivateKey) -> None:
        self.key = key
        self._public = PaillierCounterPublicKey(key.public_key)

    @property
    def public_key(self) -> PaillierCounterPublicKey:
        return self._public

    def to_bytes(self) -> bytes:
        return bytes([_TAG["paillier"]]) + self.key.to_bytes()

    def encrypt_values(self, values: Sequence[int], workers: int | None = None,
                       progress: ChunkProgress | None = None) -> list[bytes]:
        # with p and q: the same ciphertexts' distribution, ≈ 1.6x cheaper (PaillierPrivateKey.encrypt)
        w = self._public.key.ciphertext_bytes
        cts = self.key.encrypt_many(list(values), workers=workers, progress=progress)
        return [int(c).to_bytes(w, "big") for c in cts]

    def decrypt_class_counts(self, message: bytes, n_classes: int, workers: int | None = 1) -> list[int]:
        if len(message) < 7 or message[0] != _TAG["paillier"]:
            raise DecryptionError("not a Paillier class-sum message")
        slot_bits, n = struct.unpack_from(">HI", message, 1)
        if n != n_classes or not 1 <= slot_bits <= 64:
            raise DecryptionError(f"class-sum message for {n} classes ({slot_bits}-bit slots); expected {n_classes}")
        packer = paillier.CountPacker(self.key.public_key, (1 << slot_bits) - 1)
        packed = self.key.public_key.ciphertexts_from_bytes(message[7:])
        return packer.unpack(self.key, packed, n_classes, workers=workers)

    def decrypt_counters(self, ciphertexts: Sequence[bytes], workers: int | None = None) -> list[int]:
        # The dissertation decrypts every row counter (r + r_p Paillier decryptions). The key
        # holder can instead pack them itself — Horner with 2-bit slots, ~760 counters per
        # ciphertext — and decrypt ~1/760 as many, each at half cost; 2 bits (not 1) so that
        # a counter of 2 or 3 is caught instead of silently carrying into its neighbour.
        pk = self.key.public_key
        cts = pk.ciphertexts_from_bytes(b"".join(ciphertexts))
        if not cts:
            return []
        packer = paillier.CountPacker(pk, 3)
        return _check_bits(packer.unpack(self.key, packer.pack(cts), len(cts), workers=workers))


# --- ElGamal -----------------------------------------------------------------------------------

#: ElGamal messages pack several small sums per ciphertext while the packed value stays
#: below the key holder's baby-step table (2^16): one table lookup per decryption.
_ELGAMAL_PACK_BITS = 16


def _elgamal_slots(bound: int) -> tuple[int, int]:
    """(slot bits, slots per ciphertext) for sums at most `bound` (public: from the header)."""
    bits = max(1, int(bound).bit_length())
    return bits, max(1, _ELGAMAL_PACK_BITS // bits)


class ElGamalCounterPublicKey(CounterPublicKey):
    scheme = "elgamal"

    def __init__(self, key: elgamal.ElGamalPublicKey) -> None:
        self.key = key

    def to_bytes(self) -> bytes:
        return bytes([_TAG["elgamal"]]) + self.key.to_bytes()

    def encrypt_values(self, values: Sequence[int], workers: int | None = None,
                       progress: ChunkProgress | None = None) -> list[bytes]:
        return self.key.encrypt_many(list(values), workers=workers, progress=progress)

    def load(self, ciphertexts: Sequence[bytes], workers: int | None = 1) -> object:
        return elgamal.CiphertextVector(ciphertexts)  # sums need no worker: one combine call per class

    def sum_by_class(self, loaded: object, class_ids: Sequence[int], n_classes: int) -> object:
        return loaded.class_sums(class_ids, n_classes)  # type: ignore[attr-defined]

    def subset_sum(self, loaded: object, rows: Sequence[int]) -> object:
        return loaded.subset_sum(rows)  # type: ignore[attr-defined]

    def ciphertexts(self, sums: object) -> list[bytes]:
        return sums.blobs() if isinstance(sums, elgamal.CiphertextVector) else list(sums)  # type: ignore[call-overload]

    def sums_message(self, sums: object, upper_bounds: Sequence[int], order: Sequence[int] | None = None) -> bytes:
        vector = sums if isinstance(sums, elgamal.CiphertextVector) else elgamal.CiphertextVector(list(sums))  # type: ignore[call-overload]
        n = len(vector) if order is None else len(order)
        # Send only a power-of-two bound (like Paillier's slot width), not the exact largest
        # class size including pseudotuples. Small sums (e.g. the final 0/1 row counters)
        # are packed several per ciphertext, Horner-style, as with Paillier.
        bound = (1 << int(max(upper_bounds, default=0)).bit_length()) - 1
        bits, slots = _elgamal_slots(bound)
        body = vector.packed(bits, slots, order).serialize() if slots > 1 else vector.serialize(order)
        return bytes([_TAG["elgamal"]]) + struct.pack(">II", bound, n) + body


class ElGamalCounterPrivateKey(CounterPrivateKey):
    scheme = "elgamal"

    def __init__(self, key: elgamal.ElGamalPrivateKey) -> None:
        self.key = key
        self._public = ElGamalCounterPublicKey(key.public_key)

    @property
    def public_key(self) -> ElGamalCounterPublicKey:
        return self._public

    def to_bytes(self) -> bytes:
        return bytes([_TAG["elgamal"]]) + self.key.to_bytes()

    def encrypt_values(self, values: Sequence[int], workers: int | None = None,
                       progress: ChunkProgress | None = None) -> list[bytes]:
        # with x: two fixed-base multiplications per value, the same ciphertexts' distribution
        return self.key.encrypt_many(list(values), workers=workers, progress=progress)

    def decrypt_class_counts(self, message: bytes, n_classes: int, workers: int | None = 1) -> list[int]:
        if len(message) < 9 or message[0] != _TAG["elgamal"]:
            raise DecryptionError("not an ElGamal class-sum message")
        bound, n = struct.unpack_from(">II", message, 1)
        bits, slots = _elgamal_slots(bound)
        blocks = -(-n // slots)
        w = elgamal.CIPHERTEXT_BYTES
        body = message[9:]
        if n != n_classes or len(body) != blocks * w:
            raise DecryptionError(f"class-sum message for {n} classes / {len(body)} bytes; expected {n_classes}")
        cts = [body[i: i + w] for i in range(0, len(body), w)]
        if slots == 1:
            return self.key.decrypt_many(cts, max_value=bound, workers=workers)
        plains = self.key.decrypt_many(cts, max_value=(1 << (bits * slots)) - 1, workers=workers)
        mask, out = (1 << bits) - 1, []
        for b, m in enumerate(plains):
            k = min(slots, n - b * slots)
            part = [(m >> (bits * (k - 1 - i))) & mask for i in range(k)]
            if m >> (bits * k) or any(v > bound for v in part):
                raise DecryptionError(f"packed ElGamal block #{b} holds a sum above its bound {bound}")
            out.extend(part)
        return out

    def decrypt_counters(self, ciphertexts: Sequence[bytes], workers: int | None = None) -> list[int]:
        try:
            return _check_bits(self.key.decrypt_many(list(ciphertexts), max_value=1, workers=workers))
        except DecryptionError as exc:
            raise DecryptionError(f"a row counter is not 0 or 1 ({exc})") from None


# --- factories -----------------------------------------------------------------------------

def generate_counter_key(scheme: str = DEFAULT_COUNTER_SCHEME) -> CounterPrivateKey:
    """A fresh key pair for the key holder (Paillier keygen takes up to a few seconds)."""
    if scheme == "paillier":
        return PaillierCounterPrivateKey(paillier.generate_paillier_keypair())
    if scheme == "elgamal":
        return ElGamalCounterPrivateKey(elgamal.generate_elgamal_keypair())
    raise KeyFormatError(f"unknown counter cipher {scheme!r}; choose one of {list(COUNTER_SCHEMES)}")


def counter_public_key_from_bytes(data: bytes) -> CounterPublicKey:
    if not data:
        raise KeyFormatError("empty counter public key")
    if data[0] == _TAG["paillier"]:
        return PaillierCounterPublicKey(paillier.PaillierPublicKey.from_bytes(data[1:]))
    if data[0] == _TAG["elgamal"]:
        return ElGamalCounterPublicKey(elgamal.ElGamalPublicKey.from_bytes(data[1:]))
    raise KeyFormatError(f"unknown counter public key tag 0x{data[0]:02x}")


def counter_private_key_from_bytes(data: bytes) -> CounterPrivateKey:
    if not data:
        raise KeyFormatError("empty counter private key")
    if data[0] == _TAG["paillier"]:
        return PaillierCounterPrivateKey(paillier.PaillierPrivateKey.from_bytes(data[1:]))
    if data[0] == _TAG["elgamal"]:
        return ElGamalCounterPrivateKey(elgamal.ElGamalPrivateKey.from_bytes(data[1:]))
    raise KeyFormatError(f"unknown counter private key tag 0x{data[0]:02x}")
