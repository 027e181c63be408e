"""Replacing each record's values by its group's mean or median.

Groups are given as labels 0..g-1 (one per record). Both aggregates are vectorized:
the mean from per-group sums (`np.bincount`), the median from one sort of
(group, value) pairs -- the median of an even-sized group is the mean of its two
middle values, as usual.
"""

from __future__ import annotations

import numpy as np

AGGREGATES = ("mean", "median")


def group_sizes(labels: np.ndarray) -> np.ndarray:
    return np.bincount(labels)


def group_means(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(g, d) per-group means of `values` (n, d)."""
    sizes = np.bincount(labels).astype(np.float64)
    return np.stack([np.bincount(labels, weights=values[:, j], minlength=sizes.size) / sizes
                     for j in range(values.shape[1])], axis=1)


def group_medians(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """(g, d) per-group medians of `values` (n, d)."""
    sizes = np.bincount(labels)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    lower = starts + (sizes - 1) // 2
    upper = starts + sizes // 2
    out = np.empty((sizes.size, values.shape[1]), dtype=np.float64)
    for j in range(values.shape[1]):
        order = np.lexsort((values[:, j], labels))  # by group, then by value
        ranked = values[order, j]
        out[:, j] = (ranked[lower] + ranked[upper]) / 2.0
    return out


def aggregate(values: np.ndarray, labels: np.ndarray, how: str = "mean") -> np.ndarray:
    """(n, d): every record's values replaced by its group's aggregate."""
    if how == "mean":
        table = group_means(values, labels)
    elif how == "median":
        table = group_medians(values, labels)
    else:
        raise ValueError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {how!r}")
    return table[labels]
