"""k-Ward: Ward's hierarchical clustering constrained to groups of at least k records.

The data-oriented method of Domingo-Ferrer and Mateo-Sanz (2002), on standardized
attributes:

1. Find the two records farthest apart (for one attribute: the smallest and the largest
   value); group each with its k - 1 nearest records (the "largest" and "smallest" k
   records). Every other record starts as a group of its own.
2. Merge groups as Ward's method does -- always the pair with the smallest increase of
   within-group sum of squares, d(Gi, Gj) = ni nj / (ni + nj) |mean_i - mean_j|^2 --
   but never two groups that both already have k or more records, until every group
   has at least k records.
3. Run steps 1-2 again inside every group of 2k or more records, until all groups have
   between k and 2k - 1 records.

Step 2 works on group means and sizes only (no n x n matrix): each group keeps its
nearest allowed partner; after a merge only the groups whose partner was one of the two
merged ones look again (Ward's distance is reducible: a merged group is never closer to
a third group than the nearer of its parts, so no other partner can change, except where
the k-or-more rule forbids a pair that was allowed). Each look is one vectorized pass
over the groups, so a run is O(n^2) arithmetic in O(n) memory; `KWARD_MAX_ROWS` bounds
the input so that one call stays within a couple of minutes.
"""

from __future__ import annotations

import numpy as np

KWARD_MAX_ROWS = 20_000  # 10,000 rows x 2 took 21 CPU seconds; the time grows as n^2


def diameter_pair(x: np.ndarray) -> tuple[int, int]:
    """Indices of two records at maximum distance (exact).

    Why not all n^2 pairs: if |p - q| exceeds a known distance D, one of p, q is more than
    D/2 from the centroid, so only records that far out need their distances to all others.
    """
    if x.shape[0] < 2:
        return 0, 0
    c = x.mean(axis=0)
    from_c = ((x - c) ** 2).sum(axis=1)
    r = int(np.argmax(from_c))
    from_r = ((x - x[r]) ** 2).sum(axis=1)
    s = int(np.argmax(from_r))
    best, pair = float(from_r[s]), (r, s)
    shell = np.flatnonzero(from_c * 4 >= best * (1 - 1e-12))  # |p - c| >= sqrt(best) / 2
    for start in range(0, shell.shape[0], 256):
        rows = shell[start:start + 256]
        d = ((x[rows, None, :] - x[None, :, :]) ** 2).sum(axis=2)
        a, b = np.unravel_index(int(np.argmax(d)), d.shape)
        if d[a, b] > best:
            best, pair = float(d[a, b]), (int(rows[a]), int(b))
    return pair


def _nearest_to(x: np.ndarray, point: np.ndarray, among: np.ndarray, k: int) -> np.ndarray:
    d = ((x[among] - point) ** 2).sum(axis=1)
    return among[np.argsort(d, kind="stable")[:k]]


def _seed_groups(x: np.ndarray, k: int) -> np.ndarray:
    """Step 1: labels 0 and 1 for the two extreme groups, 2.. for singletons."""
    n = x.shape[0]
    p, q = diameter_pair(x)
    everyone = np.arange(n)
    first = _nearest_to(x, x[p], everyone, k)
    rest = np.setdiff1d(everyone, first, assume_unique=True)
    second = _nearest_to(x, x[q], rest, k)
    labels = np.empty(n, dtype=np.int64)
    singles = np.setdiff1d(rest, second, assume_unique=True)
    labels[first] = 0
    labels[second] = 1
    labels[singles] = 2 + np.arange(singles.shape[0])
    return labels


def _first_partners(mean: np.ndarray, size: np.ndarray, k: int, partner: np.ndarray, best: np.ndarray) -> None:
    """Every group's nearest allowed partner, in blocks of rows (all groups are active)."""
    g = mean.shape[0]
    big = size >= k
    for start in range(0, g, 256):
        rows = slice(start, min(g, start + 256))
        d = ((mean[rows, None, :] - mean[None, :, :]) ** 2).sum(axis=2)
        d *= size[rows, None] * size[None, :] / (size[rows, None] + size[None, :])
        d[np.arange(d.shape[0]), np.arange(start, start + d.shape[0])] = np.inf
        d[big[rows][:, None] & big[None, :]] = np.inf
        j = np.argmin(d, axis=1)
        value = d[np.arange(d.shape[0]), j]
        partner[rows] = np.where(np.isfinite(value), j, -1)
        best[rows] = value


def _ward_merge(x: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    """Step 2: constrained Ward merges until every group has >= k records; returns labels."""
    g = int(labels.max()) + 1
    size = np.bincount(labels, minlength=g).astype(np.float64)
    mean = np.stack([np.bincount(labels, weights=x[:, j], minlength=g) for j in range(x.shape[1])], axis=1)
    mean /= size[:, None]
    active = np.ones(g, dtype=bool)
    parent = np.arange(g)
    partner = np.full(g, -1, dtype=np.int64)
    best = np.full(g, np.inf)

    def look(i: int) -> None:
        """Nearest allowed partner of group i (allowed: active, not i, not both >= k)."""
        diff = mean_t - mean_t[:, i:i + 1]  # (d, g): a sum over the short axis of (g, d) is slow
        diff *= diff
        d = diff.sum(axis=0)
        d *= size * size[i] / (size + size[i])
        d[i] = np.inf  # inactive groups have infinite means, hence infinite distances
        if size[i] >= k:
            d[size >= k] = np.inf
        j = int(np.argmin(d))
        partner[i], best[i] = (j, d[j]) if np.isfinite(d[j]) else (-1, np.inf)

    _first_partners(mean, size, k, partner, best)
    mean_t = np.ascontiguousarray(mean.T)
    small_left = int((size < k).sum())
    while small_left:
        i = int(np.argmin(best))
        j = int(partner[i])
        small_left -= int(size[i] < k) + int(size[j] < k)
        total = size[i] + size[j]
        mean_t[:, i] = (mean_t[:, i] * size[i] + mean_t[:, j] * size[j]) / total
        size[i] = total
        small_left += int(total < k)
        active[j] = False
        best[j] = np.inf
        parent[j] = i
        mean_t[:, j] = np.inf  # an inactive group is infinitely far from every other
        # by reducibility only the groups whose partner was i or j can have a new nearest partner
        for m in np.flatnonzero((partner == i) | (partner == j)):
            if active[m]:
                look(int(m))
        look(i)
    # follow merges to the surviving group of each original label
    root = parent.copy()
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    return root[labels]


def kward_labels(z: np.ndarray, k: int) -> np.ndarray:
    """Group label of each record (0..g-1) for standardized data `z` (n, d)."""
    n = int(z.shape[0])
    if k < 1 or n < k:
        raise ValueError(f"k must be between 1 and the number of records ({n}), got {k}")
    if n > KWARD_MAX_ROWS:
        raise ValueError(f"k-Ward is limited to {KWARD_MAX_ROWS:,} records (O(n^2) time), got {n:,}; "
                         f"use MDAV for larger tables")
    x = np.ascontiguousarray(z, dtype=np.float64)
    labels = np.zeros(n, dtype=np.int64)
    if k == 1:
        return np.arange(n, dtype=np.int64)
    pending = [np.arange(n)]
    next_label = 0
    while pending:
        rows = pending.pop()
        if rows.shape[0] < 2 * k:
            labels[rows] = next_label
            next_label += 1
            continue
        local = _ward_merge(x[rows], _seed_groups(x[rows], k), k)
        _values, local = np.unique(local, return_inverse=True)
        for part in range(int(local.max()) + 1):
            pending.append(rows[local == part])
    return labels
