"""MDAV: Maximum Distance to Average Vector, multivariate fixed-size microaggregation.

The algorithm (Domingo-Ferrer and Torra, 2005), on standardized attributes:
while at least 3k records remain, take the record r farthest from the centroid of the
remaining records; group r with its k - 1 nearest remaining records; take the record s
farthest from r among the rest and group it with its k - 1 nearest. With 2k..3k-1
records left, one more group forms around the record farthest from the centroid; the
rest (k..2k-1 records) is the last group. Every group has exactly k records except the
last, which has k..2k-1.

Why it is fast without an n x n matrix or a pass over all records per group:

* the k nearest records come from a k-d tree, queried for a few more than k
  neighbours (records already grouped are skipped, the query widened when needed);
* the farthest records come from a list of the remaining records sorted by their
  distance `rad` to a reference point c0 (the centroid when the list was made). By the
  triangle inequality a record x is at most rad(x) + |p - c0| from any point p, so a
  scan down the list stops as soon as that bound falls below the best distance found;
  for the farthest record from the current centroid c, only records with
  rad >= max rad - 2|c - c0| can win. Usually a few hundred records are looked at;
* grouped records stay in the arrays (masked) until a quarter of them are grouped, then
  arrays, list and tree are rebuilt on the survivors.

Ties: MDAV names no rule, and on integer-valued attributes many records are equally
distant, so the rule changes the groups. The farthest record goes to the first met in the
radius list (input order among equal radii). When more records lie at the k-th nearest
distance than places are left in the group, those nearest to the centroid of the
records strictly nearer (the sure members) fill the places: of the equally valid groups,
the one with the smaller spread around what is already in it; equal again, input order.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

COMPACT_FRACTION = 0.25   # rebuild when this share of the arrays' records has been grouped
RELIST_FRACTION = 1 / 32  # re-centre the radius list when more candidates than this would be scanned
FIRST_BLOCK = 256         # records per step of a farthest-record scan (doubling)
_SLACK = 1e-9             # relative slack on distance bounds, against rounding


class _Remaining:
    """The records not grouped yet: compacted coordinates, k-d tree, radius list, running sum."""

    def __init__(self, z: np.ndarray) -> None:
        self.count = int(z.shape[0])
        self._rebuild(np.ascontiguousarray(z, dtype=np.float64), np.arange(self.count, dtype=np.int64))

    def _rebuild(self, x: np.ndarray, original: np.ndarray) -> None:
        self.x = x                          # (m, d) coordinates of the m records in the arrays
        self.original = original            # (m,) input row of each
        self.alive = np.ones(original.shape[0], dtype=bool)
        self.total = x.sum(axis=0)
        self.tree = cKDTree(x)
        self._relist(self.total / self.count)

    def _relist(self, c0: np.ndarray) -> None:
        self.c0 = c0
        rad = np.sqrt(((self.x - c0) ** 2).sum(axis=1))
        rad[~self.alive] = -np.inf
        self.order = np.argsort(-rad, kind="stable")  # farthest from c0 first
        self.rad = rad[self.order]
        self.head = 0                                 # entries before head are grouped

    def centroid(self) -> np.ndarray:
        return self.total / self.count

    def _advance(self) -> None:
        while not self.alive[self.order[self.head]]:
            self.head += 1

    def _scan(self, point: np.ndarray, extra: float, floor: float) -> int:
        """Farthest remaining record from `point`, scanning the radius list from the top.

        `extra` bounds |point - c0|; records with rad + extra below the best distance are
        skipped; `floor` (a radius) ends the scan early when known to be safe.
        """
        self._advance()
        best, best_pos = -np.inf, -1
        i, step, m = self.head, FIRST_BLOCK, self.order.shape[0]
        while i < m:
            limit = self.rad[i] + extra
            if limit < best * (1 - _SLACK) or self.rad[i] < floor:
                break
            pos = self.order[i:i + step]
            pos = pos[self.alive[pos]]
            if pos.shape[0]:
                dist = np.sqrt(((self.x[pos] - point) ** 2).sum(axis=1))
                a = int(np.argmax(dist))
                if dist[a] > best:
                    best, best_pos = float(dist[a]), int(pos[a])
            i += step
            step *= 2
        return best_pos

    def farthest_from_centroid(self) -> int:
        c = self.centroid()
        shift = float(np.sqrt(((c - self.c0) ** 2).sum()))
        self._advance()
        floor = self.rad[self.head] - 2 * shift - _SLACK * (1 + self.rad[self.head])
        candidates = int(np.searchsorted(-self.rad, -floor, side="right")) - self.head
        if shift > 0 and candidates > max(FIRST_BLOCK, RELIST_FRACTION * self.count):
            self._relist(c)  # centred on c, the bound is as tight as it gets (ties may still be many)
            shift = 0.0
            self._advance()
            floor = self.rad[self.head] - _SLACK * (1 + self.rad[self.head])
        return self._scan(c, shift, floor)

    def farthest_from(self, point: np.ndarray) -> int:
        return self._scan(point, float(np.sqrt(((point - self.c0) ** 2).sum())), -np.inf)

    def nearest(self, point: np.ndarray, k: int) -> np.ndarray:
        """Array positions of the k remaining records nearest to `point` (ties: see `_break_tie`)."""
        size = self.original.shape[0]
        want = min(size, max(2 * k, 8))
        while True:
            dist, idx = self.tree.query(point, k=want)
            idx, dist = np.atleast_1d(idx), np.atleast_1d(dist)
            keep = self.alive[idx]
            found, found_dist = idx[keep], dist[keep]
            if found.shape[0] > k or want == size:
                break
            want = min(size, want * 4)
        if found.shape[0] <= k:
            return found
        boundary = float(found_dist[k - 1])
        if found_dist[k] > boundary + 2 * _SLACK * (1 + boundary):
            return found[:k]  # the k-th and the (k+1)-th differ: no choice to make
        if boundary == 0.0:
            return found[:k]  # copies of the point: every choice gives the same group
        return self._break_tie(point, k, boundary)

    def _break_tie(self, point: np.ndarray, k: int, boundary: float) -> np.ndarray:
        """The k nearest when records at the k-th distance are more than the places left.

        Records strictly nearer than the k-th distance are in the group; of those at that
        distance, the ones nearest to the centroid of the sure members (the point itself
        when none is sure) fill the places left, so the group is the most compact of the
        equally valid choices one step can see. Equal again: input order.
        """
        ball = np.sort(np.asarray(self.tree.query_ball_point(point, boundary * (1 + 1e-7) + 1e-9), dtype=np.int64))
        ball = ball[self.alive[ball]]
        dist = np.sqrt(((self.x[ball] - point) ** 2).sum(axis=1))
        kth = float(np.partition(dist, k - 1)[k - 1])
        tol = _SLACK * (1 + kth)
        sure, tied = ball[dist < kth - tol], ball[np.abs(dist - kth) <= tol]
        centre = self.x[sure].mean(axis=0) if sure.shape[0] else point
        spread = ((self.x[tied] - centre) ** 2).sum(axis=1)
        return np.concatenate([sure, tied[np.argsort(spread, kind="stable")[:k - sure.shape[0]]]])

    def remove(self, positions: np.ndarray) -> None:
        self.alive[positions] = False
        self.total -= self.x[positions].sum(axis=0)
        self.count -= positions.shape[0]

    def compact(self) -> None:
        """Drop grouped records from the arrays once enough accumulate (positions change)."""
        if self.count and self.count <= (1 - COMPACT_FRACTION) * self.alive.shape[0]:
            keep = self.alive
            self._rebuild(self.x[keep], self.original[keep])

    def rest(self) -> np.ndarray:
        return self.original[self.alive]


def mdav_labels(z: np.ndarray, k: int) -> np.ndarray:
    """Group label of each record (0..g-1, in the order groups form) for standardized data `z` (n, d)."""
    n = int(z.shape[0])
    if k < 1 or n < k:
        raise ValueError(f"k must be between 1 and the number of records ({n}), got {k}")
    if k == 1:
        return np.arange(n, dtype=np.int64)  # every record is its own group
    labels = np.full(n, -1, dtype=np.int64)
    state = _Remaining(z)
    label = 0

    def take(positions: np.ndarray) -> None:
        nonlocal label
        labels[state.original[positions]] = label
        label += 1
        state.remove(positions)

    while state.count >= 3 * k:
        r_point = state.x[state.farthest_from_centroid()].copy()
        take(state.nearest(r_point, k))
        s_point = state.x[state.farthest_from(r_point)].copy()
        take(state.nearest(s_point, k))
        state.compact()
    if state.count >= 2 * k:
        take(state.nearest(state.x[state.farthest_from_centroid()].copy(), k))
    labels[state.rest()] = label
    return labels
