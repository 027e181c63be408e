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
from typing import Callable

import numpy as np

#: `grouping.group_key`'s signature: (int64 keys, key span) -> (one index per group, group of each key)
GroupFn = Callable[[np.ndarray, int], "tuple[np.ndarray, np.ndarray]"]


@dataclass
class SparseHistogram:
    """Non-zero entries of a (n_classes x domain) count matrix.

    `cls[i]`, `value[i]`, `count[i]`: class, sensitive code and count (> 0) of entry i.
    Each (class, value) pair occurs once. Entries are not necessarily ordered.
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
    def from_rows(cls_, row_class: np.ndarray, codes: np.ndarray, n_classes: int, domain: int,
                  group: GroupFn) -> "SparseHistogram":
        """Count (class, value) pairs over rows; `group` is the grouping used for rows."""
        key = row_class.astype(np.int64) * domain + codes
        first, inverse = group(key, n_classes * domain)
        counts = np.bincount(inverse, minlength=first.shape[0]).astype(np.int64)
        pair_key = key[first]
        return cls_(pair_key // domain, pair_key % domain, counts, n_classes, domain)

    def rollup(self, class_map: np.ndarray, n_classes: int, group: GroupFn) -> "SparseHistogram":
        """Entries of the coarser classes: class c of this table becomes class_map[c]."""
        new_cls = class_map[self.cls].astype(np.int64)
        if n_classes == self.n_classes:  # a renumbering only: no two pairs can merge
            return SparseHistogram(new_cls, self.value, self.count, n_classes, self.domain)
        key = new_cls * self.domain + self.value
        first, inverse = group(key, n_classes * self.domain)
        counts = np.bincount(inverse, weights=self.count, minlength=first.shape[0]).round().astype(np.int64)
        pair_key = key[first]
        return SparseHistogram(pair_key // self.domain, pair_key % self.domain, counts, n_classes, self.domain)

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

