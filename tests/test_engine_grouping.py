"""Grouping paths of engine/grouping.py against an independent reference.

The grouper picks one of several ways to group rows (counting in blocks, counting
with a dense renumbering, one sort, a sort after compacting an overflowing key) and
rolls up from stored snapshots. Every path must give the same classes in the same
canonical order: ascending mixed-radix key, i.e. lexicographic order of the class's
generalized code tuple (QI 0 most significant). The reference here groups plain
Python tuples in a dict and sorts them -- no code shared with the engine.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fedanon.engine.check import grouping
from fedanon.engine.check.checker import ClassJudge
from fedanon.model.criterion import CriterionContext, KAnonymity
from fedanon.model.metrics.base import MetricContext
from fedanon.model.metrics.registry import build_metric
from fedanon.stats import classes as classes_module
from fedanon.stats import keys as keymath
from fedanon.engine.check.grouping import Grouper
from fedanon.stats.keys import combined_key, count_keys, gather, group_key, key_dtype, mixed_radix_digits
from fedanon.engine.search.lattice import Lattice


def reference_groups(keys: np.ndarray) -> tuple[list[int], list[int]]:
    """(sorted distinct keys, group id per key) by a dict and sorted()."""
    distinct = sorted(set(int(k) for k in keys.tolist()))
    pos = {k: i for i, k in enumerate(distinct)}
    return distinct, [pos[int(k)] for k in keys.tolist()]


KEY_CASES = [
    ("one row", np.array([0]), 1),
    ("all equal", np.full(50, 7), 8),
    ("span one", np.zeros(20, dtype=np.int64), 1),
    ("top of span", np.array([0, 9, 9, 3, 0, 9]), 10),
    ("dense small", np.random.default_rng(1).integers(0, 30, 500), 30),
    ("sparse wide (sort path)", np.random.default_rng(2).integers(0, 1 << 40, 300), 1 << 40),
    ("near 62 bits (argsort path)", np.random.default_rng(3).integers(0, 1 << 61, 200), 1 << 61),
    ("many duplicates wide", np.random.default_rng(4).choice([5, 1 << 33, 12345678901], 400), (1 << 33) + 1),
]


@pytest.mark.parametrize("name,keys,span", KEY_CASES, ids=[c[0] for c in KEY_CASES])
def test_group_key_counting_and_sorting_equal_reference(name, keys, span):
    distinct, ids = reference_groups(keys)
    first, inverse = group_key(keys.astype(np.int64), span)
    assert inverse.tolist() == ids
    assert keys[first].tolist() == distinct
    if span <= keymath.counting_span(keys.shape[0]):
        present, inv2 = count_keys(keys.astype(key_dtype(span)) if span <= 1 << 32 else keys, span)
        assert present.tolist() == distinct and inv2.tolist() == ids


def test_counting_and_sorting_agree_on_the_same_keys(monkeypatch):
    """Force both paths on identical random keys (the choice is by span only)."""
    rng = np.random.default_rng(5)
    for n, span in [(1, 3), (17, 17), (1000, 5000), (3000, 100_000)]:
        keys = rng.integers(0, span, n)
        counted = group_key(keys, span)
        monkeypatch.setattr(keymath, "counting_span", lambda n: 0)
        sorted_ = group_key(keys, span)
        monkeypatch.undo()
        assert counted[1].tolist() == sorted_[1].tolist()
        assert keys[counted[0]].tolist() == keys[sorted_[0]].tolist()


def test_combined_key_is_the_mixed_radix_number_in_the_narrowest_type():
    rng = np.random.default_rng(6)
    for radices in ([2], [3, 1, 4], [256], [257], [16, 16, 16, 16], [1 << 16, 1 << 16], [70000, 70000], [1, 1]):
        cols = [rng.integers(0, r, 40).astype(np.uint32) for r in radices]
        key, span, exact = combined_key(cols, radices)
        expected = [0] * 40
        for col, r in zip(cols, radices):
            expected = [e * r + int(v) for e, v in zip(expected, col.tolist())]
        assert exact and key.tolist() == expected
        assert span == int(np.prod([r for r in radices if r > 1], dtype=object)) if any(r > 1 for r in radices) else 1
        assert key.dtype == key_dtype(span)
        assert np.iinfo(key.dtype).max >= span - 1
        digits = mixed_radix_digits(np.array(sorted(set(expected))), radices)
        assert [tuple(r) for r in digits.tolist()] == sorted(set(zip(*[c.tolist() for c in cols])))


@pytest.mark.parametrize("n", [8, 14, 15, 50])
def test_blocked_key_equals_the_mixed_radix_number(monkeypatch, n):
    """Keys of more than `BLOCK_ROWS` rows are built block by block (full blocks and a
    partial last one): same values and type as the plain fold, for every key width,
    columns of radix 1 skipped (first, middle, all)."""
    monkeypatch.setattr(keymath, "BLOCK_ROWS", 7)
    rng = np.random.default_rng(16)
    for radices in ([1, 3, 1, 4], [256], [257, 1, 3], [16, 16, 16, 16], [70000, 60000], [1 << 20] * 3, [1, 1]):
        cols = [rng.integers(0, r, n).astype(np.uint8 if r <= 256 else np.uint32) for r in radices]
        key, span, exact = combined_key(cols, radices)
        expected = [0] * n
        for col, r in zip(cols, radices):
            expected = [e * r + int(v) for e, v in zip(expected, col.tolist())]
        assert exact and key.tolist() == expected
        assert key.dtype == key_dtype(span) and key.shape == (n,)


def test_overflowing_key_is_compacted_and_still_groups_correctly():
    rng = np.random.default_rng(7)
    radices = [1 << 20] * 4  # 2^80: does not fit into one int64
    cols = [rng.integers(0, 3, 300) * (1 << 18) for _ in radices]
    key, span, exact = combined_key(cols, radices)
    assert not exact
    tuples = list(zip(*[c.tolist() for c in cols]))
    first, inverse = group_key(key, span)
    distinct = sorted(set(tuples))
    assert [tuples[i] for i in first.tolist()] == distinct
    assert [distinct[g] for g in inverse.tolist()] == tuples


def test_blocked_gather_equals_plain_indexing(monkeypatch):
    monkeypatch.setattr(keymath, "BLOCK_ROWS", 7)
    rng = np.random.default_rng(8)
    table = rng.integers(0, 200, 50).astype(np.uint8)
    for n in (0, 1, 7, 8, 50, 51):
        index = rng.integers(0, 50, n).astype(np.uint16)
        assert gather(table, index).tolist() == table[index].tolist()


# --------------------------------------------------------------------------- Grouper
def random_problem(seed: int, n: int, sensitive_domains=(4,), with_subset=True):
    """Random codes, monotone code maps (each level merges codes of the one below)."""
    rng = np.random.default_rng(seed)
    maps = []
    for d0, height in [(7, 3), (30, 4), (2, 2), (300, 3)]:
        levels = [np.arange(d0)]
        for _ in range(height - 2):
            levels.append(levels[-1] // 3)
        levels.append(np.zeros(d0, dtype=np.int64))
        maps.append(np.array(levels, dtype=np.int32))
    qi = np.column_stack([rng.integers(0, m.shape[1], n) for m in maps]).astype(np.int32)
    sens = {f"s{i}": rng.integers(0, d, n) for i, d in enumerate(sensitive_domains)}
    sizes = {f"s{i}": d for i, d in enumerate(sensitive_domains)}
    subset = rng.random(n) < 0.3 if with_subset else None
    return qi, maps, sens, sizes, subset


def reference_classes(qi, maps, sens, sizes, subset, levels):
    """Classes by a dict over generalized tuples, sorted lexicographically."""
    groups: dict[tuple, list[int]] = {}
    for r in range(qi.shape[0]):
        t = tuple(int(maps[i][l][qi[r, i]]) for i, l in enumerate(levels))
        groups.setdefault(t, []).append(r)
    out = []
    for t in sorted(groups):
        rows = groups[t]
        hist = {a: np.bincount(sens[a][rows], minlength=sizes[a]).tolist() for a in sens}
        out.append((t, len(rows), hist, None if subset is None else int(subset[rows].sum()), rows))
    return out


def assert_matches(classes, ref, sizes):
    assert [tuple(c) for c in classes.codes.tolist()] == [r[0] for r in ref]
    assert classes.stats.sizes.tolist() == [r[1] for r in ref]
    for a in sizes:
        assert np.asarray(classes.stats.histograms[a]).tolist() == [r[2][a] for r in ref]
    if ref and ref[0][3] is not None:
        assert classes.stats.subset_sizes.tolist() == [r[3] for r in ref]


def all_levels(maps):
    return list(itertools.product(*[range(m.shape[0]) for m in maps]))


@pytest.mark.parametrize("block_rows", [1 << 18, 64])
def test_group_rows_every_path_equals_reference(monkeypatch, block_rows):
    """Every node of a small lattice, with blocks of the full table and of 64 rows
    (the block loop, its last partial block included); a smaller block-counting span
    so that all three paths occur on 1,000 rows."""
    monkeypatch.setattr(keymath, "BLOCK_ROWS", block_rows)
    monkeypatch.setattr(keymath, "BLOCK_SPAN", 4096)
    qi, maps, sens, sizes, subset = random_problem(9, 1000)
    g = Grouper(qi, maps, sens, sizes, subset)
    nodes = all_levels(maps)
    paths = set()
    for levels in nodes:
        ref = reference_classes(qi, maps, sens, sizes, subset, levels)
        classes = g.group_rows(levels)
        assert_matches(classes, ref, sizes)
        kept = g.group_rows(levels, keep_rows=True)
        assert_matches(kept, ref, sizes)
        for cls, r in enumerate(ref):
            assert set(np.flatnonzero(kept.row_class == cls).tolist()) == set(r[4])
        span = int(np.prod([int(maps[i][l].max()) + 1 for i, l in enumerate(levels)]))  # the key span, from the maps
        paths.add("block" if span <= keymath.BLOCK_SPAN else
                  "count" if span <= keymath.counting_span(g.n_rows) else "sort")
    assert paths == {"block", "count", "sort"}


@pytest.mark.parametrize("block_rows", [1 << 18, 64])
def test_sizes_only_grouping_equals_reference(monkeypatch, block_rows):
    """Without sensitive attributes or subset (k-anonymity) rows are grouped without a
    class per row: counted keys or run lengths of the sorted keys. Every node, both of
    those paths asserted to occur, and the same classes as with `keep_rows` (which
    still builds the row -> class map)."""
    monkeypatch.setattr(keymath, "BLOCK_ROWS", block_rows)
    monkeypatch.setattr(keymath, "BLOCK_SPAN", 16)
    qi, maps, _, _, _ = random_problem(14, 1000, sensitive_domains=(), with_subset=False)
    g = Grouper(qi, maps, {}, {}, None)
    paths = set()
    for levels in all_levels(maps):
        ref = reference_classes(qi, maps, {}, {}, None, levels)
        classes = g.group_rows(levels)
        assert classes.row_class is None
        assert_matches(classes, ref, {})
        kept = g.group_rows(levels, keep_rows=True)
        assert kept.codes.tolist() == classes.codes.tolist()
        assert kept.stats.sizes.tolist() == classes.stats.sizes.tolist()
        span = int(np.prod([int(maps[i][l].max()) + 1 for i, l in enumerate(levels)]))  # the key span, from the maps
        paths.add("block" if span <= keymath.BLOCK_SPAN else
                  "count" if span <= keymath.sizes_counting_span(g.n_rows) else "sort")
    assert paths == {"block", "count", "sort"}


@pytest.mark.parametrize("counted_up_to", [0, 1 << 40])
def test_sizes_only_counting_and_sorting_each_equal_reference(monkeypatch, counted_up_to):
    """The sizes-only path on every node with the counting/sorting choice forced one way
    and then the other (the choice depends on span and rows only, so both must agree)."""
    monkeypatch.setattr(keymath, "BLOCK_SPAN", 1)
    monkeypatch.setattr(keymath, "sizes_counting_span", lambda n: counted_up_to)
    qi, maps, _, _, _ = random_problem(17, 700, sensitive_domains=(), with_subset=False)
    g = Grouper(qi, maps, {}, {}, None)
    for levels in all_levels(maps):
        classes = g.group_rows(levels)
        assert classes.row_class is None
        assert_matches(classes, reference_classes(qi, maps, {}, {}, None, levels), {})


@pytest.mark.parametrize("block_rows", [1 << 18, 64])
def test_sizes_only_sort_leaves_the_cached_columns_alone(monkeypatch, block_rows):
    """The sort path sorts the key in place: the key must never be a cached column, also
    not where a single column has a radix above 1 (the key is then that column's values)."""
    monkeypatch.setattr(keymath, "BLOCK_SPAN", 1)
    monkeypatch.setattr(keymath, "BLOCK_ROWS", block_rows)
    monkeypatch.setattr(keymath, "sizes_counting_span", lambda n: 0)
    qi, maps, _, _, _ = random_problem(19, 500, sensitive_domains=(), with_subset=False)
    tops = [m.shape[0] - 1 for m in maps]
    g = Grouper(qi, maps, {}, {}, None)
    for i, m in enumerate(maps):
        for level in range(m.shape[0] - 1):
            levels = tuple(level if j == i else top for j, top in enumerate(tops))
            ref = reference_classes(qi, maps, {}, {}, None, levels)
            before = {k: c.copy() for k, c in g._columns.items()}
            assert_matches(g.group_rows(levels), ref, {})
            assert all(np.array_equal(before[k], g._columns[k]) for k in before)
            assert_matches(g.group_rows(levels), ref, {})
            assert g.column(i, level).tolist() == maps[i][level][qi[:, i]].tolist()


def test_mixed_radix_digits_of_narrow_and_wide_keys():
    """Every key type the grouper produces (uint8/16/32, int64 from counting), spans just
    below and above 2^32 (4-byte and 8-byte arithmetic), the largest keys included."""
    rng = np.random.default_rng(18)
    for radices in ([5, 1, 7], [256], [16, 1, 4096], [65536, 65535], [65536, 65536], [1 << 20, 1 << 20, 3]):
        digits = np.column_stack([rng.integers(0, r, 200) for r in radices]).astype(np.int64)
        digits[0] = [r - 1 for r in radices]
        key = np.zeros(200, dtype=np.int64)
        for col, r in zip(digits.T, radices):
            key = key * r + col
        span, _ = keymath.key_span(radices)
        for keys in ([key, key.astype(key_dtype(span))] if span <= 1 << 32 else [key]):
            got = keymath.mixed_radix_digits(keys, radices)
            assert got.dtype == np.int32 and got.flags.c_contiguous
            assert got.tolist() == digits.tolist()


def test_mixed_radix_digits_invert_the_key_on_random_radices():
    rng = np.random.default_rng(15)
    for _ in range(20):
        radices = rng.integers(1, 40, rng.integers(1, 9)).tolist()
        digits = np.column_stack([rng.integers(0, r, 300) for r in radices]).astype(np.int32)
        key = np.zeros(300, dtype=np.int64)
        for col, r in zip(digits.T, radices):
            key = key * r + col
        assert keymath.mixed_radix_digits(key, radices).tolist() == digits.tolist()


def test_group_rows_without_subset_and_with_a_wide_sensitive_domain():
    """A sensitive domain that makes span x domain too large for block counting."""
    qi, maps, sens, sizes, subset = random_problem(10, 600, sensitive_domains=(3, 5000), with_subset=False)
    g = Grouper(qi, maps, sens, sizes, None, sparse_domain=10**6)
    for levels in [(0, 0, 0, 0), (1, 1, 1, 1), (2, 3, 1, 2), (0, 3, 1, 2)]:
        assert_matches(g.group_rows(levels), reference_classes(qi, maps, sens, sizes, None, levels), sizes)


@pytest.mark.parametrize("float_exact,counting", [(1 << 53, 4), (1 << 53, 0), (1 << 53, 10**9), (0, 4)],
                         ids=["float-key-default", "float-key-sort", "float-key-count", "combined-key"])
def test_rollup_and_snapshot_choice_equal_rows_on_every_node(monkeypatch, float_exact, counting):
    """classes() on every node in a random order with a tiny history (evictions,
    roll-ups from many different snapshots) equals grouping the rows; roll-up keys
    from the float matrix-vector product (grouped by sorting, by counting, or as the
    span decides) and from `combined_key` (spans beyond 2^53)."""
    monkeypatch.setattr(grouping, "_FLOAT_EXACT", float_exact)
    monkeypatch.setattr(grouping, "_ROLLUP_COUNTING", counting)
    qi, maps, sens, sizes, subset = random_problem(11, 800)
    g = Grouper(qi, maps, sens, sizes, subset, history_size=5)
    fresh = Grouper(qi, maps, sens, sizes, subset)
    nodes = all_levels(maps)
    order = np.random.default_rng(12).permutation(len(nodes))
    rolled = 0
    for i in order.tolist():
        levels = nodes[i]
        classes, was_rolled = g.classes(levels)
        rolled += was_rolled
        direct = fresh.group_rows(levels)
        assert classes.codes.tolist() == direct.codes.tolist()
        assert classes.stats.sizes.tolist() == direct.stats.sizes.tolist()
        assert classes.stats.subset_sizes.tolist() == direct.stats.subset_sizes.tolist()
        for a in sizes:
            assert np.asarray(classes.stats.histograms[a]).tolist() == np.asarray(direct.stats.histograms[a]).tolist()
        if classes.rolled_from is not None:
            assert all(s <= d for s, d in zip(classes.rolled_from, levels))
            base = g.group_rows(classes.rolled_from)  # the mapping sends each finer class to its coarser one
            assert classes.stats.sizes.tolist() == np.bincount(classes.mapping, weights=base.stats.sizes,
                                                               minlength=classes.count).astype(int).tolist()
    assert rolled >= 10  # roll-ups did happen (17 of 72 with this seed)
    assert len(g._history) <= 5


def test_snapshot_choice_is_the_cheapest_then_least_recently_used():
    qi, maps, sens, sizes, subset = random_problem(13, 500, sensitive_domains=(), with_subset=False)
    probe = Grouper(qi, maps, {}, {}, None)
    counts = {lv: probe.group_rows(lv).count for lv in all_levels(maps)}
    # snapshots small enough to be rolled up from (a sizes-only node groups its rows rather
    # than roll up a larger one: next test)
    storable = [lv for lv, c in counts.items()
                if c <= min(probe.snapshot_limit, grouping._SIZES_ROLLUP_SHARE * probe.n_rows)]

    def below(x, y):
        return all(a <= b for a, b in zip(x, y))

    # two stored specializations of different cost: the cheaper one is rolled up from
    a, b = next((x, y) for x in storable for y in storable if counts[x] < counts[y] and not below(x, y)
                and not below(y, x))
    target = tuple(max(p, q) for p, q in zip(a, b))
    for first, second in ((a, b), (b, a)):
        g = Grouper(qi, maps, {}, {}, None)
        g.remember(g.group_rows(first))
        g.remember(g.group_rows(second))
        classes, rolled = g.classes(target)
        assert rolled and classes.rolled_from == a
    # equal costs: the least recently used one wins
    c, d = next((x, y) for x in storable for y in storable if x != y and counts[x] == counts[y]
                and not below(x, y) and not below(y, x))
    target = tuple(max(p, q) for p, q in zip(c, d))
    g = Grouper(qi, maps, {}, {}, None)
    g.remember(g.group_rows(c))
    g.remember(g.group_rows(d))
    assert g.classes(target)[0].rolled_from == c
    g = Grouper(qi, maps, {}, {}, None)
    g.remember(g.group_rows(c))
    g.remember(g.group_rows(d))
    g.classes(c)  # a hit: c is now the most recently used
    assert g.classes(target)[0].rolled_from == d


def test_sizes_only_node_groups_its_rows_rather_than_roll_up_a_large_snapshot(monkeypatch):
    """Where a node needs class sizes alone, rolling up a snapshot of more than
    `_SIZES_ROLLUP_SHARE` of the rows as classes costs more than grouping the rows: the grouper
    groups them (same classes). With sensitive histograms to sum, or a share that allows it, it
    rolls up as before."""
    qi, maps, sens, sizes, _ = random_problem(17, 600, with_subset=False)
    probe = Grouper(qi, maps, {}, {}, None)
    nodes = all_levels(maps)
    counts = {lv: probe.group_rows(lv).count for lv in nodes}
    share = grouping._SIZES_ROLLUP_SHARE * probe.n_rows
    base, target = next((b, t) for b in nodes for t in nodes
                        if share < counts[b] <= probe.snapshot_limit and b != t
                        and all(x <= y for x, y in zip(b, t)))

    def classes_after_storing(g: Grouper):
        g.remember(g.group_rows(base))
        return g.classes(target)

    got, rolled = classes_after_storing(Grouper(qi, maps, {}, {}, None))
    direct = probe.group_rows(target)
    assert not rolled and got.rolled_from is None
    assert got.codes.tolist() == direct.codes.tolist() and got.stats.sizes.tolist() == direct.stats.sizes.tolist()
    # with histograms the roll-up sums them (the row path would count every row's value again)
    assert classes_after_storing(Grouper(qi, maps, sens, sizes, None))[1]
    monkeypatch.setattr(grouping, "_SIZES_ROLLUP_SHARE", 1.0)
    got, rolled = classes_after_storing(Grouper(qi, maps, {}, {}, None))
    assert rolled and got.rolled_from == base and got.stats.sizes.tolist() == direct.stats.sizes.tolist()


def test_class_codes_are_decoded_only_when_read(monkeypatch):
    """On the paths that find the classes as exact keys (sizes only, counted blocks, counted keys
    with the rows kept), a k-anonymity judge reads the sizes alone and the codes stay undecoded;
    the first read decodes them once, to the reference's codes."""
    decoded: list[int] = []
    real = classes_module.mixed_radix_digits
    monkeypatch.setattr(classes_module, "mixed_radix_digits", lambda k, r: decoded.append(len(k)) or real(k, r))
    qi, maps, sens, sizes, subset = random_problem(5, 2000)
    heights = [m.shape[0] for m in maps]
    ctx = MetricContext(n_rows=qi.shape[0], heights=heights,
                        cardinalities=[[np.ones(m.shape[1])] * m.shape[0] for m in maps],
                        level0_to_level=list(maps), leaf_fraction=[[np.zeros(m.shape[1])] * m.shape[0] for m in maps])
    judge = ClassJudge([KAnonymity(3)], build_metric("height", ctx), 0.0, CriterionContext(n_rows=qi.shape[0]))
    nodes = all_levels(maps)[::7]
    for grouper_args, keep_rows in [(({}, {}, None), False), ((sens, sizes, subset), False), ((sens, sizes, subset), True)]:
        grouper = Grouper(qi, maps, *grouper_args)
        lazy = 0
        for lv in nodes:
            classes = grouper.group_rows(lv, keep_rows=keep_rows)
            judge.judge(lv, classes)
            assert decoded == [], (grouper_args[1], keep_rows, lv)
            ref = reference_classes(qi, maps, *grouper_args, lv)
            assert [tuple(c) for c in classes.codes.tolist()] == [r[0] for r in ref]
            assert [tuple(c) for c in classes.codes.tolist()] == [r[0] for r in ref]
            assert decoded in ([], [classes.count])  # once, if at all (a wide key span gathers codes from rows)
            lazy += len(decoded)
            decoded.clear()
        assert lazy >= len(nodes) // 2, (grouper_args[1], keep_rows)


# --------------------------------------------------------------------------- lattice
def test_lattice_order_neighbours_and_boxes_match_definitions():
    lat = Lattice([2, 4, 1, 3, 2])
    levels = lat.levels
    ref = sorted(range(lat.size), key=lambda n: (int(levels[n].sum()), tuple(levels[n].tolist())))
    assert lat.order.tolist() == ref
    for node in range(lat.size):
        lv = levels[node]
        succ = lat.successors(node)
        assert list(succ) == sorted(succ, key=lambda s: lat.rank[s])
        assert sorted(tuple(levels[s].tolist()) for s in succ) == sorted(
            tuple(int(x) + (j == i) for j, x in enumerate(lv)) for i in range(len(lv)) if lv[i] < lat.heights[i] - 1)
        pred = lat.predecessors(node)
        assert pred == sorted(pred, key=lambda s: lat.rank[s])
        assert len(pred) == int((lv > 0).sum())
        up = np.zeros(lat.size, dtype=bool)
        lat.grid(up)[lat.up_box(node)] = True
        assert up.tolist() == (levels >= lv).all(axis=1).tolist()
        down = np.zeros(lat.size, dtype=bool)
        lat.grid(down)[lat.down_box(node)] = True
        assert down.tolist() == (levels <= lv).all(axis=1).tolist()


def test_packed_level_comparison_equals_elementwise():
    """"Stored node below the asked one" from packed level vectors (guard bits) equals
    comparing level by level, on random vectors that reach every QI's top level; fields
    that need more than 62 bits fall back to the level-by-level comparison (None)."""
    rng = np.random.default_rng(21)
    for _ in range(200):
        tops = rng.integers(0, 20, rng.integers(1, 10)).tolist()
        offsets, guard = keymath.level_fields(tops)
        assert offsets is not None
        stored = np.array([[rng.integers(0, t + 1) for t in tops] for _ in range(40)])
        asked = [int(rng.integers(0, t + 1)) for t in tops]
        packed = np.array([keymath.packed_levels(tuple(s), offsets) for s in stored], dtype=np.int64)
        below = ((keymath.packed_levels(tuple(asked), offsets) | guard) - packed) & guard == guard
        assert below.tolist() == [bool((s <= np.array(asked)).all()) for s in stored]
        assert below[[i for i, s in enumerate(stored) if (s == np.array(asked)).all()]].all()
    assert keymath.level_fields([1000] * 6) == (None, 0)


@pytest.mark.parametrize("size", [1, 2, 5, 8, 9, 70])
@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64])
def test_value_counts_equals_a_plain_count(size: int, dtype: type) -> None:
    """Both ways of counting (comparison per value up to 8 values, bincount above) give the
    count of every value, absent values included as 0; a skewed column and a strided one too."""
    from collections import Counter

    from fedanon.stats.keys import value_counts

    rng = np.random.default_rng(size)
    column = np.minimum(rng.geometric(0.5, 5000) - 1, size - 1).astype(dtype)  # skewed: high values rare or absent
    for values in (column, np.asfortranarray(np.stack([column, column], axis=1))[:, 1]):
        counts = value_counts(values, size)
        expected = Counter(int(v) for v in values)
        assert counts.dtype == np.int64 and counts.tolist() == [expected.get(v, 0) for v in range(size)]
