"""Metrics of how far each value was generalized: height, precision, loss (§2.6)."""

from __future__ import annotations

import math

import numpy as np

from fedanon.model.metrics.base import Metric, fsum
from fedanon.model.metrics.registry import register_metric


@register_metric
class Height(Metric):
    """Sum of levels (data independent)."""

    name = "height"
    monotone_with_suppression = True
    uses_weights = True

    def _bound_table(self) -> list[np.ndarray]:
        return [w * np.arange(h, dtype=np.float64) for w, h in zip(self.weights, self.ctx.heights)]

    def static_loss(self, levels):
        return math.fsum(w * level for w, level in zip(self.weights, levels))

    def loss(self, levels, classes, failing):
        return self.static_loss(levels)


def _relative_levels(heights: list[int]) -> list[np.ndarray]:
    return [np.arange(h, dtype=np.float64) / (h - 1) if h > 1 else np.zeros(1) for h in heights]


@register_metric
class PrecisionStar(Metric):
    """PM*: mean over QIs of level / max level; ignores suppression (monotone)."""

    name = "precision-star"
    monotone_with_suppression = True
    uses_weights = True

    def _bound_table(self):
        return [w * t / self.q for w, t in zip(self.weights, _relative_levels(self.ctx.heights))]

    def static_loss(self, levels):
        return math.fsum(w * float(t[l]) for w, t, l in
                         zip(self.weights, _relative_levels(self.ctx.heights), levels)) / self.q

    def loss(self, levels, classes, failing):
        return self.static_loss(levels)


@register_metric
class Precision(PrecisionStar):
    """PM over cells: level / max level per cell, suppressed cells count 1 (loss = 1 - precision)."""

    name = "precision"
    monotone_with_suppression = False

    def loss(self, levels, classes, failing):
        n = self.ctx.n_rows
        s = self._suppressed_rows(classes, failing)
        per_row = self.static_loss(levels)
        # a suppressed row's cells count 1 each: weighted, sum(w) / q = 1 (weights average 1)
        return ((n - s) * per_row + s * math.fsum(self.weights) / self.q) / n


@register_metric
class Loss(Metric):
    """Iyengar's LM: (leaves below value - 1) / (leaves - 1) per cell; suppressed cells = 1."""

    name = "loss"
    needs_class_values = True
    uses_weights = True

    def _bound_table(self):
        """Per QI and level: the LM share of all rows, from static cardinalities."""
        ctx = self.ctx

        def cell(i: int, level: int) -> float:
            card0 = ctx.cardinalities[i][0].astype(np.float64)
            frac = ctx.leaf_fraction[i][level][ctx.level0_to_level[i][level]]
            return self.weights[i] * fsum(card0 * frac) / (ctx.n_rows * self.q)

        return self._per_level_table(cell)

    def static_loss(self, levels):
        return self._sum_at(self._bound_table(), levels)

    def loss(self, levels, classes, failing):
        base = self.static_loss(levels)
        if not failing.any():
            return base
        ctx = self.ctx
        sizes = classes.stats.sizes[failing].astype(np.float64)
        removed = []
        for i, l in enumerate(levels):
            frac = ctx.leaf_fraction[i][l][classes.codes[failing, i]]
            removed.append(self.weights[i] * fsum(sizes * frac))
        s = float(sizes.sum())
        return base + (s * math.fsum(self.weights) - math.fsum(removed)) / (ctx.n_rows * self.q)
