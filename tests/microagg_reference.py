"""Plain-Python references for the microaggregation tests (share no code with fedanon.microagg).

Loops over lists only: slow, obviously correct, and independent of the vectorized code.
"""

from __future__ import annotations

import math


def zscores(rows: list[list[float]]) -> list[list[float]]:
    n, d = len(rows), len(rows[0])
    means = [sum(r[j] for r in rows) / n for j in range(d)]
    sds = [math.sqrt(sum((r[j] - means[j]) ** 2 for r in rows) / n) for j in range(d)]
    sds = [s if s > 0 else 1.0 for s in sds]
    return [[(r[j] - means[j]) / sds[j] for j in range(d)] for r in rows]


def sse_sst(original: list[list[float]], released: list[list[float]]) -> float:
    """SSE/SST on attributes standardized by the original's mean and population sd."""
    n, d = len(original), len(original[0])
    means = [sum(r[j] for r in original) / n for j in range(d)]
    sds = [math.sqrt(sum((r[j] - means[j]) ** 2 for r in original) / n) for j in range(d)]
    sds = [s if s > 0 else 1.0 for s in sds]
    sse = sum(((o[j] - q[j]) / sds[j]) ** 2 for o, q in zip(original, released) for j in range(d))
    sst = sum(((o[j] - means[j]) / sds[j]) ** 2 for o in original for j in range(d))
    return sse / sst if sst else 0.0


def linkage_risk(original: list[list[float]], released: list[list[float]]) -> float:
    """Distance-based record linkage with ties shared: own record among the t nearest -> 1/t."""
    n, d = len(original), len(original[0])
    means = [sum(r[j] for r in original) / n for j in range(d)]
    sds = [math.sqrt(sum((r[j] - means[j]) ** 2 for r in original) / n) for j in range(d)]
    sds = [s if s > 0 else 1.0 for s in sds]
    z = [[(r[j] - means[j]) / sds[j] for j in range(d)] for r in original]
    zr = [[(r[j] - means[j]) / sds[j] for j in range(d)] for r in released]
    total = 0.0
    for i in range(n):
        dist = [math.sqrt(sum((z[i][j] - zr[m][j]) ** 2 for j in range(d))) for m in range(n)]
        best = min(dist)
        tied = [m for m in range(n) if dist[m] <= best + 1e-9 * (1 + best)]
        if i in tied or dist[i] <= best + 1e-9 * (1 + best):
            total += 1.0 / len(tied)
    return total / n


def mdav(rows: list[list[float]], k: int) -> list[set[int]]:
    """MDAV on z-scores, as Domingo-Ferrer and Torra describe it (no ties expected)."""
    z = zscores(rows)

    def d2(a: list[float], b: list[float]) -> float:
        return sum((x - y) ** 2 for x, y in zip(a, b))

    def k_nearest(point: list[float], pool: list[int]) -> list[int]:
        return sorted(pool, key=lambda i: d2(z[i], point))[:k]

    remaining = list(range(len(rows)))
    groups: list[set[int]] = []
    while len(remaining) >= 3 * k:
        c = [sum(z[i][j] for i in remaining) / len(remaining) for j in range(len(z[0]))]
        r = max(remaining, key=lambda i: d2(z[i], c))
        group = k_nearest(z[r], remaining)
        groups.append(set(group))
        remaining = [i for i in remaining if i not in group]
        s = max(remaining, key=lambda i: d2(z[i], z[r]))
        group = k_nearest(z[s], remaining)
        groups.append(set(group))
        remaining = [i for i in remaining if i not in group]
    if len(remaining) >= 2 * k:
        c = [sum(z[i][j] for i in remaining) / len(remaining) for j in range(len(z[0]))]
        r = max(remaining, key=lambda i: d2(z[i], c))
        group = k_nearest(z[r], remaining)
        groups.append(set(group))
        remaining = [i for i in remaining if i not in group]
    groups.append(set(remaining))
    return groups
