"""Information-loss metrics (§2.6) with ARX-style suppression handling (§3.6.2).

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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fedanon.stats.classes import Classes
from fedanon.errors import InputError


@dataclass
class MetricContext:
    """Table-wide facts metrics need, computed once per run."""

    n_rows: int
    heights: list[int]  # levels per QI incl. level 0
    cardinalities: list[list[np.ndarray]]  # [qi][level] -> count of each level code over all rows
    level0_to_level: list[np.ndarray]  # [qi] -> code_map (height x d0)
    leaf_fraction: Sequence[list[np.ndarray]]  # [qi][level] -> (leaves-1)/(all leaves-1) per level code
    min_class_size: int = 1


def _fsum(values: np.ndarray) -> float:
    return math.fsum(values.ravel().tolist())


class Metric:
    name = ""
    monotone_without_suppression = True
    monotone_with_suppression = False

    def __init__(self, ctx: MetricContext) -> None:
        self.ctx = ctx
        self.q = len(ctx.heights)

    # per-QI per-level table whose sum over QIs is the static bound; None = no bound
    def _bound_table(self) -> list[np.ndarray] | None:
        return None

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


class Height(Metric):
    """Sum of levels (data independent)."""

    name = "height"
    monotone_with_suppression = True

    def _bound_table(self) -> list[np.ndarray]:
        return [np.arange(h, dtype=np.float64) for h in self.ctx.heights]

    def static_loss(self, levels):
        return float(sum(levels))

    def loss(self, levels, classes, failing):
        return float(sum(levels))


def _relative_levels(heights: list[int]) -> list[np.ndarray]:
    return [np.arange(h, dtype=np.float64) / (h - 1) if h > 1 else np.zeros(1) for h in heights]


class PrecisionStar(Metric):
    """PM*: mean over QIs of level / max level; ignores suppression (monotone)."""

    name = "precision-star"
    monotone_with_suppression = True

    def _bound_table(self):
        return [t / self.q for t in _relative_levels(self.ctx.heights)]

    def static_loss(self, levels):
        return math.fsum(float(t[l]) for t, l in zip(_relative_levels(self.ctx.heights), levels)) / self.q

    def loss(self, levels, classes, failing):
        return self.static_loss(levels)


class Precision(PrecisionStar):
    """PM over cells: level / max level per cell, suppressed cells count 1 (loss = 1 - precision)."""

    name = "precision"
    monotone_with_suppression = False

    def loss(self, levels, classes, failing):
        n = self.ctx.n_rows
        s = self._suppressed_rows(classes, failing)
        per_row = self.static_loss(levels)
        return ((n - s) * per_row + s * 1.0) / n


class Loss(Metric):
    """Iyengar's LM: (leaves below value - 1) / (leaves - 1) per cell; suppressed cells = 1."""

    name = "loss"

    def _bound_table(self):
        """Per QI and level: the LM share of all rows, from static cardinalities."""
        if not hasattr(self, "_cached"):
            ctx = self.ctx
            tables = []
            for i, h in enumerate(ctx.heights):
                card0 = ctx.cardinalities[i][0].astype(np.float64)
                t = np.zeros(h)
                for l in range(h):
                    frac = ctx.leaf_fraction[i][l][ctx.level0_to_level[i][l]]
                    t[l] = _fsum(card0 * frac) / (ctx.n_rows * self.q)
                tables.append(t)
            self._cached = tables
        return self._cached

    def static_loss(self, levels):
        tbl = self._bound_table()
        return math.fsum(float(tbl[i][l]) for i, l in enumerate(levels))

    def loss(self, levels, classes, failing):
        base = self.static_loss(levels)
        if not failing.any():
            return base
        ctx = self.ctx
        sizes = classes.stats.sizes[failing].astype(np.float64)
        removed = []
        for i, l in enumerate(levels):
            frac = ctx.leaf_fraction[i][l][classes.codes[failing, i]]
            removed.append(_fsum(sizes * frac))
        s = float(sizes.sum())
        return base + (s * self.q - math.fsum(removed)) / (ctx.n_rows * self.q)


class AECS(Metric):
    """Average class size n / #classes; all suppressed rows form one class (as ARX)."""

    name = "aecs"

    def class_bound(self, levels, classes):
        return self.ctx.n_rows / max(classes.count, 1)

    def loss(self, levels, classes, failing):
        ok = classes.count - int(failing.sum())
        n_cls = ok + (1 if failing.any() else 0)
        return self.ctx.n_rows / max(n_cls, 1)


class Discernibility(Metric):
    """DM: |E|^2 per kept class, n*|E| per suppressed class."""

    name = "discernibility"

    def class_bound(self, levels, classes):
        s = classes.stats.sizes
        return float(int((s * s).sum()))

    def loss(self, levels, classes, failing):
        s = classes.stats.sizes
        kept = s[~failing]
        return float(int((kept * kept).sum()) + self.ctx.n_rows * int(s[failing].sum()))


class DiscernibilityStar(Discernibility):
    """DM*: sum of |E|^2 over all classes, suppression not considered (monotone)."""

    name = "discernibility-star"
    monotone_with_suppression = True

    def loss(self, levels, classes, failing):
        return self.class_bound(levels, classes)


class _EntropyBase(Metric):
    """Shared machinery of the entropy metrics (§2.6.6, §3.6.2).

    The part over all rows depends only on per-level value cardinalities, which are
    static (§3.6.2); suppression adds the loss of generalizing the suppressed rows
    from their current state to the root, computed from the suppressed classes only.
    """

    def _term(self, orig: np.ndarray, gen: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _table(self) -> list[np.ndarray]:
        if not hasattr(self, "_cached"):
            ctx = self.ctx
            tables = []
            for i, h in enumerate(ctx.heights):
                card0 = ctx.cardinalities[i][0].astype(np.float64)
                t = np.zeros(h)
                for l in range(h):
                    gen = ctx.cardinalities[i][l][ctx.level0_to_level[i][l]].astype(np.float64)
                    t[l] = _fsum(self._term(card0, gen))
                tables.append(t)
            self._cached = tables
        return self._cached

    def static_loss(self, levels):
        tbl = self._table()
        return math.fsum(float(tbl[i][l]) for i, l in enumerate(levels))

    def loss(self, levels, classes, failing):
        base = self.static_loss(levels)
        if not failing.any():
            return base
        sizes = classes.stats.sizes[failing]
        codes = classes.codes[failing]  # one gather of the suppressed classes' rows
        return base + self.suppressed_loss([np.bincount(codes[:, i], weights=sizes) for i in range(self.q)])

    def suppressed_loss(self, marginals: list[np.ndarray]) -> float:
        """What suppression adds: per QI, the suppressed rows generalized from their value to the root.

        `marginals[i][v]` = suppressed rows whose QI-i value (at the node's level) is v, in any
        order of v (zeros allowed). Public so that a party which learns only these per-QI
        counts -- Protocol C's key holder, never the classes' values -- adds exactly the same.
        """
        extra = []
        for counts in marginals:
            counts = np.asarray(counts, dtype=np.float64)
            total = float(counts.sum())
            counts = counts[counts > 0]
            extra.append(_fsum(self._term(counts, np.full_like(counts, total))))
        return math.fsum(extra)


class NonUniformEntropy(_EntropyBase):
    """NUEM: -sum over cells log2(card(orig) / card(generalized)); §3.6.2 variant with suppression.

    Suppressed rows are charged as generalized to the root (the loss of the suppressed
    rows' values among themselves is added). That makes the metric NON-monotonic with
    suppression: ARX calls this variant `createEntropyMetric(false)` (MetricMDNUNMEntropy).
    See `NonUniformEntropyMonotonic` for the other one.
    """

    name = "nonuniform-entropy"

    def _term(self, orig, gen):
        return -orig * np.log2(orig / gen)

    def _bound_table(self):
        return self._table()


class NonUniformEntropyMonotonic(NonUniformEntropy):
    """NUEM, monotonic variant: suppression is not charged (ARX `createEntropyMetric(true)`).

    The loss is the static part over all rows at the node's levels, whether a row is
    suppressed or not -- like PM* and DM*, it depends on the levels only, so it is
    monotone with suppression too and Flash_B needs no second phase. The two variants
    agree without suppression; with suppression they can pick different optima.
    """

    name = "nonuniform-entropy-monotonic"
    monotone_with_suppression = True

    def loss(self, levels, classes, failing):
        return self.static_loss(levels)


class Entropy(_EntropyBase):
    """EM: -sum over cells X log2 X, X = card(orig)/card(generalized); not monotone."""

    name = "entropy"
    monotone_without_suppression = False

    def _term(self, orig, gen):
        x = orig / gen
        # each of the `orig` rows contributes -x log2 x
        return -orig * x * np.log2(x)


_METRICS: dict[str, type[Metric]] = {
    cls.name: cls
    for cls in (Height, Precision, PrecisionStar, Loss, AECS, Discernibility, DiscernibilityStar, Entropy, NonUniformEntropy,
                NonUniformEntropyMonotonic)
}


def build_metric(name: str, ctx: MetricContext) -> Metric:
    try:
        return _METRICS[name](ctx)
    except KeyError:
        raise InputError(f"unknown metric {name!r}; choose one of: {', '.join(_METRICS)}") from None
