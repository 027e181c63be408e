"""The reference and the engine against values worked out by hand from the dissertation.

Three layers, none of which takes a number from the engine:
1. the reference (tests/reference.py) reproduces the dissertation's worked examples
   (Abb. 2.5-2.7, 2.13/2.14, 3.3) and the facts in docs/design.md (running example);
2. every metric, with suppression, on two of the dissertation's example nodes is
   computed by hand below (the arithmetic is spelled out next to each value) and
   both the reference and the engine must produce it;
3. where the engine's documented definition differs from the dissertation's formula
   (PM orientation, AECS normalization, DM* summation), the relation is pinned.

The running example (data/example): ages 34 45 66 70 35 21 18 19, sexes m f m m f m f f,
zipcodes 82667 81775 81925 81931 81951 82451 82931 82004, diagnoses p p g p p g p g
(p = pneumonia, g = gastritis). Rows are numbered r1..r8 in file order.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedanon.engine import AnonymizationConfig, anonymize
from fedanon.engine.anonymizer import prepare
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from reference import METRICS, Model, Reference, Tree, distribution, emd_equal, emd_hierarchical, l_diverse, \
    read_hierarchy, read_table

from datasets import EXAMPLE_DIR as DATA
QIS = ["age", "sex", "zipcode"]
COLUMNS, ROWS = read_table(DATA / "example.csv")
HIER = {a: read_hierarchy(DATA / f"example_hierarchy_{a}.csv") for a in QIS + ["diagnosis"]}


def ref(**model) -> Reference:
    return Reference(COLUMNS, ROWS, HIER, Model(QIS, **model))


# ------------------------------------------------------------------ 1. the reference itself
def test_lattice_facts() -> None:
    """docs/design.md running example / Abb. 2.14: 36 nodes, 9 levels; (1,0,3): 3 successors, 2 predecessors, 7 below, 11 above."""
    nodes = ref().nodes()
    assert len(nodes) == 36 and len({sum(n) for n in nodes}) == 9
    node = (1, 0, 3)
    up = [n for n in nodes if sum(n) == 5 and all(a >= b for a, b in zip(n, node))]
    down = [n for n in nodes if sum(n) == 3 and all(a <= b for a, b in zip(n, node))]
    assert len(up) == 3 and len(down) == 2
    assert len([n for n in nodes if n != node and all(a <= b for a, b in zip(n, node))]) == 7
    assert len([n for n in nodes if n != node and all(a >= b for a, b in zip(n, node))]) == 11
    assert nodes[0] == (0, 0, 0) and nodes[-1] == (2, 1, 5)


def test_two_anonymous_relation_of_figure_2_5() -> None:
    """Abb. 2.5 is node (1,0,3): four classes of two rows, so 2-anonymous, not 3-anonymous."""
    r = ref(k=2)
    res = r.evaluate((1, 0, 3))
    assert sorted(len(m) for m in res.classes.values()) == [2, 2, 2, 2] and not res.failing
    assert r.output(res)[0] == ["20-60", "male", "82***", "pneumonia"]
    assert r.output(res)[6] == ["1-19", "female", "82***", "pneumonia"]
    assert len(ref(k=3).evaluate((1, 0, 3)).failing) == 4


def test_design_optimum_two_anonymity_nonuniform_entropy() -> None:
    """docs/design.md running example (and §3.7's Flash walk-through): 2-anonymity, 0 %, NUEM -> (1,0,3)."""
    best = ref(k=2, metric="nonuniform-entropy").optimum()
    assert best.levels == (1, 0, 3)
    # NUEM by hand (eq. 3.2): age 20-60 holds 4 rows (4·log2 4 = 8), 61-99 and 1-19 two each (2 + 2);
    # zipcode 82*** and 81*** four rows each (8 · 2); sex unchanged (0) -> 28
    assert best.loss == pytest.approx(28.0)


def test_design_optimum_recursive_diversity_aecs() -> None:
    """docs/design.md running example: recursive-(4,2), 25 % (2 rows), AECS -> (1,0,3); ties broken towards lower levels."""
    r = ref(l_diversity=("recursive", 2, 4, "diagnosis"), suppression=0.25, metric="aecs")
    best = r.optimum()
    assert best.levels == (1, 0, 3) and best.suppressed_rows == {1, 4}  # r2, r5: both pneumonia
    tied = [lv for lv in r.nodes() if (e := r.evaluate(lv)).anonymous and e.loss == pytest.approx(best.loss)]
    assert len(tied) > 1 and tied[0] == (1, 0, 3)


def test_figure_2_6_node_1_1_4() -> None:
    """Abb. 2.6 = node (1,1,4): distinct-2-diverse, recursive-(4,2)-diverse, 0.2-close (both EMDs)."""
    for model in (dict(l_diversity=("distinct", 2, None, "diagnosis")),
                  dict(l_diversity=("recursive", 2, 4, "diagnosis")),
                  dict(t_closeness=(0.2, "equal", "diagnosis")),
                  dict(t_closeness=(0.2, "hierarchical", "diagnosis"))):
        res = ref(**model).evaluate((1, 1, 4))
        assert not res.failing, model
    # ... and the sharper statement behind it: the largest EMD is 1/8 (class 20-60 is 3 p : 1 g vs 5 : 3)
    q = distribution([r[3] for r in ROWS])
    assert q == {"pneumonia": 5 / 8, "gastritis": 3 / 8}
    assert emd_equal({"pneumonia": 0.5, "gastritis": 0.5}, q) == pytest.approx(0.125)
    # the two values meet only at the root (level 2 of 2): hierarchical EMD = equal EMD here
    assert emd_hierarchical({"pneumonia": 0.5, "gastritis": 0.5}, q, Tree(HIER["diagnosis"])) == pytest.approx(0.125)


def test_figure_3_3_emd_values() -> None:
    """Abb. 3.3 (t-closeness and suppression): 3 p + 12 g overall; G = 0.47, 0.3, 0.2, and 0.4 after merging."""
    q = {"pneumonia": 3 / 15, "gastritis": 12 / 15}
    tree = Tree(HIER["diagnosis"])
    g012 = emd_equal(distribution(["pneumonia", "gastritis", "pneumonia"]), q)
    assert round(g012, 2) == 0.47
    assert emd_equal(distribution(["pneumonia", "gastritis"]), q) == pytest.approx(0.3)
    assert emd_hierarchical(distribution(["pneumonia", "gastritis"]), q, tree) == pytest.approx(0.3)
    assert emd_equal(distribution(["gastritis"] * 10), q) == pytest.approx(0.2)
    assert emd_hierarchical(distribution(["gastritis"] * 10), q, tree) == pytest.approx(0.2)
    assert emd_equal(distribution(["pneumonia", "gastritis", "pneumonia", "pneumonia", "gastritis"]), q) \
        == pytest.approx(0.4)


def test_hierarchical_emd_uses_tree_distances() -> None:
    """Li et al.: moving mass between siblings costs 1/H, across the root 1 (a case where they differ)."""
    tree = Tree([["a", "x", "*"], ["b", "x", "*"], ["c", "y", "*"]])
    q = {"a": 0.5, "b": 0.5}
    assert emd_hierarchical({"a": 1.0}, q, tree) == pytest.approx(0.5 * 1 / 2)  # a<->b share parent x
    assert emd_hierarchical({"c": 1.0}, q, tree) == pytest.approx(1.0)  # everything crosses the root
    assert emd_equal({"a": 1.0}, q) == pytest.approx(0.5)


def test_l_diversity_definitions() -> None:
    """§2.4.2 and Abb. 3.2's numbers: 12 > 3·3 fails recursive-(3,2); entropy ℓ compares ln-entropy with ln ℓ."""
    assert not l_diverse(["g"] * 12 + ["p", "x", "y"], "recursive", 2, 3)  # 12 < 3·3 is false
    assert l_diverse(["g", "g", "p"], "recursive", 2, 3)  # 2 < 3·1 (the text's R = 2 < 3·(1))
    assert l_diverse(["p", "g"], "entropy", 2, None)  # exactly ln 2 passes (1e-9 tolerance)
    assert not l_diverse(["p", "p", "g"], "entropy", 2, None)
    assert l_diverse(["p", "g"], "distinct", 2, None) and not l_diverse(["p", "p"], "distinct", 2, None)


def test_figure_2_7_delta_presence() -> None:
    """Abb. 2.7: research subset = the men, node (2,1,3) is (0, 0.5)-present, (0, 0.4) is not."""
    men = [r[1] == "male" for r in ROWS]
    res = ref(delta_presence=(0.0, 0.5), subset=men).evaluate((2, 1, 3))
    assert sorted(len(m) for m in res.classes.values()) == [4, 4] and not res.failing
    assert len(ref(delta_presence=(0.0, 0.4), subset=men).evaluate((2, 1, 3)).failing) == 2


# ------------------------------------------------------------------ 2. metrics with suppression by hand
# Node (1,1,4) (Abb. 2.6) under 3-anonymity with 50 % suppression: classes 20-60 {r1,r2,r5,r6} (kept),
# 61-99 {r3,r4} and 1-19 {r7,r8} (suppressed: 4 rows). n = 8 rows, 3 QIs (max levels 2, 1, 5).
# Age hierarchy: 8 leaves; 20-60 has 4, 61-99 and 1-19 two each. Sex: 2 leaves. Zipcode: 8 leaves.
NODE_114 = {
    "height": 1 + 1 + 4,
    "precision-star": (1 / 2 + 1 / 1 + 4 / 5) / 3,
    # kept rows 2.3 each (4 rows), suppressed cells 1 each (4 rows × 3): (9.2 + 12) / 24
    "precision": (4 * 2.3 + 4 * 3) / 24,
    # kept row: age 20-60 (4-1)/(8-1), sex * (2-1)/(2-1), zip 8**** (8-1)/(8-1); suppressed rows 3 each
    "loss": (4 * (3 / 7 + 1 + 1) + 4 * 3) / 24,
    # one kept class + one class of all suppressed rows
    "aecs": 8 / 2,
    # kept 4² + suppressed n·|E| = 8·2 + 8·2
    "discernibility": 16 + 8 * 2 + 8 * 2,
    # all classes, suppression ignored: 4² + 2² + 2²
    "discernibility-star": 16 + 4 + 4,
    # NUEM over all rows: age 4·log2 4 + 2·1 + 2·1 = 12, sex 8·log2(8/4) = 8, zip 8·log2 8 = 24 -> 44;
    # eq. 3.5 over S = {r3,r4,r7,r8}: age 61-99 / 1-19 two each -> Y = 1/2, 4·1 = 4; sex, zip: Y = 1 -> 0
    "nonuniform-entropy": 44 + 4,
    # the monotonic variant (ARX createEntropyMetric(true)) does not charge suppression
    "nonuniform-entropy-monotonic": 44,
    # EM: age 4·(¼·2) + 2·(½·1) + 2·(½·1) = 4, sex 8·(½·1) = 4, zip 8·(⅛·3) = 3 -> 11; S term: 4·(½·1) = 2
    "entropy": 11 + 2,
    # table domains: age 8 values, sex 2, zipcode 8 (a suppressed row: 8·2·8 = 128);
    # kept rows: age 20-60 covers 4 values, sex * 2, zip 8**** 8 -> 64 each: (4·64 + 4·128) / 8
    "ambiguity": (4 * 64 + 4 * 128) / 8,
    # KL divergence in bits: 8 distinct tuples, p = 1/8 each; domain 128 cells. The 4 suppressed rows
    # spread 4/8 over 128 cells (1/256 each); the kept class spreads 4/8 over its 64 cells (1/128 each).
    # r1,r2,r5,r6: q = 1/128 + 1/256 = 3/256 -> 4 · 1/8 · log2(32/3); r3,r4,r7,r8: q = 1/256 -> 4 · 1/8 · 5
    "kl-divergence": 0.5 * math.log2(32 / 3) + 0.5 * 5,
}
# Node (1,0,3) (Abb. 2.5) under recursive-(4,2)-diversity with 25 % suppression: 20-60/female/81***
# {r2,r5} holds only pneumonia and is suppressed; {r1,r6}, {r3,r4}, {r7,r8} are kept.
NODE_103 = {
    "height": 4,
    "precision-star": (1 / 2 + 0 + 3 / 5) / 3,
    "precision": (6 * 1.1 + 2 * 3) / 24,
    # kept: r1, r6 (20-60: 3/7, zip 82***: 3/7), r3, r4 (61-99: 1/7, 81***: 3/7), r7, r8 (1-19: 1/7, 3/7)
    "loss": (2 * 6 / 7 + 4 * 4 / 7 + 2 * 3) / 24,
    "aecs": 8 / 4,
    "discernibility": 3 * 4 + 8 * 2,
    "discernibility-star": 4 * 4,
    # S = {r2, r5} agree on every QI (20-60, female, 81***): the suppression term is 0
    "nonuniform-entropy": 12 + 0 + 16,
    "nonuniform-entropy-monotonic": 12 + 0 + 16,
    "entropy": (2 + 1 + 1) + 0 + 8 * (1 / 4 * 2),
    # r1, r6: 20-60 (4 values) · sex 1 · 82*** (4 zips) = 16; r3, r4: 61-99 (2) · 1 · 81*** (4) = 8;
    # r7, r8: 1-19 (2) · 1 · 82*** (4) = 8; r2, r5 suppressed: 128 each -> (2·16 + 4·8 + 2·128) / 8
    "ambiguity": (2 * 16 + 4 * 8 + 2 * 128) / 8,
    # KL divergence: S = {r2, r5} spreads 2/8 over 128 cells (1/512 each). r1, r6: 2/8 over the 16 cells
    # of 20-60/male/82*** -> q = 1/64 + 1/512 = 9/512; r3, r4 and r7, r8: 2/8 over 8 cells -> q = 17/512;
    # r2, r5: q = 1/512. Σ 1/8 · log2((1/8) / q) = 2/8 log2(64/9) + 4/8 log2(64/17) + 2/8 log2(64)
    "kl-divergence": 0.25 * math.log2(64 / 9) + 0.5 * math.log2(64 / 17) + 0.25 * 6,
}
CASES = [
    ((1, 1, 4), dict(k=3, suppression=0.5), NODE_114),
    ((1, 0, 3), dict(l_diversity=("recursive", 2, 4, "diagnosis"), suppression=0.25), NODE_103),
]


def engine_config(model: dict, metric: str) -> AnonymizationConfig:
    ld = model.get("l_diversity")
    return AnonymizationConfig(QIS, k=model.get("k", 1), suppression=model["suppression"], metric=metric,
                               l_diversity=LDiversity(ld[0], ld[1], ld[3], c=ld[2]) if ld else None)


def engine_loss_at(node: tuple[int, ...], config: AnonymizationConfig) -> tuple[float, int]:
    """The engine's loss and suppressed rows at one node (its own checker, no search)."""
    table = EncodedTable.from_rows(COLUMNS, ROWS)
    hierarchies = {a: Hierarchy.from_rows(a, rows) for a, rows in HIER.items()}
    evaluation = prepare(table, hierarchies, config).checker.evaluate(node)
    return evaluation.loss, evaluation.suppressed_rows


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("node,model,expected", CASES, ids=["1-1-4_k3_50pct", "1-0-3_rec42_25pct"])
def test_metric_with_suppression_by_hand(node, model, expected, metric) -> None:
    r = ref(metric=metric, **model)
    res = r.evaluate(node)
    assert res.anonymous and len(res.suppressed_rows) == (4 if node == (1, 1, 4) else 2)
    assert res.loss == pytest.approx(expected[metric], rel=1e-12)
    loss, suppressed = engine_loss_at(node, engine_config(model, metric))
    assert suppressed == len(res.suppressed_rows)
    assert loss == pytest.approx(expected[metric], rel=1e-12), (metric, node)


def test_engine_optimum_reports_hand_computed_loss() -> None:
    """The full search on the suppression case of docs/design.md's running example reports the hand value AECS = 8 / 4."""
    res = anonymize(EncodedTable.from_rows(COLUMNS, ROWS), {a: Hierarchy.from_rows(a, r) for a, r in HIER.items()},
                    engine_config(dict(l_diversity=("recursive", 2, 4, "diagnosis"), suppression=0.25), "aecs"))
    assert res.transformation == {"age": 1, "sex": 0, "zipcode": 3}
    assert res.suppressed_rows == 2 and res.information_loss == pytest.approx(2.0)


# ------------------------------------------------------------------ 3. documented deviations
def test_deviations_from_the_printed_formulas() -> None:
    r = ref(k=3, suppression=0.5)
    res = r.evaluate((1, 1, 4))
    assert r.precision_dissertation(res) == pytest.approx(1 - NODE_114["precision"])  # eq. 2.20 is 1 - loss
    assert r.aecs_dissertation(res) == pytest.approx(NODE_114["aecs"] / 3)  # eq. 2.24 divides by p = k
    assert r.discernibility_star_dissertation_literal(res) == 16  # eq. 2.26 as printed: kept classes only
    assert r.metric(res, "discernibility-star") == 24  # table 2.15 / FLASH's MetricDMStar: all classes


def test_engine_and_reference_agree_on_the_example_for_every_model_and_metric() -> None:
    """Whole-lattice optimum on the real example data for a few configurations with suppression."""
    subset = [i % 3 == 0 for i in range(len(ROWS))]
    models = [dict(k=2, suppression=0.25), dict(k=3, suppression=0.5),
              dict(l_diversity=("entropy", 2, None, "diagnosis"), suppression=0.25),
              dict(t_closeness=(0.15, "hierarchical", "diagnosis"), suppression=0.25),
              dict(k=2, delta_presence=(0.0, 0.6), subset=subset, suppression=0.25)]
    table = EncodedTable.from_rows(COLUMNS, ROWS)
    hierarchies = {a: Hierarchy.from_rows(a, rows) for a, rows in HIER.items()}
    for model in models:
        for metric in METRICS:
            best = ref(metric=metric, **model).optimum()
            ld, tc, dp = model.get("l_diversity"), model.get("t_closeness"), model.get("delta_presence")
            config = AnonymizationConfig(QIS, k=model.get("k", 1), suppression=model["suppression"], metric=metric,
                                         l_diversity=LDiversity(ld[0], ld[1], ld[3], c=ld[2]) if ld else None,
                                         t_closeness=TCloseness(*tc) if tc else None,
                                         delta_presence=DeltaPresence(*dp) if dp else None)
            res = anonymize(table, hierarchies, config,
                            research_subset=np.array(subset) if dp else None)
            assert res.transformation == dict(zip(QIS, best.levels)), (model, metric)
            assert math.isclose(res.information_loss, best.loss, rel_tol=1e-9, abs_tol=1e-9), (model, metric)


def test_reference_covers_every_engine_metric() -> None:
    """A metric added to the engine without a reference formula fails here."""
    from fedanon.model.metrics.registry import METRICS as ENGINE_METRICS

    assert set(METRICS) == set(ENGINE_METRICS)
