"""Univariate fixed-size microaggregation: single-axis and individual sorting.

Both sort records along one axis and cut the sorted sequence into groups of exactly k
records, taken alternately from both ends; when n is not a multiple of k the one larger
group (k + n mod k, so at most 2k - 1 records) is the middle one, which holds the median.

* single-axis sorting: every record is placed once, on one sorting key -- one attribute,
  the first principal component of the standardized attributes, or the sum of their
  z-scores -- and all attributes are replaced by the group's aggregate. Good when every
  attribute correlates strongly with the key.
* individual sorting (individual ranking): each attribute is sorted and grouped on its
  own, assuming the attributes independent; a record may fall into different groups for
  different attributes.
"""

from __future__ import annotations

import numpy as np

from fedanon.microagg.scaling import standardize

SORT_KEYS = ("pc1", "zsum")  # besides an attribute's name


def fixed_size_labels(order: np.ndarray, k: int) -> np.ndarray:
    """Group of each record when the records are taken in `order` (n >= k required).

    Groups are numbered along the order: the low end's groups, the middle group,
    the high end's groups. With g = n // k groups the middle one has index (g - 1) // 2.
    """
    n = int(order.shape[0])
    g = n // k
    middle = (g - 1) // 2
    low_end = middle * k                    # records before the middle group
    high_start = low_end + k + n - g * k    # first record after the middle group
    position = np.arange(n, dtype=np.int64)
    group = np.where(position < low_end, position // k,
                     np.where(position < high_start, middle, middle + 1 + (position - high_start) // k))
    labels = np.empty(n, dtype=np.int64)
    labels[order] = group
    return labels


def first_principal_component(z: np.ndarray) -> np.ndarray:
    """Scores on the first principal component of standardized data; the sign makes the
    largest loading positive so the same data always sort the same way."""
    if z.shape[1] == 1:
        return z[:, 0].copy()
    _u, _s, vt = np.linalg.svd(z - z.mean(axis=0), full_matrices=False)
    axis = vt[0]
    if axis[np.argmax(np.abs(axis))] < 0:
        axis = -axis
    return z @ axis


def sort_key(values: np.ndarray, names: list[str], sort_by: str) -> np.ndarray:
    """The single-axis key: an attribute (by name), `pc1` or `zsum` of the z-scores."""
    if sort_by in names:
        return values[:, names.index(sort_by)]
    z = standardize(values)
    if sort_by == "pc1":
        return first_principal_component(z)
    if sort_by == "zsum":
        return z.sum(axis=1)
    raise ValueError(f"sort key must be one of {', '.join(names)}, pc1 or zsum, got {sort_by!r}")


def single_axis_labels(key: np.ndarray, k: int) -> np.ndarray:
    """Fixed-size groups along one key (ties keep the input order: a stable sort)."""
    return fixed_size_labels(np.argsort(key, kind="stable"), k)


def individual_labels(values: np.ndarray, k: int) -> list[np.ndarray]:
    """One fixed-size grouping per attribute (column j grouped on its own order)."""
    return [single_axis_labels(values[:, j], k) for j in range(values.shape[1])]
