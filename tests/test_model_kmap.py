"""k-map, estimated from the sampling fraction and against a population table: hand-computed
cases, Flash == exhaustive == reference, every entry point. Both are one module
(fedanon/model/privacy/kmap.py) on the registry.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedanon.cli import main
from fedanon.engine import AnonymizationConfig
from fedanon.errors import InputError
from fedanon.model.criterion import CriterionContext
from fedanon.model.privacy.kmap import KMap, KMapPopulation
from fedanon.model.registry import ClassView, ParseContext, model_types
from fedanon.stats.classes import ClassStats
from model_cases import EXAMPLE, QI_FLAGS, bad_anonymize_flags_fail, engine_equals_reference, \
    flag_toml_and_frame_agree, flash_equals_exhaustive, instances, property_tests, released, \
    simulate_b_equals_anonymize

# (k, n, N, estimator, alpha, k'), worked out by hand:
HAND = [
    # λ = 5 · 1000/10000 = 0.5. Poisson CDF: 0.6065, 0.9098, 0.9856, 0.9982 -> first >= 0.99 at c = 3: k' = 4
    (5, 1000, 10_000, "poisson", 0.01, 4),
    # zero-truncated: divide by 1 - e^-0.5 = 0.3935: 0.7707, 0.9634, 0.9955 -> c = 3: k' = 4
    (5, 1000, 10_000, "zero-truncated", 0.01, 4),
    # λ = 0.1. Poisson: 0.9048, 0.9953 -> c = 1: k' = 2; zero-truncated: 0.9508, 0.9983 -> c = 2: k' = 3
    (10, 1000, 100_000, "poisson", 0.01, 2),
    (10, 1000, 100_000, "zero-truncated", 0.01, 3),
    # α = 0.1 with λ = 0.1: Poisson 0.9048 >= 0.9 already at c = 0: k' = 1 (every class passes)
    (10, 1000, 100_000, "poisson", 0.1, 1),
    # the whole population sampled (λ = k = 5): the tail never falls below α before k: k' = k
    (5, 1000, 1000, "poisson", 0.01, 5),
    # k' never exceeds the rows: n = 3
    (5, 3, 3, "poisson", 0.01, 3),
]


@pytest.mark.parametrize("k,n,population,estimator,alpha,expected", HAND)
def test_hand_computed_class_size(k, n, population, estimator, alpha, expected):
    criterion = KMap(k, population, estimator, alpha).criterion()
    criterion.prepare(CriterionContext(n_rows=n))
    assert criterion.min_class_size == expected
    sizes = np.array([expected - 1, expected, expected + 1])
    assert criterion.classes_ok(ClassStats(sizes)).tolist() == [expected - 1 >= expected, True, True]
    # the verifier derives k' on its own
    model = KMap(k, population, estimator, alpha)
    assert model.violation(ClassView(size=expected, sensitive_counts={}, overall={}, table_rows=n)) is None
    if expected > 1:
        why = model.violation(ClassView(size=expected - 1, sensitive_counts={}, overall={}, table_rows=n))
        assert why is not None and f"k'={expected}" in why


def test_population_smaller_than_the_data_is_an_input_error():
    with pytest.raises(InputError, match="population .* smaller than the data"):
        KMap(5, 10, "poisson", 0.01).criterion().prepare(CriterionContext(n_rows=11))


def test_parsing_and_validation():
    ctx = ParseContext()
    assert KMap.parse("5:1000", ctx) == KMap(5, 1000, "poisson", 0.01)
    assert KMap.parse("5:1000:zero-truncated:0.05", ctx) == KMap(5, 1000, "zero-truncated", 0.05)
    assert KMap.parse({"k": 3, "population": 500, "estimator": "zero-truncated"}, ctx) == \
        KMap(3, 500, "zero-truncated", 0.01)
    with pytest.raises(InputError, match="expected K:N"):
        KMap.parse("5", ctx)
    with pytest.raises(InputError, match="not an integer"):
        KMap.parse("5:10.5", ctx)
    with pytest.raises(InputError, match="needs k and population"):
        KMap.parse({"k": 3}, ctx)
    for bad, message in ((KMap(5, 100, "binomial", 0.01), "unknown k-map estimator"),
                         (KMap(0, 100, "poisson", 0.01), "k >= 1"),
                         (KMap(5, 0, "poisson", 0.01), "N >= 1"),
                         (KMap(5, 100, "poisson", 1.0), r"significance level in \(0, 1\)")):
        with pytest.raises(InputError, match=message):
            AnonymizationConfig(["q"], models=[bad]).validate()
    assert "k_map" in model_types()
    config = AnonymizationConfig(["q"], models=[KMap(5, 1000, "zero-truncated", 0.05)])
    assert AnonymizationConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def _model(draw) -> KMap:
    return KMap(draw(st.sampled_from([2, 3, 5, 8])), draw(st.sampled_from([30, 60, 150, 600])),
                draw(st.sampled_from(["poisson", "zero-truncated"])), draw(st.sampled_from([0.01, 0.05, 0.2])))


test_flash_equals_exhaustive_and_the_verifier_agrees, test_engine_equals_the_independent_reference = property_tests(
    _model, lambda m: {"k_map": (m.k, m.population, m.estimator, m.significance)},
    exhaustive_examples=100)


def test_cli_flag_toml_and_frame_give_the_same_release(tmp_path):
    # 8 rows of a population of 400, k = 5: λ = 0.1, Poisson: k' = 2, so the release is 2-anonymity's
    flag_toml_and_frame_agree(
        tmp_path, ["--k-map", "5:400"], ["[k_map]", "k = 5", "population = 400"], dict(k_map="5:400"),
        [{"model": "k_map", "k": 5, "population": 400, "estimator": "poisson", "significance": 0.01}])
    k2_out = tmp_path / "k2.csv"
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, "--k", "2", "-o", str(k2_out), "-q"]) == 0
    assert released(tmp_path / "flags.csv") == released(k2_out)


def test_bad_value_is_one_line_exit_2(capsys):
    bad_anonymize_flags_fail(capsys, ["--k-map", "5:4"], "smaller than the data")


@pytest.mark.slow
def test_simulate_protocol_b_equals_central(tmp_path):
    simulate_b_equals_anonymize(tmp_path, ["--k-map", "5:400:zero-truncated", "--suppression", "0.25"])


# ----------------------------------------------------------------- against a population table

def test_population_table_hand_computed():
    # k = 3; (population rows, released rows) per class:
    # (5, 2) passes; (2, 1) fails: 1 released row matches 2 people; (2, 0) releases nothing; (3, 3) passes
    criterion = KMapPopulation(3).criterion()
    criterion.prepare(CriterionContext(n_rows=12, subset_total=6))
    stats = ClassStats(np.array([5, 2, 2, 3]), subset_sizes=np.array([2, 1, 0, 3]))
    assert criterion.classes_ok(stats).tolist() == [True, False, True, True]
    assert criterion.monotone and not criterion.monotone_with_suppression
    model = KMapPopulation(3)
    assert model.violation(ClassView(size=2, sensitive_counts={}, overall={}, subset_rows=1)) is not None
    assert model.violation(ClassView(size=2, sensitive_counts={}, overall={}, subset_rows=0)) is None
    with pytest.raises(InputError, match="needs the sample"):
        KMapPopulation(3).criterion().prepare(CriterionContext(n_rows=12))


def test_population_table_parsing(tmp_path):
    ctx = ParseContext(base=tmp_path)
    assert KMapPopulation.parse("4:sample.csv", ctx) == KMapPopulation(4)
    assert ctx.files["subset"] == tmp_path / "sample.csv"
    assert KMapPopulation.parse({"k": 2, "subset": "s.csv"}, ctx) == KMapPopulation(2)
    with pytest.raises(InputError, match="expected K:SAMPLE.csv"):
        KMapPopulation.parse("4", ctx)
    assert "k_map_population" in model_types()


@st.composite
def _with_sample(draw):
    table, hier, config, rows = draw(instances(lambda d: KMapPopulation(d(st.sampled_from([2, 3, 4]))),
                                               metrics=["loss", "nonuniform-entropy", "discernibility"]))
    subset = [draw(st.booleans()) for _ in rows]
    subset[draw(st.integers(0, len(rows) - 1))] = True
    return table, hier, config, rows, subset


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_with_sample())
def test_population_table_flash_equals_exhaustive_and_reference(case):
    table, hier, config, rows, subset = case
    flash_equals_exhaustive(table, hier, config, rows, subset)
    engine_equals_reference(table, hier, config, rows, subset, k_map_population=config.models[0].k)


def test_population_table_from_the_command_line(tmp_path):
    lines = (EXAMPLE / "example.csv").read_text(encoding="utf-8").splitlines()
    sample = tmp_path / "sample.csv"
    sample.write_text("\n".join([lines[0], *lines[1:5]]) + "\n", encoding="utf-8")  # the first 4 of 8 rows
    out = tmp_path / "out.csv"
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, "--k-map-population", f"2:{sample}",
                 "-o", str(out), "--report", str(tmp_path / "r.json"), "--verify", "-q"]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["verified"] is True and report["research_subset_rows"] == 4
    assert len(released(out)) == 4   # only the sample is released


@pytest.mark.slow
def test_population_table_simulate_protocol_b_equals_central(tmp_path):
    lines = (EXAMPLE / "example.csv").read_text(encoding="utf-8").splitlines()
    sample = tmp_path / "sample.csv"
    sample.write_text("\n".join([lines[0], *lines[1:5]]) + "\n", encoding="utf-8")
    simulate_b_equals_anonymize(tmp_path, ["--k-map-population", f"2:{sample}"])
