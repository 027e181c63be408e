"""The search only talks to the checker seam; progress, counters and tie-breaking."""

from __future__ import annotations


import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, anonymize, read_table_csv
from fedanon.engine.anonymizer import prepare, search_and_apply
from fedanon.engine.check.checker import Checker, NodeEvaluation
from fedanon.engine.search.flash import FlashSearch
from fedanon.engine.check.grouping import Grouper
from fedanon.engine.search.lattice import Lattice

from datasets import EXAMPLE_DIR as EXAMPLE
QIS = ["age", "sex", "zipcode"]


def example():
    header, rows = read_table_csv(EXAMPLE / "example.csv")
    hier = {a: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{a}.csv", a) for a in QIS}
    return EncodedTable.from_rows(header, rows), hier


class RecordingChecker(Checker):
    """A foreign checker (think: encrypted counts) that delegates and records the nodes asked."""

    def __init__(self, inner: Checker) -> None:
        self.inner = inner
        self.anonymity_monotone = inner.anonymity_monotone
        self.strict_monotone = inner.strict_monotone
        self.metric_monotone = inner.metric_monotone
        self.suppression_limit = inner.suppression_limit
        self.asked: list[tuple[int, ...]] = []
        self.checks = 0

    def evaluate(self, levels):
        self.asked.append(tuple(levels))
        self.checks += 1
        return self.inner.evaluate(levels)

    def failing_classes(self, stats, codes=None):
        return self.inner.failing_classes(stats, codes)


def test_search_runs_against_any_checker():
    table, hier = example()
    prep = prepare(table, hier, AnonymizationConfig(QIS, k=2))
    checker = RecordingChecker(prep.checker)
    outcome = FlashSearch(prep.lattice, checker).run()
    assert prep.lattice.node_levels(outcome.node) == (1, 0, 3)
    assert outcome.checks == len(checker.asked) == len(set(checker.asked))
    assert len(checker.asked) < prep.lattice.size  # predictive tagging spared checks


def test_search_and_apply_with_foreign_checker_materializes_like_anonymize():
    table, hier = example()
    cfg = AnonymizationConfig(QIS, k=3, suppression=0.25, metric="discernibility")
    prep = prepare(table, hier, cfg)
    res = search_and_apply(prep, RecordingChecker(prep.checker))
    ref = anonymize(table, hier, cfg)
    assert res.transformation == ref.transformation
    assert res.output.decode_rows() == ref.output.decode_rows()
    assert res.suppressed_rows == ref.suppressed_rows and res.information_loss == ref.information_loss


def test_progress_reaches_lattice_size():
    table, hier = example()
    seen = []
    res = anonymize(table, hier, AnonymizationConfig(QIS, k=2, suppression=0.25, metric="aecs"),
                    progress=lambda done, total: seen.append((done, total)))
    assert seen and all(total == 36 for _, total in seen)
    assert seen[-1][0] == 36
    assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))
    assert res.checks > 0


def test_rollup_matches_grouping_from_rows():
    """Every (specialization, generalization) pair of the example lattice, incl. no-merge roll-ups."""
    table, hier = example()
    header, rows = read_table_csv(EXAMPLE / "example.csv")
    hier["diagnosis"] = Hierarchy.read_csv(EXAMPLE / "example_hierarchy_diagnosis.csv", "diagnosis")
    from fedanon.model.privacy.ldiversity import LDiversity

    cfg = AnonymizationConfig(QIS, k=2, l_diversity=LDiversity("distinct", 2, "diagnosis"))
    prep = prepare(table, hier, cfg)
    g: Grouper = prep.grouper
    lat = prep.lattice

    def as_set(c):
        hist = c.stats.histograms["diagnosis"].tolist()
        return sorted(zip(map(tuple, c.codes.tolist()), c.stats.sizes.tolist(), map(tuple, hist)))

    direct = {n: g.group_rows(lat.node_levels(n)) for n in range(lat.size)}
    no_merge = 0
    for a in range(lat.size):
        for b in np.flatnonzero(lat.generalizations_mask(a)).tolist():
            rolled = g.rollup(direct[a], lat.node_levels(b))
            assert as_set(rolled) == as_set(direct[b])
            no_merge += rolled.count == direct[a].count
    assert no_merge > 0


def test_ties_resolve_to_lowest_generalization():
    # two symmetric QIs: (0,1) and (1,0) tie on height; the lexicographically smaller wins
    rows = [["a", "x"], ["a", "y"], ["b", "x"], ["b", "y"]]
    table = EncodedTable.from_rows(["p", "q"], rows)
    hp = Hierarchy.from_rows("p", [["a", "*"], ["b", "*"]])
    hq = Hierarchy.from_rows("q", [["x", "*"], ["y", "*"]])
    res = anonymize(table, {"p": hp, "q": hq}, AnonymizationConfig(["p", "q"], k=2, metric="height"))
    assert res.transformation == {"p": 0, "q": 1}
    assert res.information_loss == 1.0


def test_class_counts_reported():
    table, hier = example()
    res = anonymize(table, hier, AnonymizationConfig(QIS, k=2))
    out = res.output.decode_rows()
    assert res.classes == len({tuple(r[:3]) for r in out})
    assert res.rollups >= 0 and res.elapsed_s > 0
    assert np.array_equal(res.suppressed, np.zeros(8, dtype=bool))


def test_grouping_with_key_overflow_compaction():
    # 16 QIs x 40 values: the mixed-radix product (40^16) overflows int64, forcing compaction
    rng = np.random.default_rng(3)
    n, q = 500, 16
    values = rng.integers(0, 40, size=(n, q))
    values[250:] = values[:250]  # guarantee duplicates
    cols = [f"c{i}" for i in range(q)]
    table = EncodedTable.from_rows(cols, [[str(v) for v in row] for row in values])
    hier = {c: Hierarchy.from_rows(c, [[str(v), "*"] for v in range(40)]) for c in cols}
    prep = prepare(table, hier, AnonymizationConfig(cols, k=1))
    classes = prep.grouper.group_rows(tuple([0] * q), keep_rows=True)
    expected = {}
    for row in values.tolist():
        expected[tuple(row)] = expected.get(tuple(row), 0) + 1
    assert classes.count == len(expected)
    assert sorted(classes.stats.sizes.tolist()) == sorted(expected.values())
    # rows in one class share every QI value
    for cls in range(classes.count):
        members = values[classes.row_class == cls]
        assert (members == members[0]).all()


def test_metric_values_on_the_example_node_103():
    """Hand-computed values at (1,0,3): four classes of two rows, no suppression."""
    import math

    table, hier = example()
    expected = {
        "height": 4.0,
        "precision-star": (1 / 2 + 0 + 3 / 5) / 3,
        "precision": (1 / 2 + 0 + 3 / 5) / 3,
        "aecs": 2.0,
        "discernibility": 16.0,
        "discernibility-star": 16.0,
        # age: 2 rows in 1-19 (1 of 7 other leaves), 4 in 20-60 (3/7), 2 in 61-99 (1/7); zip: 8 x 3/7
        "loss": (2 / 7 + 12 / 7 + 2 / 7 + 24 / 7) / 24,
        # -log2 X per cell: age 2*1 + 4*2 + 2*1, zipcode 8*2
        "nonuniform-entropy": 28.0,
        # -X log2 X per cell: age 2*0.5 + 4*0.5 + 2*0.5, zipcode 8*0.5
        "entropy": 8.0,
    }
    for metric, value in expected.items():
        prep = prepare(table, hier, AnonymizationConfig(QIS, k=2, metric=metric))
        classes = prep.grouper.group_rows((1, 0, 3))
        ev = prep.checker.judge((1, 0, 3), classes)
        assert ev.anonymous and ev.classes == 4
        assert math.isclose(ev.loss, value, rel_tol=1e-12), metric


def test_suppression_aware_metric_values():
    """DM charges n per suppressed row, AECS counts the suppressed rows as one class,
    NUE adds the loss of generalizing the suppressed rows to the root (§3.6.2)."""
    import math

    table, hier = example()
    cfgs = {m: AnonymizationConfig(QIS, k=3, suppression=0.5, metric=m) for m in ("discernibility", "aecs", "nonuniform-entropy")}
    preps = {m: prepare(table, hier, c) for m, c in cfgs.items()}
    lat = preps["aecs"].lattice
    seen = 0
    for node in range(lat.size):
        levels = lat.node_levels(node)
        classes = preps["aecs"].grouper.group_rows(levels, keep_rows=True)
        sizes = classes.stats.sizes.tolist()
        dropped = [s for s in sizes if s < 3]
        if not 0 < sum(dropped) <= 4:
            continue
        seen += 1
        kept = [s for s in sizes if s >= 3]
        ev = {m: p.checker.judge(levels, p.grouper.group_rows(levels)) for m, p in preps.items()}
        assert ev["discernibility"].loss == sum(s * s for s in kept) + 8 * sum(dropped)
        assert math.isclose(ev["aecs"].loss, 8 / (len(kept) + 1))
        # NUE: the static part over all rows + per QI, -sum c*log2(c/S) over the suppressed rows' values
        static = preps["nonuniform-entropy"].checker.metric.static_loss(levels)
        rows = table.decode_rows()
        sup_rows = [r for r, cls in enumerate(classes.row_class.tolist()) if sizes[cls] < 3]
        extra = 0.0
        for qi, level in zip(QIS, levels):
            gen = {h[0]: h[level] for h in hier[qi].rows}
            counts = {}
            for r in sup_rows:
                v = gen[rows[r][table.column_index(qi)]]
                counts[v] = counts.get(v, 0) + 1
            extra += -sum(c * math.log2(c / len(sup_rows)) for c in counts.values())
        assert math.isclose(ev["nonuniform-entropy"].loss, static + extra, rel_tol=1e-12)
    assert seen > 0


def test_both_nonuniform_entropy_variants_hand_computed():
    """Node (1,1,4), k=3, 50 % suppression: classes 20-60 (4 rows), 61-99 (2), 1-19 (2);
    the two 2-row classes (4 rows) are suppressed.

    Static part, -log2(card(orig)/card(gen)) per cell: age 2*1 + 4*2 + 2*1 = 12,
    sex 8*1 = 8, zipcode 8*3 = 24 -> 44. The monotonic variant (ARX
    createEntropyMetric(true)) stops there; the non-monotonic one adds the suppressed
    rows generalized to the root: age {61-99: 2, 1-19: 2} -> 2*1 + 2*1 = 4, sex and
    zipcode one value each -> 0, so 48."""
    import math

    table, hier = example()
    expected = {"nonuniform-entropy-monotonic": 44.0, "nonuniform-entropy": 48.0}
    for metric, value in expected.items():
        prep = prepare(table, hier, AnonymizationConfig(QIS, k=3, suppression=0.5, metric=metric))
        ev = prep.checker.judge((1, 1, 4), prep.grouper.group_rows((1, 1, 4)))
        assert ev.anonymous and ev.suppressed_rows == 4 and ev.classes == 1
        assert math.isclose(ev.loss, value, rel_tol=1e-12), metric
        # only the monotonic variant lets Flash skip phase 2 under suppression
        assert prep.checker.metric_monotone is (metric == "nonuniform-entropy-monotonic")
    # without suppression the two are the same metric
    for levels in [(0, 0, 0), (1, 0, 3), (2, 1, 5)]:
        losses = [prepare(table, hier, AnonymizationConfig(QIS, k=1, metric=m)).checker.evaluate(levels).loss
                  for m in expected]
        assert math.isclose(losses[0], losses[1], rel_tol=1e-12)


class BoundedRecordingChecker(RecordingChecker):
    """A recording checker that also passes on the metric's static bound, so the search may take
    its bound-guided phase 1 (`RecordingChecker` alone gets plain Flash_B)."""

    def __init__(self, inner: Checker, bound_scale: float = 1.0) -> None:
        super().__init__(inner)
        self.bound_scale = bound_scale

    def static_bounds(self, levels):
        # scaled below 1: still a monotone lower bound, no longer the loss itself
        bounds = self.inner.static_bounds(levels)
        return None if bounds is None else bounds * self.bound_scale



@pytest.mark.parametrize("metric", ["entropy", "nonuniform-entropy", "loss", "precision", "discernibility"])
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("bound_scale", [1.0, 0.5, 0.0])
def test_bound_guided_phase_finds_flash_bs_node_and_asks_each_node_once(metric, k, bound_scale):
    """Without suppression the guided phase must end on Flash_B's node (ties included) with the
    same loss; a guided phase that stopped early, or scored an anonymous node wrongly, fails.
    Weaker bounds (halved, or 0 everywhere: still monotone lower bounds) leave more nodes open;
    the result must not change."""
    table, hier = example()
    prep = prepare(table, hier, AnonymizationConfig(QIS, k=k, suppression=0.0, metric=metric))
    plain = FlashSearch(prep.lattice, RecordingChecker(prep.checker)).run()
    bounded = BoundedRecordingChecker(prep.checker, bound_scale)
    guided_search = FlashSearch(prep.lattice, bounded)
    guided = guided_search.run()
    # guided only where Flash_B would run (a metric monotone without suppression) with a static bound
    guides = plain.algorithm == "Flash_B" and prep.checker.static_bounds(prep.lattice.levels[:1]) is not None
    assert guided.algorithm == ("Flash_B (bound-guided)" if guides else plain.algorithm)
    assert guided.node == plain.node
    assert guided.loss == pytest.approx(plain.loss, rel=1e-12, abs=1e-12)
    assert guided.checks == len(bounded.asked) == len(set(bounded.asked))


@pytest.mark.parametrize("metric", ["loss", "discernibility"])
def test_bound_guided_phase_is_not_taken_with_suppression(metric):
    """With suppression an anonymous node's loss needs its classes: the search is Flash's own."""
    table, hier = example()
    prep = prepare(table, hier, AnonymizationConfig(QIS, k=2, suppression=0.25, metric=metric))
    plain = FlashSearch(prep.lattice, RecordingChecker(prep.checker)).run()
    bounded = BoundedRecordingChecker(prep.checker)
    outcome = FlashSearch(prep.lattice, bounded).run()
    assert "bound-guided" not in outcome.algorithm and outcome.node == plain.node
