"""A node's per-class sensitive histograms, each counted when a criterion first reads it.

The search rejects most nodes on class sizes alone (`checker.ClassJudge`: the classes
below the size every model implies hold more rows than may be suppressed), and it
never reads the histograms of those. Building every dense histogram eagerly -- from the
rows one `bincount` over every (class, value) cell, in a roll-up a sum of the whole
(classes x values) matrix per merged class -- costs about a third of the search on ADULT
with recursive-(4,3)-diversity and 5 % suppression, for matrices nobody reads.

`Histograms` maps each sensitive attribute to its class histogram, dense (a NumPy
matrix) or sparse (`classhist.SparseHistogram`, which defers on its own). A dense one
may be held as a recipe instead: "count these rows by class" (`RowCounts`), "count these
rows by key over the key span" (`KeyCounts`, the counting path of small spans) or "sum this
matrix by that class map" (`ClassSums`). Reading the attribute (`histograms[a]`) computes
and keeps the matrix. A roll-up of a sum composes class maps, so it always starts from a
matrix or names the histogram it sums: a roll-up of a count still waiting to be counted
refers to that count's `Histograms` and counts it (once, kept there for every other roll-up
of it) only when some roll-up is read. Counts wait only on tables of at most
the grouper's `_DEFER_ROW_COUNTS` rows, so what such a reference keeps alive is small; composing
the row maps instead would make one map as long as the table per roll-up.
Results are bit for bit the eager ones: the same integer sums in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Union

import numpy as np

from fedanon.stats.classhist import SparseHistogram


def sum_by_group(inverse: np.ndarray, n_groups: int, values: np.ndarray) -> np.ndarray:
    """Sum rows of integer `values` (1-D or 2-D) per group id, in int64; also used to merge
    partitions' class tables (`parallel_grouping.py`).

    `np.add.at` on int64 (NumPy >= 1.25 has a fast indexed loop for it): exact without a
    float round trip, and for 2-D values about 3x faster than a weighted `bincount` over
    flat cell indices, which needed a float copy and a cast back of every cell.
    """
    values = values.astype(np.int64, copy=False)
    if values.ndim == 1:
        out = np.zeros(n_groups, dtype=np.int64)
        np.add.at(out, inverse, values)
        return out
    d = values.shape[1]
    cells = inverse * d
    flat = np.add.outer(cells, _column_index(d)).ravel()
    out = np.zeros(n_groups * d, dtype=np.int64)
    np.add.at(out, flat, values.ravel())
    return out.reshape(n_groups, d)


def sum_by_class(class_map: np.ndarray, n_classes: int, values: np.ndarray) -> np.ndarray:
    """Rows of `values` summed per class of a grouping's class map (every class has a row).

    Where no two rows share a class (a roll-up that merged nothing) the rows are only moved,
    in their own type; otherwise `sum_by_group`. One rule for a roll-up's sizes and subset
    counts (`Grouper.rollup`) and its dense histograms (`ClassSums`).
    """
    if n_classes == values.shape[0]:
        out = np.empty_like(values)
        out[class_map] = values
        return out
    return sum_by_group(class_map, n_classes, values)


_COLUMN_INDEX: dict[int, np.ndarray] = {}


def _column_index(d: int) -> np.ndarray:
    """0..d-1 as int64, cached (one allocation less per roll-up of dense histograms)."""
    index = _COLUMN_INDEX.get(d)
    if index is None:
        index = _COLUMN_INDEX[d] = np.arange(d, dtype=np.int64)
    return index


class Recipe:
    """How to compute a dense (classes x domain) histogram, kept instead of the matrix."""

    __slots__ = ()

    def compute(self) -> np.ndarray:
        raise NotImplementedError


class RowCounts(Recipe):
    """Recipe: the (classes x domain) counts of (class of row, code of row) pairs."""

    __slots__ = ("row_class", "codes", "n_classes", "domain")

    def __init__(self, row_class: np.ndarray, codes: np.ndarray, n_classes: int, domain: int) -> None:
        self.row_class, self.codes, self.n_classes, self.domain = row_class, codes, int(n_classes), int(domain)

    def compute(self) -> np.ndarray:
        d = self.domain
        return np.bincount(self.row_class * d + self.codes, minlength=self.n_classes * d).reshape(
            self.n_classes, d).astype(np.int64, copy=False)


class KeyCounts(Recipe):
    """Recipe: counts of (key of row, code of row) pairs over the whole key span, then the rows
    of the present keys (the classes, ascending) -- the counting path of a small key span."""

    __slots__ = ("key", "codes", "span", "domain", "present")

    def __init__(self, key: np.ndarray, codes: np.ndarray, span: int, domain: int, present: np.ndarray) -> None:
        self.key, self.codes, self.span, self.domain, self.present = key, codes, int(span), int(domain), present

    def compute(self) -> np.ndarray:
        cell = self.key.astype(np.int64)
        np.multiply(cell, self.domain, out=cell)
        np.add(cell, self.codes, out=cell)
        return np.bincount(cell, minlength=self.span * self.domain).reshape(self.span, self.domain)[self.present]


class ClassSums(Recipe):
    """Recipe: the rows of a matrix summed per class of a class map (`sum_by_class`).

    `base` is the matrix, or (histograms, attribute) naming one not computed yet: it is
    computed by its own `Histograms` (and kept there) when this recipe is first read. On
    ADULT with recursive-(4,3)-diversity 16 of a search's 21 row counts were computed only
    because a roll-up was made from them, and most of those roll-ups failed on sizes alone.
    """

    __slots__ = ("base", "class_map", "n_classes")

    def __init__(self, base: "np.ndarray | tuple[Histograms, str]", class_map: np.ndarray, n_classes: int) -> None:
        self.base, self.class_map, self.n_classes = base, class_map, int(n_classes)

    def compute(self) -> np.ndarray:
        base = self.base
        if isinstance(base, tuple):
            histograms, attr = base
            base = histograms[attr]
        return sum_by_class(self.class_map, self.n_classes, base)


Histogram = Union[np.ndarray, SparseHistogram]


class Histograms(Mapping):
    """Attribute -> class histogram of one node; a dense one is computed when first read."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Histogram | Recipe] | None = None) -> None:
        self._values: dict[str, Histogram | Recipe] = dict(values or {})

    def __getitem__(self, attr: str) -> Histogram:
        value = self._values[attr]
        if isinstance(value, Recipe):
            value = self._values[attr] = value.compute()
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"Histograms({self._values!r})"

    def __getstate__(self) -> dict:
        # computed before pickling: a recipe from rows would ship a map as long as the table
        # (a worker process sending its partition's class table, `parallel_grouping.py`)
        return {"_values": {a: self[a] for a in self._values}}

    def __setstate__(self, state: dict) -> None:
        self._values = state["_values"]

    def pending(self, attr: str) -> bool:
        """Whether the attribute's histogram is still a recipe (dense) or unsummed (sparse)."""
        value = self._values[attr]
        if isinstance(value, SparseHistogram):
            return value.pending
        return isinstance(value, Recipe)

    def sparse(self) -> Iterator[SparseHistogram]:
        """The sparse histograms, without computing any dense one."""
        return (v for v in self._values.values() if isinstance(v, SparseHistogram))

    def rolled_up(self, class_map: np.ndarray, n_classes: int) -> "Histograms":
        """The histograms of the coarser classes (class c here becomes class_map[c]), computed
        when read."""
        out: dict[str, Histogram | Recipe] = {}
        for attr, value in self._values.items():
            if isinstance(value, SparseHistogram):
                out[attr] = value.rollup(class_map, n_classes)
            elif isinstance(value, ClassSums):  # compose: from the same base straight to the new classes
                out[attr] = ClassSums(value.base, class_map[value.class_map], n_classes)
            elif isinstance(value, Recipe):  # rows not counted yet: counted here when a roll-up is read
                out[attr] = ClassSums((self, attr), class_map, n_classes)
            else:
                out[attr] = ClassSums(value, class_map, n_classes)
        return Histograms(out)
