"""Row groupings in worker processes (`engine/parallel_grouping.py`) equal the single-process ones.

The single-process `Grouper.group_rows` is the reference: for random tables (dense and
sparse sensitive statistics, a research subset) and for ADULT, the merged class tables
must be equal field by field (codes, sizes, histograms, sparse entries in the same
order, subset counts), and whole searches -- with suppression, ℓ-diversity and
t-closeness -- must find the same node with the same checks, loss, suppressed rows
and output. The merge itself is checked against a class table summed by hand, so a
merge that drops, duplicates or mis-orders classes fails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedanon.engine.check.backends import processes as parallel_grouping
from fedanon.cli import main
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, LDiversity, TCloseness, anonymize
from fedanon.engine.anonymizer import prepare, search_and_apply
from fedanon.stats.classhist import SparseHistogram
from fedanon.stats.classes import ClassStats
from fedanon.data.io.delimited import read_columns
from fedanon.stats.classes import Classes
from fedanon.engine.check.grouping import Grouper
from fedanon.engine.check.backends.processes import (AUTO_MIN_ROWS, merge_partition_classes, parallel_rows,
                                              resolve_workers)
from fedanon.errors import InputError

from datasets import ADULT_DIR as ADULT
ADULT_QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "salary-class"]


@pytest.fixture(autouse=True)
def every_node_to_the_workers(monkeypatch, request):
    """The equality tests send every node to the workers, fine ones (large merges) too;
    the test of the default rule keeps it."""
    if "default_share" not in request.keywords:
        monkeypatch.setattr(parallel_grouping, "MERGE_SPAN_SHARE", math.inf)


def assert_same_classes(got: Classes, want: Classes) -> None:
    assert got.levels == want.levels and got.count == want.count
    assert got.codes.dtype == want.codes.dtype and np.array_equal(got.codes, want.codes)
    assert got.stats.sizes.dtype == want.stats.sizes.dtype and np.array_equal(got.stats.sizes, want.stats.sizes)
    assert (got.stats.subset_sizes is None) == (want.stats.subset_sizes is None)
    if want.stats.subset_sizes is not None:
        assert np.array_equal(got.stats.subset_sizes, want.stats.subset_sizes)
    assert set(got.stats.histograms) == set(want.stats.histograms)
    for attr, w in want.stats.histograms.items():
        g = got.stats.histograms[attr]
        assert type(g) is type(w), attr
        if isinstance(w, SparseHistogram):
            assert (g.n_classes, g.domain) == (w.n_classes, w.domain)
            for field in ("cls", "value", "count"):  # same entries in the same order
                assert np.array_equal(getattr(g, field), getattr(w, field)), (attr, field)
            assert g.saturate_at == w.saturate_at and (g.saturated is None) == (w.saturated is None), attr
            if w.saturated is not None:  # the same classes forgotten
                assert np.array_equal(g.saturated, w.saturated), attr
        else:
            assert g.dtype == w.dtype and np.array_equal(g, w), attr


def test_merge_sums_classes_shared_by_partitions():
    """Two partitions of a 2-QI node, class (1, 0) in both: computed by hand."""
    a = (np.array([[0, 1], [1, 0]], dtype=np.int32),
         ClassStats(np.array([2, 3]), {"d": np.array([[2, 0], [1, 2]])}, np.array([1, 0])))
    b = (np.array([[1, 0], [2, 2]], dtype=np.int32),
         ClassStats(np.array([4, 1]), {"d": np.array([[0, 4], [1, 0]])}, np.array([2, 1])))
    merged = merge_partition_classes((0, 0), [a, b], [3, 3])
    assert merged.codes.tolist() == [[0, 1], [1, 0], [2, 2]]  # ascending key = single-process order
    assert merged.stats.sizes.tolist() == [2, 7, 1]
    assert merged.stats.histograms["d"].tolist() == [[2, 0], [1, 6], [1, 0]]
    assert merged.stats.subset_sizes.tolist() == [1, 2, 1]


def test_merge_sums_sparse_entries_sorted():
    sa = SparseHistogram(np.array([0, 0, 1]), np.array([3, 7, 3]), np.array([1, 2, 3]), 2, 10)
    sb = SparseHistogram(np.array([0, 1]), np.array([3, 1]), np.array([4, 5]), 2, 10)
    a = (np.array([[5], [2]], dtype=np.int32), ClassStats(np.array([3, 3]), {"s": sa}))
    b = (np.array([[2], [9]], dtype=np.int32), ClassStats(np.array([4, 5]), {"s": sb}))
    merged = merge_partition_classes((0,), [a, b], [10])
    h = merged.stats.histograms["s"]
    assert merged.codes.ravel().tolist() == [2, 5, 9] and merged.stats.sizes.tolist() == [7, 3, 5]
    # class 2 = a's class 1 (value 3: 3) + b's class 0 (value 3: 4); class 5 = a's class 0; class 9 = b's class 1
    assert list(zip(h.cls.tolist(), h.value.tolist(), h.count.tolist())) == [(0, 3, 7), (1, 3, 1), (1, 7, 2),
                                                                             (2, 1, 5)]


def test_merge_saturates_classes_whose_parts_are_not():
    """Distinct-3 saturation: class 4 has 2 distinct values in each partition but 3 merged, so it is
    saturated only in the merged table; class 6 is saturated in one partition (its other part's
    entries go); class 8 stays below 3 and keeps exact summed entries. Computed by hand."""
    sa = SparseHistogram(np.array([0, 0, 2]), np.array([1, 2, 0]), np.array([1, 1, 1]), 3, 10,
                         saturate_at=3, saturated=np.array([False, True, False]))
    sb = SparseHistogram(np.array([0, 0, 1, 2]), np.array([2, 3, 9, 0]), np.array([2, 1, 1, 4]), 3, 10,
                         saturate_at=3, saturated=np.array([False, False, False]))
    a = (np.array([[4], [6], [8]], dtype=np.int32), ClassStats(np.array([2, 5, 1]), {"s": sa}))
    b = (np.array([[4], [6], [8]], dtype=np.int32), ClassStats(np.array([3, 1, 4]), {"s": sb}))
    merged = merge_partition_classes((0,), [a, b], [10])
    h = merged.stats.histograms["s"]
    assert merged.codes.ravel().tolist() == [4, 6, 8] and merged.stats.sizes.tolist() == [5, 6, 5]
    assert h.saturate_at == 3 and h.saturated.tolist() == [True, True, False]
    assert list(zip(h.cls.tolist(), h.value.tolist(), h.count.tolist())) == [(2, 0, 5)]
    assert h.distinct().tolist() == [3, 3, 1]


def _random_grouper(seed: int, n: int, saturation: dict[str, int] | None = None) -> Grouper:
    rng = np.random.default_rng(seed)
    sizes = [2, 9, 30, 5]
    columns = [rng.integers(0, s, n).astype(np.int32) for s in sizes]
    code_maps = []
    for s in sizes:  # level l merges 2^l neighbouring values, top level: one value
        levels = [np.arange(s) >> l for l in range(max(1, (s - 1).bit_length()))] + [np.zeros(s, dtype=np.int64)]
        code_maps.append(np.array(levels, dtype=np.int32))
    sensitive = {"small": rng.integers(0, 6, n), "large": rng.integers(0, 200, n)}
    return Grouper(columns, code_maps, sensitive, {"small": 6, "large": 200}, rng.random(n) < 0.4,
                   saturation=saturation)


@pytest.mark.parametrize("seed,n,workers,saturation", [(1, 5000, 2, None), (2, 777, 3, None),
                                                       (3, 4000, 2, {"large": 4}), (4, 900, 3, {"large": 2})])
def test_random_tables_every_sampled_node_equal(seed, n, workers, saturation):
    """Saturated statistics too: partitions forget classes early, the merge must still
    flag exactly the classes one process flags and keep the others' exact entries."""
    grouper = _random_grouper(seed, n, saturation)
    assert "large" in grouper.sparse and "small" not in grouper.sparse  # both statistic kinds exercised
    rng = np.random.default_rng(seed)
    nodes = {tuple(0 for _ in grouper.code_maps), tuple(m.shape[0] - 1 for m in grouper.code_maps)}
    nodes |= {tuple(int(rng.integers(0, m.shape[0])) for m in grouper.code_maps) for _ in range(12)}
    want = {lv: grouper.group_rows(lv) for lv in nodes}
    with parallel_rows(grouper, workers) as pool:
        assert pool is not None and pool.workers == workers
        got = {lv: grouper.group_rows(lv) for lv in nodes}
        rows_kept = grouper.group_rows(next(iter(nodes)), keep_rows=True)  # materialization stays local
        assert pool.groupings == len(nodes)
    assert grouper.row_partitions is None
    assert rows_kept.row_class is not None
    for lv in nodes:
        assert_same_classes(got[lv], want[lv])
    if saturation:  # the sampled nodes have classes of both kinds (else the case tests nothing)
        flags = np.concatenate([want[lv].stats.histograms["large"].saturated for lv in nodes])
        assert flags.any() and not flags.all()


@pytest.mark.default_share
def test_fine_nodes_stay_in_the_owning_process_and_coarse_ones_go_to_the_workers():
    """By default a node goes to the workers only where workers x key span <= a quarter of the
    rows (the merge stays small); on a table with per-class histograms (no shuffle) every
    other node is grouped by the owner, with equal results."""
    assert parallel_grouping.MERGE_SPAN_SHARE == 0.25
    grouper = _random_grouper(5, 4000)
    top = tuple(m.shape[0] - 1 for m in grouper.code_maps)
    bottom = tuple(0 for _ in grouper.code_maps)  # span 2 * 9 * 30 * 5 = 2,700: 2 x 2,700 > 1,000
    coarse = tuple(max(0, t - 1) for t in top)
    spans = {lv: int(np.prod([grouper.level_sizes[i][l] for i, l in enumerate(lv)])) for lv in (top, bottom, coarse)}
    assert 2 * spans[coarse] <= 1000 < 2 * spans[bottom]
    want = {lv: grouper.group_rows(lv) for lv in spans}
    with parallel_rows(grouper, 2) as pool:
        assert [pool.takes(lv) for lv in (top, coarse, bottom)] == [True, True, False]
        got = {lv: grouper.group_rows(lv) for lv in spans}
        assert pool.groupings == 2  # top and coarse; the bottom node was grouped here
    for lv in spans:
        assert_same_classes(got[lv], want[lv])


def _sizes_only_grouper(seed: int, n: int) -> Grouper:
    """No sensitive attribute, no research subset: class sizes are the only statistic."""
    g = _random_grouper(seed, n)
    return Grouper([g.qi_column(i) for i in range(g.n_qis)], g.code_maps)


@pytest.mark.parametrize("seed,n,workers", [(11, 6000, 2), (12, 2500, 3), (13, 900, 4)])
def test_shuffle_gives_the_classes_of_one_process(seed, n, workers, monkeypatch):
    """Every node grouped by the shuffle (no node counts as a small merge): classes, codes and
    sizes equal to one process's, in the same order, across key ranges of any fill."""
    monkeypatch.setattr(parallel_grouping, "MERGE_SPAN_SHARE", 0.0)
    grouper = _sizes_only_grouper(seed, n)
    rng = np.random.default_rng(seed)
    nodes = {tuple(0 for _ in grouper.code_maps), tuple(m.shape[0] - 1 for m in grouper.code_maps)}
    nodes |= {tuple(int(rng.integers(0, m.shape[0])) for m in grouper.code_maps) for _ in range(15)}
    want = {lv: grouper.group_rows(lv) for lv in nodes}
    with parallel_rows(grouper, workers) as pool:
        assert pool.can_shuffle and all(pool.takes(lv) for lv in nodes)
        got = {lv: grouper.group_rows(lv) for lv in nodes}
        assert pool.shuffles == len(nodes)
    for lv in nodes:
        assert_same_classes(got[lv], want[lv])


def test_no_shuffle_with_sensitive_statistics():
    """Per-class histograms cannot be shuffled as (key, size) rows: such a table keeps the merge."""
    with parallel_rows(_random_grouper(5, 4000), 2) as pool:
        assert not pool.can_shuffle


def _adult_table() -> tuple[EncodedTable, dict[str, Hierarchy]]:
    columns = ADULT_QIS + ["occupation"]
    table = read_columns(ADULT / "adult.csv").select(columns).encoded()
    hier = {a: Hierarchy.read_csv(ADULT / f"adult_hierarchy_{a}.csv", a) for a in columns}
    return table, hier


SEARCHES = {
    "k5-supp": AnonymizationConfig(ADULT_QIS, k=5, suppression=0.05),
    "distinct-l-supp": AnonymizationConfig(ADULT_QIS[:6], k=2, suppression=0.04,
                                           l_diversity=LDiversity("distinct", 3, "occupation")),
    "distinct-l-sparse-saturated": AnonymizationConfig(ADULT_QIS[:6], k=1, suppression=0.03,
                                                       l_diversity=LDiversity("distinct", 4, "occupation")),
    "t-hier-loss": AnonymizationConfig(ADULT_QIS[:6], k=1, suppression=0.02, metric="loss",
                                       t_closeness=TCloseness(0.2, "hierarchical", "occupation")),
}


@pytest.mark.parametrize("share", [math.inf, 0.0])  # every node merged, or every sizes-only node shuffled
def test_adult_k_search_with_suppression_equal_merged_or_shuffled(share, monkeypatch):
    monkeypatch.setattr(parallel_grouping, "MERGE_SPAN_SHARE", share)
    table, hier = _adult_table()
    config = SEARCHES["k5-supp"]
    table = table.select(list(config.quasi_identifiers))
    prep_one, prep_two = prepare(table, hier, config), prepare(table, hier, config)
    want = search_and_apply(prep_one, prep_one.checker)
    with parallel_rows(prep_two.grouper, 3) as pool:
        got = search_and_apply(prep_two, prep_two.checker)
        assert (pool.shuffles > 0) == (share == 0.0) and pool.groupings > 0
    assert (got.transformation, got.information_loss, got.checks, got.rollups, got.classes,
            got.suppressed_rows) == (want.transformation, want.information_loss, want.checks, want.rollups,
                                     want.classes, want.suppressed_rows)
    assert np.array_equal(got.suppressed, want.suppressed) and np.array_equal(got.output.codes, want.output.codes)


@pytest.mark.parametrize("name", list(SEARCHES))
def test_adult_searches_equal_with_two_workers(name):
    table, hier = _adult_table()
    config = SEARCHES[name]
    columns = list(config.quasi_identifiers) + ["occupation"]
    table = table.select(columns)
    prep_one, prep_two = prepare(table, hier, config), prepare(table, hier, config)
    if name in ("t-hier-loss", "distinct-l-sparse-saturated"):
        # force sparse statistics for occupation (14 values) to merge those too (saturated ones for distinct-ℓ)
        for g in (prep_one.grouper, prep_two.grouper):
            g.sparse = {"occupation"}
        assert prep_two.grouper.saturation == ({"occupation": 4} if name.startswith("distinct") else {})
    want = search_and_apply(prep_one, prep_one.checker)
    with parallel_rows(prep_two.grouper, 2) as pool:
        got = search_and_apply(prep_two, prep_two.checker)
        assert pool.groupings > 0
    assert got.transformation == want.transformation
    assert (got.information_loss, got.checks, got.rollups, got.classes, got.suppressed_rows) == \
        (want.information_loss, want.checks, want.rollups, want.classes, want.suppressed_rows)
    assert got.extra["row_groupings"] == want.extra["row_groupings"]
    assert np.array_equal(got.suppressed, want.suppressed)
    assert np.array_equal(got.output.codes, want.output.codes) and got.output.dictionaries == want.output.dictionaries


def test_anonymize_workers_argument_gives_the_same_result():
    table, hier = _adult_table()
    config = AnonymizationConfig(ADULT_QIS, k=10, suppression=0.02, metric="discernibility")
    table = table.select(ADULT_QIS)
    one, two = anonymize(table, hier, config), anonymize(table, hier, config, workers=2)
    assert (one.extra["workers"], two.extra["workers"]) == (1, 2)
    assert (two.transformation, two.information_loss, two.checks) == (one.transformation, one.information_loss,
                                                                      one.checks)
    assert np.array_equal(two.suppressed, one.suppressed)


def test_cli_workers_writes_the_same_file(tmp_path, capsys):
    qis = ADULT_QIS[:5]
    base = ["anonymize", str(ADULT / "adult.csv"), "-q", "--k", "5", "--suppression", "0.05"]
    for a in qis:
        base += ["--qi", f"{a}={ADULT / f'adult_hierarchy_{a}.csv'}"]
    for w in ("1", "2"):
        assert main(base + ["-o", str(tmp_path / f"out{w}.csv"), "--workers", w]) == 0
    assert (tmp_path / "out1.csv").read_bytes() == (tmp_path / "out2.csv").read_bytes()
    for bad in ("0", "two", "-3"):
        code = main(base + ["-o", str(tmp_path / "bad.csv"), "--workers", bad])
        _, err = capsys.readouterr()
        assert code == 2 and "--workers" in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "bad.csv").exists()


def test_resolve_workers():
    assert resolve_workers("auto", AUTO_MIN_ROWS - 1) == 1
    assert resolve_workers("auto", AUTO_MIN_ROWS) >= 1
    assert resolve_workers("3", 10) == 3 and resolve_workers(2, 10) == 2
    with pytest.raises(InputError):
        resolve_workers("0", 10)


def test_merge_of_disjoint_partitions_sorts_sparse_entries():
    """No class in two partitions (a pure renumbering): entries still come out by (class, value)."""
    sa = SparseHistogram(np.array([0, 0]), np.array([1, 4]), np.array([1, 1]), 1, 5)
    sb = SparseHistogram(np.array([0]), np.array([2]), np.array([3]), 1, 5)
    a = (np.array([[7]], dtype=np.int32), ClassStats(np.array([2]), {"s": sa}))
    b = (np.array([[3]], dtype=np.int32), ClassStats(np.array([3]), {"s": sb}))
    merged = merge_partition_classes((0,), [a, b], [8])
    h = merged.stats.histograms["s"]
    assert merged.codes.ravel().tolist() == [3, 7]
    assert list(zip(h.cls.tolist(), h.value.tolist(), h.count.tolist())) == [(0, 2, 3), (1, 1, 1), (1, 4, 1)]
