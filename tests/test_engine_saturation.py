"""Saturated classes in sparse sensitive statistics (distinct-ℓ) against complete statistics.

With distinct-ℓ-diversity as the only model reading a large sensitive attribute, the
sparse class histograms forget every class with ≥ ℓ distinct values (such a class and
every union containing it is diverse). These tests hold that shortcut against
statistics that forget nothing -- node by node across chains of roll-ups, and whole
searches with and without suppression -- and against a dense count from the rows.

Which bug makes them fail: a saturated flag not carried through a roll-up (a merged
class with a saturated part judged on the remaining entries only), saturating one
distinct value too early, dropping entries of an unsaturated class, saturation
switched on for entropy-/recursive-ℓ or next to t-closeness on the same attribute.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, LDiversity, TCloseness
from fedanon.engine.anonymizer import prepare, search_and_apply
from fedanon.stats.classhist import SparseHistogram
from fedanon.model.privacy.tcloseness import TClosenessCriterion
from fedanon.model.config import AnonymizationConfig as Config
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import saturation_thresholds, build_criteria
from fedanon.model.privacy.ldiversity import LDiversityCriterion
from fedanon.engine.check.grouping import Grouper

QIS = ["a", "b", "c"]


def _prefix_hierarchy(name: str, n_values: int, height: int) -> Hierarchy:
    """Values 0..n-1; level l groups v // 2**l (the top level is '*')."""
    rows = [[f"{v}"] + [f"{v >> l}x{l}" if l < height - 1 else "*" for l in range(1, height)]
            for v in range(n_values)]
    return Hierarchy.from_rows(name, rows)


def _random_table(seed: int, n_rows: int = 700, domain: int = 60) -> tuple[EncodedTable, dict[str, Hierarchy]]:
    """Three QIs; a sensitive attribute with `domain` (> 32: sparse) values, mostly a
    function of the QIs so that fine classes are often single-valued (unsaturated)
    while coarser ones mix -- saturation happens part-way up the lattice."""
    rng = np.random.default_rng(seed)
    sizes = {"a": 16, "b": 8, "c": 4}
    heights = {"a": 5, "b": 4, "c": 3}
    cols = {q: rng.integers(0, sizes[q], size=n_rows) for q in QIS}
    local = (cols["a"] * 5 + cols["b"] * 3 + cols["c"]) % domain
    noise = rng.integers(0, domain, size=n_rows)
    sens = np.where(rng.random(n_rows) < 0.75, local, noise)
    sens[:domain] = np.arange(domain)  # every value occurs
    rows = [[str(cols["a"][i]), str(cols["b"][i]), str(cols["c"][i]), str(sens[i])] for i in range(n_rows)]
    table = EncodedTable.from_rows(QIS + ["s"], rows)
    return table, {q: _prefix_hierarchy(q, sizes[q], heights[q]) for q in QIS}


def assert_same_result(a, b) -> None:
    """Two results of the same search: same optimum, loss, suppression and classes."""
    assert a.transformation == b.transformation
    assert a.information_loss == pytest.approx(b.information_loss, rel=1e-12)
    assert a.suppressed_rows == b.suppressed_rows and a.classes == b.classes
    assert np.array_equal(a.suppressed, b.suppressed)


def _grouper(table: EncodedTable, hier: dict[str, Hierarchy], saturation: dict[str, int] | None,
             sparse_domain: int = 32) -> Grouper:
    code_maps = [hier[q].code_map(table.dictionaries[table.column_index(q)])[0] for q in QIS]
    ci = table.column_index("s")
    return Grouper(table.codes[:, [table.column_index(q) for q in QIS]], code_maps,
                   {"s": table.codes[:, ci].astype(np.int64)}, {"s": len(table.dictionaries[ci])},
                   sparse_domain=sparse_domain, saturation=saturation, history_size=8)


def _nodes(heights: list[int], seed: int) -> list[tuple[int, ...]]:
    grid = np.stack(np.meshgrid(*[np.arange(h) for h in heights], indexing="ij"), -1).reshape(-1, len(heights))
    order = np.random.default_rng(seed).permutation(len(grid))
    return [tuple(int(x) for x in grid[i]) for i in order]


@pytest.mark.parametrize("l", [2, 3, 2.5, 5])
@pytest.mark.parametrize("seed", [1, 2])
def test_saturated_statistics_decide_every_class_like_complete_ones(l, seed):
    """Every node of the lattice, visited in random order (roll-ups from whatever snapshot
    is stored, a small history so chains vary): the same decision per class with saturated
    statistics, with complete sparse ones and with dense counts from the rows."""
    table, hier = _random_table(seed)
    crit = LDiversityCriterion(LDiversity("distinct", l, "s"))
    at = crit.accepts_distinct_at_least
    assert at == int(np.ceil(l))
    saturated = _grouper(table, hier, {"s": at})
    complete = _grouper(table, hier, None)
    dense = _grouper(table, hier, None, sparse_domain=10 ** 6)
    assert "s" in saturated.sparse and "s" not in dense.sparse
    heights = [5, 4, 3]
    dropped = kept_unsaturated = 0
    for levels in _nodes(heights, seed) + _nodes(heights, seed + 10):
        got, _ = saturated.classes(levels)
        ref, _ = complete.classes(levels)
        truth = dense.group_rows(levels)
        assert np.array_equal(got.codes, truth.codes) and np.array_equal(ref.codes, truth.codes)
        want = crit.classes_ok(truth.stats)
        assert crit.classes_ok(got.stats).tolist() == want.tolist()
        assert crit.classes_ok(ref.stats).tolist() == want.tolist()
        h = got.stats.histograms["s"]
        full = truth.stats.histograms["s"]
        # unsaturated classes keep exact entries, saturated ones none
        assert h.saturated is not None and not h.saturated[h.cls].any()
        assert h.saturated.tolist() == ((full > 0).sum(axis=1) >= at).tolist()
        exact = np.zeros_like(full)
        np.add.at(exact, (h.cls, h.value), h.count)
        assert np.array_equal(exact[~h.saturated], full[~h.saturated])
        dropped += int((full[h.saturated] > 0).sum())
        kept_unsaturated += int(h.cls.shape[0])
    assert saturated.rollups > 0 and saturated.row_groupings > 0
    assert dropped > 0 and kept_unsaturated > 0  # the case is not trivial either way


@pytest.mark.parametrize("suppression", [0.0, 0.04, 0.15])
@pytest.mark.parametrize("l,seed", [(2, 3), (3, 4), (4, 5)])
def test_search_with_saturation_finds_the_same_optimum(suppression, l, seed):
    """A whole search (and the suppression of the failing classes in the output) with the
    saturated statistics the engine uses by default and with saturation switched off."""
    table, hier = _random_table(seed, n_rows=900)
    config = AnonymizationConfig(QIS, suppression=suppression, l_diversity=LDiversity("distinct", l, "s"))
    results = []
    for saturate in (True, False):
        prep = prepare(table, hier, config)
        assert prep.grouper.saturation == {"s": l} and "s" in prep.grouper.sparse
        if not saturate:
            prep.grouper.saturation = {}
        results.append(search_and_apply(prep, prep.checker))
    assert_same_result(*results)


def test_saturation_only_where_every_reader_accepts_saturated_classes():
    distinct = LDiversity("distinct", 3, "s")
    assert saturation_thresholds(build_criteria(Config(QIS, l_diversity=distinct))) == {"s": 3}
    assert saturation_thresholds(build_criteria(Config(QIS, l_diversity=LDiversity("distinct", 2.5, "s")))) == {"s": 3}
    for other in (LDiversity("entropy", 3, "s"), LDiversity("recursive", 3, "s", 2.0)):
        assert saturation_thresholds(build_criteria(Config(QIS, l_diversity=other))) == {}
    both = Config(QIS, l_diversity=distinct, t_closeness=TCloseness(0.3, "equal", "s"))
    assert saturation_thresholds(build_criteria(both)) == {}
    apart = Config(QIS, l_diversity=distinct, t_closeness=TCloseness(0.3, "equal", "t"))
    assert saturation_thresholds(build_criteria(apart)) == {"s": 3}


def test_saturated_histograms_refuse_questions_they_cannot_answer():
    row_class = np.array([0, 0, 1, 1, 2], dtype=np.int64)
    codes = np.array([4, 5, 6, 6, 7], dtype=np.int64)
    h = SparseHistogram.from_rows(row_class, codes, 3, 40, saturate_at=2)
    assert h.saturated.tolist() == [True, False, False]
    assert h.distinct().tolist() == [2, 1, 1]
    assert sorted(zip(h.cls.tolist(), h.value.tolist(), h.count.tolist())) == [(1, 6, 2), (2, 7, 1)]
    for ask in (h.sizes, h.toarray, lambda: h.per_class_sum(np.ones(2))):
        with pytest.raises(ValueError, match="saturated"):
            ask()
    stats = ClassStats(np.array([2, 2, 1]), {"s": h})
    with pytest.raises(ValueError, match="complete"):
        LDiversityCriterion(LDiversity("entropy", 2, "s")).classes_ok(stats)
    # merging an unsaturated class into a saturated one saturates it; two unsaturated ones may
    rolled = h.rollup(np.array([0, 1, 1]), 2)
    assert rolled.saturated.tolist() == [True, True] and rolled.cls.shape[0] == 0
    rolled = h.rollup(np.array([1, 0, 0]), 2)
    assert rolled.saturated.tolist() == [True, True]
    one = SparseHistogram.from_rows(np.array([0, 1, 1]), np.array([3, 3, 3]), 2, 40, saturate_at=2)
    merged = one.rollup(np.array([0, 0]), 1)
    assert merged.saturated.tolist() == [False] and merged.count.tolist() == [3]


@pytest.mark.parametrize("n_classes,domain", [(1 << 11, 900), (1 << 21, 5000)])
def test_packed_pair_counting_in_int32_and_int64_keys(n_classes, domain):
    """Pair keys that fit 31 bits are sorted as int32, wider ones as int64; from rows and in
    a roll-up both must give the exact (class, value) counts, sorted by (class, value)."""
    rng = np.random.default_rng(n_classes)
    n = 20000
    row_class = rng.integers(0, n_classes, size=n)
    row_class[rng.random(n) < 0.5] = 7  # one big class: counts need several bits
    codes = rng.integers(0, domain, size=n)
    codes[row_class == 7] = rng.integers(0, 3, size=int((row_class == 7).sum()))
    built = SparseHistogram.from_rows(row_class, codes, n_classes, domain)
    assert Counter(dict(zip(zip(built.cls.tolist(), built.value.tolist()), built.count.tolist()))) == \
        Counter(zip(row_class.tolist(), codes.tolist()))
    assert np.all(np.diff(built.cls * domain + built.value) > 0)
    class_map = rng.integers(0, n_classes // 3, size=n_classes)
    rolled = built.rollup(class_map, n_classes // 3)
    want = Counter(zip(class_map[row_class].tolist(), codes.tolist()))
    assert Counter(dict(zip(zip(rolled.cls.tolist(), rolled.value.tolist()), rolled.count.tolist()))) == want
    assert np.all(np.diff(rolled.cls * domain + rolled.value) > 0)
    assert int(rolled.count.max()) > 1000
