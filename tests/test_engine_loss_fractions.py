"""The loss metric's per-value fractions, computed lazily (`anonymizer.LossFractions`), equal the
hierarchy's own (`Hierarchy.loss_fractions`) for every QI and level, and the loss metric gives
the same figures from them as from an eagerly built list."""

from __future__ import annotations


import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy
from fedanon.engine.anonymizer import LossFractions, local_statistics, prepare_structure
from fedanon.data.io.delimited import read_columns
from fedanon.model.metrics.base import MetricContext
from fedanon.model.metrics.registry import build_metric

from datasets import ADULT_DIR as ADULT
QIS = ["sex", "age", "race", "education", "native-country"]


@pytest.fixture(scope="module")
def structure():
    table: EncodedTable = read_columns(ADULT / "adult.csv").select(QIS).encoded()
    hier = {a: Hierarchy.read_csv(ADULT / f"adult_hierarchy_{a}.csv", a) for a in QIS}
    return prepare_structure(table, hier, AnonymizationConfig(QIS, k=5, metric="loss"))


def test_every_qi_and_level_equals_the_hierarchy(structure):
    fractions = LossFractions(structure)
    assert len(fractions) == len(QIS)
    for i, q in enumerate(QIS):
        levels = structure.code_maps[i].shape[0]
        want = [structure.hierarchies[q].loss_fractions(l, structure.level_dicts[i][l]) for l in range(levels)]
        got = fractions[i]
        assert len(got) == levels and all(np.array_equal(g, w) for g, w in zip(got, want))
        assert fractions[i - len(QIS)] is got  # negative index: the same, computed once
    assert [len(f) for f in fractions] == [m.shape[0] for m in structure.code_maps]  # iterates and stops
    with pytest.raises(IndexError):
        fractions[len(QIS)]


def test_loss_metric_same_from_lazy_and_eager_fractions(structure):
    ctx = local_statistics(structure).metric
    assert isinstance(ctx.leaf_fraction, LossFractions)
    eager = MetricContext(ctx.n_rows, ctx.heights, ctx.cardinalities, ctx.level0_to_level,
                          [list(ctx.leaf_fraction[i]) for i in range(len(QIS))], ctx.min_class_size)
    lazy_metric, eager_metric = build_metric("loss", ctx), build_metric("loss", eager)
    grouper = structure.grouper
    for levels in [(0, 0, 0, 0, 0), (1, 2, 1, 1, 1), (1, 4, 1, 3, 2)]:
        classes = grouper.group_rows(levels)
        failing = classes.stats.sizes < 5
        assert lazy_metric.loss(levels, classes, failing) == eager_metric.loss(levels, classes, failing)
        assert lazy_metric.static_loss(levels) == eager_metric.static_loss(levels)
