"""The KL-divergence metric: one module (fedanon/model/metrics/kldivergence.py) on the metric registry.

Held to: values worked out by hand on the running example (the two nodes of
tests/test_reference.py, whose table pins the same numbers for the reference) and on a table with
repeated tuples; the independent reference (tests/reference.py, written from Kifer & Gehrke's
definition over rows and tuples, no fedanon code) on random tables; its bounds against the loss
at every generalization with arbitrary suppression; Flash against the exhaustive search with
the verifier; every entry point (flag, TOML, `anonymize_frame`, `simulate` B); Protocol C's
refusal before any data moves.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedanon
from engine_strategies import instances as engine_instances
from fedanon.cli import main
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.engine import AnonymizationConfig, anonymize
from fedanon.engine.anonymizer import prepare
from fedanon.errors import InputError
from fedanon.model.metrics.registry import metric_names, metric_type
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.reidentification import AverageRisk
from model_cases import EXAMPLE, QI_FLAGS, bad_anonymize_flags_fail, property_tests, released, \
    simulate_b_equals_anonymize

QIS = ["age", "sex", "zipcode"]
METRIC = "kl-divergence"


def _example() -> tuple[EncodedTable, dict[str, Hierarchy]]:
    rows = [line.split(";") for line in (EXAMPLE / "example.csv").read_text(encoding="utf-8").splitlines()]
    hierarchies = {a: Hierarchy.from_rows(a, [line.split(";") for line in
                                              (EXAMPLE / f"example_hierarchy_{a}.csv").read_text().splitlines()])
                   for a in QIS}
    return EncodedTable.from_rows(rows[0], rows[1:]), hierarchies


def test_registered_with_the_traits_of_its_definition():
    assert METRIC in metric_names()
    metric = metric_type(METRIC)
    assert metric.monotone_without_suppression and not metric.monotone_with_suppression
    assert metric.needs_class_values and not metric.has_baseline
    assert not metric.needs_value_marginals and not metric.charges_suppressed_values


def test_hand_values_on_the_running_example():
    table, hierarchies = _example()
    # node (1,1,4), 3-anonymity, 50 %: the kept class 20-60/*/8**** {r1,r2,r5,r6} spreads 4/8 over
    # 4·2·8 = 64 cells, the 4 suppressed rows 4/8 over all 128: q = 1/128 + 1/256 on the kept
    # tuples, 1/256 on the others; p = 1/8 each -> ½·log2((1/8)/(3/256)) + ½·log2(32) = 5 − ½·log2 3
    prep = prepare(table, hierarchies, AnonymizationConfig(QIS, k=3, suppression=0.5, metric=METRIC))
    evaluation = prep.checker.evaluate((1, 1, 4))
    assert evaluation.suppressed_rows == 4
    assert evaluation.loss == pytest.approx(5 - 0.5 * math.log2(3), rel=1e-12)
    # without suppression the node has the classes of 4, 2 and 2 rows over 64, 32 and 32 cells
    # (q = 1/128 everywhere): 8 · 1/8 · log2(16) = 4 -- the bound, below the loss with suppression
    assert evaluation.bound == pytest.approx(4.0, rel=1e-12)
    # node (1,0,3), 2-anonymity, no suppression: four classes of 2 over 16, 16, 8 and 8 cells
    # (q = 1/64, 1/64, 1/32, 1/32): 1/8 · (2·3 + 2·3 + 2·2 + 2·2) = 2.5; it is the optimum
    result = anonymize(table, hierarchies, AnonymizationConfig(QIS, k=2, metric=METRIC))
    assert result.transformation == {"age": 1, "sex": 0, "zipcode": 3}
    assert result.information_loss == pytest.approx(2.5, rel=1e-12)
    # the ends: the input itself diverges by 0; all suppressed: log2(128) − H(P) = 7 − 3
    metric = prep.checker.metric
    bottom, top = (0, 0, 0), (2, 1, 5)
    at_bottom, at_top = prep.grouper.group_rows(bottom), prep.grouper.group_rows(top)
    assert metric.loss(bottom, at_bottom, np.zeros(at_bottom.count, dtype=bool)) == 0.0
    assert metric.loss(top, at_top, np.ones(at_top.count, dtype=bool)) == pytest.approx(4.0, rel=1e-12)


def test_repeated_tuples_count_once_per_tuple_not_per_row():
    # rows a, a, b; level 1 joins {a, b}: q = 1/2 on both; p(a) = 2/3, p(b) = 1/3
    # KL = 2/3·log2(4/3) + 1/3·log2(2/3) = 5/3 − log2 3 (summing over rows, as ARX does, would count a twice)
    h = Hierarchy.from_rows("q", [["a", "ab"], ["b", "ab"]])
    table = EncodedTable.from_rows(["q"], [["a"], ["a"], ["b"]])
    result = anonymize(table, {"q": h}, AnonymizationConfig(["q"], k=3, metric=METRIC))
    assert result.transformation == {"q": 1}
    assert result.information_loss == pytest.approx(5 / 3 - math.log2(3), rel=1e-12)


def test_not_monotone_with_suppression_generalizing_can_beat_suppressing():
    # a, b once each, c six times; 2-anonymity with 2 rows of suppression. At level 0 a and b are
    # suppressed: q(c) = 6/8 + 2/(8·3) = 10/12, q(a) = q(b) = 1/12, so
    # KL = 2 · 1/8 · log2(3/2) + 3/4 · log2(9/10) ≈ 0.032 > 0; at level 1 {a, b} is one class over its two
    # values, q = p everywhere: KL = 0. A search that took the metric for monotone would stop at level 0.
    h = Hierarchy.from_rows("q", [["a", "ab"], ["b", "ab"], ["c", "c"]])
    table = EncodedTable.from_rows(["q"], [["a"], ["b"]] + [["c"]] * 6)
    config = AnonymizationConfig(["q"], k=2, suppression=0.25, metric=METRIC)
    at_bottom = prepare(table, {"q": h}, config).checker.evaluate((0,))
    assert at_bottom.suppressed_rows == 2
    assert at_bottom.loss == pytest.approx(0.25 * math.log2(1.5) + 0.75 * math.log2(0.9), rel=1e-12)
    result = anonymize(table, {"q": h}, config)
    assert result.transformation == {"q": 1} and result.information_loss == 0.0


@st.composite
def _bound_cases(draw):
    table, hier, names = draw(engine_instances(max_qis=3, max_rows=16))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return table, hier, names, seed


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_bound_cases())
def test_bounds_never_exceed_the_loss_at_any_generalization_with_any_suppression(case):
    """class_bound(X) and static_bound(X) are at most the loss at X and every generalization of X,
    whatever classes are suppressed there -- what Flash's pruning of non-monotone searches needs."""
    table, hier, names, seed = case
    prep = prepare(table, hier, AnonymizationConfig(names, metric=METRIC))
    metric, grouper = prep.checker.metric, prep.grouper
    rng = np.random.default_rng(seed)
    nodes = list(itertools.product(*[range(int(h.shape[0])) for h in prep.code_maps]))
    losses: dict[tuple[int, ...], float] = {}
    bounds: dict[tuple[int, ...], tuple[float, float]] = {}
    for node in nodes:
        classes = grouper.group_rows(node)
        trials = [np.zeros(classes.count, dtype=bool)] + [rng.random(classes.count) < share for share in (0.3, 0.7)]
        losses[node] = min(metric.loss(node, classes, failing) for failing in trials)
        bounds[node] = (metric.class_bound(node, classes), float(metric.static_bound(np.array([node]))[0]))
        assert bounds[node][0] == pytest.approx(metric.loss(node, classes, trials[0]), abs=0.0)
    for low in nodes:
        for high in nodes:
            if all(a <= b for a, b in zip(low, high)):
                assert max(bounds[low]) <= losses[high] + 1e-9 * max(1.0, losses[high]), (low, high)


def _model(draw):
    kind = draw(st.sampled_from(["l", "risk"]))
    if kind == "l":
        return LDiversity("distinct", draw(st.sampled_from([1, 2])), "s")
    return AverageRisk(draw(st.sampled_from([0.4, 0.5, 0.7])))


def _reference_args(model) -> dict:
    if isinstance(model, LDiversity):
        return {"l_diversity": ("distinct", model.l, None, "s")}
    return {"average_risk": model.threshold}


test_flash_equals_exhaustive_and_the_verifier_agrees, test_engine_equals_the_independent_reference = property_tests(
    _model, _reference_args,
    exhaustive_examples=120, reference_examples=80,
    exhaustive_metrics=[METRIC], reference_metrics=[METRIC])


def test_flag_toml_and_frame_give_the_same_release(tmp_path):
    flags_out, toml_out = tmp_path / "flags.csv", tmp_path / "toml.csv"
    model = ["--k", "2", "--suppression", "0.25", "--metric", METRIC]
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, *model, "-o", str(flags_out),
                 "--verify", "-q"]) == 0
    run = tmp_path / "run.toml"
    run.write_text("\n".join([
        f'input = "{EXAMPLE / "example.csv"}"', f'output = "{toml_out}"', "k = 2", "suppression = 0.25",
        f'metric = "{METRIC}"', "[qi]", *[f'{c} = "{EXAMPLE / f"example_hierarchy_{c}.csv"}"' for c in QIS]]) + "\n")
    assert main(["anonymize", "--config", str(run), "-q"]) == 0
    assert released(flags_out) == released(toml_out)

    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(EXAMPLE / "example.csv", sep=";", dtype=str)
    out, report = fedanon.anonymize_frame(frame, {c: str(EXAMPLE / f"example_hierarchy_{c}.csv") for c in QIS},
                                          k=2, suppression=0.25, metric=METRIC)
    assert sorted(";".join(row) for row in out.astype(str).values.tolist()) == released(flags_out)


def test_unknown_spelling_is_one_line_exit_2(capsys):
    bad_anonymize_flags_fail(capsys, ["--metric", "kl"], METRIC)


@pytest.mark.slow
def test_simulate_protocol_b_equals_central(tmp_path):
    simulate_b_equals_anonymize(tmp_path, ["--k", "2", "--suppression", "0.25", "--metric", METRIC])


def test_protocol_c_refuses_it_before_data_moves():
    """C's key holder never sees a class's values, and a class's share of the divergence depends on
    them (its area): refused with one clear message at the start, not computed wrongly."""
    from fedanon.protocols.c.counted_checks import COUNTED_METRICS, check_supported

    assert METRIC not in COUNTED_METRICS
    with pytest.raises(InputError) as refused:
        check_supported(AnonymizationConfig(QIS, k=2, metric=METRIC))
    text = str(refused.value)
    assert f"metric {METRIC!r}" in text and "depends on the class's generalized values" in text, text
    assert "per-QI value" not in text, text  # C sends per-QI value counts for the entropy metrics: not the reason
