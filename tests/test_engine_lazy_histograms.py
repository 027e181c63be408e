"""Dense class histograms computed when first read (`engine/histograms.py`) against a recount.

A node grouped from the rows keeps "count these rows" and a roll-up keeps "sum that
matrix by this class map"; the matrix appears when a criterion reads it. The reference
recounts (generalized QI codes, sensitive code) pairs of the rows in a Python Counter,
sharing no code with the grouper.

Which bug makes these fail: a composed class map applied in the wrong order, rows of the key
span picked for the wrong classes, a renumbering
moved the wrong way (out = base[map] instead of out[map] = base), a recipe that is not kept
once computed (or that computes its base again), a roll-up of a "count the rows" recipe
that keeps a row map, a pickled histogram that ships its rows, a search whose optimum or
suppression changes because statistics arrive later.
"""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, LDiversity, TCloseness
from fedanon.engine.anonymizer import prepare, search_and_apply
from fedanon.stats.histograms import ClassSums, Histograms, KeyCounts, RowCounts
from test_engine_saturation import QIS, _grouper, _nodes, _random_table, assert_same_result


def _recount(table, hier, levels: tuple[int, ...], classes) -> np.ndarray:
    """Class x value counts of the node from the rows (class order from the grouper's codes)."""
    code_maps = [hier[q].code_map(table.dictionaries[table.column_index(q)])[0] for q in QIS]
    ci = [table.column_index(q) for q in QIS]
    s = table.column_index("s")
    pairs = Counter((tuple(int(code_maps[i][l][row[c]]) for i, (c, l) in enumerate(zip(ci, levels))), int(row[s]))
                    for row in table.codes.tolist())
    index = {tuple(code): k for k, code in enumerate(classes.codes.tolist())}
    out = np.zeros((classes.count, len(table.dictionaries[s])), dtype=np.int64)
    for (code, value), n in pairs.items():
        out[index[code], value] += n
    return out


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize("path,recipe", [("block", KeyCounts), ("classes", RowCounts)])
def test_rows_and_rollups_give_the_recounted_histograms_when_read(seed, path, recipe, monkeypatch):
    from fedanon.engine.check import grouping
    from fedanon.stats import keys as keymath

    # this table's key spans are small: rows are counted over the span ("block", cells by key);
    # with that path off, by classes ("classes", cells by the row -> class map)
    if path == "classes":
        monkeypatch.setattr(keymath, "BLOCK_SPAN", 0)
    table, hier = _random_table(seed, n_rows=600, domain=12)  # 12 values: dense histograms
    grouper = _grouper(table, hier, None)
    nodes = _nodes([5, 4, 3], seed)
    seen_pending = {"rows": 0, "roll-up": 0}
    for levels in nodes:
        classes, rolled = grouper.classes(levels)
        hists = classes.stats.histograms
        assert isinstance(hists, Histograms)
        if hists.pending("s"):
            seen_pending["roll-up" if rolled else "rows"] += 1
            assert isinstance(hists._values["s"], ClassSums if rolled else recipe)
        got = hists["s"]
        assert not hists.pending("s") and hists["s"] is got  # computed once, then kept
        assert got.dtype == np.int64
        assert np.array_equal(got, _recount(table, hier, levels, classes)), levels
        assert np.array_equal(got.sum(axis=1), classes.stats.sizes)
    # both recipes were exercised (the grouper starts with nothing stored, and keeps 8 snapshots)
    assert seen_pending["rows"] > 0 and seen_pending["roll-up"] > 0


def test_recipes_compose_and_start_from_a_matrix_that_exists():
    rng = np.random.default_rng(7)
    n_rows, classes, domain = 400, 90, 6
    row_class = rng.integers(0, classes, size=n_rows)
    row_class[:classes] = np.arange(classes)  # every class has a row
    codes = rng.integers(0, domain, size=n_rows)
    dense = np.zeros((classes, domain), dtype=np.int64)
    np.add.at(dense, (row_class, codes), 1)
    base = Histograms({"s": RowCounts(row_class, codes, classes, domain)})
    assert base.pending("s")
    maps = [np.arange(classes) // 3, None, np.arange(30) % 7, None]  # None: a pure renumbering
    current, expected, n = base, dense, classes
    chain = []
    for class_map in maps:
        if class_map is None:
            class_map = rng.permutation(n)
        new_n = int(class_map.max()) + 1
        rolled = current.rolled_up(class_map, new_n)
        moved = np.zeros((new_n, domain), dtype=np.int64)
        np.add.at(moved, class_map, expected)
        chain.append((rolled, moved))
        current, expected, n = rolled, moved, new_n
    assert base.pending("s")  # rolling up did not count the rows: no roll-up was read yet
    for rolled, _ in chain:
        recipe = rolled._values["s"]
        # composed: each names the one histogram counted from the rows, not a map of its own
        assert isinstance(recipe, ClassSums) and recipe.base[0] is base and recipe.base[1] == "s"
    # reading one in the middle counts the rows once, in the base, and leaves the others pending
    middle, middle_expected = chain[1]
    assert np.array_equal(middle["s"], middle_expected)
    assert not base.pending("s") and np.array_equal(base["s"], dense)
    assert chain[0][0].pending("s") and chain[2][0].pending("s")
    counted = base["s"]
    for rolled, want in chain:
        assert np.array_equal(rolled["s"], want)
    assert base["s"] is counted  # every roll-up summed the same counted matrix
    # a roll-up of a matrix that exists refers to the matrix itself
    assert Histograms({"s": dense}).rolled_up(np.arange(classes) // 3, 30)._values["s"].base is dense


def test_a_renumbering_moves_each_class_to_its_new_number():
    matrix = np.arange(12, dtype=np.int64).reshape(4, 3)
    class_map = np.array([2, 0, 3, 1])  # class 0 becomes class 2, ... (not its own inverse)
    rolled = Histograms({"s": matrix}).rolled_up(class_map, 4)
    assert rolled.pending("s")
    assert rolled["s"].tolist() == [matrix[1].tolist(), matrix[3].tolist(), matrix[0].tolist(), matrix[2].tolist()]


def test_pickling_computes_the_recipes_and_ships_no_rows():
    row_class = np.array([0, 1, 1, 2, 0])
    codes = np.array([1, 0, 0, 2, 1])
    hists = Histograms({"s": RowCounts(row_class, codes, 3, 3)})
    copy = pickle.loads(pickle.dumps(hists))
    assert not copy.pending("s")
    assert copy["s"].tolist() == [[0, 2, 0], [2, 0, 0], [0, 0, 1]]
    assert b"RowCounts" not in pickle.dumps(hists)
    # a roll-up whose rows are not counted yet ships its sums, not the rows nor their histogram
    pending = Histograms({"s": RowCounts(row_class, codes, 3, 3)})
    rolled = pending.rolled_up(np.array([0, 1, 0]), 2)
    blob = pickle.dumps(rolled)
    assert b"RowCounts" not in blob and b"ClassSums" not in blob
    assert pickle.loads(blob)["s"].tolist() == [[0, 2, 1], [2, 0, 0]]


@pytest.mark.parametrize("suppression", [0.0, 0.05])
@pytest.mark.parametrize("model", [dict(l_diversity=LDiversity("recursive", 2, "s", 3)),
                                   dict(l_diversity=LDiversity("entropy", 2, "s")),
                                   dict(t_closeness=TCloseness(0.3, "equal", "s"))])
def test_a_search_with_deferred_counts_equals_one_that_counts_at_once(suppression, model, monkeypatch):
    from fedanon.engine.check import grouping
    from fedanon.stats import keys as keymath

    table, hier = _random_table(5, n_rows=700, domain=12)
    config = AnonymizationConfig(QIS, suppression=suppression, **model)
    deferred = search_and_apply(prep := prepare(table, hier, config), prep.checker)
    monkeypatch.setattr(grouping, "_DEFER_ROW_COUNTS", 0)  # every node counts its rows at once (both paths)
    monkeypatch.setattr(Histograms, "rolled_up", _eager_rolled_up)
    eager = search_and_apply(prep2 := prepare(table, hier, config), prep2.checker)
    assert_same_result(deferred, eager)
    assert deferred.checks == eager.checks


def _eager_rolled_up(self, class_map, n_classes):
    """`Histograms.rolled_up` computing every sum at once (the behaviour before deferral)."""
    return Histograms({a: ClassSums(self[a], class_map, n_classes).compute() for a in self})
