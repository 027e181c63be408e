"""The ambiguity metric (Nergiz & Clifton 2007): how many original tuples a released row could be.

A released row whose QI values stand for v₁, …, v_q original values (the leaves under each
generalized value) is consistent with v₁ · … · v_q original QI combinations; ambiguity is that
product averaged over all rows, with a suppressed row counting the whole domain (the product of
every QI's number of values). Lower is better; the input itself has ambiguity 1.

Monotone without suppression: generalizing never shrinks a value's set of leaves, so no row's
product decreases. Not with suppression (a row suppressed at a node may be released, with a
smaller product, at a generalization of it).

The domain of a quasi-identifier is the set of its values in the table (its dictionary), so the
counts come from the code maps alone (how many level-0 codes map to each generalized code): the
metric is the same on ciphertext dictionaries and on the pooled table of a protocol run (A and B).
A value the hierarchy lists but the table lacks does not count. Protocol C refuses it: a class's
share depends on its values, which C's key holder never sees, and only `loss` has a per-class
weight channel from the helper.
"""

from __future__ import annotations

import math

import numpy as np

from fedanon.model.metrics.base import CellAreas, Metric, MetricContext
from fedanon.model.metrics.registry import register_metric
from fedanon.stats.classes import Classes


@register_metric
class Ambiguity(Metric):
    """Mean over rows of the product of the leaf counts of the row's generalized QI values."""

    name = "ambiguity"
    monotone_without_suppression = True
    monotone_with_suppression = False
    has_baseline = False
    needs_class_values = True

    def __init__(self, ctx: MetricContext) -> None:
        super().__init__(ctx)
        self.areas = CellAreas(ctx.level0_to_level)
        self.domain = self.areas.domain

    def loss(self, levels: tuple[int, ...], classes: Classes, failing: np.ndarray) -> float:
        sizes = np.asarray(classes.stats.sizes, dtype=np.float64)
        product = self.areas.of_classes(levels, classes)
        kept = ~failing
        total = math.fsum((sizes[kept] * product[kept]).tolist()) + self.domain * float(sizes[failing].sum())
        return total / max(self.ctx.n_rows, 1)

    def class_bound(self, levels: tuple[int, ...], classes: Classes) -> float:
        """Ambiguity if nothing were suppressed: a lower bound at every generalization of the node
        (without suppression the metric is monotone; suppression only raises a row's product)."""
        sizes = np.asarray(classes.stats.sizes, dtype=np.float64)
        return math.fsum((sizes * self.areas.of_classes(levels, classes)).tolist()) / max(self.ctx.n_rows, 1)
