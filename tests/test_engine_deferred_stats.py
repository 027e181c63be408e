"""Deferred sparse roll-ups and the judge's size shortcut against complete evaluation.

A sparse roll-up is summed only when a criterion reads it, and the judge does not ask
the models at all when the classes below the implied size (ℓ rows for ℓ-diversity)
already hold more rows than may be suppressed. These tests hold both against eager
statistics and a judge that asks every model about every node.

Which bug makes them fail: a composed class map applied in the wrong order, a pending
roll-up that forgets it was summed (or sums its parent), rows counted without their
saturation, the shortcut taken at exactly
the suppression limit or for models that do not imply the size, a node judged
anonymous or rejected differently, a whole search picking another optimum with sparse
statistics than with dense ones.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, LDiversity, TCloseness
from fedanon.engine.anonymizer import prepare, search_and_apply
from fedanon.stats.classhist import SparseHistogram
from test_engine_saturation import QIS, _nodes, _random_table, assert_same_result


def _dense_rollup(dense: np.ndarray, class_map: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, dense.shape[1]), dtype=np.int64)
    np.add.at(out, class_map, dense)
    return out


def _dense_rows(row_class: np.ndarray, codes: np.ndarray, classes: int, domain: int) -> np.ndarray:
    out = np.zeros((classes, domain), dtype=np.int64)
    np.add.at(out, (row_class, codes), 1)
    return out


def test_a_large_tables_row_histogram_is_counted_at_its_first_rollup(monkeypatch):
    """Above LAZY_BASE_ROWS a roll-up must not keep the row map alive: the rows are counted
    when the first roll-up is made (and the row map dropped)."""
    from fedanon.stats import classhist

    monkeypatch.setattr(classhist, "LAZY_BASE_ROWS", 100)
    rng = np.random.default_rng(5)
    row_class, codes = rng.integers(0, 50, size=101), rng.integers(0, 7, size=101)
    base = SparseHistogram.from_rows(row_class, codes, 50, 7)
    rolled = base.rollup(np.arange(50) // 5, 10)
    assert not base.pending and base._rows is None and rolled.pending
    assert np.array_equal(rolled.toarray(), _dense_rollup(_dense_rows(row_class, codes, 50, 7), np.arange(50) // 5, 10))


def test_deferred_rollups_compose_and_sum_only_when_read():
    rng = np.random.default_rng(11)
    n_rows, classes, domain = 5000, 900, 300
    row_class = rng.integers(0, classes, size=n_rows)
    codes = rng.integers(0, domain, size=n_rows)
    base = SparseHistogram.from_rows(row_class, codes, classes, domain)
    assert base.pending and base.entries == n_rows  # counted when first read
    first = base.rollup(np.arange(classes) // 2, (classes + 1) // 2)
    assert base.pending and first.pending  # a roll-up refers to the rows' histogram, not yet counted
    assert np.array_equal(first.toarray(), _dense_rollup(_dense_rows(row_class, codes, classes, domain),
                                                         np.arange(classes) // 2, (classes + 1) // 2))
    assert not base.pending  # reading the roll-up counted the rows once, in the base
    dense = base.toarray()
    assert np.array_equal(first.toarray(), _dense_rollup(dense, np.arange(classes) // 2, (classes + 1) // 2))
    assert base.entries == int(np.count_nonzero(dense))
    chain = [(base, dense)]
    for n in (500, 500, 120, 40, 40, 7):  # includes pure renumberings (same class count)
        class_map = rng.permutation(n) if n == chain[-1][1].shape[0] else rng.integers(0, n, size=chain[-1][1].shape[0])
        if n != chain[-1][1].shape[0]:
            _, class_map = np.unique(class_map, return_inverse=True)
            n = int(class_map.max()) + 1
        parent = chain[-1][0]
        rolled = parent.rollup(class_map, n)
        assert rolled.pending
        chain.append((rolled, _dense_rollup(chain[-1][1], class_map, n)))
    assert all(h.pending for h, _ in chain[1:])
    # reading the middle of the chain sums it alone; its descendants and ancestors stay pending
    middle, middle_dense = chain[3]
    assert np.array_equal(middle.toarray(), middle_dense) and not middle.pending
    assert chain[2][0].pending and chain[4][0].pending
    assert chain[2][0].entries == base.entries  # a pending roll-up's estimate: its base's entries
    for h, want in chain[1:]:
        assert np.array_equal(h.toarray(), want)
        assert np.array_equal(h.distinct(), (want > 0).sum(axis=1))
        assert np.all(np.diff(h.cls * domain + h.value) > 0) or h.n_classes == chain[1][0].n_classes
    # a roll-up of a roll-up that was summed meanwhile starts from the summed one
    again = middle.rollup(np.zeros(middle.n_classes, dtype=np.int64), 1)
    assert np.array_equal(again.toarray(), middle_dense.sum(axis=0, keepdims=True))


def _complete_judgement(prep, levels):
    """Every model asked about every class of the node (no shortcut), from the rows."""
    judge = prep.checker.class_judge
    classes = prep.grouper.group_rows(levels)
    failing = judge.failing_classes(classes.stats)
    suppressed = int(classes.stats.sizes[failing].sum())
    return suppressed <= judge.suppression_limit, suppressed == 0, suppressed


@pytest.mark.parametrize("model", [LDiversity("entropy", 3, "s"), LDiversity("recursive", 3, "s", 3.0),
                                   LDiversity("distinct", 4, "s")])
@pytest.mark.parametrize("suppression", [0.0, 0.04])
def test_size_shortcut_judges_every_node_like_asking_every_model(model, suppression):
    table, hier = _random_table(21, n_rows=800)
    prep = prepare(table, hier, AnonymizationConfig(QIS, suppression=suppression, l_diversity=model))
    checker = prep.checker
    assert checker.implied_k == int(np.ceil(model.l)) and "s" in prep.grouper.sparse
    shortcut = asked = 0
    for levels in _nodes([5, 4, 3], 3):
        ev = checker.evaluate(levels)
        anonymous, strict, suppressed = _complete_judgement(prep, levels)
        assert (ev.anonymous, ev.anonymous_strict) == (anonymous, strict), levels
        classes, _ = prep.grouper.classes(levels)
        hist = classes.stats.histograms["s"]
        if ev.implied_k_ok:
            assert ev.suppressed_rows == suppressed
            asked += 1
        else:
            assert not anonymous and ev.suppressed_rows <= suppressed
            sizes = classes.stats.sizes
            assert int(sizes[sizes < checker.implied_k].sum()) > checker.suppression_limit
            # the models were not asked: a rolled-up histogram was never summed
            shortcut += int(hist.pending)
    assert shortcut > 0 and asked > 0  # both paths taken


@pytest.mark.parametrize("model", [
    dict(l_diversity=LDiversity("entropy", 3, "s")),
    dict(l_diversity=LDiversity("recursive", 3, "s", 3.0)),
    dict(l_diversity=LDiversity("distinct", 3, "s"), t_closeness=TCloseness(0.45, "equal", "s")),
])
@pytest.mark.parametrize("suppression", [0.0, 0.05])
def test_search_with_deferred_sparse_statistics_finds_the_dense_optimum(model, suppression):
    """Random table, 60-value sensitive attribute: sparse (deferred roll-ups, size shortcut)
    and dense statistics give the same optimum, loss, suppressed rows and classes."""
    table, hier = _random_table(31, n_rows=900)
    config = AnonymizationConfig(QIS, suppression=suppression, **model)
    results = []
    for sparse in (True, False):
        prep = prepare(table, hier, config)
        assert ("s" in prep.grouper.sparse) and not prep.grouper.saturation
        if not sparse:
            prep.grouper.sparse = set()
        results.append(search_and_apply(prep, prep.checker))
    assert_same_result(*results)
