"""The criteria's suppression bounds (`Criterion.suppression_bound`) are sound and monotone.

The search tags every specialization of a node whose bound exceeds the suppression limit as
failing, without checking it. That is right only if (1) the bound never exceeds the rows that
the criterion's own rule suppresses at the node (else an anonymous node would be dropped), and
(2) the bound never grows when classes merge, as they do under generalization (else a
specialization tagged as failing could pass). Both are checked here on random class tables and
random merges of their classes, apart from any search: a bound that overshoots by one row, or
that a merge raises, fails the test. The search-level consequence (Flash == exhaustive ==
the independent reference) is checked in each model's own test file.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fedanon.model.criterion import CriterionContext
from fedanon.model.privacy.blikeness import BetaLikeness
from fedanon.model.privacy.ddisclosure import DeltaDisclosure
from fedanon.model.privacy.lkc import LKCPrivacy
from fedanon.model.privacy.reidentification import AverageRisk
from fedanon.stats.classes import ClassStats
from fedanon.stats.classhist import SparseHistogram

SLACK = 1e-7


def _criterion(kind: str, parameter: float, total: np.ndarray):
    model = {"basic": lambda: BetaLikeness(parameter, "basic", "s"),
             "enhanced": lambda: BetaLikeness(parameter, "enhanced", "s"),
             "delta": lambda: DeltaDisclosure(parameter, "s"),
             "average": lambda: AverageRisk(min(parameter / 4.0, 1.0))}[kind]()
    criterion = model.criterion()
    criterion.prepare(CriterionContext(n_rows=int(total.sum()), histograms_total={"s": total}))
    return criterion


def _suppressed(criterion, stats: ClassStats) -> int:
    """Rows the criterion's own rule suppresses at this node (class by class, or release-level)."""
    failing = np.zeros(stats.sizes.shape[0], dtype=bool)
    if criterion.release_level:
        failing = np.asarray(criterion.enforce_classes(stats, None, failing), dtype=bool)
    else:
        failing = ~np.asarray(criterion.classes_ok(stats), dtype=bool)
    return int(stats.sizes[failing].sum())


@st.composite
def class_tables(draw):
    """Per-class histograms of a sensitive attribute (2-5 values, 1-25 classes) and a merge of
    the classes into coarser ones (each coarse class a union of fine ones)."""
    domain = draw(st.integers(2, 5))
    n_classes = draw(st.integers(1, 25))
    hist = np.array([[draw(st.integers(0, 6)) for _ in range(domain)] for _ in range(n_classes)], dtype=np.int64)
    hist[hist.sum(axis=1) == 0, 0] = 1   # no empty class
    merge = np.array([draw(st.integers(0, max(0, n_classes - 1))) for _ in range(n_classes)], dtype=np.int64)
    _, merge = np.unique(merge, return_inverse=True)
    kind = draw(st.sampled_from(["basic", "enhanced", "delta", "average"]))
    parameter = draw(st.sampled_from([0.3, 0.7, 1.0, 1.5, 2.5]))
    return hist, merge.reshape(-1), kind, parameter


@settings(max_examples=400, deadline=None)
@given(case=class_tables())
def test_bound_is_at_most_the_rule_and_never_grows_under_merging(case):
    hist, merge, kind, parameter = case
    total = hist.sum(axis=0)
    if (total == 0).any():   # every value of the domain occurs in the table
        hist[0, total == 0] = 1
        total = hist.sum(axis=0)
    criterion = _criterion(kind, parameter, total.astype(np.float64))
    fine = ClassStats(hist.sum(axis=1), {"s": hist})
    n_coarse = int(merge.max()) + 1
    coarse_hist = np.zeros((n_coarse, hist.shape[1]), dtype=np.int64)
    np.add.at(coarse_hist, merge, hist)
    coarse = ClassStats(coarse_hist.sum(axis=1), {"s": coarse_hist})
    for stats in (fine, coarse):
        assert criterion.suppression_bound(stats) <= _suppressed(criterion, stats) + SLACK
    assert criterion.suppression_bound(coarse) <= criterion.suppression_bound(fine) + SLACK


def test_bound_by_hand():
    # table: values x, y at 1/2 each; basic 0.5-likeness allows count <= 0.75 |E| of each value.
    # Class A = 4 x (excess 4 - 3 = 1, over 1 - 0.75: 4 rows), class B = 2 x + 2 y (no excess).
    hist = np.array([[4, 0], [2, 2], [0, 6]])
    criterion = _criterion("basic", 0.5, hist.sum(axis=0).astype(np.float64))
    stats = ClassStats(hist.sum(axis=1), {"s": hist})
    # A: excess of x = 1 -> 1 / 0.25 = 4 rows; C = 6 y: excess 6 - 4.5 = 1.5 -> 6 rows
    assert abs(criterion.suppression_bound(stats) - 10.0) < 1e-6
    assert _suppressed(criterion, stats) == 10
    # average risk 0.25 on classes of sizes 1, 1, 1, 5: 4 classes - 0.25 * 8 rows = 2 rows at least
    risk = _criterion("average", 1.0, np.array([4.0, 4.0]))
    sizes = np.array([1, 1, 1, 5])
    assert abs(risk.suppression_bound(ClassStats(sizes, {})) - 2.0) < 1e-6
    assert _suppressed(risk, ClassStats(sizes, {})) >= 2


@st.composite
def lkc_tables(draw):
    """Classes with distinct QI codes (2-3 QIs of up to 4 codes), sensitive histograms, and a
    generalization: per QI a map of its codes onto coarser ones; classes equal after it merge."""
    n_qis = draw(st.integers(2, 3))
    radix = [draw(st.integers(1, 4)) for _ in range(n_qis)]
    cells = sorted({tuple(draw(st.integers(0, r - 1)) for r in radix)
                    for _ in range(draw(st.integers(1, 14)))})
    codes = np.array(cells, dtype=np.int64)
    domain = draw(st.integers(2, 4))
    hist = np.array([[draw(st.integers(0, 4)) for _ in range(domain)] for _ in cells], dtype=np.int64)
    hist[hist.sum(axis=1) == 0, 0] = 1
    maps = [np.array([draw(st.integers(0, r - 1)) for _ in range(r)], dtype=np.int64) for r in radix]
    model = LKCPrivacy(draw(st.integers(1, n_qis)), draw(st.integers(1, 6)),
                       draw(st.sampled_from([0.4, 0.6, 0.75, 1.0])), "s")
    return codes, hist, maps, model


@settings(max_examples=300, deadline=None)
@given(case=lkc_tables())
def test_lkc_bound_is_at_most_the_rule_and_never_grows_under_generalization(case):
    codes, hist, maps, model = case
    coarse_codes = np.stack([m[codes[:, i]] for i, m in enumerate(maps)], axis=1)
    merged, inverse = np.unique(coarse_codes, axis=0, return_inverse=True)
    coarse_hist = np.zeros((merged.shape[0], hist.shape[1]), dtype=np.int64)
    np.add.at(coarse_hist, inverse.reshape(-1), hist)
    bounds = []
    for c, h in ((codes, hist), (merged, coarse_hist)):
        criterion = model.criterion()
        criterion.prepare(CriterionContext(n_rows=int(hist.sum()), histograms_total={"s": hist.sum(axis=0)}))
        stats = ClassStats(h.sum(axis=1), {"s": h})
        failing = np.asarray(criterion.enforce_classes(stats, c, np.zeros(c.shape[0], dtype=bool)), dtype=bool)
        bound = criterion.suppression_bound(stats, c)
        assert bound <= int(stats.sizes[failing].sum()) + SLACK
        bounds.append(bound)
    assert bounds[1] <= bounds[0] + SLACK


@settings(max_examples=150, deadline=None)
@given(case=lkc_tables())
def test_lkc_bound_kept_per_subset_and_levels_equals_the_bound_computed_afresh(case):
    """The search hands the node's levels; the figure of a QI subset at given levels is then kept
    and reused by later nodes with those levels on the subset. It must equal the bound computed
    from the node's classes alone, whichever node asked first."""
    codes, hist, maps, model = case
    coarse_codes = np.stack([m[codes[:, i]] for i, m in enumerate(maps)], axis=1)
    merged, inverse = np.unique(coarse_codes, axis=0, return_inverse=True)
    coarse_hist = np.zeros((merged.shape[0], hist.shape[1]), dtype=np.int64)
    np.add.at(coarse_hist, inverse.reshape(-1), hist)
    n_qis = codes.shape[1]
    # node A: every QI at level 0; node B: QI 0 generalized only (the others as in A)
    partly = np.concatenate([coarse_codes[:, :1], codes[:, 1:]], axis=1)
    part_codes, part_inverse = np.unique(partly, axis=0, return_inverse=True)
    part_hist = np.zeros((part_codes.shape[0], hist.shape[1]), dtype=np.int64)
    np.add.at(part_hist, part_inverse.reshape(-1), hist)
    nodes = [((0,) * n_qis, codes, hist), ((1,) + (0,) * (n_qis - 1), part_codes, part_hist),
             ((1,) * n_qis, merged, coarse_hist)]
    context = CriterionContext(n_rows=int(hist.sum()), histograms_total={"s": hist.sum(axis=0)})
    kept = model.criterion()
    kept.prepare(context)
    for order in (nodes, nodes[::-1]):
        for levels, c, h in order:
            afresh = model.criterion()
            afresh.prepare(context)
            stats = ClassStats(h.sum(axis=1), {"s": h})
            assert abs(kept.suppression_bound(stats, c, None, levels) - afresh.suppression_bound(stats, c)) < 1e-9


@settings(max_examples=150, deadline=None)
@given(case=class_tables())
def test_sparse_histograms_give_the_dense_bound(case):
    """A large sensitive domain keeps (class, value, count) entries instead of a matrix; the bound
    read from them is the one read from the matrix."""
    hist, _, kind, parameter = case
    total = hist.sum(axis=0)
    if (total == 0).any():
        hist[0, total == 0] = 1
        total = hist.sum(axis=0)
    criterion = _criterion(kind, parameter, total.astype(np.float64))
    row_class = np.repeat(np.repeat(np.arange(hist.shape[0]), hist.shape[1]), hist.ravel())
    row_value = np.repeat(np.tile(np.arange(hist.shape[1]), hist.shape[0]), hist.ravel())
    sparse = SparseHistogram.from_rows(row_class, row_value, hist.shape[0], hist.shape[1])
    sizes = hist.sum(axis=1)
    dense_bound = criterion.suppression_bound(ClassStats(sizes, {"s": hist}))
    assert abs(criterion.suppression_bound(ClassStats(sizes, {"s": sparse})) - dense_bound) < 1e-6
