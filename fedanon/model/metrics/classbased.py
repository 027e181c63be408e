"""Metrics of the equivalence classes' sizes: average class size and discernibility (§2.6)."""

from __future__ import annotations

from fedanon.model.metrics.base import Metric
from fedanon.model.metrics.registry import register_metric


@register_metric
class AECS(Metric):
    """Average class size n / #classes; all suppressed rows form one class (as ARX)."""

    name = "aecs"

    def class_bound(self, levels, classes):
        return self.ctx.n_rows / max(classes.count, 1)

    def loss(self, levels, classes, failing):
        ok = classes.count - int(failing.sum())
        n_cls = ok + (1 if failing.any() else 0)
        return self.ctx.n_rows / max(n_cls, 1)


@register_metric
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


@register_metric
class DiscernibilityStar(Discernibility):
    """DM*: sum of |E|^2 over all classes, suppression not considered (monotone)."""

    name = "discernibility-star"
    monotone_with_suppression = True

    def loss(self, levels, classes, failing):
        return self.class_bound(levels, classes)

