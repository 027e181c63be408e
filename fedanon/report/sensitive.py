"""What the classes of a table satisfy for one sensitive attribute, from its (class, value) pairs.

The figures (smallest distinct and entropy ℓ, recursive (c, ℓ)'s smallest c per ℓ, largest
equal-distance and hierarchical EMD) are defined on the classes x values count matrix.
Built densely, that matrix has one cell per class and value of the attribute: with
tens of thousands of classes (the input's classes, nearly one per row on a table with a
ZIP-like quasi-identifier) and ~800 sensitive values, hundreds of millions of bytes,
almost all zeros, and several float copies of it -- ten times the search's own memory
for a report. Here only the non-zero (class, value, count) entries are kept (never more
than the released rows, counted by the engine's `SparseHistogram`), and every figure is
computed from them: a value a class lacks contributes in closed form (its share of the
table for the EMDs, nothing to the entropy), so time and memory follow the rows, not
classes x values.

Figures from integer counts (distinct ℓ, recursive c) are exactly the dense ones; the
float sums (entropy, EMDs) add the same terms in another order, so they may differ from
a dense computation in the last bits (relative 1e-12 at most on any table).
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from fedanon.stats.classhist import SparseHistogram

RECURSIVE_MAX_L = 10  # recursive (c, ℓ): the smallest c is reported for ℓ = 2 .. min(distinct ℓ, this)
CHUNK_ENTRIES = 1 << 17  # entries per chunk of classes: ~1 MiB per temporary array


class ClassEntries:
    """Non-zero entries of the classes x values count matrix, sorted by (class, value).

    `cls`, `value`, `count`: class, value code and count (> 0) of each entry; `sizes`: rows
    per class (every class holds at least one row)."""

    def __init__(self, cls: np.ndarray, value: np.ndarray, count: np.ndarray, n_classes: int, domain: int,
                 sizes: np.ndarray | None = None) -> None:
        self.cls, self.value, self.count = cls, value, count
        self.n_classes, self.domain = int(n_classes), int(domain)
        self.sizes = np.bincount(cls, weights=count, minlength=self.n_classes).astype(np.int64) \
            if sizes is None else sizes

    @classmethod
    def from_rows(cls_, row_class: np.ndarray, row_value: np.ndarray, n_classes: int, domain: int) -> "ClassEntries":
        """Count the (class, value) pairs of the rows (the engine's sparse class histogram)."""
        hist = SparseHistogram.from_rows(np.asarray(row_class, dtype=np.int64), np.asarray(row_value, dtype=np.int64),
                                         n_classes, domain)
        return cls_(hist.cls, hist.value, hist.count, n_classes, domain)

    @property
    def distinct(self) -> np.ndarray:
        """Distinct values per class."""
        return np.bincount(self.cls, minlength=self.n_classes)

    def chunks(self, max_entries: int) -> Iterator["ClassEntries"]:
        """Consecutive runs of whole classes with about `max_entries` entries each (at least one
        class), renumbered from 0: every figure is per class, so it is computed chunk by chunk and
        the temporaries of its vector arithmetic stay bounded whatever the number of rows."""
        n = self.cls.shape[0]
        start = 0
        while start < n:
            first = int(self.cls[start])
            stop = n if start + max_entries >= n else int(np.searchsorted(self.cls, self.cls[start + max_entries]))
            if stop <= start:  # one class with more entries than max_entries
                stop = int(np.searchsorted(self.cls, first, side="right"))
            last = int(self.cls[stop - 1]) + 1
            yield ClassEntries(self.cls[start:stop] - first, self.value[start:stop], self.count[start:stop],
                               last - first, self.domain, self.sizes[first:last])
            start = stop


def entropy_l(entries: ClassEntries) -> np.ndarray:
    """exp(entropy) of each class's value distribution."""
    p = entries.count / entries.sizes[entries.cls]
    h = -np.bincount(entries.cls, weights=p * np.log(p), minlength=entries.n_classes)
    return np.exp(h)


def recursive_c(entries: ClassEntries, max_l: int) -> dict[str, float]:
    """For each ℓ = 2 .. max_l: the smallest c with r1 < c (r_ℓ + ... + r_m) in every class
    (r_i its i-th largest count), i.e. the largest r1 / (r_ℓ + ... + r_m); every class must
    hold at least max_l values."""
    order = np.lexsort((-entries.count, entries.cls))  # per class, its counts in descending order
    cls, count = entries.cls[order], entries.count[order]
    starts = np.flatnonzero(np.concatenate(([True], cls[1:] != cls[:-1])))
    rank = np.arange(cls.shape[0]) - np.repeat(starts, np.diff(np.append(starts, cls.shape[0])))
    largest = np.zeros(entries.n_classes, dtype=np.int64)
    largest[cls[rank == 0]] = count[rank == 0]
    top = np.zeros(entries.n_classes, dtype=np.int64)  # r1 + ... + r_{ℓ-1}
    out: dict[str, float] = {}
    for l in range(2, max_l + 1):
        at = rank == l - 2
        top[cls[at]] += count[at]
        out[str(l)] = float((largest / (entries.sizes - top)).max())
    return out


def emd_equal(entries: ClassEntries, total: np.ndarray) -> np.ndarray:
    """Each class's half L1 distance between a class's distribution and the table's (`total`: count
    per value over the table): present values by their difference, absent ones by their share."""
    n = int(total.sum())
    p = entries.count / entries.sizes[entries.cls]
    present = np.bincount(entries.cls, weights=np.abs(p - total[entries.value] / n), minlength=entries.n_classes)
    # the table's rows holding a value the class lacks, counted exactly in integers
    covered = np.bincount(entries.cls, weights=total[entries.value], minlength=entries.n_classes)
    absent = (n - covered) / n
    return 0.5 * (present + absent)


def emd_hierarchical(entries: ClassEntries, total: np.ndarray, code_map: np.ndarray) -> np.ndarray:
    """Each class's hierarchical EMD (Li et al.'s closed form) between a class and the table.

    Per level ℓ = 1..H and node N: cost ℓ/H · min(pos, neg), pos and neg the positive and
    negative surplus (class share - table share) of N's children, a node's surplus pos - neg.
    A node below which the class has no rows has surplus -(its table share) and costs nothing
    (pos = 0), so only the (class, node) pairs the class touches are visited; the untouched
    children of a touched node add their table share to its neg, taken as the node's table
    rows minus its touched children's (integers, exact).
    """
    height = code_map.shape[0] - 1
    if height == 0:
        return np.zeros(entries.n_classes)
    n = int(total.sum())
    safe = entries.sizes[entries.cls]
    cls = entries.cls
    node = code_map[0][entries.value].astype(np.int64)
    rows_below = np.bincount(code_map[0], weights=total, minlength=int(code_map[0].max()) + 1)
    surplus = entries.count / safe - rows_below[node] / n
    cost = np.zeros(entries.n_classes)
    for level in range(1, height + 1):
        parent_of = np.zeros(int(code_map[level - 1].max()) + 1, dtype=np.int64)
        parent_of[code_map[level - 1]] = code_map[level]
        width = int(code_map[level].max()) + 1
        parent_rows = np.bincount(parent_of, weights=rows_below, minlength=width)
        pairs, group = np.unique(cls * width + parent_of[node], return_inverse=True)
        p_cls, p_node = pairs // width, pairs % width
        pos = np.bincount(group, weights=np.maximum(surplus, 0.0), minlength=pairs.shape[0])
        neg = np.bincount(group, weights=np.maximum(-surplus, 0.0), minlength=pairs.shape[0])
        touched_rows = np.bincount(group, weights=rows_below[node], minlength=pairs.shape[0])
        neg += (parent_rows[p_node] - touched_rows) / n
        cost += level / height * np.bincount(p_cls, weights=np.minimum(pos, neg), minlength=entries.n_classes)
        cls, node, surplus, rows_below = p_cls, p_node, pos - neg, parent_rows
    return cost


def sensitive_figures(row_class: np.ndarray, row_value: np.ndarray, n_classes: int, all_values: np.ndarray,
                      domain: int, code_map: np.ndarray | None, chunk_entries: int = CHUNK_ENTRIES) -> dict[str, Any]:
    """The figures of one sensitive attribute: `row_class` and `row_value` per released row,
    `all_values` the attribute's codes on every row of the table (the EMDs' reference
    distribution), `code_map` its hierarchy's (levels x codes) map where it has one.

    One-row classes (nearly every class of a fine node on a table with a ZIP-like QI)
    are figured once per value they hold -- the same arithmetic on the same entry, so the
    same numbers -- and only the larger classes get entries, computed over chunks of
    `chunk_entries` entries (whole classes), extremes combined."""
    row_class = np.asarray(row_class)
    row_value = np.asarray(row_value)
    sizes = np.bincount(row_class, minlength=n_classes)
    single_row = sizes[row_class] == 1
    single_values = np.flatnonzero(np.bincount(row_value[single_row], minlength=domain))
    if single_values.shape[0] == 0:
        multi = ClassEntries.from_rows(row_class, row_value, n_classes, domain)
    else:
        keep = sizes > 1
        new_id = np.cumsum(keep) - 1
        multi = ClassEntries.from_rows(new_id[row_class[~single_row]], row_value[~single_row], int(keep.sum()), domain)
        del keep, new_id
    del sizes, single_row
    parts = [multi]
    if single_values.shape[0]:
        ones = np.ones(single_values.shape[0], dtype=np.int64)
        parts.append(ClassEntries(np.arange(single_values.shape[0]), single_values, ones, single_values.shape[0],
                                  domain, ones))
    total = np.bincount(np.asarray(all_values, dtype=np.int64), minlength=domain).astype(np.float64)
    distinct = min(int(part.distinct.min()) for part in parts if part.n_classes)
    max_l = min(distinct, RECURSIVE_MAX_L)
    hierarchy = None if code_map is None else np.asarray(code_map)
    entropy, t_equal, t_hier = np.inf, -np.inf, -np.inf
    recursive: dict[str, float] = {}
    for chunk in (c for part in parts for c in part.chunks(chunk_entries)):
        entropy = min(entropy, float(entropy_l(chunk).min()))
        t_equal = max(t_equal, float(emd_equal(chunk, total).max()))
        if hierarchy is not None:
            t_hier = max(t_hier, float(emd_hierarchical(chunk, total, hierarchy).max()))
        if max_l >= 2:
            for l_value, c in recursive_c(chunk, max_l).items():
                recursive[l_value] = max(recursive.get(l_value, c), c)
    out: dict[str, Any] = {"distinct_l": distinct, "entropy_l": entropy, "recursive_c": recursive, "t_equal": t_equal}
    if hierarchy is not None:
        out["t_hierarchical"] = t_hier
    return out
