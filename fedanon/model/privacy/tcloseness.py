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

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Literal, Mapping

import numpy as np

from fedanon.stats.classhist import SparseHistogram
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.stats.keys import group_key
from fedanon.errors import InputError
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value

EPS = 1e-9



@register
@dataclass
class TCloseness(PrivacyModel):
    """t-closeness of one sensitive attribute: `T:equal` or `T:hierarchical` (earth mover's distance)."""

    t: float
    kind: Literal["equal", "hierarchical"]
    attribute: str

    key = "t_closeness"
    flag = "--t-closeness"
    metavar = "T:equal|T:hierarchical"
    help = "t-closeness of the sensitive attribute (earth mover's distance)"
    uses_sensitive = True

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "TCloseness":
        attribute = ctx.require_sensitive()
        if isinstance(value, str):
            model = cls.parse_text(value, attribute)
        else:
            entries = table_value(value, "t_closeness", ("t", "kind"), ctx)
            if "t" not in entries:
                raise InputError(f"{ctx.source}: [t_closeness] needs t (and kind = equal|hierarchical)")
            model = cls(number(entries["t"], "[t_closeness] t"), str(entries.get("kind", "equal")), attribute)  # type: ignore[arg-type]
        if model.kind == "hierarchical" and ctx.sensitive_hierarchy is None:
            raise InputError(f"hierarchical t-closeness needs the hierarchy of {attribute!r}: "
                             f"use --sensitive {attribute}=HIERARCHY.csv")
        return model

    @classmethod
    def parse_text(cls, text: str, attribute: str) -> "TCloseness":
        """`T:equal` or `T:hierarchical`."""
        t_text, sep, kind = text.partition(":")
        kind = kind.strip().lower() if sep else "equal"
        if kind not in ("equal", "hierarchical"):
            raise InputError(f"--t-closeness {text!r}: distance must be 'equal' or 'hierarchical'")
        return cls(number(t_text, f"--t-closeness {text!r}: t"), kind, attribute)  # type: ignore[arg-type]

    def validate(self, config: Any) -> None:
        if self.kind not in ("equal", "hierarchical"):
            raise InputError(f"unknown t-closeness distance {self.kind!r} (equal, hierarchical)")
        if not 0.0 <= self.t <= 1.0:
            raise InputError(f"t-closeness needs t in [0, 1], got {self.t!r}")

    def needs_hierarchy(self) -> str | None:
        return self.attribute if self.kind == "hierarchical" else None

    def criterion(self) -> "TClosenessCriterion":
        return TClosenessCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        counts = view.sensitive_counts[self.attribute]
        overall = view.overall[self.attribute]
        gen = view.generalizers.get(self.attribute) if self.kind == "hierarchical" else None
        d = emd_hierarchical(counts, overall, gen) if gen is not None else emd_equal(counts, overall)
        if d > float(self.t) + EPS:
            return f"EMD {d:.6f} > t={self.t}"
        return None

    def describe(self) -> str:
        return f"{self.t:g}-closeness ({self.kind} EMD) of {self.attribute}"


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
        # every node of every level as a column: leaf -> the node above it (`_tree_cost`)
        self._node_of_leaf = np.zeros((0, 0))
        self._node_weight = np.zeros(0)
        self._leaf = np.zeros((0, 0))
        self._leaf_identity = True
        self._rooted = True
        self._single: np.ndarray | None = None  # per value: distance of a one-row class holding it
        self._height = 0
        # sparse form of the tree: leaf -> level-0 node, child -> parent per level, q per node
        self._leaf_node = np.zeros(0, dtype=np.int64)
        self._parent_of: list[np.ndarray] = []
        self._q_nodes: list[np.ndarray] = []

    def prepare(self, context: CriterionContext) -> None:
        attr = self.model.attribute
        total = np.asarray(context.histograms_total[attr], dtype=np.float64)
        if total.sum() <= 0:
            raise InputError(f"t-closeness: the sensitive attribute {attr!r} has no values")
        self._q = total / total.sum()
        self._ones = np.ones(len(total))
        if self.kind == "hierarchical":
            maps = (context.sensitive_code_maps or {}).get(attr)
            if maps is None:
                raise InputError(f"hierarchical t-closeness needs the hierarchy of {attr!r}")
            self._build_tree(np.asarray(maps), len(total))
            # Generalization keeps a node t-close only where the EMD is convex in the class's
            # distribution (a merged class is a mixture of its parts). Below one root it is. With
            # several top-level trees the top level adds min(pos, pos - net) = pos - max(net, 0)
            # for a nonzero net surplus, which is not convex: merging two t-close classes can
            # give one that is not, and Flash's tagging of generalizations as t-close would skip
            # the optimum (found by the property test against the exhaustive search). So the
            # criterion says so and the search checks instead of tagging.
            self.monotone = self._height == 0 or self._rooted
            self._q_nodes = [np.bincount(self._leaf_node, weights=self._q, minlength=self._leaf.shape[1])]
            for parent_of in self._parent_of:
                self._q_nodes.append(np.bincount(parent_of, weights=self._q_nodes[-1]))
        # distance of a one-row class holding value v, for the dense path's singleton shortcut: computed
        # when that path first meets singletons -- a values x values product, ~70 ms for 800 values under
        # a hierarchy, which the sparse path (every large domain) never needs
        self._single = None
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
        """The tree's forms from the level-0 code map: every level's nodes as leaf indicators
        with their weights (`_tree_cost`), and each level's child -> parent codes (`_emd_sparse`).
        Built anew on each call, so preparing a criterion twice leaves no duplicate levels."""
        if code_map.shape[1] != n_leaves:
            raise InputError(f"hierarchy of {self.model.attribute!r} covers {code_map.shape[1]} values, "
                             f"the table has {n_leaves}")
        self._height = code_map.shape[0] - 1
        self._leaf = np.zeros((n_leaves, int(code_map[0].max()) + 1), dtype=np.float64)
        self._leaf[np.arange(n_leaves), code_map[0]] = 1.0
        self._leaf_identity = bool(np.array_equal(code_map[0], np.arange(n_leaves)))
        # one common root: only then is every move between distinct values worth >= 1/H
        self._rooted = bool(n_leaves == 0 or code_map[self._height].max() == 0)
        self._parent_of = []
        up_matrices = []  # per level j ≥ 1: a 0/1 matrix (codes at level j-1) × (codes at level j)
        for level in range(1, self._height + 1):
            child = code_map[level - 1]
            parent = code_map[level]
            up = np.zeros((int(child.max()) + 1, int(parent.max()) + 1), dtype=np.float64)
            up[child, parent] = 1.0
            up_matrices.append(up)
            parent_of = np.zeros(int(child.max()) + 1, dtype=np.int64)
            parent_of[child] = parent
            self._parent_of.append(parent_of)
        self._leaf_node = code_map[0].astype(np.int64)
        # levels 0..H side by side, each column a node's 0/1 leaf indicator; the weights turn
        # the positive parts of the nodes' net surplus into the cost (see `_tree_cost`)
        below = [self._leaf]
        for up in up_matrices:
            below.append(below[-1] @ up)
        self._node_of_leaf = np.hstack(below)
        h = max(self._height, 1)
        self._node_weight = np.concatenate([np.full(m.shape[1], 1.0 / h) for m in below[:-1]]
                                           + [np.full(below[-1].shape[1], -1.0)])

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
        hist = stats.histograms[self.model.attribute]
        if isinstance(hist, SparseHistogram):
            return self._emd_sparse(hist)
        hist = np.asarray(hist)
        sizes = hist.sum(axis=1)
        single = sizes == 1
        n_single = int(np.count_nonzero(single))
        if n_single == 0:
            return self._emd(hist, sizes)
        out = np.empty(hist.shape[0], dtype=np.float64)
        if self._single is None:
            n_values = hist.shape[1]
            self._single = self._emd(np.eye(n_values, dtype=np.int64), np.ones(n_values, dtype=np.int64))
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
        return self._tree_cost(x) / sizes_f

    def _tree_cost(self, x: np.ndarray) -> np.ndarray:
        """Hierarchical EMD times class size, from the surplus counts per value.

        Per level l = 1..H the cost is l/H times the sum over its nodes of min(pos, pos - net),
        pos the children's positive surplus and net their total. As min(pos, pos - net) =
        pos - max(net, 0), and every child has one parent, level l adds l/H (P_{l-1} - P_l),
        P_j the positive parts of level j's net surplus summed; the sum telescopes to
        (P_0 + ... + P_{H-1}) / H - P_H. So one product gives every node's net surplus and a
        second the weighted sum: two matrix products instead of three per level.
        """
        return np.maximum(x @ self._node_of_leaf, 0.0) @ self._node_weight

    def _emd_sparse(self, hist: SparseHistogram) -> np.ndarray:
        """EMD per class from (class, value, count) entries, linear in the entries.

        Equal distance: 0.5/s * (sum over present values |c - s q| + s * (q mass of the
        absent values)). Hierarchical: the closed form only needs, per inner node, its
        children's positive surplus and its net surplus; a child without class mass has
        negative surplus and a parent without class mass contributes 0, so only the
        present (class, node) pairs are visited, level by level.
        """
        q = self._q
        assert q is not None
        sizes = hist.sizes().astype(np.float64)
        safe = np.where(sizes == 0, 1.0, sizes)
        mass = hist.count.astype(np.float64)
        if self.kind == "equal":
            dev = np.abs(mass - safe[hist.cls] * q[hist.value])
            absent_q = 1.0 - hist.per_class_sum(q[hist.value])
            return 0.5 * (hist.per_class_sum(dev) + sizes * absent_q) / safe
        if self._height == 0:
            return np.zeros(hist.n_classes)
        cls, node = hist.cls, self._leaf_node[hist.value]
        if not self._leaf_identity:
            cls, node, mass = _merge_pairs(cls, node, mass, self._leaf.shape[1], hist.n_classes)
        cost = np.zeros(hist.n_classes)
        for level, parent_of in enumerate(self._parent_of, start=1):
            surplus = mass - safe[cls] * self._q_nodes[level - 1][node]
            parent = parent_of[node]
            width = self._q_nodes[level].shape[0]
            p_cls, p_node, p_mass, p_pos = _merge_pairs(cls, parent, mass, width, hist.n_classes,
                                                        extra=np.maximum(surplus, 0.0))
            moved = p_mass - safe[p_cls] * self._q_nodes[level][p_node]
            cost += (level / self._height) * np.bincount(p_cls, weights=np.minimum(p_pos, p_pos - moved),
                                                         minlength=hist.n_classes)
            cls, node, mass = p_cls, p_node, p_mass
        return cost / safe

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        if isinstance(stats.histograms[self.model.attribute], SparseHistogram):
            return self.distances(stats) <= self.t + EPS
        if self.kind == "equal" or self._height <= 1:
            return self.distances(stats) <= self.t + EPS
        # one float copy of the counts (integers below 2^53: exact), its row sums by one
        # matrix-vector product (exact too) -- the same values as the integer sums, in
        # fewer NumPy calls than summing, masking and casting per check
        surplus = np.array(stats.histograms[self.model.attribute], dtype=np.float64)  # a copy, made the surplus in place
        sizes_f = np.maximum(surplus @ self._ones, 1.0)  # an empty class divides by 1
        surplus -= np.multiply.outer(sizes_f, self._q)
        return self._tree_cost(surplus) / sizes_f <= self.t + EPS

    def describe(self) -> str:
        return f"{self.t:g}-closeness ({self.kind} EMD) of {self.model.attribute}"


def _merge_pairs(cls: np.ndarray, node: np.ndarray, mass: np.ndarray, width: int, n_classes: int,
                 extra: np.ndarray | None = None):
    """Sum `mass` (and `extra`) over equal (class, node) pairs; node codes are < width."""
    key = cls * width + node
    first, inverse = group_key(key, n_classes * width)
    n = first.shape[0]
    summed = np.bincount(inverse, weights=mass, minlength=n)
    pair = key[first]
    if extra is None:
        return pair // width, pair % width, summed
    return pair // width, pair % width, summed, np.bincount(inverse, weights=extra, minlength=n)


# ---- the verifier's independent reading of the definition (plain Python on raw counts)

def emd_equal(class_counts: Counter, overall: Mapping[bytes, float]) -> float:
    size = sum(class_counts.values())
    keys = set(overall) | set(class_counts)
    return 0.5 * sum(abs(class_counts.get(v, 0) / size - overall.get(v, 0.0)) for v in keys)


def emd_hierarchical(class_counts: Counter, overall: Mapping[bytes, float],
                      gen: Mapping[bytes, list[bytes]]) -> float:
    """Li et al.'s closed form: sum over inner nodes of height/H · min(pos, neg).

    Nodes are identified by (level, label); the tree is read from the
    hierarchy rows restricted to the values that occur in the data.
    """
    size = sum(class_counts.values())
    leaves = set(overall) | set(class_counts)
    height = len(gen[next(iter(leaves))]) - 1
    if height <= 0:
        return 0.0
    # extra of each node, built leaf-up
    extra: dict[tuple[int, bytes], float] = {}
    for v in leaves:
        extra[(0, v)] = class_counts.get(v, 0) / size - overall.get(v, 0.0)
    total = 0.0
    for level in range(1, height + 1):
        pos: dict[bytes, float] = defaultdict(float)
        neg: dict[bytes, float] = defaultdict(float)
        children_seen: set[bytes] = set()
        for v in leaves:
            child = gen[v][level - 1]
            if child in children_seen:
                continue
            children_seen.add(child)
            parent = gen[v][level]
            e = extra[(level - 1, child)]
            if e > 0:
                pos[parent] += e
            else:
                neg[parent] -= e
        for parent in set(pos) | set(neg):
            total += level / height * min(pos[parent], neg[parent])
            extra[(level, parent)] = pos[parent] - neg[parent]
    return total
