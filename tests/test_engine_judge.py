"""ClassJudge on hand-made class statistics: the implied-size shortcut's counts.

When the classes below the size every model implies already hold more rows than may be
suppressed, the judge answers without asking the models; its suppressed-row count and
kept-class count must still be those of the classes below that size (hand-computed here).
"""

from __future__ import annotations

import numpy as np

from fedanon.engine.check.checker import ClassJudge
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import CriterionContext, KAnonymity
from fedanon.stats.classes import Classes
from fedanon.model.metrics.base import MetricContext
from fedanon.model.metrics.registry import build_metric


def judge_for(k: int, suppression: float, n_rows: int) -> ClassJudge:
    ctx = MetricContext(n_rows=n_rows, heights=[3], cardinalities=[[np.array([n_rows])] * 3],
                        level0_to_level=[np.zeros((3, 1), dtype=np.int64)],
                        leaf_fraction=[[np.zeros(1)] * 3])
    return ClassJudge([KAnonymity(k)], build_metric("height", ctx), suppression, CriterionContext(n_rows=n_rows))


def classes_of(sizes: list[int]) -> Classes:
    codes = np.arange(len(sizes), dtype=np.int32).reshape(-1, 1)
    return Classes((1,), codes, ClassStats(np.array(sizes, dtype=np.int64)))


def test_implied_size_shortcut_counts_the_small_classes():
    sizes = [1, 7, 4, 2, 9, 5, 3]  # below k=5: 1, 4, 2, 3 -> 10 rows in 4 classes
    judge = judge_for(5, 0.2, sum(sizes))  # limit floor(0.2 * 31) = 6 < 10
    ev = judge.judge((1,), classes_of(sizes))
    assert not ev.implied_k_ok and not ev.anonymous
    assert ev.suppressed_rows == 10
    assert ev.classes == 3
    assert ev.bound == 1.0  # the height metric's bound: the level itself


def test_within_the_limit_the_models_decide():
    sizes = [1, 7, 4, 9, 5]  # below k=5: 1 and 4 -> 5 rows, limit floor(0.2 * 26) = 5
    ev = judge_for(5, 0.2, sum(sizes)).judge((2,), classes_of(sizes))
    assert ev.implied_k_ok and ev.anonymous
    assert ev.suppressed_rows == 5 and ev.classes == 3 and ev.loss == 2.0
