"""Sparse per-class sensitive statistics (large sensitive domains) against the dense form.

The dense (classes x values) histogram is the reference: every ℓ-diversity and
t-closeness variant must take the same decision (and t-closeness the same distance)
on the sparse (class, value, count) entries, the sparse roll-up must equal summing
dense rows, and a whole search with sparse statistics forced on must find the same
optimum as with dense ones.
"""

from __future__ import annotations


import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, LDiversity, TCloseness
from fedanon.engine.anonymizer import prepare, search_and_apply
from fedanon.stats.classhist import SparseHistogram
from fedanon.model.privacy.tcloseness import TClosenessCriterion
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import CriterionContext
from fedanon.data.io.delimited import read_table_csv
from fedanon.model.privacy.ldiversity import LDiversityCriterion
from test_engine_saturation import assert_same_result

from datasets import ADULT_DIR as ADULT
from model_cases import sparse_of


def _random_hist(seed: int, classes: int, domain: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    hist = rng.integers(0, 5, size=(classes, domain)) * (rng.random((classes, domain)) < 0.3)
    hist[hist.sum(axis=1) == 0, rng.integers(0, domain)] = 1
    return hist.astype(np.int64)


@pytest.mark.parametrize("shuffled", [False, True])  # entries in any order (a renumbering roll-up keeps its base's)
@pytest.mark.parametrize("variant,l,c", [("distinct", 3, None), ("entropy", 2.5, None), ("entropy", 4, None),
                                         ("recursive", 3, 2.0), ("recursive", 2, 1.0), ("recursive", 1, 0.5),
                                         ("recursive", 4, 3.0), ("recursive", 5, 1.5)])
def test_l_diversity_sparse_equals_dense(variant, l, c, shuffled):
    """Counts 0-4: many ties among a class's largest counts, which the recursive test's
    rounds of maxima must count once each."""
    dense = _random_hist(1, 400, 12)
    crit = LDiversityCriterion(LDiversity(variant, l, "s", c))
    want = crit.classes_ok(ClassStats(dense.sum(axis=1), {"s": dense}))
    sparse = sparse_of(dense)
    if shuffled:
        order = np.random.default_rng(9).permutation(sparse.cls.shape[0])
        sparse = SparseHistogram(sparse.cls[order], sparse.value[order], sparse.count[order], *dense.shape)
    got = crit.classes_ok(ClassStats(dense.sum(axis=1), {"s": sparse}))
    if variant == "recursive" and l >= 3:
        assert 0 < want.sum() < len(want)  # the rounds decide: some classes pass, some fail
    assert 0 < want.sum() < len(want) or variant == "recursive"  # the case is not trivial
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("kind", ["equal", "hierarchical"])
def test_t_closeness_sparse_distances_equal_dense(kind):
    # 12 leaves under 6, 3, 1 inner nodes: a non-identity leaf map on one side too
    rows = [[f"v{i}", f"a{i // 2}", f"b{i // 4}", "*"] for i in range(12)]
    code_map, _ = Hierarchy.from_rows("s", rows).code_map([f"v{i}".encode() for i in range(12)])
    total = np.random.default_rng(3).integers(1, 30, size=12)
    dense = _random_hist(2, 300, 12)
    for t in (0.1, 0.25, 0.4):
        crit = TClosenessCriterion(TCloseness(t, kind, "s"))
        crit.prepare(CriterionContext(n_rows=int(total.sum()), histograms_total={"s": total},
                                      sensitive_code_maps={"s": code_map}))
        d_dense = crit.distances(ClassStats(dense.sum(axis=1), {"s": dense}))
        d_sparse = crit.distances(ClassStats(dense.sum(axis=1), {"s": sparse_of(dense)}))
        assert np.allclose(d_dense, d_sparse, rtol=1e-12, atol=1e-12)
        ok_dense = crit.classes_ok(ClassStats(dense.sum(axis=1), {"s": dense}))
        ok_sparse = crit.classes_ok(ClassStats(dense.sum(axis=1), {"s": sparse_of(dense)}))
        assert ok_dense.tolist() == ok_sparse.tolist()


def test_sparse_rollup_equals_dense_sum():
    dense = _random_hist(4, 200, 9)
    class_map = np.random.default_rng(5).integers(0, 17, size=200)
    _, class_map = np.unique(class_map, return_inverse=True)  # dense ids
    n_coarse = int(class_map.max()) + 1
    coarse = np.zeros((n_coarse, 9), dtype=np.int64)
    np.add.at(coarse, class_map, dense)
    rolled = sparse_of(dense).rollup(class_map, n_coarse)
    assert np.array_equal(rolled.toarray(), coarse)
    assert np.array_equal(rolled.sizes(), coarse.sum(axis=1))
    assert np.array_equal(rolled.distinct(), (coarse > 0).sum(axis=1))
    # a pure renumbering keeps every entry
    perm = np.random.default_rng(6).permutation(200)
    assert np.array_equal(sparse_of(dense).rollup(perm, 200).toarray()[perm], dense)


@pytest.mark.parametrize("classes,domain,coarse_classes", [(40, 9, 7), (3000, 800, 1200), (5000, 5000, 4999)])
def test_sparse_counting_and_sorting_paths_equal_dense(classes, domain, coarse_classes):
    """Small key spans are counted densely, large ones sorted with the counts packed into the
    key: both must give the dense matrix, from rows and in a roll-up, sorted by (class, value)."""
    rng = np.random.default_rng(classes)
    n = 6000
    row_class = rng.integers(0, classes, size=n)
    codes = rng.integers(0, domain, size=n).astype(np.uint16)
    dense = np.zeros((classes, domain), dtype=np.int64)
    np.add.at(dense, (row_class, codes.astype(np.int64)), 1)
    built = SparseHistogram.from_rows(row_class, codes, classes, domain)
    assert np.array_equal(built.toarray(), dense)
    assert np.all(built.count > 0)
    order = built.cls * domain + built.value
    assert np.all(np.diff(order) > 0)  # each pair once, sorted by (class, value)
    class_map = rng.integers(0, coarse_classes, size=classes)
    _, class_map = np.unique(class_map, return_inverse=True)
    n_coarse = int(class_map.max()) + 1
    coarse = np.zeros((n_coarse, domain), dtype=np.int64)
    np.add.at(coarse, class_map, dense)
    rolled = built.rollup(class_map, n_coarse)
    assert np.array_equal(rolled.toarray(), coarse)
    assert np.all(np.diff(rolled.cls * domain + rolled.value) > 0)
    assert np.array_equal(rolled.distinct(), (coarse > 0).sum(axis=1))


def _adult():
    header, rows = read_table_csv(ADULT / "adult.csv")
    attrs = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
             "occupation", "salary-class"]
    hier = {a: Hierarchy.read_csv(ADULT / f"adult_hierarchy_{a}.csv", a) for a in attrs}
    return EncodedTable.from_rows(header, rows), hier, [a for a in attrs if a != "occupation"]


@pytest.mark.parametrize("model,suppression", [
    (dict(l_diversity=LDiversity("recursive", 3, "occupation", 4)), 0.0),
    (dict(l_diversity=LDiversity("entropy", 3, "occupation")), 0.05),
    (dict(t_closeness=TCloseness(0.2, "hierarchical", "occupation")), 0.05),
    (dict(t_closeness=TCloseness(0.3, "equal", "occupation")), 0.0),
])
def test_search_with_sparse_statistics_finds_the_dense_optimum(model, suppression):
    """ADULT, 8 QIs, occupation sensitive: forcing sparse histograms changes nothing."""
    table, hier, qis = _adult()
    config = AnonymizationConfig(qis[:6], suppression=suppression, **model)
    results = []
    for force_sparse in (False, True):
        prep = prepare(table, hier, config)
        assert not prep.grouper.sparse  # occupation has 14 values: dense by default
        if force_sparse:
            prep.grouper.sparse = set(prep.grouper.sensitive_sizes)
        results.append(search_and_apply(prep, prep.checker))
    assert_same_result(*results)
