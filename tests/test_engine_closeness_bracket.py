"""Hierarchical t-closeness decisions on dense class histograms against the plain reference.

`TClosenessCriterion.classes_ok` decides every class by the telescoped tree form (two
matrix products over all levels at once, `_tree_cost`). Random trees and histograms,
with thresholds chosen so that many classes fall into the band between the equal-distance
EMD and its 1/H (where an error of the tree form would show: the bracket eq/H <= hier <= eq
alone cannot decide them); every decision is compared with `tests/reference.py`'s per-class
EMD (eqs. 2.4-2.8, plain Python).
"""

from __future__ import annotations

import numpy as np
import pytest

from fedanon.model.privacy.tcloseness import TClosenessCriterion
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import CriterionContext
from fedanon.data.hierarchy import Hierarchy
from tests.reference import EPS, Tree, emd_equal, emd_hierarchical


def random_tree(rng: np.random.Generator, leaves: int, height: int) -> list[list[str]]:
    """Rows leaf;level1;...;root with random groupings (each level merges the one below)."""
    rows = [[f"v{i}"] for i in range(leaves)]
    codes = np.arange(leaves)
    for level in range(1, height):
        if level == height - 1:
            codes = np.zeros(leaves, dtype=np.int64)
        else:
            groups = max(1, int(codes.max() + 1) // 2)
            remap = rng.integers(0, groups, int(codes.max()) + 1)
            codes = remap[codes]
        for r, c in zip(rows, codes.tolist()):
            r.append("*" if level == height - 1 else f"n{level}_{c}")
    return rows


@pytest.mark.parametrize("seed,leaves,height", [(1, 14, 3), (2, 9, 4), (3, 20, 3), (4, 12, 5)])
def test_dense_hierarchical_decisions_equal_reference(seed, leaves, height):
    rng = np.random.default_rng(seed)
    rows = random_tree(rng, leaves, height)
    values = [r[0] for r in rows]
    h = Hierarchy.from_rows("s", rows)
    code_map, _ = h.code_map([v.encode() for v in values])
    totals = rng.integers(1, 400, leaves)
    hist = rng.integers(0, 6, (300, leaves)) * (rng.random((300, leaves)) < 0.5)
    hist[np.arange(300), rng.integers(0, leaves, 300)] += 1  # no empty class
    q = {v: t / totals.sum() for v, t in zip(values, totals.tolist())}
    tree = Tree(rows)
    ref_hier, ref_equal = [], []
    for row in hist.tolist():
        p = {v: c / sum(row) for v, c in zip(values, row) if c}
        ref_hier.append(emd_hierarchical(p, q, tree))
        ref_equal.append(emd_equal(p, q))
    ref_hier, ref_equal = np.array(ref_hier), np.array(ref_equal)
    open_band = 0
    for t in np.quantile(ref_hier, [0.1, 0.3, 0.5, 0.7, 0.9]).tolist():
        t += 1e-6  # away from any class's exact distance: float noise cannot flip a decision
        crit = TClosenessCriterion(TCloseness(t, "hierarchical", "s"))
        crit.prepare(CriterionContext(n_rows=int(totals.sum()), histograms_total={"s": totals},
                                      sensitive_code_maps={"s": code_map}))
        ok = crit.classes_ok(ClassStats(hist.sum(axis=1), {"s": hist}))
        assert ok.tolist() == (ref_hier <= t + EPS).tolist()
        assert np.allclose(crit.distances(ClassStats(hist.sum(axis=1), {"s": hist})), ref_hier)
        open_band += int(((ref_equal > t + EPS) & (ref_equal / (height - 1) <= t + EPS)).sum())
    assert open_band > 50  # the tree form decided many classes, not only the bracket
