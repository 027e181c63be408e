"""Nodes judged on the Dask workers (`LocalChecker._judge_where_grouped`) evaluate as in the driver.

After the key-range shuffle each worker holds whole classes of its key ranges; the checker
then receives only their summed counts (`ClassSums`) and, at an anonymous node, the failing
classes. The reference is the checker of the same table without any backend, judging each
node's whole class table: every field of every sampled node's evaluation must be equal (a
wrong count on a worker, a class counted twice or a failing class lost changes `classes`,
`suppressed_rows` or `loss`), and a whole search must find the same node. A local cluster of
2 worker processes on loopback is started by this module and stopped at its end.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

from fedanon.engine import AnonymizationConfig  # noqa: E402
from fedanon.engine.anonymizer import prepare, search_and_apply  # noqa: E402
from fedanon.engine.check import checker as checker_module  # noqa: E402
from fedanon.engine.check.backends import processes  # noqa: E402
from fedanon.engine.check.backends.base import backend_for  # noqa: E402
from fedanon.engine.check.checker import class_sums  # noqa: E402
from fedanon.stats.classes import ClassStats  # noqa: E402
from fedanon.model.criterion import KAnonymity  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from dask_cluster import loopback_cluster  # noqa: E402
from fedanon.engine.check.grouping import Grouper  # noqa: E402
from test_parallel_grouping import ADULT_QIS, _adult_table, _sizes_only_grouper  # noqa: E402

WORKERS = 2


@pytest.fixture(scope="module")
def client():
    with loopback_cluster(WORKERS) as (_, c):
        yield c


@pytest.fixture
def on_workers(monkeypatch):
    """Every sizes-only node by the shuffle, and judged on the workers even where the driver would
    keep its class table as a snapshot."""
    monkeypatch.setattr(processes, "MERGE_SPAN_SHARE", 0.0)
    monkeypatch.setattr(checker_module, "JUDGE_KEPT_TABLES_ELSEWHERE", True)


def test_class_sums_by_hand():
    """The counts one worker returns, on a table small enough to count by hand."""
    sizes = np.array([1, 4, 5, 2, 9, 3], dtype=np.int64)
    s = class_sums(ClassStats(sizes, {}), [KAnonymity(4)], 4)
    assert (s.classes, s.below, s.small, s.failing, s.failing_rows) == (6, 3, 6, 3, 6)
    s = class_sums(ClassStats(sizes, {}), [KAnonymity(4)], 1)  # no implied size: nothing "below"
    assert (s.below, s.small, s.failing, s.failing_rows) == (0, 0, 3, 6)


def _nodes(lattice, seed: int, count: int) -> list[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    nodes = {tuple(lattice.node_levels(i)) for i in rng.choice(lattice.size, size=count, replace=False)}
    nodes.add(tuple(lattice.node_levels(0)))
    return sorted(nodes)


@pytest.mark.parametrize("metric,suppression", [("nonuniform-entropy", 0.05), ("entropy", 0.02),
                                                ("nonuniform-entropy-monotonic", 0.05)])
def test_every_sampled_node_evaluates_the_same(metric, suppression, client, on_workers):
    table, hier = _adult_table()
    config = AnonymizationConfig(ADULT_QIS[:6], k=5, suppression=suppression, metric=metric)
    table = table.select(list(config.quasi_identifiers))
    here, there = prepare(table, hier, config), prepare(table, hier, config)
    nodes = _nodes(here.lattice, 7, 40)
    want = {lv: here.checker.evaluate(lv) for lv in nodes}
    assert there.checker.class_judge.judges_sums
    with backend_for("dask", there.grouper, WORKERS, client=client) as pool:
        got = {lv: there.checker.evaluate(lv) for lv in nodes}
        assert pool.shuffles == pool.groupings == len(nodes)  # every node went to the workers and stayed there
    assert not there.grouper.remembers(nodes[0])  # judged there: no class table came to this process
    for lv in nodes:
        assert got[lv] == want[lv], lv
    kinds = {(e.implied_k_ok, e.anonymous, e.anonymous_strict) for e in want.values()}
    # the sample reaches every branch: the implied size fails, anonymous with and without suppression
    assert {(False, False, False), (True, True, False), (True, True, True)} <= kinds, kinds


def test_whole_search_judged_on_the_workers_finds_the_same_node(client, on_workers):
    table, hier = _adult_table()
    config = AnonymizationConfig(ADULT_QIS, k=5, suppression=0.05)
    table = table.select(list(config.quasi_identifiers))
    here, there = prepare(table, hier, config), prepare(table, hier, config)
    want = search_and_apply(here, here.checker)
    with backend_for("dask", there.grouper, WORKERS, client=client) as pool:
        got = search_and_apply(there, there.checker)
        assert pool.shuffles > 0
    assert got.transformation == want.transformation
    assert (got.information_loss, got.checks, got.classes, got.suppressed_rows) == \
        (want.information_loss, want.checks, want.classes, want.suppressed_rows)
    assert np.array_equal(got.output.codes, want.output.codes)


def test_a_metric_that_reads_kept_classes_is_judged_in_the_driver(client, on_workers):
    """Discernibility charges kept classes by their sizes: its nodes come back whole."""
    table, hier = _adult_table()
    config = AnonymizationConfig(ADULT_QIS[:5], k=5, suppression=0.05, metric="discernibility")
    table = table.select(list(config.quasi_identifiers))
    prep = prepare(table, hier, config)
    assert not prep.checker.class_judge.judges_sums
    level = tuple(prep.lattice.node_levels(0))
    with backend_for("dask", prep.grouper, WORKERS, client=client):
        prep.checker.evaluate(level)
    assert prep.grouper.remembers(level)


def test_a_node_judged_elsewhere_leaves_the_snapshots_as_grouping_here_would():
    """`passed_over` evicts what `remember` would have evicted for a table too large to keep, so
    later roll-ups (and the search's counters) are those of grouping every node in the driver."""
    here = _sizes_only_grouper(5, 4000)
    there = Grouper([here.qi_column(i) for i in range(here.n_qis)], here.code_maps)
    top = tuple(m.shape[0] - 1 for m in here.code_maps)
    bottom = tuple(0 for _ in here.code_maps)
    for g in (here, there):
        kept, _ = g.classes(top)  # a small snapshot, stored
        g.history_budget = kept.count + 1  # the next large table evicts it but is not kept
    fine = here.group_rows(bottom)
    assert here.history_budget < fine.count <= here.snapshot_limit
    here.remember(fine)
    there.passed_over(bottom, fine.count)
    assert not here.remembers(top) and not there.remembers(top)
    assert not here.remembers(bottom) and not there.remembers(bottom)
    assert there.row_groupings == 2  # the top node here, the bottom one elsewhere: counted as a row grouping
