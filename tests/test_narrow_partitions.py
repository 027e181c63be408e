"""The backends' row partitions hold level-0 QI codes in the narrowest unsigned type, and group exactly.

A worker's partition is most of its memory at scale, so its QI codes are 1 byte a row for a
dictionary of up to 256 values and 2 up to 65,536, not the table's int32 4. Checked on what
the partitions report holding (a regression to int32 fails), for the process backend's
shared memory, the Dask backend's sent partitions and a Parquet partition read on a worker.
Narrow codes must never narrow the arithmetic: a column of 300 values (uint16) beside
columns of exactly 256 and of 7 values (uint8) makes a key computed in uint8 (code x radix)
wrap and merge distinct classes, so every node's classes are compared with an independent
reference: `np.unique` over the rows' generalized codes in int64.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from fedanon.data.io.parquet_parts import plan_partitions, read_partition, unify_dictionaries
from fedanon.engine.check.backends import processes
from fedanon.engine.check.backends.dask import GroupingSetup, held_arrays
from fedanon.engine.check.backends.processes import level0_part, parallel_rows
from fedanon.engine.check.grouping import Grouper

SIZES = [300, 256, 7]  # uint16, uint8 at its limit, uint8
WANT = ["<u2", "|u1", "|u1"]


def _code_maps(sizes: list[int]) -> list[np.ndarray]:
    """Level l merges 2^l neighbouring values; a top level of one value."""
    maps = []
    for s in sizes:
        levels = [np.arange(s) >> l for l in range(max(1, (s - 1).bit_length()))] + [np.zeros(s, dtype=np.int64)]
        maps.append(np.array(levels, dtype=np.int32))
    return maps


def _table(n: int, seed: int = 7) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """int32 columns using every value of each dictionary (the largest code occurs)."""
    rng = np.random.default_rng(seed)
    columns = []
    for s in SIZES:
        col = rng.integers(0, s, n).astype(np.int32)
        col[:s] = np.arange(s)
        rng.shuffle(col)
        columns.append(col)
    return columns, _code_maps(SIZES)


def _reference(columns: list[np.ndarray], code_maps: list[np.ndarray],
               levels: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(class codes, sizes) in ascending lexicographic (= mixed-radix key) order, all in int64."""
    rows = np.stack([cm[l].astype(np.int64)[c.astype(np.int64)] for c, cm, l in zip(columns, code_maps, levels)],
                    axis=1)
    codes, sizes = np.unique(rows, axis=0, return_counts=True)
    return codes, sizes


def _nodes(code_maps: list[np.ndarray]) -> list[tuple[int, ...]]:
    """The finest node (the widest keys), the top, and a few between."""
    return [(0, 0, 0), (0, 1, 0), (1, 0, 0), (0, 0, 2), (2, 3, 1), tuple(m.shape[0] - 1 for m in code_maps)]


def _assert_reference(grouper: Grouper, columns: list[np.ndarray], code_maps: list[np.ndarray]) -> None:
    for levels in _nodes(code_maps):
        classes = grouper.group_rows(levels)
        codes, sizes = _reference(columns, code_maps, levels)
        assert classes.codes.tolist() == codes.tolist(), levels
        assert classes.stats.sizes.tolist() == sizes.tolist(), levels


def test_level0_part_narrowest_type_of_the_dictionary():
    columns, code_maps = _table(1000)
    grouper = Grouper(columns, code_maps)
    parts = [level0_part(grouper, i, 100, 600) for i in range(len(SIZES))]
    assert [p.dtype.str for p in parts] == WANT
    assert all(np.array_equal(p, c[100:600]) for p, c in zip(parts, columns))
    big = Grouper([np.arange(70_000, dtype=np.int32)], _code_maps([70_000]))
    assert level0_part(big, 0, 0, 10).dtype == np.uint32  # past 65,536 values


def test_grouper_on_narrow_columns_keeps_them_and_groups_exactly():
    """A grouper over narrow level-0 columns (a worker's) uses them as they are and finds the
    reference's classes at every node, the finest (span 300 x 256 x 7) included."""
    columns, code_maps = _table(6000)
    narrow = [level0_part(Grouper(columns, code_maps), i, 0, 6000) for i in range(len(SIZES))]
    grouper = Grouper(narrow, code_maps)
    assert [grouper.qi_column(i).dtype.str for i in range(len(SIZES))] == WANT
    assert all(grouper.qi_column(i) is narrow[i] for i in range(len(SIZES)))  # not copied
    _assert_reference(grouper, columns, code_maps)


@pytest.mark.parametrize("share", [math.inf, 0.0])  # every node merged / every node shuffled
def test_process_partitions_narrow_and_exact(share, monkeypatch):
    monkeypatch.setattr(processes, "MERGE_SPAN_SHARE", share)
    columns, code_maps = _table(6000)
    grouper = Grouper(columns, code_maps)
    with parallel_rows(grouper, 3) as pool:
        assert pool is not None
        held = pool.held_arrays()
        assert len(held) == 2  # the two worker processes' partitions (the owner's is its table)
        for part in held:
            assert [part[f"qi{i}"][0] for i in range(len(SIZES))] == WANT
            assert sum(b for _, b in part.values()) == 2 * 2000 + 2000 + 2000  # 4 bytes a row, not 12
        _assert_reference(grouper, columns, code_maps)
        assert pool.groupings == len(_nodes(code_maps))
        assert (pool.shuffles > 0) == (share == 0.0)


def test_parquet_partition_read_on_a_worker_holds_narrow_codes(tmp_path: Path):
    """`build_read_partition`: global QI codes narrow (from the narrowed remap), local QI codes
    dropped (the output writes QIs from the generalized codes), other columns' kept as read."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from fedanon.engine.check.backends.dask_tables import ColumnRoles, build_read_partition

    columns, code_maps = _table(4000)
    names = ["wide", "byte", "few", "other"]
    other = np.random.default_rng(3).integers(0, 5, 4000)
    folder = tmp_path / "t"
    folder.mkdir()
    for f, (lo, hi) in enumerate([(0, 1500), (1500, 4000)]):
        pq.write_table(pa.table({n: [f"v{x}" for x in c[lo:hi]] for n, c in zip(names, columns + [other])}),
                       folder / f"{f}.parquet", row_group_size=700)
    _, plans = plan_partitions(folder, 2)
    locals_ = [read_partition(plan, names) for plan in plans]
    dictionaries, remaps = unify_dictionaries([local.dictionaries for local in locals_])
    assert [len(d) for d in dictionaries[:3]] == SIZES
    # the code maps over the unified dictionaries' codes: level 0 the value itself
    values = [np.array([int(v[1:]) for v in d]) for d in dictionaries[:3]]
    maps = [cm[:, v].astype(np.int32) for cm, v in zip(code_maps, values)]
    setup = GroupingSetup(maps, {}, set(), {}, 8)
    roles = ColumnRoles([0, 1, 2], {})
    global_codes = [[], [], []]
    for p, local in enumerate(locals_):
        part = build_read_partition(local, remaps[p], roles, setup)
        held = held_arrays(part)
        assert [held[f"qi{i}"][0] for i in range(3)] == WANT
        assert sorted(held) == ["qi0", "qi1", "qi2", "source3"]  # no local QI codes kept
        assert held["source3"][0] == "|u1"
        for i in range(3):
            global_codes[i].append(values[i][part.grouper.qi_column(i)])
        rows = part.grouper.n_rows
        levels = (0, 0, 0)
        want = _reference([np.concatenate(g)[-rows:] for g in global_codes], code_maps, levels)
        got = part.grouper.group_rows(levels)
        assert got.stats.sizes.tolist() == want[1].tolist()
        assert got.codes.tolist() == want[0].tolist()  # level-0 class codes: the values themselves
    assert [np.concatenate(g).tolist() for g in global_codes] == [c.tolist() for c in columns]


def test_dask_partitions_narrow_and_exact(monkeypatch):
    pytest.importorskip("distributed")
    from dask_cluster import loopback_cluster
    from fedanon.engine.check.backends.dask import dask_rows

    monkeypatch.setattr(processes, "MERGE_SPAN_SHARE", math.inf)
    columns, code_maps = _table(5000)
    grouper = Grouper(columns, code_maps)
    with loopback_cluster(2) as (_, client):
        with dask_rows(grouper, 2, client=client) as pool:
            held = pool.held_arrays()
            assert len(held) == 2
            for part in held:
                assert [part[f"qi{i}"][0] for i in range(len(SIZES))] == WANT
                assert sum(b for _, b in part.values()) == 4 * 2500
            _assert_reference(grouper, columns, code_maps)
            assert pool.groupings == len(_nodes(code_maps))


def test_research_subset_flags_one_byte_a_row_and_counted_exactly(monkeypatch):
    """The research subset's flags travel and stay as booleans (not int64, 8 bytes a row); the
    subset counts per class equal the reference's."""
    monkeypatch.setattr(processes, "MERGE_SPAN_SHARE", math.inf)
    columns, code_maps = _table(3000)
    flags = np.random.default_rng(5).random(3000) < 0.3
    grouper = Grouper(columns, code_maps, subset=flags)
    assert grouper.subset.dtype == np.bool_
    with parallel_rows(grouper, 2) as pool:
        assert pool.held_arrays()[0]["subset"] == ("|b1", 1500)
        levels = (1, 2, 0)
        got = grouper.group_rows(levels)
        assert pool.groupings == 1
    rows = np.stack([cm[l].astype(np.int64)[c] for c, cm, l in zip(columns, code_maps, levels)], axis=1)
    codes, inverse = np.unique(rows, axis=0, return_inverse=True)
    assert got.codes.tolist() == codes.tolist()
    assert got.stats.subset_sizes.tolist() == np.bincount(inverse.ravel()[flags], minlength=len(codes)).tolist()
