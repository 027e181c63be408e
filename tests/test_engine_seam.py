"""The engine's preparation split and checker seam (what Protocol C builds on).

* roll-up names its source node and the class mapping, so any per-row quantity the
  grouper does not hold (Protocol C: encrypted counters) rolls up to the same sums as
  grouping the rows directly;
* structure + local statistics + supplied checker reproduce `anonymize` exactly;
* statistics computed from only the *true* rows of a table padded with fake rows, with
  a checker that ignores the fakes, give the centralized answer on the true rows.
"""

from __future__ import annotations


import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, EncodedTable, anonymize, read_table_csv
from fedanon.engine.anonymizer import (
    generalize,
    local_checker,
    local_statistics,
    metric_context,
    prepare_structure,
    search,
    Statistics,
)
from fedanon.engine.check.checker import Checker, ClassJudge, NodeEvaluation
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import CriterionContext, build_criteria
from fedanon.stats.classes import Classes
from fedanon.data.hierarchy import Hierarchy
from fedanon.model.metrics.registry import build_metric

from datasets import EXAMPLE_DIR as EXAMPLE


def _example():
    header, rows = read_table_csv(EXAMPLE / "example.csv")
    table = EncodedTable.from_rows(header, rows)
    hier = {c: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{c}.csv", c)
            for c in ("age", "sex", "zipcode", "diagnosis")}
    return table, hier


def test_rollup_mapping_sums_like_rows():
    table, hier = _example()
    cfg = AnonymizationConfig(["age", "sex", "zipcode"], k=2)
    st = prepare_structure(table, hier, cfg)
    st.grouper.snapshot_limit = table.n_rows  # keep every node (8 rows: the default keeps few)
    weights = np.arange(1, table.n_rows + 1, dtype=np.int64) ** 2  # any per-row value
    base, _ = st.grouper.classes((0, 0, 1), keep_rows=True)
    assert base.row_class is not None
    base_sums = np.bincount(base.row_class, weights=weights, minlength=base.count)
    # asked as Protocol C's helper asks (its encrypted sums roll up by the mapping): a node that
    # needs only class sizes may be grouped from the rows instead (tests/test_engine_grouping.py)
    rolled, was_rolled = st.grouper.classes((1, 0, 3), keep_rows=True)
    assert was_rolled and rolled.rolled_from == (0, 0, 1) and rolled.mapping is not None
    via_mapping = np.bincount(rolled.mapping, weights=base_sums, minlength=rolled.count)
    direct = st.grouper.group_rows((1, 0, 3), keep_rows=True)
    assert np.array_equal(direct.codes, rolled.codes)  # canonical class order
    assert np.array_equal(via_mapping, np.bincount(direct.row_class, weights=weights, minlength=direct.count))


@pytest.mark.parametrize("metric", ["nonuniform-entropy", "loss", "discernibility"])
def test_split_preparation_equals_anonymize(metric):
    table, hier = _example()
    cfg = AnonymizationConfig(["age", "sex", "zipcode"], k=2, suppression=0.25, metric=metric)
    st = prepare_structure(table, hier, cfg)
    checker = local_checker(st, local_statistics(st))
    outcome = search(st, checker)
    reference = anonymize(table, hier, cfg)
    levels = st.lattice.node_levels(outcome.node)
    assert {q: l for q, l in zip(cfg.quasi_identifiers, levels)} == reference.transformation
    assert outcome.loss == pytest.approx(reference.information_loss)


class _TrueRowsChecker(Checker):
    """A supplied checker: groups the padded table, but counts only rows flagged real."""

    def __init__(self, structure, real: np.ndarray, statistics: Statistics, cfg) -> None:
        self.grouper = structure.grouper
        self.real = real.astype(np.int64)
        self.judge = ClassJudge(build_criteria(cfg), build_metric(cfg.metric, statistics.metric),
                                cfg.suppression, statistics.criteria)
        for name in ("anonymity_monotone", "strict_monotone", "metric_monotone", "suppression_limit", "implied_k"):
            setattr(self, name, getattr(self.judge, name))
        self.checks = 0

    def evaluate(self, levels) -> NodeEvaluation:
        self.checks += 1
        classes, _ = self.grouper.classes(levels, keep_rows=True)
        rows = classes.row_class if classes.row_class is not None else \
            self.grouper.group_rows(levels, keep_rows=True).row_class
        sizes = np.bincount(rows, weights=self.real, minlength=classes.count).astype(np.int64)
        live = sizes > 0  # classes of fake rows only do not exist in the true table
        true = Classes(tuple(levels), classes.codes[live], ClassStats(sizes[live]))
        return self.judge.judge(tuple(levels), true)


def test_supplied_checker_with_true_statistics_ignores_fake_rows():
    table, hier = _example()
    cfg = AnonymizationConfig(["age", "sex", "zipcode"], k=2, metric="discernibility")
    rng = np.random.default_rng(7)
    fakes = table.codes[rng.integers(0, table.n_rows, 5)]
    fakes[:, 0] = rng.permutation(fakes[:, 0])  # fake rows with shuffled ages
    padded_codes = np.vstack([table.codes, fakes])
    real = np.r_[np.ones(table.n_rows, bool), np.zeros(len(fakes), bool)]
    padded = type(table)(list(table.columns), padded_codes, table.dictionaries)
    st = prepare_structure(padded, hier, cfg)
    # statistics of the true rows only (what Protocol C's key holder supplies)
    true_st = prepare_structure(table, hier, cfg)
    stats = local_statistics(true_st)
    stats = Statistics(CriterionContext(n_rows=table.n_rows), metric_context(st, table.n_rows, stats.metric.cardinalities))
    outcome = search(st, _TrueRowsChecker(st, real, stats, cfg))
    reference = anonymize(table, hier, cfg)
    levels = st.lattice.node_levels(outcome.node)
    assert {q: l for q, l in zip(cfg.quasi_identifiers, levels)} == reference.transformation
    out = generalize(st, levels)
    ref_rows = sorted(map(tuple, reference.output.decode_rows()))
    assert sorted(map(tuple, [r for r, keep in zip(out.decode_rows(), real) if keep])) == ref_rows
