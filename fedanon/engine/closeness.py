"""t-closeness (Li, Li, Venkatasubramanian) with the earth mover's distance.

Protects against skewness and similarity attacks: the distribution of the
sensitive attribute in every equivalence class must be within distance t of
its distribution in the whole table. Two ground distances for categorical
values, as in the dissertation (§2.4.3) and ARX:

* equal distance — every pair of distinct values is 1 apart; EMD reduces to
  half the L1 distance of the two distributions;
* hierarchical distance — two values are (level of their lowest common
  ancestor) / H apart, H the height of the sensitive attribute's hierarchy;
  EMD has the closed form Σ over inner nodes N of level(N)/H ·
  min(pos_extra(N), neg_extra(N)), where extra is the surplus of class mass
  over table mass, summed bottom-up through the tree.

Both work on the per-class histograms of sensitive codes and, for the
hierarchical form, on the sensitive hierarchy's code map (height × codes) —
structure only, never values, so the check is identical on ciphertext.

The reference distribution is the one over all rows the model is evaluated on
(the whole input; with δ-presence the research subset), fixed before the
search, as in ARX. Monotone without suppression; not with it (§3.2.3).
"""

from __future__ import annotations

import numpy as np

from fedanon.engine.config import TCloseness
from fedanon.engine.criteria import ClassStats, Criterion, CriterionContext
from fedanon.errors import InputError

EPS = 1e-9


class TClosenessCriterion(Criterion):
    """Per-class EMD test against the table-wide sensitive distribution."""

    monotone = True
    needs_subset = False

    def __init__(self, model: TCloseness) -> None:
        if model.kind not in ("equal", "hierarchical"):
            raise InputError(f"unknown t-closeness distance {model.kind!r} (equal, hierarchical)")
        self.model = model
        self.t = float(model.t)
        self.kind = model.kind
        self.needs_histogram = model.attribute
        self.monotone_with_suppression = False
        self._q: np.ndarray | None = None
        # hierarchical: per level j ≥ 1 a 0/1 matrix (codes at level j-1) × (codes at level j)
        self._up: list[np.ndarray] = []
        self._leaf = np.zeros((0, 0))
        self._leaf_identity = True
        self._rooted = True
        self._single = np.zeros(0)
        self._height = 0

    def prepare(self, context: CriterionContext) -> None:
        attr = self.model.attribute
        total = np.asarray(context.histograms_total[attr], dtype=np.float64)
        if total.sum() <= 0:
            raise InputError(f"t-closeness: the sensitive attribute {attr!r} has no values")
        self._q = total / total.sum()
        if self.kind == "hierarchical":
            maps = (context.sensitive_code_maps or {}).get(attr)
            if maps is None:
                raise InputError(f"hierarchical t-closeness needs the hierarchy of {attr!r}")
            self._build_tree(np.asarray(maps), len(total))
        # distance of a one-row class holding value v, for the singleton shortcut
        self._single = self._emd(np.eye(len(total), dtype=np.int64), np.ones(len(total), dtype=np.int64))
        self.min_class_size = self._smallest_feasible_size(int(context.n_rows))

    def _smallest_feasible_size(self, n_rows: int) -> int:
        """Smallest class size m for which some m-row class can be t-close.

        Every smaller class fails, so the search may use "k-anonymity with
        k = m" as a necessary, suppression-monotone sub-criterion (predictive
        tagging, §3.2) even though t-closeness itself is not monotone with
        suppression. The closest an m-row class can get to q in equal-distance
        EMD is the largest-remainder rounding of m·q (optimal for L1); the
        hierarchical EMD is at least that divided by H (each unit of mass moves
        at least 1/H). A 2·EPS margin keeps the bound on the safe side of the
        per-class test's tolerance.
        """
        q = self._q
        assert q is not None
        if self.kind == "hierarchical" and (self._height == 0 or not self._rooted):
            # no lower bound: a one-level hierarchy puts every value at distance 0,
            # and mass moved between different top-level trees costs nothing in the formula
            return 1
        scale = float(self._height) if self.kind == "hierarchical" and self._height > 1 else 1.0
        for m in range(1, max(1, n_rows) + 1):
            exact = m * q
            counts = np.floor(exact)
            rest = int(round(m - counts.sum()))
            if rest > 0:
                counts[np.argsort(-(exact - counts), kind="stable")[:rest]] += 1
            best_equal = 0.5 * float(np.abs(counts / m - q).sum())
            if best_equal / scale <= self.t + 2 * EPS:
                return m
        return max(1, n_rows)

    def _build_tree(self, code_map: np.ndarray, n_leaves: int) -> None:
        """One child→parent indicator matrix per level, from the level-0 code map."""
        if code_map.shape[1] != n_leaves:
            raise InputError(f"hierarchy of {self.model.attribute!r} covers {code_map.shape[1]} values, "
                             f"the table has {n_leaves}")
        self._height = code_map.shape[0] - 1
        self._leaf = np.zeros((n_leaves, int(code_map[0].max()) + 1), dtype=np.float64)
        self._leaf[np.arange(n_leaves), code_map[0]] = 1.0
        self._leaf_identity = bool(np.array_equal(code_map[0], np.arange(n_leaves)))
        # one common root: only then is every move between distinct values worth >= 1/H
        self._rooted = bool(n_leaves == 0 or code_map[self._height].max() == 0)
        self._up = []
        for level in range(1, self._height + 1):
            child = code_map[level - 1]
            parent = code_map[level]
            up = np.zeros((int(child.max()) + 1, int(parent.max()) + 1), dtype=np.float64)
            up[child, parent] = 1.0
            self._up.append(up)

    def distances(self, stats: ClassStats) -> np.ndarray:
        """EMD of every class to the table distribution (exposed for tests/reports).

        This is the hot spot of t-closeness searches (one call per checked
        node over all its classes), hence two shortcuts that change nothing in
        the result: singleton classes, the bulk of fine nodes, take a
        precomputed per-value distance; the rest is computed on unnormalized
        surplus counts (hist − size·q) and divided by the size once, since
        every EMD term is positively homogeneous.
        """
        if self._q is None:
            raise RuntimeError("prepare() must run before the check")
        hist = np.asarray(stats.histograms[self.model.attribute])
        sizes = hist.sum(axis=1)
        single = sizes == 1
        n_single = int(np.count_nonzero(single))
        if n_single == 0:
            return self._emd(hist, sizes)
        out = np.empty(hist.shape[0], dtype=np.float64)
        out[single] = self._single[np.argmax(hist[single], axis=1)]
        if n_single < hist.shape[0]:
            rest = ~single
            out[rest] = self._emd(hist[rest], sizes[rest])
        return out

    def _emd(self, hist: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        sizes_f = np.where(sizes == 0, 1, sizes).astype(np.float64)
        x = hist - np.multiply.outer(sizes_f, self._q)  # surplus counts per value
        if self.kind == "equal":
            return 0.5 * np.abs(x).sum(axis=1) / sizes_f
        if self._height == 0:
            return np.zeros(hist.shape[0])
        if not self._leaf_identity:
            x = x @ self._leaf  # leaves -> level-0 nodes of the code map
        cost = np.zeros(hist.shape[0])
        for level, up in enumerate(self._up, start=1):
            moved = x @ up                      # net surplus of each parent
            pos = np.maximum(x, 0.0) @ up       # children's positive surplus
            cost += (level / self._height) * np.minimum(pos, pos - moved).sum(axis=1)
            x = moved
        return cost / sizes_f

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        if self.kind == "equal" or self._height <= 1:
            return self.distances(stats) <= self.t + EPS
        # The equal-distance EMD brackets the hierarchical one: every unit of
        # mass moves at most 1 and, below one common root, at least 1/H, so
        # eq/H <= hier <= eq. Only classes the bracket leaves open need the tree.
        hist = np.asarray(stats.histograms[self.model.attribute])
        sizes = hist.sum(axis=1)
        sizes_f = np.where(sizes == 0, 1, sizes).astype(np.float64)
        equal = 0.5 * np.abs(hist - np.multiply.outer(sizes_f, self._q)).sum(axis=1) / sizes_f
        ok = equal <= self.t + EPS
        open_ = ~ok & (equal / self._height <= self.t + EPS) if self._rooted else ~ok
        if open_.any():
            ok[open_] = self._emd(hist[open_], sizes[open_]) <= self.t + EPS
        return ok

    def describe(self) -> str:
        return f"{self.t:g}-closeness ({self.kind} EMD) of {self.model.attribute}"


def build(model: TCloseness) -> TClosenessCriterion:
    """Entry point used by `criteria.build_criteria` (imported lazily)."""
    return TClosenessCriterion(model)
