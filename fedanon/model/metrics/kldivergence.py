"""KL divergence (Kifer & Gehrke 2006): how far the release's implied distribution is from the input's.

Let P be the distribution of the input's quasi-identifier tuples (p(t) = rows with tuple t / n)
over the domain D = D_1 × … × D_q, D_i the values of QI i in the table. The release implies a
distribution Q over the same domain: every released row spreads its mass 1/n uniformly over
the original tuples its generalized cell covers (the product of the leaf sets under its
generalized values), a suppressed row over the whole domain. With full-domain generalization
and whole-class suppression, for a tuple t in class E of the node

    q(t) = |E| / (n · area(E)) · [E kept]  +  S / (n · |D|),      S = suppressed rows,

and the loss is KL(P ‖ Q) = Σ_t p(t) · log₂(p(t) / q(t)) in bits: 0 for the input itself,
log₂|D| − H(P) when every row is suppressed. q is constant on each class, so the sum over
tuples is Σ_t p log₂ p (the input's negative entropy, from its bottom-node class sizes, once)
minus Σ_E (|E|/n) · log₂ q_E: class sizes, areas and S per check.

ARX's "KL-Divergence" (`MetricSDNMKLDivergence`) differs in two ways: it sums over rows, so a
tuple that occurs c times is counted c times, and it charges a kept row only its own class's
mass and a suppressed row only the suppressed mass, without the S/(n·|D|) every cell receives
from the suppressed rows. On a table of distinct tuples without suppression the two agree.

Traits, from the definition:
  * monotone without suppression: generalizing F to G makes Q_G the coarsening of Q_F, and
    KL(P‖Q_G) = KL(P‖Q_F) + KL(Q_F‖Q_G) ≥ KL(P‖Q_F). Not with suppression (a class suppressed
    at a node may be released at a generalization, with less loss).
  * bounds: every Q a generalization of F implies, with any suppression, is constant on F's
    classes, and among such distributions Q_F (no suppression at F) is the closest to P; so
    the loss at F without suppression bounds the loss at F and every generalization from
    below (`class_bound`). Projected on one QI the same argument gives a bound from the
    per-QI value counts alone, without grouping: the largest per-QI divergence (`static_bound`;
    the KL of a marginal never exceeds that of the joint distribution).
  * no per-QI value marginals are needed for the loss (it needs the joint distribution,
    which no marginal gives), and suppressed rows are charged by their number only.
  * a class's share depends on its generalized values (its area): Protocol C's key holder,
    which never sees them, cannot compute it, so C refuses the metric before data moves.
    Protocols A and B compute it on the pooled ciphertext, as here: areas come from the code
    maps (leaf counts), never from a value.
  * no §4.3 baseline: the divergence does not decompose over parties' shares.
"""

from __future__ import annotations

import math

import numpy as np

from fedanon.model.metrics.base import CellAreas, Metric, MetricContext, fsum
from fedanon.model.metrics.registry import register_metric
from fedanon.stats.classes import Classes


@register_metric
class KLDivergence(Metric):
    """KL(P ‖ Q) in bits, P the input's QI tuples, Q the release spread uniformly over its cells."""

    name = "kl-divergence"
    monotone_without_suppression = True
    monotone_with_suppression = False
    needs_value_marginals = False
    charges_suppressed_values = False
    has_baseline = False
    needs_class_values = True

    def __init__(self, ctx: MetricContext) -> None:
        super().__init__(ctx)
        self.areas = CellAreas(ctx.level0_to_level)
        self.domain = self.areas.domain
        self._input_term: float | None = None
        self._marginal_table: list[np.ndarray] | None = None

    # ------------------------------------------------------------------ the loss
    def _negative_input_entropy(self) -> float:
        """Σ_t p(t) log₂ p(t) over the input's distinct QI tuples (computed once)."""
        if self._input_term is None:
            if self.ctx.input_class_sizes is None:
                raise RuntimeError("the KL divergence needs the input's class sizes, which this context lacks")
            counts = np.asarray(self.ctx.input_class_sizes(), dtype=np.float64)
            p = counts[counts > 0] / float(self.ctx.n_rows)
            self._input_term = fsum(p * np.log2(p))
        return self._input_term

    def _divergence(self, levels: tuple[int, ...], classes: Classes, failing: np.ndarray | None) -> float:
        n = float(max(self.ctx.n_rows, 1))
        sizes = np.asarray(classes.stats.sizes, dtype=np.float64)
        if failing is not None and failing.any():
            suppressed = float(sizes[failing].sum())
            kept = ~failing & (sizes > 0)
        else:
            suppressed = 0.0
            kept = sizes > 0
        spread = suppressed / (n * self.domain)   # the mass every cell gets from the suppressed rows
        mass = sizes[kept] / n
        cross = fsum(mass * np.log2(mass / self.areas.of_classes(levels, classes)[kept] + spread))
        if suppressed > 0:
            cross = math.fsum([cross, suppressed / n * math.log2(spread)])
        # KL >= 0; the two sums are rounded apart, so an exact 0 may come out a few ulps below it
        return max(0.0, self._negative_input_entropy() - cross)

    def loss(self, levels: tuple[int, ...], classes: Classes, failing: np.ndarray) -> float:
        return self._divergence(levels, classes, failing)

    def class_bound(self, levels: tuple[int, ...], classes: Classes) -> float:
        """The divergence at this node without suppression: a lower bound at the node and at every
        generalization, whatever they suppress (see the module docstring)."""
        return self._divergence(levels, classes, None)

    # ------------------------------------------------------------------ the bound without grouping
    def _marginals(self) -> list[np.ndarray]:
        """[qi][level]: KL of QI i's value distribution from its level-l generalization spread
        uniformly over each group's values (each row monotone in the level)."""
        if self._marginal_table is None:
            n = float(max(self.ctx.n_rows, 1))
            table = []
            for q, cards in enumerate(self.ctx.cardinalities):
                p0 = np.asarray(cards[0], dtype=np.float64) / n
                p0 = p0[p0 > 0]
                own = fsum(p0 * np.log2(p0))
                row = np.zeros(len(cards))
                for level, counts in enumerate(cards):
                    mass = np.asarray(counts, dtype=np.float64) / n
                    width = np.zeros(mass.shape[0])
                    covered = self.areas.leaves[q][level][:mass.shape[0]]
                    width[:covered.shape[0]] = covered
                    present = (mass > 0) & (width > 0)
                    row[level] = max(0.0, own - fsum(mass[present] * np.log2(mass[present] / width[present])))
                table.append(row)
            self._marginal_table = table
        return self._marginal_table

    def static_bound(self, levels: np.ndarray) -> np.ndarray | None:
        """The largest per-QI divergence at each node's levels: a lower bound without grouping,
        monotone under generalization (a maximum of monotone terms, not a sum)."""
        table = self._marginals()
        levels = np.atleast_2d(levels)
        out = np.zeros(levels.shape[0], dtype=np.float64)
        for q, row in enumerate(table):
            np.maximum(out, row[levels[:, q]], out=out)
        return out
