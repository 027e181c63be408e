"""Per-class sensitive-value statistics in sparse form, for large sensitive domains.

The dense form of a class histogram is a (classes x distinct values) matrix. With a
sensitive attribute of ~800 values and tens of thousands of classes at the fine
nodes of a lattice that matrix has tens of millions of cells, almost all zero, and
building, rolling up and scanning it dominated every ℓ-diversity and t-closeness
check. `SparseHistogram` keeps only the non-zero (class, value, count) triples --
never more than there are rows -- and rolls up by re-keying the triples onto the
coarser classes and summing (the same counting grouping the rows use). The ℓ and t
criteria evaluate it directly (`diversity.py`, `closeness.py`), so no dense matrix is
ever materialized. Statistics stay additive and value-blind: the same code runs on
ciphertext dictionaries.

Saturation: a criterion that accepts every class with at least `saturate_at` distinct
values -- and therefore every union of such a class with any others (distinct-ℓ-diversity;
not entropy or recursive-(c,ℓ), where merging with a skewed class can break a class) --
lets the histogram forget such classes: it keeps one flag per class instead of their
entries. The fine nodes of a high-cardinality table have entries for nearly every row,
most of them in classes that are already diverse, so roll-ups then sort a small
fraction of the entries. Unsaturated classes keep exact entries (all their parts were
unsaturated), so every per-class answer stays exact, with or without suppression.
"""

from __future__ import annotations

import numpy as np


LAZY_BASE_ROWS = 1 << 16  # up to this many rows a roll-up may keep a pending row histogram (8 B a row) alive


class SparseHistogram:
    """Non-zero entries of a (n_classes x domain) count matrix.

    `cls[i]`, `value[i]`, `count[i]`: class, sensitive code and count (> 0) of entry i.
    Each (class, value) pair occurs once. Built or merged entries are sorted by
    (class, value); a renumbering roll-up (no classes merged) keeps the old order.
    With `saturate_at` > 0, classes with at least that many distinct values are flagged
    in `saturated` and hold no entries (see the module docstring).

    Counting is deferred: a histogram from rows keeps the row classes, a roll-up its base
    histogram and the class map, and the entries are summed when first read. The search
    rejects most nodes on class sizes alone (classes below the size every model implies
    hold too many rows), so most are never summed. A roll-up of a pending roll-up composes
    the class maps, so it still starts from the nearest summed histogram (which it keeps
    alive until then). A roll-up of a histogram still pending from rows refers to it: it is
    summed once, when some roll-up of it is read (on a high-cardinality ADULT table with
    recursive-(4,3)-diversity, 21 of 22 row histograms were summed only for roll-ups).
    That keeps its row map alive meanwhile, so above `LAZY_BASE_ROWS` rows it is summed at
    the first roll-up instead (composing the maps would make one as long as the table per
    roll-up).
    """

    def __init__(self, cls: np.ndarray, value: np.ndarray, count: np.ndarray, n_classes: int, domain: int,
                 saturate_at: int = 0, saturated: np.ndarray | None = None) -> None:
        self.n_classes = int(n_classes)
        self.domain = int(domain)
        self.saturate_at = int(saturate_at)
        self._entries: tuple[np.ndarray, np.ndarray, np.ndarray] | None = (cls, value, count)
        self._saturated = saturated  # bool per class, only when saturate_at > 0
        self._deferred: tuple[SparseHistogram, np.ndarray] | None = None  # (summed base, class map)
        self._rows: tuple[np.ndarray, np.ndarray] | None = None  # (class per row, code per row)

    def __getstate__(self) -> dict:
        # summed before pickling: a pending histogram from rows would ship its rows (a worker
        # process sending its partition's class table, `parallel_grouping.py`)
        self._summed()
        return self.__dict__

    @classmethod
    def _pending(cls_, n_classes: int, domain: int, saturate_at: int) -> "SparseHistogram":
        later = cls_.__new__(cls_)
        later.n_classes, later.domain, later.saturate_at = int(n_classes), int(domain), int(saturate_at)
        later._entries, later._saturated, later._deferred, later._rows = None, None, None, None
        return later

    @classmethod
    def _rolled_later(cls_, base: "SparseHistogram", class_map: np.ndarray, n_classes: int) -> "SparseHistogram":
        later = cls_._pending(n_classes, base.domain, base.saturate_at)
        later._deferred = (base, class_map)
        return later

    def _summed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._entries is None:
            if self._rows is not None:
                row_class, codes = self._rows
                built = self._from_pairs(row_class, codes, None, self.n_classes, self.domain)
                self._entries, self._rows = built._entries, None
                if self.saturate_at > 0:
                    self._saturate(np.zeros(self.n_classes, dtype=bool))
            else:
                assert self._deferred is not None
                base, class_map = self._deferred
                rolled = base._rollup_now(class_map, self.n_classes)
                self._entries, self._saturated = rolled._entries, rolled._saturated
                self._deferred = None  # the base may go
        return self._entries  # type: ignore[return-value]

    @property
    def cls(self) -> np.ndarray:  # int64
        return self._summed()[0]

    @property
    def value(self) -> np.ndarray:  # int64
        return self._summed()[1]

    @property
    def count(self) -> np.ndarray:  # int64
        return self._summed()[2]

    @property
    def saturated(self) -> np.ndarray | None:
        self._summed()
        return self._saturated

    @property
    def pending(self) -> bool:
        """A roll-up whose entries are not summed yet."""
        return self._entries is None

    @property
    def entries(self) -> int:
        """Number of entries, without summing: of a pending histogram an upper bound (its
        rows, or its base's entries)."""
        if self._entries is not None:
            return int(self._entries[0].shape[0])
        if self._rows is not None:
            return int(self._rows[0].shape[0])
        return self._deferred[0].entries  # type: ignore[index]

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_classes, self.domain)

    @property
    def nbytes(self) -> int:
        return int(self.cls.nbytes + self.value.nbytes + self.count.nbytes)

    @classmethod
    def from_rows(cls_, row_class: np.ndarray, codes: np.ndarray, n_classes: int, domain: int,
                  saturate_at: int = 0) -> "SparseHistogram":
        """Count (class, value) pairs over rows (when first read); with `saturate_at`, forget
        saturated classes."""
        built = cls_._pending(n_classes, domain, saturate_at)
        built._rows = (row_class, codes)
        return built

    def rollup(self, class_map: np.ndarray, n_classes: int) -> "SparseHistogram":
        """Entries of the coarser classes: class c of this table becomes class_map[c]
        (summed when first read)."""
        if self._deferred is not None:  # compose: from this one's base straight to the new classes
            base, base_map = self._deferred
            return self._rolled_later(base, class_map[base_map], n_classes)
        if self._rows is not None and self._rows[0].shape[0] > LAZY_BASE_ROWS:
            self._summed()  # a large table's rows: counted now, so that no roll-up keeps the row map alive
        return self._rolled_later(self, class_map, n_classes)

    def _rollup_now(self, class_map: np.ndarray, n_classes: int) -> "SparseHistogram":
        cls, value, count = self._summed()
        new_cls = class_map[cls].astype(np.int64, copy=False)
        saturated = None
        if self._saturated is not None:
            # a class with a saturated part is saturated: its other parts' entries are dropped
            saturated = np.zeros(n_classes, dtype=bool)
            saturated[class_map[self._saturated]] = True
            live = ~saturated[new_cls]
            if not live.all():
                new_cls, value, count = new_cls[live], value[live], count[live]
        if n_classes == self.n_classes:  # a renumbering only: no two pairs can merge
            return SparseHistogram(new_cls, value, count, n_classes, self.domain, self.saturate_at, saturated)
        rolled = self._from_pairs(new_cls, value, count, n_classes, self.domain)
        if saturated is not None:
            rolled.saturate_at = self.saturate_at
            rolled._saturate(saturated)
        return rolled

    def _saturate(self, saturated: np.ndarray) -> None:
        """Flag classes with ≥ `saturate_at` distinct values (plus those already in
        `saturated`) and drop their entries; entries of the others keep their order."""
        cls, value, count = self._summed()
        saturated |= np.bincount(cls, minlength=self.n_classes) >= self.saturate_at
        live = ~saturated[cls]
        if not live.all():
            self._entries = (cls[live], value[live], count[live])
        self._saturated = saturated

    def _require_complete(self, what: str) -> None:
        if self.saturated is not None and self.saturated.any():
            raise ValueError(f"{what} of saturated classes are not kept (their entries were dropped)")

    @classmethod
    def _from_pairs(cls_, pair_cls: np.ndarray, value: np.ndarray, count: np.ndarray | None,
                    n_classes: int, domain: int) -> "SparseHistogram":
        """Sum `count` (1 each where None) per (class, value) pair.

        Only the sums per pair are needed -- no group id per input entry -- so a small
        key span is counted densely (`bincount`) and a large one sorted once: the key is
        class and value bit-packed (decoded by a shift and a mask, not a division), in
        int32 where it fits (a faster sort), with the count in the low bits; sums per pair
        are differences of one running sum (not `reduceat`, slow on many small groups).
        No argsort, no scatter of an inverse, no float round trip. Entries come out
        sorted by (class, value).
        """
        n = pair_cls.shape[0]
        span = n_classes * domain
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls_(empty, empty, empty, n_classes, domain)
        if span <= max(4 * n, 1 << 16):
            key = pair_cls.astype(np.int64) * domain + value
            summed = np.bincount(key, weights=count, minlength=span)
            pair_key = np.flatnonzero(summed != 0)  # a bool mask: nonzero() on numbers is several times slower
            counts = summed[pair_key].astype(np.int64)  # exact: integer sums < 2**53
            cls, values = np.divmod(pair_key, domain)
            return cls_(cls, values, counts, n_classes, domain)
        value_bits = max(1, (domain - 1).bit_length())
        count_bits = 0 if count is None else max(1, int(count.max()).bit_length())
        key_bits = max(1, (n_classes - 1).bit_length()) + value_bits + count_bits
        if key_bits > 63:  # pragma: no cover - beyond 2**63: plain argsort
            key = pair_cls.astype(np.int64) * domain + value
            order = np.argsort(key, kind="stable")
            sorted_key = key[order]
            starts = np.flatnonzero(np.concatenate(([True], sorted_key[1:] != sorted_key[:-1])))
            ones = np.ones(n, dtype=np.int64) if count is None else count[order]
            cls, values = np.divmod(sorted_key[starts], domain)
            return cls_(cls, values, np.add.reduceat(ones, starts), n_classes, domain)
        key = pair_cls.astype(np.int32 if key_bits <= 31 else np.int64)
        np.left_shift(key, value_bits, out=key)
        np.bitwise_or(key, value, out=key, casting="unsafe")  # value < 2**value_bits
        if count is not None:
            np.left_shift(key, count_bits, out=key)
            np.bitwise_or(key, count, out=key, casting="unsafe")  # count < 2**count_bits
        key.sort()
        pairs = key if count is None else np.right_shift(key, count_bits)
        last = np.empty(n, dtype=bool)  # last entry of each pair
        last[-1] = True
        np.not_equal(pairs[1:], pairs[:-1], out=last[:-1])
        ends = np.flatnonzero(last)
        if count is None:
            running = ends + 1
        else:
            running = np.cumsum(np.bitwise_and(key, (1 << count_bits) - 1), dtype=np.int64)[ends]
        counts = np.empty(ends.shape[0], dtype=np.int64)
        counts[0] = running[0]
        np.subtract(running[1:], running[:-1], out=counts[1:])
        pair_key = pairs[ends]
        cls = np.right_shift(pair_key, value_bits).astype(np.int64)
        values = np.bitwise_and(pair_key, (1 << value_bits) - 1).astype(np.int64)
        return cls_(cls, values, counts, n_classes, domain)

    def subset(self, keep: np.ndarray) -> "SparseHistogram":
        """Only the classes flagged in `keep` (boolean per class), renumbered densely."""
        new_id = np.cumsum(keep, dtype=np.int64) - 1
        mask = keep[self.cls]
        return SparseHistogram(new_id[self.cls[mask]], self.value[mask], self.count[mask],
                               int(keep.sum()), self.domain, self.saturate_at,
                               None if self.saturated is None else self.saturated[keep])

    def sizes(self) -> np.ndarray:
        """Rows per class (not known for saturated classes: ValueError if there are any)."""
        self._require_complete("sizes")
        return np.bincount(self.cls, weights=self.count, minlength=self.n_classes).round().astype(np.int64)

    def distinct(self) -> np.ndarray:
        """Distinct values per class; `saturate_at` (a lower bound) for saturated classes."""
        distinct = np.bincount(self.cls, minlength=self.n_classes).astype(np.int64)
        if self.saturated is not None:
            distinct[self.saturated] = self.saturate_at
        return distinct

    def per_class_sum(self, weights: np.ndarray) -> np.ndarray:
        """Sum of a per-entry float quantity per class."""
        self._require_complete("sums")
        return np.bincount(self.cls, weights=weights, minlength=self.n_classes)

    def toarray(self) -> np.ndarray:
        """The dense matrix (tests and small tables only; not with saturated classes)."""
        self._require_complete("counts")
        out = np.zeros((self.n_classes, self.domain), dtype=np.int64)
        np.add.at(out, (self.cls, self.value), self.count)
        return out

