"""Population uniqueness with the SNB estimator (fedanon/stats/snb.py) and Dankar et al.'s rule.

Held to: the closed-form moments against their defining series and a hand-computed geometric
case; K̂ and the moment equations solved by hand; the estimate against the independent
reference (tests/reference.py, written from Chen & Keller-McNulty's and Haas & Stokes's
formulas, no fedanon code) and against the verifier's plain-Python route; the edge cases the
documentation defines (no sample unique, all sample uniques, no class of two, π = 1, π near 0);
Flash against the exhaustive search with the verifier and the engine against the reference's
optimum; the flag, TOML and `anonymize_frame` paths; bad input as one line with exit code 2.
The rule that picks among Pitman, Zayatz and SNB by the sampling fraction (`dankar`) is held to
the same checks and to its branches by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import strategies as st

from fedanon.cli import main
from fedanon.model.criterion import CriterionContext
from fedanon.model.privacy.popuniqueness import PopulationUniqueness, dankar_uniques, pitman_uniques, \
    population_snb_uniques, zayatz_uniques
from fedanon.stats.snb import plain_snb_uniques, population_classes, snb_moments, snb_parameters, \
    snb_uniques
from fedanon.model.registry import ParseContext
from model_cases import EXAMPLE, QI_FLAGS, bad_anonymize_flags_fail, flag_toml_and_frame_agree, property_tests, \
    released
from reference import dankar_population_uniques, snb_population_uniques, zayatz_population_uniques

TABLES = {
    "heavy-tail": [1] * 50 + [2] * 10 + [3] * 4 + [50, 100],
    "zipf-like": [1] * 20 + [2] * 6 + [3] * 3 + [4, 4, 6, 9, 15, 40],
    "few-uniques": [1, 1, 2, 2, 2, 3, 3, 4, 7, 9, 12],
    "mostly-pairs": [1] * 5 + [2] * 30 + [5, 8],
    "small": [1, 1, 2, 3, 5],
    "large-classes": [1] * 5 + [2] * 3 + [300] * 4,
}
FRACTIONS = (1e-6, 0.001, 0.01, 0.1, 0.5, 0.9, 0.999)


def _logit(p: float) -> float:
    return math.log(p / (1 - p))


def test_moments_equal_their_series():
    """E[s_j]/K = Σ_m P(F = m) · C(m, j) π^j (1−π)^(m−j), F − 1 negative binomial (α, β)."""
    for alpha, beta, p in ((0.3, 0.2, 0.1), (2.5, 0.6, 0.4), (1.0, 0.05, 0.02), (7.0, 0.9, 0.7)):
        first = second = 0.0
        for m in range(1, 20000):
            log_pf = (math.lgamma(m - 1 + alpha) - math.lgamma(alpha) - math.lgamma(m)
                      + alpha * math.log(beta) + (m - 1) * math.log1p(-beta))
            first += math.exp(log_pf + math.log(m * p) + (m - 1) * math.log1p(-p))
            if m >= 2:
                second += math.exp(log_pf + math.log(m * (m - 1) / 2 * p * p) + (m - 2) * math.log1p(-p))
        e1, e2 = snb_moments(alpha, _logit(beta), p)
        assert float(e1) == pytest.approx(first, rel=1e-10)
        assert float(e2) == pytest.approx(second, rel=1e-10)


def test_geometric_case_by_hand():
    # α = 1: F − 1 is geometric, P(F = m) = β(1−β)^(m−1). With d = (1−π)(1−β):
    # E[s1]/K = πβ Σ m d^(m−1) = πβ/(1−d)², E[s2]/K = π²β(1−β) Σ C(m,2) d^(m−2) = π²β(1−β)/(1−d)³.
    # π = β = 1/2: d = 1/4, E[s1]/K = (1/4)/(9/16) = 4/9, E[s2]/K = (1/16)/(27/64) = 4/27.
    e1, e2 = snb_moments(1.0, 0.0, 0.5)
    assert float(e1) == pytest.approx(4 / 9, rel=1e-14) and float(e2) == pytest.approx(4 / 27, rel=1e-14)
    # so s1 = 3, s2 = 1 with K = 27/4 are matched exactly by α = 1, β = 1/2 -- and by nothing else:
    # Û = K β^α = 27/8
    roots = snb_parameters(3, 1, 6.75, 0.5)
    assert len(roots) == 1
    alpha, t = roots[0]
    assert alpha == pytest.approx(1.0, rel=1e-10) and t == pytest.approx(0.0, abs=1e-10)


def test_population_classes_by_hand():
    # sizes 1, 1, 2 (u = 3, f1 = 2, f2 = 1), q = 1/2:
    #   Σ i q²(1−q²)^(i−1) f_i = 2·1/4 + 2·1/4·3/4 = 7/8;   Σ (1−q)^i((1+q)^i − 1) f_i = 2·1/2·1/2 + 1/4·5/4 = 13/16
    #   Σ (1−q)^i f_i = 2·1/2 + 1/4 = 5/4;                    Σ i q (1−q)^(i−1) f_i = 2·1/2 + 2·1/2·1/2 = 3/2
    #   K̂ = 3 + 2 · (7/8)/(13/16) · ((5/4)/(3/2))² = 3 + 2 · 14/13 · 25/36 = 526/117
    assert population_classes(np.array([1, 2, 1]), 0.5) == pytest.approx(526 / 117, rel=1e-14)
    assert population_classes(np.array([2, 3, 3]), 0.5) == 3.0   # no sample unique: K̂ = u
    assert population_classes(np.array([1, 2, 1]), 1.0) == 3.0   # the sample is the population


@pytest.mark.parametrize("name", sorted(TABLES))
def test_estimate_equals_the_independent_reference(name):
    sizes = TABLES[name]
    for fraction in FRACTIONS:
        population = round(sum(sizes) / fraction)
        expected = snb_population_uniques(sizes, fraction, population)
        got = population_snb_uniques(np.array(sizes), float(population), fraction)
        assert got == pytest.approx(expected, rel=1e-8), fraction


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_roots_solve_the_moment_equations_and_the_verifier_agrees(name):
    sizes = np.array(TABLES[name])
    singles, pairs = int(np.sum(sizes == 1)), int(np.sum(sizes == 2))
    for fraction in FRACTIONS:
        classes = population_classes(sizes, fraction)
        roots = snb_parameters(singles, pairs, classes, fraction)
        assert len(roots) <= 1
        for alpha, t in roots:
            e1, e2 = snb_moments(alpha, t, fraction)
            assert classes * float(e1) == pytest.approx(singles, rel=1e-9)
            assert classes * float(e2) == pytest.approx(pairs, rel=1e-9)
        estimate = snb_uniques(sizes, fraction)
        plain = plain_snb_uniques(sizes.tolist(), fraction)
        assert (estimate is None) == (plain is None) == (not roots)
        if roots:
            assert estimate == pytest.approx(plain, rel=1e-9)
            assert estimate == pytest.approx(classes / (1 + math.exp(-roots[0][1])) ** roots[0][0], rel=1e-12)


def test_edge_cases():
    # no sample unique: 0, as for every estimator
    assert snb_uniques(np.array([2, 3, 4]), 0.1) == 0.0
    # π = 1: the release is the population, its uniques are the population's
    assert snb_uniques(np.array([1, 1, 2, 5]), 1.0) == 2.0
    # no class of two (here: every record a sample unique): the equations ask for a population of
    # uniques only and have no root; the model takes Zayatz's estimate, which is then N
    assert snb_uniques(np.array([1, 1, 1]), 0.1) is None
    assert population_snb_uniques(np.array([1, 1, 1]), 30.0, 0.1) == pytest.approx(30.0)
    assert population_snb_uniques(np.array([1, 1, 3]), 50.0, 0.1) == pytest.approx(
        zayatz_population_uniques([1, 1, 3], 50), rel=1e-12)
    # a class of two, but no root: 1, 1, 2 at π = 1/2 (the reduced equation stays below 0), Zayatz
    assert snb_uniques(np.array([1, 1, 2]), 0.5) is None
    assert population_snb_uniques(np.array([1, 1, 2]), 8.0, 0.5) == pytest.approx(
        float(zayatz_uniques(np.array([1, 1, 2]), 8.0)), rel=1e-14)
    # π near 0: a finite estimate, at most N, as the reference
    sizes = [1] * 20 + [2] * 6 + [3] * 3 + [4, 4, 6, 9, 15, 40]
    population = round(sum(sizes) / 1e-6)
    got = population_snb_uniques(np.array(sizes), float(population), 1e-6)
    assert 0 < got <= population
    assert got == pytest.approx(snb_population_uniques(sizes, 1e-6, population), rel=1e-8)
    # empty classes do not count
    assert snb_uniques(np.array([1, 0, 2, 3, 5, 1]), 0.5) == snb_uniques(np.array([1, 1, 2, 3, 5]), 0.5)


def test_the_criterion_and_the_verifier_by_hand():
    # the heavy-tail table at π = 0.1 (n = 232, N = 2,320): K̂ ≈ 538.7, Û ≈ 305.0, a share of ≈ 13.1 %
    sizes = np.array(TABLES["heavy-tail"])
    rows = int(sizes.sum())
    model = PopulationUniqueness(0.1, 0.1, "snb")
    criterion = model.criterion()
    criterion.prepare(CriterionContext(n_rows=rows))
    share = criterion.share(sizes)
    assert share == pytest.approx(snb_population_uniques(sizes.tolist(), 0.1, 2320) / 2320, rel=1e-9)
    assert 0.12 < share < 0.14
    none = np.zeros(sizes.shape[0], dtype=bool)
    assert criterion.enforce(sizes, none).tolist() == (sizes == 1).tolist()   # above 10 %: uniques go
    loose = PopulationUniqueness(0.15, 0.1, "snb").criterion()
    loose.prepare(CriterionContext(n_rows=rows))
    assert not loose.enforce(sizes, none).any()
    assert model.release_violation(sizes.tolist(), table_rows=rows).startswith(
        f"estimated population uniqueness {share:.6g} > 0.1 (snb")
    assert PopulationUniqueness(0.15, 0.1, "snb").release_violation(sizes.tolist(), table_rows=rows) is None


def test_parsing():
    ctx = ParseContext()
    assert PopulationUniqueness.parse("0.01:0.1:SNB", ctx) == PopulationUniqueness(0.01, 0.1, "snb")
    assert PopulationUniqueness.parse({"threshold": 0.02, "sampling_fraction": 0.5, "estimator": "snb"}, ctx) \
        == PopulationUniqueness(0.02, 0.5, "snb")
    assert "snb" in PopulationUniqueness.metavar and "snb" in PopulationUniqueness.help
    assert PopulationUniqueness.parse("0.01:0.3:Dankar", ctx) == PopulationUniqueness(0.01, 0.3, "dankar")


def test_dankar_rule_by_hand():
    """π ≤ 0.1: Pitman's estimate; π > 0.1: the lower of Zayatz's and SNB's, Zayatz's where SNB has no root."""
    sizes = np.array(TABLES["heavy-tail"])
    for fraction in (0.01, 0.1):
        population = sizes.sum() / fraction
        assert dankar_uniques(sizes, population, fraction) == pitman_uniques(sizes, population)
    population = sizes.sum() / 0.5
    snb, zayatz = snb_uniques(sizes, 0.5), float(zayatz_uniques(sizes, population))
    assert snb is not None and snb != zayatz
    assert dankar_uniques(sizes, population, 0.5) == pytest.approx(min(snb, zayatz), rel=1e-14)
    # 1, 1, 2 at π = 0.5: SNB has no root, Zayatz's estimate
    assert dankar_uniques(np.array([1, 1, 2]), 8.0, 0.5) == pytest.approx(float(zayatz_uniques(np.array([1, 1, 2]), 8.0)))
    # the heavy-tail table above has SNB below Zayatz (SNB wins); here SNB is above it (Zayatz wins):
    # 1 ×6, 2, 4, 8, 12 at π = 0.3 (n = 32): SNB ≈ 14.6, Zayatz ≈ 12.4 of N ≈ 106.7
    sizes = np.array([1] * 6 + [2, 4, 8, 12])
    population = 32 / 0.3
    snb, zayatz = snb_uniques(sizes, 0.3), float(zayatz_uniques(sizes, population))
    assert 14.5 < snb < 14.7 and 12.3 < zayatz < 12.5
    assert dankar_uniques(sizes, population, 0.3) == zayatz
    assert snb_uniques(np.array(TABLES["heavy-tail"]), 0.5) < zayatz_uniques(np.array(TABLES["heavy-tail"]), 464.0)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_dankar_equals_the_independent_reference(name):
    sizes = TABLES[name]
    for fraction in (0.01, 0.1, 0.100001, 0.5, 0.9):
        population = round(sum(sizes) / fraction)
        expected = dankar_population_uniques(sizes, fraction, population)
        assert dankar_uniques(np.array(sizes), float(population), fraction) == pytest.approx(expected, rel=1e-5)
        model = PopulationUniqueness(0.5, fraction, "dankar")
        criterion = model.criterion()
        criterion.prepare(CriterionContext(n_rows=sum(sizes)))
        share = criterion.share(np.array(sizes))
        # the verifier's plain route agrees: it passes at the estimate and fails just below it
        assert PopulationUniqueness(min(1.0, share * (1 + 1e-6)), fraction, "dankar").release_violation(
            sizes, table_rows=sum(sizes)) is None
        assert share > 1e-5   # above the verifier's tolerance of 1e-7, so 1 % below must fail
        assert PopulationUniqueness(share * 0.99, fraction, "dankar").release_violation(
            sizes, table_rows=sum(sizes)) is not None


def _model(draw) -> PopulationUniqueness:
    return PopulationUniqueness(draw(st.sampled_from([0.02, 0.1, 0.3])), draw(st.sampled_from([0.01, 0.1, 0.5])),
                                draw(st.sampled_from(["snb", "snb", "dankar"])))


test_flash_equals_exhaustive_and_the_verifier_agrees, test_engine_equals_the_independent_reference = property_tests(
    _model, lambda m: {"population_uniqueness": (m.threshold, m.sampling_fraction, m.estimator)},
    exhaustive_examples=60, reference_examples=10,
    reference_metrics=["loss", "discernibility"])


def test_flag_toml_and_frame_agree(tmp_path):
    flag_toml_and_frame_agree(
        tmp_path, ["--population-uniqueness", "0.05:0.01:snb", "--suppression", "0.25"],
        ["suppression = 0.25", "[population_uniqueness]", "threshold = 0.05", "sampling_fraction = 0.01",
         'estimator = "snb"'],
        {"population_uniqueness": "0.05:0.01:snb", "suppression": 0.25},
        [{"model": "population_uniqueness", "threshold": 0.05, "sampling_fraction": 0.01, "estimator": "snb"}])


@pytest.mark.parametrize("value, message", [("0.05:0.01:snbx", "unknown population-uniqueness estimator 'snbx'"),
                                            ("0.05:0.01:snb:2", "expected TAU:FRACTION[:pitman|zayatz|snb|dankar]")])
def test_bad_estimator_is_one_line_exit_2(capsys, value, message):
    bad_anonymize_flags_fail(capsys, ["--population-uniqueness", value], message)


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["A", "B", "C"])
def test_protocols_equal_central(tmp_path, protocol):
    """The party that judges a node needs only the class sizes, as with Pitman's estimator."""
    flags = [*QI_FLAGS, "--population-uniqueness", "0.05:0.01:snb", "--suppression", "0.25"]
    sim_out, ref_out = tmp_path / "sim.csv", tmp_path / "ref.csv"
    assert main(["simulate", "--protocol", protocol, "--split", "horizontal", "--parties", "2",
                 str(EXAMPLE / "example.csv"), *flags, "--output", str(sim_out), "-q"]) == 0
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *flags, "--output", str(ref_out), "--verify", "-q"]) == 0
    assert released(sim_out) == released(ref_out)
