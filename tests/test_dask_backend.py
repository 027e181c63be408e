"""The Dask backend (`engine/check/backends/dask.py`) gives the optimum of the default backend.

A local Dask cluster of 2 worker processes on loopback is started by this module and
stopped at its end. The reference is the grouper without any backend: for random tables
(dense and sparse sensitive statistics, saturation, a research subset) every sampled node's
class table must be equal field by field, by merge and by the key-range shuffle; whole
searches on ADULT (suppression, l-diversity, t-closeness) and on random tables with random
hierarchies (every registered metric) must find the same node with the same checks, loss,
suppressed rows and output. The command line must write the same file with `--backend dask`
and reject a bad backend or a scheduler without it in one line.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")

import pyarrow as pa  # noqa: E402
import pyarrow.csv as pacsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from fedanon.cli import main  # noqa: E402
from fedanon.data.io.parquet_parts import plan_partitions, read_partition, unify_dictionaries  # noqa: E402
from fedanon.engine import AnonymizationConfig, Hierarchy, anonymize  # noqa: E402
from fedanon.engine.partitioned import anonymize_partitioned  # noqa: E402
from fedanon.errors import HierarchyError, InputError  # noqa: E402
from fedanon.engine.anonymizer import prepare, search_and_apply  # noqa: E402
from fedanon.engine.check.backends import processes  # noqa: E402
from fedanon.engine.check.backends.base import backend_for, backends  # noqa: E402
from fedanon.model.metrics.registry import METRICS  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from dask_cluster import loopback_cluster  # noqa: E402
from engine_strategies import instances  # noqa: E402
from test_parallel_grouping import (ADULT, ADULT_QIS, SEARCHES, _adult_table, _random_grouper,  # noqa: E402
                                    _sizes_only_grouper, assert_same_classes)

WORKERS = 2


@pytest.fixture(scope="module")
def cluster():
    """A local cluster on loopback for this module: (scheduler address, client)."""
    with loopback_cluster(WORKERS) as cluster:
        yield cluster


@pytest.fixture
def every_node(monkeypatch):
    """Every node to the workers by merging (fine nodes too, not only the small merges)."""
    monkeypatch.setattr(processes, "MERGE_SPAN_SHARE", math.inf)


def test_both_backends_are_registered():
    assert {"processes", "dask"} <= set(backends())


def _sampled_nodes(grouper, seed: int, count: int) -> set[tuple[int, ...]]:
    rng = np.random.default_rng(seed)
    nodes = {tuple(0 for _ in grouper.code_maps), tuple(m.shape[0] - 1 for m in grouper.code_maps)}
    return nodes | {tuple(int(rng.integers(0, m.shape[0])) for m in grouper.code_maps) for _ in range(count)}


@pytest.mark.parametrize("seed,n,saturation", [(1, 5000, None), (3, 4000, {"large": 4})])
def test_random_tables_every_sampled_node_equal(seed, n, saturation, cluster, every_node):
    grouper = _random_grouper(seed, n, saturation)
    nodes = _sampled_nodes(grouper, seed, 10)
    want = {lv: grouper.group_rows(lv) for lv in nodes}
    with backend_for("dask", grouper, WORKERS, client=cluster[1]) as pool:
        assert pool.workers == WORKERS and not pool.can_shuffle
        got = {lv: grouper.group_rows(lv) for lv in nodes}
        kept = grouper.group_rows(next(iter(nodes)), keep_rows=True)  # materialization stays in the driver
        assert pool.groupings == len(nodes)
    assert grouper.row_partitions is None and kept.row_class is not None
    for lv in nodes:
        assert_same_classes(got[lv], want[lv])


def test_shuffle_gives_the_classes_of_one_process(cluster, monkeypatch):
    """Sizes only, no node a small merge: every node by the shuffle, in canonical order."""
    monkeypatch.setattr(processes, "MERGE_SPAN_SHARE", 0.0)
    grouper = _sizes_only_grouper(12, 3000)
    nodes = _sampled_nodes(grouper, 12, 10)
    want = {lv: grouper.group_rows(lv) for lv in nodes}
    with backend_for("dask", grouper, WORKERS, scheduler=cluster[0]) as pool:
        assert pool.can_shuffle
        got = {lv: grouper.group_rows(lv) for lv in nodes}
        assert pool.shuffles == len(nodes)
    for lv in nodes:
        assert_same_classes(got[lv], want[lv])


def _scheduler_keys(client) -> set[str]:
    return set(client.run_on_scheduler(lambda dask_scheduler: [str(k) for k in dask_scheduler.tasks]))


def test_closing_releases_the_partitions_without_a_cancel_to_every_client(cluster):
    """The scheduler forgets a closed pool's partitions, and was never asked to cancel them: it reports
    a cancel to every connected client, which breaks the handshake of a client connecting meanwhile."""
    client = cluster[1]
    grouper = _sizes_only_grouper(5, 2000)
    before = _scheduler_keys(client)
    with backend_for("dask", grouper, WORKERS, client=client) as pool:
        grouper.group_rows(tuple(0 for _ in grouper.code_maps))
        held = _scheduler_keys(client) - before
        assert any(k.startswith("fedanon-partition-") for k in held)
        assert pool.parts
    assert not pool.parts
    deadline = time.monotonic() + 20
    while _scheduler_keys(client) & held and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _scheduler_keys(client) & held
    assert not [e for _, e in client.get_events(client.id) if isinstance(e, dict) and e.get("action") == "cancel"]


def _same_result(got, want) -> None:
    assert got.transformation == want.transformation
    assert (got.information_loss, got.checks, got.rollups, got.classes, got.suppressed_rows) == \
        (want.information_loss, want.checks, want.rollups, want.classes, want.suppressed_rows)
    assert np.array_equal(got.suppressed, want.suppressed)
    assert np.array_equal(got.output.codes, want.output.codes) and got.output.dictionaries == want.output.dictionaries


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SEARCHES))
def test_adult_searches_equal(name, cluster, every_node):
    table, hier = _adult_table()
    config = SEARCHES[name]
    table = table.select(list(config.quasi_identifiers) + ["occupation"])
    prep_one, prep_two = prepare(table, hier, config), prepare(table, hier, config)
    if name in ("t-hier-loss", "distinct-l-sparse-saturated"):
        for g in (prep_one.grouper, prep_two.grouper):
            g.sparse = {"occupation"}
    want = search_and_apply(prep_one, prep_one.checker)
    with backend_for("dask", prep_two.grouper, WORKERS, client=cluster[1]) as pool:
        got = search_and_apply(prep_two, prep_two.checker)
        assert pool.groupings > 0
    _same_result(got, want)


@pytest.mark.parametrize("share", [math.inf, pytest.param(0.0, marks=pytest.mark.slow)])  # merged / shuffled
def test_adult_k_search_merged_or_shuffled(share, cluster, monkeypatch):
    monkeypatch.setattr(processes, "MERGE_SPAN_SHARE", share)
    table, hier = _adult_table()
    config = SEARCHES["k5-supp"]
    table = table.select(list(config.quasi_identifiers))
    want = anonymize(table, hier, config)
    got = anonymize(table, hier, config, backend="dask", workers=WORKERS, scheduler=cluster[0])
    assert got.extra["backend"] == "dask" and got.extra["workers"] == WORKERS
    _same_result(got, want)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inst=instances(max_qis=3, max_rows=40), k=st.integers(1, 4), suppression=st.sampled_from([0.0, 0.1, 0.3]),
       metric=st.sampled_from(sorted(METRICS)))
def test_random_tables_same_optimum(inst, k, suppression, metric, cluster, every_node):
    table, hier, names = inst
    config = AnonymizationConfig(names, k=k, suppression=suppression, metric=metric)
    prep_one, prep_two = prepare(table, hier, config), prepare(table, hier, config)
    try:
        want = search_and_apply(prep_one, prep_one.checker)
    except Exception as exc:  # no solution: the Dask search must fail the same way
        with backend_for("dask", prep_two.grouper, WORKERS, client=cluster[1]):
            with pytest.raises(type(exc)):
                search_and_apply(prep_two, prep_two.checker)
        return
    with backend_for("dask", prep_two.grouper, WORKERS, client=cluster[1]):
        got = search_and_apply(prep_two, prep_two.checker)
    _same_result(got, want)


def _cli_base() -> list[str]:
    base = ["anonymize", str(ADULT / "adult.csv"), "-q", "--k", "5", "--suppression", "0.05"]
    for a in ADULT_QIS[:5]:
        base += ["--qi", f"{a}={ADULT / f'adult_hierarchy_{a}.csv'}"]
    return base


def test_cli_dask_scheduler_writes_the_same_file(tmp_path, cluster):
    base = _cli_base()
    assert main(base + ["-o", str(tmp_path / "one.csv")]) == 0
    assert main(base + ["-o", str(tmp_path / "dask.csv"), "--backend", "dask", "--scheduler", cluster[0]]) == 0
    assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "dask.csv").read_bytes()


@pytest.mark.parametrize("flags,named", [(["--backend", "spark"], "spark"),
                                         (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler"),
                                         (["--backend", "dask", "--scheduler", "tcp://127.0.0.1:1"], "--scheduler")])
def test_cli_bad_backend_one_line(flags, named, tmp_path, capsys):
    code = main(_cli_base() + ["-o", str(tmp_path / "bad.csv")] + flags)
    _, err = capsys.readouterr()
    assert code == 2 and named in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "bad.csv").exists()


@pytest.mark.slow
def test_local_cluster_started_and_stopped_by_the_backend(tmp_path):
    """`--backend dask` without a scheduler: a local cluster on loopback for the run, gone after."""
    base = _cli_base()
    assert main(base + ["-o", str(tmp_path / "one.csv")]) == 0
    assert main(base + ["-o", str(tmp_path / "dask.csv"), "--backend", "dask", "--workers", "2"]) == 0
    assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "dask.csv").read_bytes()


# --------------------------------------------------------------------------- Parquet read on the workers
def test_unify_dictionaries_by_first_appearance():
    merged, remaps = unify_dictionaries([[["b", "a"], ["x"]], [["a", "c"], ["y", "x"]]])
    assert merged == [["b", "a", "c"], ["x", "y"]]
    assert [r.tolist() for r in remaps[0]] == [[0, 1], [0]] and [r.tolist() for r in remaps[1]] == [[1, 2], [1, 0]]


def _adult_parquet_dir(tmp_path: Path, columns: list[str]) -> Path:
    """ADULT as 3 Parquet files of several row groups each (rows in file order)."""
    table = pacsv.read_csv(ADULT / "adult.csv", parse_options=pacsv.ParseOptions(delimiter=";"),
                           convert_options=pacsv.ConvertOptions(include_columns=columns))
    folder = tmp_path / "adult"
    folder.mkdir()
    cut = [0, 9000, 21000, table.num_rows]
    for i in range(3):
        pq.write_table(table.slice(cut[i], cut[i + 1] - cut[i]), folder / f"adult-{i}.parquet", row_group_size=2500)
    return folder


def test_partitions_cover_every_row_once_and_encode_like_one_reader(tmp_path):
    columns = ["age", "sex", "occupation"]
    folder = _adult_parquet_dir(tmp_path, columns)
    names, plans = plan_partitions(folder, 3)
    assert names == columns and len(plans) == 3
    whole = pq.read_table(sorted(folder.glob("*.parquet")))
    assert sum(p.rows for p in plans) == whole.num_rows
    assert max(p.rows for p in plans) - min(p.rows for p in plans) <= 2 * 2500  # about equal
    parts = [read_partition(p, columns) for p in plans]
    merged, remaps = unify_dictionaries([p.dictionaries for p in parts])
    for c, name in enumerate(columns):
        codes = np.concatenate([remaps[p][c][part.codes[c]] for p, part in enumerate(parts)])
        assert [merged[c][i] for i in codes] == [str(v).strip() for v in whole.column(name).to_pylist()]
        assert len(set(merged[c])) == len(merged[c])


def _decoded_output(folder: Path) -> dict[str, list[str]]:
    table = pq.read_table(sorted(folder.glob("part-*.parquet")))
    return {name: [str(v) for v in table.column(name).to_pylist()] for name in table.column_names}


@pytest.mark.parametrize("name", ["k5-supp", pytest.param("distinct-l-supp", marks=pytest.mark.slow)])
def test_parquet_read_on_the_workers_same_optimum_and_output(name, tmp_path, cluster):
    """No row in the driver: the search and the output partitions equal the whole-table run's."""
    config = SEARCHES[name]
    columns = list(config.quasi_identifiers) + ["occupation"]
    folder = _adult_parquet_dir(tmp_path, columns)
    table, hier = _adult_table()
    table = table.select(columns)
    want = anonymize(table, hier, config)
    got = anonymize_partitioned(folder, hier, config, tmp_path / "out", columns=columns, client=cluster[1])
    assert got.transformation == want.transformation
    assert (got.information_loss, got.checks, got.classes, got.suppressed_rows, got.rows) == \
        (want.information_loss, want.checks, want.classes, want.suppressed_rows, table.n_rows)
    assert got.extra["groupings_on_workers"] == got.extra["row_groupings"] > 0
    out = _decoded_output(tmp_path / "out")
    for c, column in enumerate(want.output.columns):
        assert out[column] == [want.output.dictionaries[c][i].decode() for i in want.output.codes[:, c]], column


def test_one_partition_answers_without_merge(tmp_path, cluster):
    """A dataset of one row group is one partition on one worker: its classes go back as they are."""
    config = SEARCHES["k5-supp"]
    columns = list(config.quasi_identifiers)
    folder = tmp_path / "one"
    folder.mkdir()
    whole = pacsv.read_csv(ADULT / "adult.csv", parse_options=pacsv.ParseOptions(delimiter=";"),
                           convert_options=pacsv.ConvertOptions(include_columns=columns))
    pq.write_table(whole, folder / "adult.parquet")
    table, hier = _adult_table()
    want = anonymize(table.select(columns), hier, config)
    got = anonymize_partitioned(folder, hier, config, tmp_path / "out", client=cluster[1])
    assert got.extra["partitions"] == 1 and got.extra["shuffles"] == 0
    assert (got.transformation, got.information_loss, got.checks, got.suppressed_rows) == \
        (want.transformation, want.information_loss, want.checks, want.suppressed_rows)


def test_cli_parquet_directory_on_the_workers(tmp_path, cluster, capsys):
    qis = ADULT_QIS[:5]
    folder = _adult_parquet_dir(tmp_path, qis)
    qi = [x for a in qis for x in ("--qi", f"{a}={ADULT / f'adult_hierarchy_{a}.csv'}")]
    base = ["anonymize", "-q", "--k", "5", "--suppression", "0.05", *qi]
    assert main(base + [str(ADULT / "adult.csv"), "-o", str(tmp_path / "one.csv"), "--report",
                        str(tmp_path / "one.json")]) == 0
    assert main(base + [str(folder), "-o", str(tmp_path / "out"), "--report", str(tmp_path / "dask.json"),
                        "--backend", "dask", "--scheduler", cluster[0]]) == 0
    one, dask_ = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "dask"))
    assert (dask_["transformation"], dask_["suppressed_rows"], dask_["information_loss"]) == \
        (one["transformation"], one["suppressed_rows"], one["information_loss"])
    assert dask_["rows_written"] == one["rows_written"] and len(dask_["output_files"]) == WORKERS
    code = main(base + [str(folder), "-o", str(tmp_path / "v"), "--verify", "--backend", "dask",
                        "--scheduler", cluster[0]])
    _, err = capsys.readouterr()
    assert code == 2 and "--verify" in err and len(err.strip().splitlines()) == 1


def test_parquet_value_missing_from_hierarchy_one_line(tmp_path, cluster):
    folder = tmp_path / "bad"
    folder.mkdir()
    pq.write_table(pa.table({"sex": ["Male", "Female", "Other"]}), folder / "a.parquet")
    hier = {"sex": Hierarchy.read_csv(ADULT / "adult_hierarchy_sex.csv", "sex")}
    with pytest.raises(HierarchyError, match="'Other' of column 'sex'"):
        anonymize_partitioned(folder, hier, AnonymizationConfig(["sex"], k=1), tmp_path / "out", client=cluster[1])


def test_missing_cell_named_by_file_and_row(tmp_path):
    """A null in the second row group of the second file: the error names that file and its row
    (7 rows in 3 row groups cut in two: a group goes where its first row falls, 0-3 | 5)."""
    folder = tmp_path / "nulls"
    folder.mkdir()
    pq.write_table(pa.table({"a": ["x", "y", "z"]}), folder / "1.parquet")
    pq.write_table(pa.table({"a": ["x", "y", "z", None]}), folder / "2.parquet", row_group_size=2)
    _, plans = plan_partitions(folder, 2)
    assert [[(Path(p.path).name, p.groups) for p in plan.pieces] for plan in plans] == \
        [[("1.parquet", [0]), ("2.parquet", [0])], [("2.parquet", [1])]]
    read_partition(plans[0], ["a"])
    with pytest.raises(InputError, match=r"2\.parquet, row 4: column 'a' has a missing value"):
        read_partition(plans[1], ["a"])
