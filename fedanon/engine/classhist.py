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
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np


@dataclass
class SparseHistogram:
    """Non-zero entries of a (n_classes x domain) count matrix.

    `cls[i]`, `value[i]`, `count[i]`: class, sensitive code and count (> 0) of entry i.
    Each (class, value) pair occurs once. Built or merged entries are sorted by
    (class, value); a renumbering roll-up (no classes merged) keeps the old order.
    """

    cls: np.ndarray  # int64
    value: np.ndarray  # int64
    count: np.ndarray  # int64
    n_classes: int
    domain: int

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n_classes, self.domain)

    @property
    def nbytes(self) -> int:
        return int(self.cls.nbytes + self.value.nbytes + self.count.nbytes)

    @classmethod
    def from_rows(cls_, row_class: np.ndarray, codes: np.ndarray, n_classes: int, domain: int) -> "SparseHistogram":
        """Count (class, value) pairs over rows."""
        key = row_class.astype(np.int64) * domain + codes
        return cls_._from_pairs(key, None, n_classes, domain)

    def rollup(self, class_map: np.ndarray, n_classes: int) -> "SparseHistogram":
        """Entries of the coarser classes: class c of this table becomes class_map[c]."""
        new_cls = class_map[self.cls].astype(np.int64, copy=False)
        if n_classes == self.n_classes:  # a renumbering only: no two pairs can merge
            return SparseHistogram(new_cls, self.value, self.count, n_classes, self.domain)
        key = np.multiply(new_cls, self.domain, out=new_cls)  # a fresh array from the gather
        np.add(key, self.value, out=key)
        return self._from_pairs(key, self.count, n_classes, self.domain)

    @classmethod
    def _from_pairs(cls_, key: np.ndarray, count: np.ndarray | None, n_classes: int,
                    domain: int) -> "SparseHistogram":
        """Sum `count` (1 each where None) per distinct pair key = class * domain + value.

        Only the sums per key are needed -- no group id per input entry -- so a small
        key span is counted densely (`bincount`) and a large one sorted once with the
        count packed into the low bits of the key: no argsort, no scatter of an
        inverse, no float round trip. Entries come out sorted by (class, value).
        """
        n = key.shape[0]
        span = n_classes * domain
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            return cls_(empty, empty, empty, n_classes, domain)
        if span <= max(4 * n, 1 << 16):
            summed = np.bincount(key, weights=count, minlength=span)
            pair_key = np.flatnonzero(summed)
            counts = summed[pair_key].astype(np.int64)  # exact: integer sums < 2**53
        else:
            max_count = n if count is None else int(count.max())
            bits = max(1, max_count.bit_length())
            if count is None:
                key = np.sort(key)
                starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
                counts = np.diff(np.append(starts, n))
                pair_key = key[starts]
            elif span < 1 << (63 - bits):
                packed = np.left_shift(key, bits, out=key)  # `key` is a temporary of the caller's
                np.bitwise_or(packed, count, out=packed)
                packed.sort()
                sorted_key = np.right_shift(packed, bits)
                boundary = np.empty(n, dtype=bool)
                boundary[0] = True
                np.not_equal(sorted_key[1:], sorted_key[:-1], out=boundary[1:])
                starts = np.flatnonzero(boundary)
                counts = np.add.reduceat(np.bitwise_and(packed, (1 << bits) - 1, out=packed), starts)
                pair_key = sorted_key[starts]
            else:  # pragma: no cover - beyond 2**63 / max count: plain argsort
                order = np.argsort(key, kind="stable")
                sorted_key = key[order]
                starts = np.flatnonzero(np.concatenate(([True], sorted_key[1:] != sorted_key[:-1])))
                counts = np.add.reduceat(count[order], starts)
                pair_key = sorted_key[starts]
        cls = pair_key // domain
        return cls_(cls, pair_key - cls * domain, counts.astype(np.int64, copy=False), n_classes, domain)

    def subset(self, keep: np.ndarray) -> "SparseHistogram":
        """Only the classes flagged in `keep` (boolean per class), renumbered densely."""
        new_id = np.cumsum(keep, dtype=np.int64) - 1
        mask = keep[self.cls]
        return SparseHistogram(new_id[self.cls[mask]], self.value[mask], self.count[mask],
                               int(keep.sum()), self.domain)

    def sizes(self) -> np.ndarray:
        """Rows per class."""
        return np.bincount(self.cls, weights=self.count, minlength=self.n_classes).round().astype(np.int64)

    def distinct(self) -> np.ndarray:
        """Distinct values per class."""
        return np.bincount(self.cls, minlength=self.n_classes).astype(np.int64)

    def per_class_sum(self, weights: np.ndarray) -> np.ndarray:
        """Sum of a per-entry float quantity per class."""
        return np.bincount(self.cls, weights=weights, minlength=self.n_classes)

    def toarray(self) -> np.ndarray:
        """The dense matrix (tests and small tables only)."""
        out = np.zeros((self.n_classes, self.domain), dtype=np.int64)
        np.add.at(out, (self.cls, self.value), self.count)
        return out

