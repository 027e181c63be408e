"""Privacy models beyond k-anonymity, judged class by class (diversity, closeness, presence).

These tests build ClassStats by hand from the dissertation's 8-row example so
each model is checked against numbers computed on paper (docs/design.md running example
facts, §2.4, §3.2 counterexamples), independently of the engine's grouping.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from fedanon.model.privacy.tcloseness import TClosenessCriterion
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import CriterionContext
from fedanon.data.io.delimited import read_table_csv
from fedanon.model.privacy.ldiversity import LDiversityCriterion
from fedanon.data.hierarchy import Hierarchy
from fedanon.model.privacy.presence import DeltaPresenceCriterion

from datasets import EXAMPLE_DIR as EXAMPLE


def _example():
    header, rows = read_table_csv(EXAMPLE / "example.csv")
    hier = {a: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{a}.csv", a)
            for a in ("age", "sex", "zipcode", "diagnosis")}
    return header, rows, hier


def _stats_for_node(node: dict[str, int], sensitive: str = "diagnosis", subset=None):
    """Plain-Python grouping of the example at a node -> (ClassStats, context, code map)."""
    header, rows, hier = _example()
    col = {c: i for i, c in enumerate(header)}
    gen = {a: {r[0]: r for r in h.rows} for a, h in hier.items()}
    sens_dict = sorted({r[col[sensitive]].encode() for r in rows})
    classes: dict[tuple, Counter] = {}
    subset_counts: Counter = Counter()
    for i, r in enumerate(rows):
        key = tuple(gen[a][r[col[a]].encode()][lvl] for a, lvl in node.items())
        classes.setdefault(key, Counter())[r[col[sensitive]].encode()] += 1
        if subset is not None and subset[i]:
            subset_counts[key] += 1
    keys = sorted(classes)
    hist = np.array([[classes[k][v] for v in sens_dict] for k in keys], dtype=np.int64)
    stats = ClassStats(sizes=hist.sum(axis=1), histograms={sensitive: hist},
                       subset_sizes=None if subset is None else np.array([subset_counts[k] for k in keys]))
    code_map, _ = hier[sensitive].code_map(sens_dict)
    total = Counter(r[col[sensitive]].encode() for r in rows)
    ctx = CriterionContext(n_rows=len(rows), histograms_total={sensitive: np.array([total[v] for v in sens_dict])},
                           sensitive_code_maps={sensitive: code_map},
                           subset_total=None if subset is None else int(sum(subset)))
    return stats, ctx, keys


NODE_114 = {"age": 1, "sex": 1, "zipcode": 4}


def test_node_114_is_distinct_2_diverse_recursive_4_2_and_02_close_reference_fact():
    stats, ctx, _ = _stats_for_node(NODE_114)
    for model in (LDiversity("distinct", 2, "diagnosis"), LDiversity("recursive", 2, "diagnosis", 4)):
        crit = LDiversityCriterion(model)
        crit.prepare(ctx)
        assert crit.classes_ok(stats).all(), crit.describe()
    for kind in ("equal", "hierarchical"):
        crit = TClosenessCriterion(TCloseness(0.2, kind, "diagnosis"))
        crit.prepare(ctx)
        d = crit.distances(stats)
        # classes 1-19 (1:1), 20-60 (3:1), 61-99 (1:1) vs table 5:3 -> every EMD is exactly 1/8
        assert np.allclose(d, 0.125), (kind, d)
        assert crit.classes_ok(stats).all()
        strict = TClosenessCriterion(TCloseness(0.1, kind, "diagnosis"))
        strict.prepare(ctx)
        assert not strict.classes_ok(stats).any()


def test_finest_node_fails_every_model_and_k_bound():
    stats, ctx, _ = _stats_for_node({"age": 0, "sex": 0, "zipcode": 0})
    assert (stats.sizes == 1).all()
    for model in (LDiversity("distinct", 2, "diagnosis"), LDiversity("entropy", 2, "diagnosis"),
                  LDiversity("recursive", 2, "diagnosis", 4)):
        crit = LDiversityCriterion(model)
        assert not crit.classes_ok(stats).any()
    crit = TClosenessCriterion(TCloseness(0.5, "equal", "diagnosis"))
    crit.prepare(ctx)
    # a singleton pneumonia class: |1 - 5/8| = 3/8; gastritis: 5/8
    d = sorted(set(np.round(crit.distances(stats), 9)))
    assert d == [0.375, 0.625]


def test_entropy_l_diversity_matches_definition_and_accepts_exact_bound():
    crit = LDiversityCriterion(LDiversity("entropy", 2, "s"))
    hist = np.array([[1, 1, 0], [3, 1, 0], [2, 1, 1], [5, 0, 0]])
    ok = crit.classes_ok(ClassStats(hist.sum(1), {"s": hist}))
    # entropies: log2 = bound exactly (passes), 0.562 < 0.693, 1.040 >= 0.693, 0
    assert ok.tolist() == [True, False, True, False]
    crit18 = LDiversityCriterion(LDiversity("entropy", 1.8, "s"))
    h = np.array([[2, 1], [1, 1]])  # entropies 0.637 and 0.693 (natural log) >= ln 1.8 = 0.588
    assert crit18.classes_ok(ClassStats(h.sum(1), {"s": h})).tolist() == [True, True]


def test_recursive_cl_diversity_counterexample_of_section_3_2():
    # Abbildung 3.2: group {0,1,2} = 2 pneumonia + 1 gastritis: R = 2 < 3*1 -> diverse;
    # merged group of 15 = 3 pneumonia + 12 gastritis: 12 > 3*3 -> not diverse.
    crit = LDiversityCriterion(LDiversity("recursive", 2, "s", 3))
    hist = np.array([[2, 1], [1, 1], [3, 12], [0, 10]])
    assert crit.classes_ok(ClassStats(hist.sum(1), {"s": hist})).tolist() == [True, True, False, False]
    # r1 must be STRICTLY smaller than c * tail
    crit2 = LDiversityCriterion(LDiversity("recursive", 2, "s", 2))
    edge = np.array([[2, 1]])
    assert crit2.classes_ok(ClassStats(edge.sum(1), {"s": edge})).tolist() == [False]
    # l=3 uses r_3 + ... : (4,2,1,1): 4 < c*(1+1) needs c > 2
    crit3 = LDiversityCriterion(LDiversity("recursive", 3, "s", 2.5))
    h3 = np.array([[4, 2, 1, 1], [4, 4, 0, 0]])
    assert crit3.classes_ok(ClassStats(h3.sum(1), {"s": h3})).tolist() == [True, False]


def test_distinct_l_diversity_counts_distinct_values():
    crit = LDiversityCriterion(LDiversity("distinct", 3, "s"))
    hist = np.array([[5, 1, 1, 0], [9, 9, 0, 0], [1, 1, 1, 1]])
    assert crit.classes_ok(ClassStats(hist.sum(1), {"s": hist})).tolist() == [True, False, True]
    assert crit.monotone_with_suppression and crit.min_class_size == 3
    assert not LDiversityCriterion(LDiversity("entropy", 3, "s")).monotone_with_suppression


def test_hierarchical_emd_uses_tree_distances():
    """Three leaves a,b under X and c under Y (H=2): moving mass a->b costs 1/2, a->c costs 1."""
    h = Hierarchy.from_rows("s", [["a", "X", "*"], ["b", "X", "*"], ["c", "Y", "*"]])
    code_map, _ = h.code_map([b"a", b"b", b"c"])
    crit = TClosenessCriterion(TCloseness(1.0, "hierarchical", "s"))
    crit.prepare(CriterionContext(n_rows=3, histograms_total={"s": np.array([1, 1, 1])},
                                  sensitive_code_maps={"s": code_map}))
    hist = np.array([[1, 0, 0], [0, 0, 1], [1, 1, 0], [1, 1, 1]])
    d = crit.distances(ClassStats(hist.sum(1), {"s": hist}))
    # [1,0,0] vs thirds: 1/3 from b to a (cost 1/2 each) + 1/3 from c (cost 1) = 1/6 + 1/3
    assert np.allclose(d, [0.5, 2 / 3, 1 / 3, 0.0])
    eq = TClosenessCriterion(TCloseness(1.0, "equal", "s"))
    eq.prepare(CriterionContext(n_rows=3, histograms_total={"s": np.array([1, 1, 1])}))
    assert np.allclose(eq.distances(ClassStats(hist.sum(1), {"s": hist})), [2 / 3, 2 / 3, 1 / 3, 0.0])


def test_hierarchical_emd_without_code_map_is_an_input_error():
    from fedanon.errors import InputError
    crit = TClosenessCriterion(TCloseness(0.2, "hierarchical", "s"))
    with pytest.raises(InputError, match="hierarchy"):
        crit.prepare(CriterionContext(n_rows=2, histograms_total={"s": np.array([1, 1])}))


def test_delta_presence_example_of_abbildung_2_7():
    # research subset = all male persons; node (2, 1, 3): age *, sex *, zip 82*** / 81***
    header, rows, _ = _example()
    subset = [r[1] == "male" for r in rows]
    stats, ctx, keys = _stats_for_node({"age": 2, "sex": 1, "zipcode": 3}, subset=subset)
    crit = DeltaPresenceCriterion(DeltaPresence(0.0, 0.5))
    crit.prepare(ctx)
    # 81***: 2 of 4 male, 82***: 2 of 4 male -> delta 0.5 each, inside [0, 0.5]
    assert stats.subset_sizes.tolist() == [2, 2]
    assert crit.classes_ok(stats).all()
    tight = DeltaPresenceCriterion(DeltaPresence(0.0, 0.4))
    assert not tight.classes_ok(stats).any()
    low = DeltaPresenceCriterion(DeltaPresence(0.6, 1.0))
    assert not low.classes_ok(stats).any()


def test_delta_presence_ignores_classes_without_subset_rows():
    crit = DeltaPresenceCriterion(DeltaPresence(0.3, 0.6))
    stats = ClassStats(sizes=np.array([4, 5, 2, 10]), subset_sizes=np.array([2, 0, 2, 1]))
    assert crit.classes_ok(stats).tolist() == [True, True, False, False]
    assert not crit.monotone  # dmin > 0 (see module docstring)
    assert DeltaPresenceCriterion(DeltaPresence(0.0, 0.6)).monotone


def test_stats_are_additive_so_rollup_preserves_models():
    """Summing two classes' histograms is what the roll-up does; models must agree with a recount."""
    rng = np.random.default_rng(7)
    fine = rng.integers(0, 4, size=(40, 5))
    groups = rng.integers(0, 6, size=40)
    coarse = np.zeros((6, 5), dtype=np.int64)
    np.add.at(coarse, groups, fine)
    crit = LDiversityCriterion(LDiversity("entropy", 2.5, "s"))
    ok = crit.classes_ok(ClassStats(coarse.sum(1), {"s": coarse}))
    for g in range(6):
        counts = [int(c) for c in coarse[g] if c]
        if not counts:
            continue
        n = sum(counts)
        h = -sum(c / n * math.log(c / n) for c in counts)
        assert ok[g] == (h >= math.log(2.5) - 1e-9)


# ----------------------------------------------------------------------------- through anonymize()
from fedanon.engine import AnonymizationConfig, EncodedTable, anonymize  # noqa: E402
from fedanon.oracle.verify import verify_anonymized, verify_result  # noqa: E402

from datasets import ADULT_DIR as ADULT
ADULT_ATTRS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass",
               "occupation", "salary-class"]


def _run_and_verify(header, rows, hier, cfg, subset=None):
    table = EncodedTable.from_rows(header, rows)
    res = anonymize(table, hier, cfg, research_subset=subset)
    out = [[v.decode() for v in r] for r in res.output.decode_rows()]
    problems = verify_anonymized(header, rows, header, out, cfg, hier, research_subset=subset,
                                 transformation=res.transformation, suppressed=list(res.suppressed),
                                 reported_suppressed_rows=res.suppressed_rows)
    assert problems == [], problems[:5]
    assert verify_result(table, hier, cfg, res, subset) == []
    return res


def test_reference_fact_recursive_4_2_diversity_25pct_aecs_optimum_103():
    header, rows, hier = _example()
    cfg = AnonymizationConfig(["age", "sex", "zipcode"], l_diversity=LDiversity("recursive", 2, "diagnosis", 4),
                              suppression=0.25, metric="aecs")
    res = _run_and_verify(header, rows, hier, cfg)
    assert res.transformation == {"age": 1, "sex": 0, "zipcode": 3}
    assert res.suppressed_rows == 2  # the class 20-60/female/81*** (two pneumonia) is not diverse
    # the suppressed class is the one that fails recursive-(4,2): a single sensitive value
    suppressed = [rows[i] for i in range(8) if res.suppressed[i]]
    assert len({r[3] for r in suppressed}) == 1


def test_reference_fact_node_114_through_the_engine_models_on_example():
    header, rows, hier = _example()
    for model in (dict(l_diversity=LDiversity("distinct", 2, "diagnosis")),
                  dict(l_diversity=LDiversity("recursive", 2, "diagnosis", 4)),
                  dict(t_closeness=TCloseness(0.2, "equal", "diagnosis")),
                  dict(t_closeness=TCloseness(0.2, "hierarchical", "diagnosis"))):
        cfg = AnonymizationConfig(["age", "sex", "zipcode"], metric="height", **model)
        res = _run_and_verify(header, rows, hier, cfg)
        # (1,1,4) satisfies the model, so the optimum is at most as generalized (height 6)
        assert sum(res.transformation.values()) <= 6


@pytest.fixture(scope="module")
def adult():
    header, rows = read_table_csv(ADULT / "adult.csv")
    hier = {a: Hierarchy.read_csv(ADULT / f"adult_hierarchy_{a}.csv", a) for a in ADULT_ATTRS}
    return header, rows, hier


@pytest.mark.parametrize("model", [
    dict(l_diversity=LDiversity("recursive", 3, "occupation", 4)),
    dict(l_diversity=LDiversity("entropy", 3, "occupation")),
    dict(t_closeness=TCloseness(0.2, "hierarchical", "occupation")),
    dict(t_closeness=TCloseness(0.2, "equal", "occupation"), k=5),
])
def test_adult_occupation_models_are_verified(adult, model):
    header, rows, hier = adult
    cfg = AnonymizationConfig([a for a in ADULT_ATTRS if a != "occupation"], **model)
    res = _run_and_verify(header, rows, hier, cfg)
    assert res.suppressed_rows == 0 and res.classes >= 1


def test_adult_delta_presence_with_random_subset_is_verified(adult):
    header, rows, hier = adult
    rng = np.random.default_rng(5)
    subset = rng.random(len(rows)) < 0.1
    cfg = AnonymizationConfig(["sex", "age", "race", "marital-status", "education"], k=5,
                              delta_presence=DeltaPresence(0.0, 0.2), suppression=0.02)
    res = _run_and_verify(header, rows, hier, cfg, subset)
    assert res.suppressed_rows <= math.floor(0.02 * len(rows))


def test_hierarchical_closeness_shortcut_agrees_with_exact_distances():
    """classes_ok brackets the tree EMD by the equal-distance EMD; decisions must match the exact value."""
    rows = [[f"v{i}", f"a{i // 2}", f"b{i // 4}", "*"] for i in range(8)]
    h = Hierarchy.from_rows("s", rows)
    code_map, _ = h.code_map([f"v{i}".encode() for i in range(8)])
    rng = np.random.default_rng(11)
    total = rng.integers(1, 20, size=8)
    hist = rng.integers(0, 4, size=(500, 8)) * (rng.random((500, 8)) < 0.5)
    hist[hist.sum(axis=1) == 0, 0] = 1
    for t in (0.05, 0.1, 0.2, 0.3, 0.5):
        crit = TClosenessCriterion(TCloseness(t, "hierarchical", "s"))
        crit.prepare(CriterionContext(n_rows=int(total.sum()), histograms_total={"s": total},
                                      sensitive_code_maps={"s": code_map}))
        stats = ClassStats(hist.sum(axis=1), {"s": hist})
        d = crit.distances(stats)
        eq = TClosenessCriterion(TCloseness(t, "equal", "s"))
        eq.prepare(CriterionContext(n_rows=int(total.sum()), histograms_total={"s": total}))
        e = eq.distances(stats)
        assert (d <= e + 1e-12).all() and (d >= e / 3 - 1e-12).all()  # the bracket holds (H = 3)
        assert crit.classes_ok(stats).tolist() == (d <= t + 1e-9).tolist()


def test_t_closeness_implied_minimum_class_size_is_safe():
    """min_class_size m: no class with fewer rows is t-close, and some m-row class is."""
    from itertools import combinations_with_replacement

    rows = [[f"v{i}", f"a{i // 2}", "*"] for i in range(5)]
    h = Hierarchy.from_rows("s", rows)
    code_map, _ = h.code_map([f"v{i}".encode() for i in range(5)])
    total = np.array([9, 5, 3, 2, 1])
    for kind in ("equal", "hierarchical"):
        for t in (0.1, 0.2, 0.3, 0.5):
            crit = TClosenessCriterion(TCloseness(t, kind, "s"))
            crit.prepare(CriterionContext(n_rows=20, histograms_total={"s": total},
                                          sensitive_code_maps={"s": code_map}))
            m = crit.min_class_size
            for size in range(1, m + 1):  # every histogram of this size
                hists = []
                for combo in combinations_with_replacement(range(5), size):
                    hist = np.zeros(5, dtype=np.int64)
                    np.add.at(hist, list(combo), 1)
                    hists.append(hist)
                hists = np.array(hists)
                ok = crit.classes_ok(ClassStats(hists.sum(axis=1), {"s": hists}))
                if size < m:
                    assert not ok.any(), (kind, t, size, m)
                elif kind == "equal":
                    assert ok.any(), (kind, t, size)  # the bound is exact for the equal distance


def test_hierarchical_closeness_on_a_forest_has_no_lower_bound():
    """Top level with two trees: moving mass between them is free in the formula (as in ARX)."""
    h = Hierarchy.from_rows("s", [["a", "X"], ["b", "X"], ["c", "Y"]])
    code_map, _ = h.code_map([b"a", b"b", b"c"])
    crit = TClosenessCriterion(TCloseness(0.1, "hierarchical", "s"))
    crit.prepare(CriterionContext(n_rows=3, histograms_total={"s": np.array([1, 1, 1])},
                                  sensitive_code_maps={"s": code_map}))
    assert crit.min_class_size == 1
    hist = np.array([[0, 0, 1], [1, 0, 0]])
    stats = ClassStats(hist.sum(axis=1), {"s": hist})
    assert np.allclose(crit.distances(stats), [0.0, 1 / 3])
    assert crit.classes_ok(stats).tolist() == [True, False]


def test_hierarchical_closeness_on_a_forest_is_not_monotone_and_flash_still_finds_the_optimum():
    """The case the property test against the exhaustive search found (CI, session 9): with two
    top-level trees the EMD is not convex, so merging classes can break t-closeness. Flash used
    to tag every generalization of a t-close node as t-close and returned (1,0,0) with loss 1
    where the bottom node (loss 0) is t-close; the criterion now declares itself not monotone."""
    from fedanon.engine import AnonymizationConfig, EncodedTable, anonymize
    from fedanon.oracle.exhaustive import exhaustive_optimum

    rows = [["q00", "q10", "q20", "s0"], ["q00", "q10", "q20", "s1"], ["q00", "q10", "q20", "s1"],
            ["q00", "q10", "q20", "s1"], ["q01", "q10", "q20", "s1"], ["q01", "q10", "q20", "s3"],
            ["q01", "q11", "q20", "s2"]]
    table = EncodedTable.from_rows(["q0", "q1", "q2", "s"], rows)
    hier = {"q0": Hierarchy.from_rows("q0", [["q00", "*"], ["q01", "*"]]),
            "q1": Hierarchy.from_rows("q1", [["q10", "*"], ["q11", "*"]]),
            "q2": Hierarchy.from_rows("q2", [["q20"], ["q21"]])}
    for top in ("*", None):  # one root (monotone, Flash_B) and two top-level trees
        hier["s"] = Hierarchy.from_rows("s", [["s0", "m0", top or "t0"], ["s2", "m0", top or "t0"],
                                              ["s1", "m1", top or "t1"], ["s3", "m1", top or "t1"]])
        config = AnonymizationConfig(["q0", "q1", "q2"], k=1, t_closeness=TCloseness(0.15, "hierarchical", "s"),
                                     metric="height")
        expected, expected_loss = exhaustive_optimum(table, hier, config, None)
        result = anonymize(table, hier, config)
        assert result.transformation == expected and result.information_loss == expected_loss
        crit = TClosenessCriterion(TCloseness(0.15, "hierarchical", "s"))
        code_map, _ = hier["s"].code_map(table.dictionaries[3])
        crit.prepare(CriterionContext(n_rows=7, histograms_total={"s": np.array([1, 4, 1, 1])},
                                      sensitive_code_maps={"s": code_map}))
        assert crit.monotone == (top == "*")
    assert expected == {"q0": 0, "q1": 0, "q2": 0} and result.algorithm.startswith("Flash_2P")
