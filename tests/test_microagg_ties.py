"""MDAV's tie rule: among records at the k-th nearest distance, the most compact choice wins."""

from __future__ import annotations

import math

import numpy as np

from fedanon.microagg.mdav import mdav_labels

# k = 3. The extreme record A = (10, 0) is the farthest from the centroid; B = (9, 0) is
# strictly nearer to A than anything else; (9, 2), (8, 1) and (9, -2) are all at distance
# sqrt(5) from A, so one of three equally near records takes the last place. Input order
# would take (9, 2); the rule takes the one nearest to the centroid of {A, B}: (8, 1).
POINTS = [(0, 0), (0, 1), (1, 0), (10, 0), (9, 2), (8, 1), (9, -2), (9, 0), (1, 1), (0, -1), (1, -1)]
K = 3


def expected_first_group() -> set[int]:
    """The first group from the rule's definition, in plain Python."""
    n = len(POINTS)
    centre = [sum(p[j] for p in POINTS) / n for j in range(2)]
    far = max(range(n), key=lambda i: (math.dist(POINTS[i], centre), -i))  # farthest; equal: input order
    dist = [math.dist(POINTS[i], POINTS[far]) for i in range(n)]
    kth = sorted(dist)[K - 1]
    sure = [i for i in range(n) if dist[i] < kth - 1e-12]
    tied = [i for i in range(n) if abs(dist[i] - kth) <= 1e-12]
    sure_centre = [sum(POINTS[i][j] for i in sure) / len(sure) for j in range(2)]
    tied.sort(key=lambda i: (math.dist(POINTS[i], sure_centre), i))
    return set(sure) | set(tied[:K - len(sure)])


def group_sse(members: set[int]) -> float:
    pts = np.asarray([POINTS[i] for i in members], dtype=float)
    return float(((pts - pts.mean(axis=0)) ** 2).sum())


def test_tie_at_the_kth_distance_goes_to_the_most_compact_group() -> None:
    expected = expected_first_group()
    assert len(expected) == K and 3 in expected and 7 in expected  # A and B: the case has a tie to break
    labels = mdav_labels(np.asarray(POINTS, dtype=np.float64), K)
    assert set(np.flatnonzero(labels == labels[3]).tolist()) == expected
    # the rule's choice is strictly more compact than taking the first record in input order
    assert group_sse(expected) < group_sse({3, 7, 4})
    sizes = np.bincount(labels)
    assert sizes.min() >= K and sizes.max() <= 2 * K - 1


def test_duplicates_at_distance_zero_still_fill_exactly_k() -> None:
    # every record equal: all tied at distance 0, any choice gives the same group
    labels = mdav_labels(np.zeros((10, 2)), 3)
    assert sorted(np.bincount(labels).tolist()) == [3, 3, 4]
