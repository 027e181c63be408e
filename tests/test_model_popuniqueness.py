"""Population uniqueness (Pitman's estimator): one module (fedanon/model/privacy/popuniqueness.py).

Held to: the estimator against the independent reference (tests/reference.py, which maximizes
the likelihood itself by golden-section search, no fedanon code) and against its own score
equations on hand-made class-size frequency tables; the release-level rule by hand; a table on
which the model is not monotone; Flash against the exhaustive search with the verifier; the engine
against the reference's optimum; every entry point (flag, TOML, `anonymize_frame`, `simulate`).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedanon
from fedanon.cli import main
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.engine import AnonymizationConfig
from fedanon.engine.anonymizer import prepare
from fedanon.errors import InputError
from fedanon.model.criterion import CriterionContext
from fedanon.model.privacy.popuniqueness import ROUGH_MARGIN, PopulationUniqueness, pitman_newton, \
    pitman_parameters, pitman_uniques, zayatz_uniques
from fedanon.model.registry import ParseContext, model_types
from fedanon.oracle.verify import verify_anonymized
from model_cases import EXAMPLE, QI_FLAGS, bad_anonymize_flags_fail, property_tests, released, \
    simulate_b_equals_anonymize
from reference import pitman_population_uniques, zayatz_population_uniques

# hand-made class-size tables: α̂ = 0 (Ewens) and α̂ > 0, θ̂ negative and positive
TABLES = {
    "ewens": [1, 1, 2, 3, 5],
    "ewens-2": [1, 2, 2, 2, 4, 8],
    "heavy-tail": [1] * 50 + [2] * 10 + [3] * 4 + [50, 100],
    "zipf-like": [1] * 20 + [2] * 6 + [3] * 3 + [4, 4, 6, 9, 15, 40],
    "negative-theta": [1] * 8 + [20],
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_estimator_equals_the_independent_reference(name):
    sizes = TABLES[name]
    for population in (1e3, 1e5):
        expected = pitman_population_uniques(sizes, population)
        assert pitman_uniques(np.array(sizes), population) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_parameters_solve_the_likelihood_equations(name):
    """∂L/∂θ = Σ_{i<u} 1/(θ+iα) − Σ_{i<n} 1/(θ+i) and ∂L/∂α = Σ_{i<u} i/(θ+iα) − Σ_j f_j Σ_{k<j} 1/(k−α)
    vanish at (θ̂, α̂), or ∂L/∂α ≤ 0 at the boundary α̂ = 0; θ̂ > −α̂."""
    sizes = TABLES[name]
    theta, alpha = pitman_parameters(np.array(sizes))
    n, u = sum(sizes), len(sizes)
    assert 0 <= alpha < 1 and theta > -alpha
    d_theta = sum(1 / (theta + i * alpha) for i in range(1, u)) - sum(1 / (theta + i) for i in range(1, n))
    d_alpha = sum(i / (theta + i * alpha) for i in range(1, u)) - sum(1 / (k - alpha) for j in sizes for k in range(1, j))
    assert abs(d_theta) < 1e-9 * max(1.0, abs(theta)) ** -1 + 1e-9
    assert abs(d_alpha) < 1e-6 if alpha > 0 else d_alpha <= 1e-9
    # and the tables cover both shapes
    assert (alpha > 0) == (name not in ("ewens", "ewens-2"))


@pytest.mark.parametrize("name", sorted(TABLES))
def test_zayatz_equals_the_independent_reference(name):
    sizes = TABLES[name]
    for population in (300, 1000, 100000):
        expected = zayatz_population_uniques(sizes, population)
        assert zayatz_uniques(np.array(sizes), float(population)) == pytest.approx(expected, rel=1e-9)


def test_zayatz_by_hand():
    # classes 1, 1, 2 (n = 4) from N = 40: h(1) = 4/40 = 1/10, h(2) = 2·C(38,3)/C(40,4) = 2·8436/91390 = 12/65;
    # P = (2/3 · 1/10) / (2/3 · 1/10 + 1/3 · 12/65) = 13/25; Û = 2 · 13/25 / (4/40) = 10.4, a share of 0.26
    assert zayatz_uniques(np.array([1, 1, 2]), 40.0) == pytest.approx(10.4, rel=1e-12)
    criterion = _criterion(0.3, 0.1, 4)
    criterion.model.estimator = "zayatz"
    assert criterion.share(np.array([1, 2, 1])) == pytest.approx(0.26, rel=1e-12)
    assert PopulationUniqueness(0.25, 0.1, "zayatz").release_violation([1, 1, 2], table_rows=4).startswith(
        "estimated population uniqueness 0.26 > 0.25 (zayatz")
    assert PopulationUniqueness(0.26, 0.1, "zayatz").release_violation([1, 1, 2], table_rows=4) is None
    # a class of 20 cannot be seen exactly once in 21 draws from 30: h = 0
    assert zayatz_uniques(np.array([1, 20]), 30.0) == 30.0 * 1 / 21


@pytest.mark.parametrize("name", sorted(TABLES))
def test_newton_finds_the_parameters_of_the_score_equations(name):
    """The criterion decides releases from `pitman_newton` (both parameters at once); where α̂ > 0
    it must land on the root `pitman_parameters` finds one equation at a time, and at the
    boundary α̂ = 0 (Ewens) give up so that the exact solver decides."""
    sizes = np.array(TABLES[name])
    found = pitman_newton(sizes)
    theta, alpha = pitman_parameters(sizes)
    if alpha == 0.0:
        assert found is None
    else:
        assert found is not None
        assert found[0] == pytest.approx(theta, rel=1e-9) and found[1] == pytest.approx(alpha, abs=1e-9)


@st.composite
def _size_tables(draw):
    """Class sizes with some sample uniques, not all: a geometric-like head and a long tail."""
    uniques = draw(st.integers(1, 400))
    others = draw(st.lists(st.integers(2, 3000), min_size=1, max_size=300))
    return np.array([1] * uniques + others, dtype=np.int64)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=_size_tables(), tau=st.sampled_from([0.001, 0.01, 0.05, 0.2]), fraction=st.sampled_from([0.01, 0.1, 0.5]))
def test_the_rough_estimate_decides_as_the_exact_one(sizes, tau, fraction):
    """A release is judged on the rough estimate where it is more than ROUGH_MARGIN of τ away
    from τ: on such releases it must give the exact estimate's verdict -- and the two estimates
    may differ by no more than a sliver of that margin, also where the exact one decides."""
    population = float(sizes.sum()) / fraction
    rough = pitman_uniques(sizes, population, rough=True)
    exact = pitman_uniques(sizes, population)
    assert rough == pytest.approx(exact, rel=ROUGH_MARGIN / 100)
    criterion = _criterion(tau, fraction, int(sizes.sum()))
    assert criterion.holds(sizes) == (criterion.share(sizes) <= tau + 1e-9)


def test_edge_cases_of_the_estimate():
    assert pitman_uniques(np.array([2, 3, 4]), 1e4) == 0.0          # no sample unique: 0 (as ARX)
    assert pitman_uniques(np.array([1, 1, 1]), 1e4) == 1e4          # all sample uniques: the whole population
    assert pitman_uniques(np.array([1, 0, 3]), 10.0) == pitman_uniques(np.array([1, 3]), 10.0)  # empty classes


def _criterion(tau: float, fraction: float, rows: int):
    criterion = PopulationUniqueness(tau, fraction).criterion()
    criterion.prepare(CriterionContext(n_rows=rows))
    return criterion


def test_the_release_level_rule_by_hand():
    # classes of 1 ×5, 2, 2 over 9 rows with π = 0.009: N = 1000; the estimate (Ewens, α̂ = 0) is θ̂ ≈ 12.56
    sizes = np.array([1, 1, 1, 1, 1, 2, 2])
    criterion = _criterion(0.05, 0.009, 9)
    share = criterion.share(sizes)
    assert share == pytest.approx(pitman_population_uniques(sizes.tolist(), 1000.0) / 1000.0, rel=1e-6)
    assert 0.0125 < share < 0.0126
    none = np.zeros(7, dtype=bool)
    assert criterion.enforce(sizes, none).tolist() == [False] * 7                      # 1.26 % <= 5 %
    assert _criterion(0.01, 0.009, 9).enforce(sizes, none).tolist() == [True] * 5 + [False] * 2  # singles go
    # classes rejected by another model are suppressed in any case, and do not count: without the
    # first singleton the kept classes 1 ×4, 2, 2 estimate 0.92 % (N stays 1000), within 1 %
    failing = np.array([True] + [False] * 6)
    assert _criterion(0.01, 0.009, 9).share(sizes[~failing]) == pytest.approx(0.00923, abs=1e-5)
    assert _criterion(0.01, 0.009, 9).enforce(sizes, failing).tolist() == [True] + [False] * 6
    assert _criterion(0.005, 0.009, 9).enforce(sizes, failing).tolist() == [True] * 5 + [False] * 2
    # order does not matter (Protocol C's key holder sees the classes permuted)
    order = np.array([5, 0, 6, 1, 2, 3, 4])
    assert _criterion(0.01, 0.009, 9).enforce(sizes[order], none).tolist() == [False, True, False] + [True] * 4


def _nonmonotone_table():
    """One QI: s1..s5 once, a and b twice. Level 1 keeps each s alone and joins a, b; level 2 is '*'."""
    rows = [["s1"], ["s2"], ["s3"], ["s4"], ["s5"], ["a"], ["a"], ["b"], ["b"]]
    h = Hierarchy.from_rows("q", [[v, v, "*"] for v in ("s1", "s2", "s3", "s4", "s5")]
                            + [["a", "ab", "*"], ["b", "ab", "*"]])
    return EncodedTable.from_rows(["q"], rows), {"q": h}


def test_not_monotone_a_generalization_can_fail_where_the_node_holds():
    # level 0: classes 1 ×5, 2, 2 -> 1.26 % of N = 1000; level 1: 1 ×5, 4 -> the estimate jumps to
    # about 15 %; level 2: one class of 9, no sample unique -> 0. With τ = 5 % and no suppression,
    # levels 0 and 2 hold and level 1 does not.
    table, hierarchies = _nonmonotone_table()
    config = AnonymizationConfig(["q"], models=[PopulationUniqueness(0.05, 0.009)])
    checker = prepare(table, hierarchies, config).checker
    assert [checker.evaluate((level,)).anonymous for level in range(3)] == [True, False, True]
    assert not checker.anonymity_monotone and not checker.strict_monotone
    assert model_types()["population_uniqueness"] is PopulationUniqueness


def test_verifier_reads_the_release():
    model = PopulationUniqueness(0.01, 0.009)
    assert model.release_violation([2, 2, 4], table_rows=9) is None
    assert "estimated population uniqueness 0.0125" in model.release_violation([1, 1, 1, 1, 1, 2, 2], table_rows=9)
    assert PopulationUniqueness(0.05, 0.009).release_violation([1, 1, 1, 1, 1, 2, 2], table_rows=9) is None
    # through the whole verifier: the release at level 1 of the non-monotone table, nothing suppressed
    cols, rows = ["q"], [["s1"], ["s2"], ["s3"], ["s4"], ["s5"], ["a"], ["a"], ["b"], ["b"]]
    out = [["s1"], ["s2"], ["s3"], ["s4"], ["s5"], ["ab"], ["ab"], ["ab"], ["ab"]]
    hier = {"q": [[v, v, "*"] for v in ("s1", "s2", "s3", "s4", "s5")] + [["a", "ab", "*"], ["b", "ab", "*"]]}
    problems = verify_anonymized(cols, rows, cols, out, AnonymizationConfig(["q"], models=[PopulationUniqueness(0.05, 0.009)]),
                                 hier, transformation={"q": 1})
    assert len(problems) == 1 and problems[0].startswith("release: estimated population uniqueness 0.15")


def test_parsing_and_validation():
    ctx = ParseContext()
    assert PopulationUniqueness.parse("0.01:0.1", ctx) == PopulationUniqueness(0.01, 0.1)
    assert PopulationUniqueness.parse("0.01:0.1:Pitman", ctx) == PopulationUniqueness(0.01, 0.1, "pitman")
    assert PopulationUniqueness.parse({"threshold": 0.02, "sampling_fraction": 0.5}, ctx) == PopulationUniqueness(0.02, 0.5)
    with pytest.raises(InputError, match="TAU:FRACTION"):
        PopulationUniqueness.parse("0.01", ctx)
    with pytest.raises(InputError, match="not a number"):
        PopulationUniqueness.parse("low:0.1", ctx)
    with pytest.raises(InputError, match="needs threshold and sampling_fraction"):
        PopulationUniqueness.parse({"threshold": 0.1}, ctx)
    with pytest.raises(InputError, match="unknown key"):
        PopulationUniqueness.parse({"threshold": 0.1, "sampling_fraction": 0.1, "tau": 1}, ctx)
    for bad, match in (((0.0, 0.1), r"threshold in \(0, 1\]"), ((1.5, 0.1), r"threshold in \(0, 1\]"),
                       ((0.1, 0.0), r"sampling fraction in \(0, 1\]"), ((0.1, 2.0), r"sampling fraction in \(0, 1\]"),
                       ((0.1, float("nan")), "sampling fraction")):
        with pytest.raises(InputError, match=match):
            AnonymizationConfig(["q"], models=[PopulationUniqueness(*bad)]).validate()
    with pytest.raises(InputError, match="estimator 'ewens'"):
        AnonymizationConfig(["q"], models=[PopulationUniqueness(0.1, 0.1, "ewens")]).validate()
    assert PopulationUniqueness.parse("0.01:0.1:zayatz", ctx) == PopulationUniqueness(0.01, 0.1, "zayatz")
    config = AnonymizationConfig(["q"], models=[PopulationUniqueness(0.02, 0.25)])
    assert AnonymizationConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def _model(draw) -> PopulationUniqueness:
    return PopulationUniqueness(draw(st.sampled_from([0.02, 0.1, 0.3])), draw(st.sampled_from([0.01, 0.1, 0.5])),
                                draw(st.sampled_from(["pitman", "zayatz"])))


test_flash_equals_exhaustive_and_the_verifier_agrees, test_engine_equals_the_independent_reference = property_tests(
    _model, lambda m: {"population_uniqueness": (m.threshold, m.sampling_fraction, m.estimator)},
    exhaustive_examples=120, reference_examples=12,
    reference_metrics=["loss", "discernibility"])


def test_flag_toml_and_frame_give_the_same_release(tmp_path):
    flags_out, toml_out = tmp_path / "flags.csv", tmp_path / "toml.csv"
    model = ["--population-uniqueness", "0.05:0.01", "--suppression", "0.25"]
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, *model, "-o", str(flags_out),
                 "--report", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"), "--verify", "-q"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["config"]["models"] == [{"model": "population_uniqueness", "threshold": 0.05,
                                           "sampling_fraction": 0.01, "estimator": "pitman"}]
    assert report["verified"] is True and report["violations"] == []
    assert "population uniqueness &lt;= 0.05 (pitman, sampling fraction 0.01)" in (tmp_path / "r.html").read_text()
    run = tmp_path / "run.toml"
    run.write_text("\n".join([
        f'input = "{EXAMPLE / "example.csv"}"', f'output = "{toml_out}"', "suppression = 0.25",
        "[population_uniqueness]", "threshold = 0.05", "sampling_fraction = 0.01", "[qi]",
        *[f'{c} = "{EXAMPLE / f"example_hierarchy_{c}.csv"}"' for c in ("age", "sex", "zipcode")]]) + "\n")
    assert main(["anonymize", "--config", str(run), "-q"]) == 0
    assert released(flags_out) == released(toml_out)

    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(EXAMPLE / "example.csv", sep=";", dtype=str)
    out, _ = fedanon.anonymize_frame(
        frame, {c: str(EXAMPLE / f"example_hierarchy_{c}.csv") for c in ("age", "sex", "zipcode")},
        population_uniqueness="0.05:0.01", suppression=0.25)
    assert sorted(";".join(row) for row in out.astype(str).values.tolist()) == released(flags_out)


def test_bad_value_is_one_line_exit_2(capsys):
    bad_anonymize_flags_fail(capsys, ["--population-uniqueness", "0.05:0"], "sampling fraction in (0, 1]")


@pytest.mark.slow
def test_simulate_protocol_b_equals_central(tmp_path):
    simulate_b_equals_anonymize(tmp_path, ["--population-uniqueness", "0.05:0.01", "--suppression", "0.25"])


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["A", "C"])
def test_protocols_a_and_c_equal_central(tmp_path, protocol):
    """C's key holder judges the model from decrypted class sizes, as it does k-anonymity."""
    flags = [*QI_FLAGS, "--population-uniqueness", "0.05:0.01", "--suppression", "0.25"]
    sim_out, ref_out = tmp_path / "sim.csv", tmp_path / "ref.csv"
    assert main(["simulate", "--protocol", protocol, "--split", "horizontal", "--parties", "2",
                 str(EXAMPLE / "example.csv"), *flags, "--output", str(sim_out), "-q"]) == 0
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *flags, "--output", str(ref_out), "-q"]) == 0
    assert released(sim_out) == released(ref_out)
