"""How much a microaggregated release loses and how much it discloses.

Information loss, SSE/SST: SSE = sum over records and attributes of
(original - released)^2, SST = sum of (original - attribute mean)^2, both on the
attributes standardized by the original's mean and standard deviation (so every
attribute weighs alike and the figure is scale-free). 0 = nothing lost; replacing every
value by the overall mean gives 1. Reported overall and per attribute.

Disclosure risk, distance-based record linkage (DBRL): an intruder who knows a
record's original values links it to the nearest released record (Euclidean distance on
the same standardized attributes). A record counts as linked when its own released
record is among the nearest ones; when t released records tie at the nearest distance
(a group of k records released with one value ties k ways), the intruder picks one of
them at random, so the record counts 1/t. The risk is the mean over records: at most
1/k for a method whose groups release one shared value, and 1 for an unprotected release.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from fedanon.microagg.scaling import column_scale, standardize

TIE_RELATIVE = 1e-9   # distances within this relative tolerance are ties
TIE_NEIGHBOURS = 16   # distinct released vectors looked at per record before a radius search


def sse_sst(original: np.ndarray, released: np.ndarray) -> dict[str, object]:
    """SSE, SST and SSE/SST overall and per attribute (see the module docstring)."""
    mean, scale = column_scale(original)
    z = standardize(original, mean, scale)
    zr = standardize(released, mean, scale)
    sse = ((z - zr) ** 2).sum(axis=0)
    sst = (z ** 2).sum(axis=0)  # z is centred on the original mean
    per = [float(a / b) if b > 0 else 0.0 for a, b in zip(sse, sst)]
    total_sst = float(sst.sum())
    return {"sse": float(sse.sum()), "sst": total_sst,
            "sse_sst": float(sse.sum() / total_sst) if total_sst > 0 else 0.0,
            "sse_sst_per_attribute": per}


def linkage_risk(original: np.ndarray, released: np.ndarray) -> float:
    """Expected share of records an intruder links to their own released record (DBRL)."""
    n = original.shape[0]
    mean, scale = column_scale(original)
    z = standardize(original, mean, scale)
    zr = standardize(released, mean, scale)
    distinct, inverse, counts = np.unique(zr, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    tree = cKDTree(distinct)
    own = np.sqrt(((z - zr) ** 2).sum(axis=1))
    neighbours = min(TIE_NEIGHBOURS, distinct.shape[0])
    dist, idx = tree.query(z, k=neighbours)
    dist = dist.reshape(n, neighbours)
    idx = idx.reshape(n, neighbours)
    nearest = dist[:, 0]
    tol = TIE_RELATIVE * (1.0 + nearest)
    linked_possible = own <= nearest + tol
    ties = (dist <= (nearest + tol)[:, None])
    tied_records = (counts[idx] * ties).sum(axis=1).astype(np.float64)
    # a record whose ties fill every neighbour looked at may tie with more: count them all
    wide = np.flatnonzero(linked_possible & ties[:, -1] & (neighbours < distinct.shape[0]))
    for row in wide:
        hits = tree.query_ball_point(z[row], nearest[row] + tol[row])
        tied_records[row] = float(counts[hits].sum())
    share = np.where(linked_possible, 1.0 / np.maximum(tied_records, 1.0), 0.0)
    return float(share.mean())


def group_summary(labels: np.ndarray) -> dict[str, int]:
    sizes = np.bincount(labels)
    sizes = sizes[sizes > 0]
    return {"groups": int(sizes.shape[0]), "smallest_group": int(sizes.min()), "largest_group": int(sizes.max())}


def attribute_summary(names: list[str], original: np.ndarray, released: np.ndarray) -> dict[str, dict[str, float]]:
    """Means and variances before and after: the utility figures a user checks first."""
    out: dict[str, dict[str, float]] = {}
    for j, name in enumerate(names):
        var = float(original[:, j].var())
        out[name] = {"mean": float(original[:, j].mean()), "released_mean": float(released[:, j].mean()),
                     "variance": var, "released_variance": float(released[:, j].var())}
    return out
