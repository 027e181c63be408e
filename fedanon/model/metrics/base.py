"""What every information-loss metric offers the search (§2.6, ARX-style suppression §3.6.2).

Every metric is minimized (higher = more loss). Each offers
  * `loss(levels, classes, failing)`: the value at a node given which classes are
    suppressed,
  * `static_bound(all_levels)`: a cheap lower bound computed WITHOUT grouping,
    vectorized over many nodes; it is monotone under generalization, so the search
    can prune a node and all its generalizations once the bound exceeds the best
    loss found (None where no such bound exists),
  * `class_bound(levels, classes)`: a monotone lower bound from the class table
    (used to prune generalizations after an evaluation).
Sums are done with math.fsum over per-value terms so the value is independent of
dictionary order -- a requirement for identical results on ciphertext.

Traits the protocols and baselines read (instead of keeping their own lists of names):
  * `needs_value_marginals`: the loss needs every QI's value counts over the true rows
    (Protocol C sends them once, at setup);
  * `charges_suppressed_values`: the loss charges suppressed rows by their values (Protocol C
    needs one extra round per check that suppresses at an anonymous node);
  * `has_baseline`: the loss can be evaluated on a table each party recoded on its own (the
    §4.3 anonymize-then-integrate baselines);
  * `uses_weights`: the loss is a sum (or mean) of one term per quasi-identifier, so ARX's
    attribute weights apply: each QI's term is multiplied by its weight (scaled to average 1 by
    the config, so equal weights give the unweighted loss). A metric without it refuses weights;
  * `loss_reads_suppressed_only`: `loss(levels, classes, failing)` reads nothing of the kept
    classes, so it equals `loss` over a table of only the suppressed classes, all failing (a
    search whose classes stay on a cluster's workers then brings only those to the judge);
  * `needs_class_values`: a class's share of the loss depends on its generalized values, not only on
    its size and the node's levels (Protocol C's key holder, which never sees a class's values, can
    judge such a metric only through a per-class weight channel; `loss` has one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from fedanon.stats.classes import Classes


@dataclass
class MetricContext:
    """Table-wide facts metrics need, computed once per run."""

    n_rows: int
    heights: list[int]  # levels per QI incl. level 0
    cardinalities: list[list[np.ndarray]]  # [qi][level] -> count of each level code over all rows
    level0_to_level: list[np.ndarray]  # [qi] -> code_map (height x d0)
    leaf_fraction: Sequence[list[np.ndarray]]  # [qi][level] -> (leaves-1)/(all leaves-1) per level code
    min_class_size: int = 1
    # sizes of the input's classes with every QI at level 0 (its distinct QI tuples), grouped on
    # first call: the input's joint QI distribution, which no per-QI count gives. None where the
    # party building the metric may not see it (Protocol C's key holder)
    input_class_sizes: Callable[[], np.ndarray] | None = None


def fsum(values: np.ndarray) -> float:
    return math.fsum(values.ravel().tolist())


class Metric:
    name = ""
    needs_value_marginals = False
    charges_suppressed_values = False
    has_baseline = True
    needs_class_values = False
    loss_reads_suppressed_only = False
    uses_weights = False
    monotone_without_suppression = True
    monotone_with_suppression = False

    def __init__(self, ctx: MetricContext, weights: Sequence[float] | None = None) -> None:
        self.ctx = ctx
        self.q = len(ctx.heights)
        if weights is not None and not self.uses_weights:
            raise ValueError(f"metric {self.name!r} cannot use attribute weights")
        if weights is not None and len(weights) != self.q:
            raise ValueError(f"{len(weights)} weights for {self.q} quasi-identifiers")
        #: each QI's factor in the loss (1.0 each without weights)
        self.weights = [1.0] * self.q if weights is None else [float(w) for w in weights]

    # per-QI per-level table whose sum over QIs is the static bound; None = no bound
    def _bound_table(self) -> list[np.ndarray] | None:
        return None

    def _per_level_table(self, cell: Callable[[int, int], float]) -> list[np.ndarray]:
        """`cell(qi, level)` for every QI and level, computed once per run: a figure that depends on
        a QI's level alone is the same at every node, so the search reads it from this table."""
        if not hasattr(self, "_per_level_cache"):
            self._per_level_cache = [np.array([cell(i, level) for level in range(h)], dtype=np.float64)
                                     for i, h in enumerate(self.ctx.heights)]
        return self._per_level_cache

    @staticmethod
    def _sum_at(table: list[np.ndarray], levels: tuple[int, ...]) -> float:
        """The table's entries at one node, summed exactly (the same float at every call)."""
        return math.fsum(float(table[i][level]) for i, level in enumerate(levels))

    def static_bound(self, levels: np.ndarray) -> np.ndarray | None:
        """Lower bound for each node row of `levels` (n_nodes x q) without grouping."""
        table = self._bound_table()
        if table is None:
            return None
        levels = np.atleast_2d(levels)
        out = np.zeros(levels.shape[0], dtype=np.float64)
        for i, t in enumerate(table):
            out += t[levels[:, i]]
        return out

    def static_loss(self, levels: tuple[int, ...]) -> float | None:
        """Exact loss without grouping, valid at a node where no row is suppressed."""
        return None

    def class_bound(self, levels: tuple[int, ...], classes: Classes) -> float:
        """The static bound of one node, summed in Python floats in the same order as
        `static_bound` (so bit-identical to it) without building arrays per check."""
        rows = self._bound_rows()
        if rows is None:
            return -math.inf
        total = 0.0
        for row, level in zip(rows, levels):
            total += row[level]
        return total

    def _bound_rows(self) -> list[list[float]] | None:
        if not hasattr(self, "_bound_rows_cache"):
            table = self._bound_table()
            self._bound_rows_cache = None if table is None else [np.asarray(t, dtype=np.float64).tolist()
                                                                 for t in table]
        return self._bound_rows_cache

    def loss(self, levels: tuple[int, ...], classes: Classes, failing: np.ndarray) -> float:
        raise NotImplementedError

    def monotone(self, suppression: bool) -> bool:
        return self.monotone_with_suppression if suppression else self.monotone_without_suppression

    # helpers
    def _suppressed_rows(self, classes: Classes, failing: np.ndarray) -> int:
        return int(classes.stats.sizes[failing].sum()) if failing.any() else 0



class CellAreas:
    """How many of the table's level-0 values each generalized code covers ([qi][level][code]),
    and the size of the whole domain (the product of every QI's number of values in the table).

    Metrics that charge a released row by how many original QI tuples it could stand for
    (ambiguity, KL divergence) share these counts. They come from the code maps alone, never
    from a value, so they are the same on ciphertext dictionaries and on plaintext; a value a
    hierarchy lists but the table lacks does not count."""

    def __init__(self, level0_to_level: Sequence[np.ndarray]) -> None:
        self.leaves: list[list[np.ndarray]] = [
            [np.bincount(code_map[level], minlength=int(code_map[level].max()) + 1 if code_map.shape[1] else 0)
             .astype(np.float64) for level in range(code_map.shape[0])]
            for code_map in level0_to_level]
        self.domain = math.prod(float(code_map.shape[1]) for code_map in level0_to_level)

    def of_classes(self, levels: tuple[int, ...], classes: Classes) -> np.ndarray:
        """Each class's area at the node `levels`: the product of its generalized values' leaf counts."""
        area = np.ones(classes.count, dtype=np.float64)
        for q, level in enumerate(levels):
            area *= self.leaves[q][level][classes.codes[:, q]]
        return area
