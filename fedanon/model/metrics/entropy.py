"""The entropy metrics: information lost about the QI values (§2.6.6, §3.6.2)."""

from __future__ import annotations

import math

import numpy as np

from fedanon.model.metrics.base import Metric, fsum
from fedanon.model.metrics.registry import register_metric


class _EntropyBase(Metric):
    """Shared machinery of the entropy metrics (§2.6.6, §3.6.2).

    A sum of one term per QI (over all rows, plus the suppressed rows' term): attribute weights
    scale each QI's terms.

    The part over all rows depends only on per-level value cardinalities, which are
    static (§3.6.2); suppression adds the loss of generalizing the suppressed rows
    from their current state to the root, computed from the suppressed classes only.
    """

    uses_weights = True
    loss_reads_suppressed_only = True  # the static part plus the suppressed classes' marginals

    def _term(self, orig: np.ndarray, gen: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _table(self) -> list[np.ndarray]:
        ctx = self.ctx

        def cell(i: int, level: int) -> float:
            card0 = ctx.cardinalities[i][0].astype(np.float64)
            gen = ctx.cardinalities[i][level][ctx.level0_to_level[i][level]].astype(np.float64)
            return self.weights[i] * fsum(self._term(card0, gen))

        return self._per_level_table(cell)

    def static_loss(self, levels):
        return self._sum_at(self._table(), levels)

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
        for weight, counts in zip(self.weights, marginals):
            counts = np.asarray(counts, dtype=np.float64)
            total = float(counts.sum())
            counts = counts[counts > 0]
            extra.append(weight * fsum(self._term(counts, np.full_like(counts, total))))
        return math.fsum(extra)


@register_metric
class NonUniformEntropy(_EntropyBase):
    """NUEM: -sum over cells log2(card(orig) / card(generalized)); §3.6.2 variant with suppression.

    Suppressed rows are charged as generalized to the root (the loss of the suppressed
    rows' values among themselves is added). That makes the metric NON-monotonic with
    suppression: ARX calls this variant `createEntropyMetric(false)` (MetricMDNUNMEntropy).
    See `NonUniformEntropyMonotonic` for the other one.
    """

    name = "nonuniform-entropy"
    needs_value_marginals = True
    charges_suppressed_values = True

    def _term(self, orig, gen):
        return -orig * np.log2(orig / gen)

    def _bound_table(self):
        return self._table()


@register_metric
class NonUniformEntropyMonotonic(NonUniformEntropy):
    """NUEM, monotonic variant: suppression is not charged (ARX `createEntropyMetric(true)`).

    The loss is the static part over all rows at the node's levels, whether a row is
    suppressed or not -- like PM* and DM*, it depends on the levels only, so it is
    monotone with suppression too and Flash_B needs no second phase. The two variants
    agree without suppression; with suppression they can pick different optima.
    """

    name = "nonuniform-entropy-monotonic"
    charges_suppressed_values = False
    has_baseline = False
    monotone_with_suppression = True

    def loss(self, levels, classes, failing):
        return self.static_loss(levels)


@register_metric
class Entropy(_EntropyBase):
    """EM: -sum over cells X log2 X, X = card(orig)/card(generalized); not monotone."""

    name = "entropy"
    needs_value_marginals = True
    charges_suppressed_values = True
    monotone_without_suppression = False

    def _term(self, orig, gen):
        x = orig / gen
        # each of the `orig` rows contributes -x log2 x
        return -orig * x * np.log2(x)

