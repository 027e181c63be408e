"""δ-disclosure privacy: hand-computed cases, Flash == exhaustive, and every entry point.

The model is one module (fedanon/model/privacy/ddisclosure.py) on the model registry; these
tests show it reaches the CLI flag, the TOML run file, `anonymize_frame`, the independent
verifier and `fedanon simulate` (Protocol B over daemons) without any other change.
"""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine_strategies import hierarchies
from model_cases import bad_anonymize_flags_fail, dense_and_sparse_verdicts, flag_toml_and_frame_agree, \
    simulate_b_equals_anonymize
from fedanon.data.table import EncodedTable
from fedanon.engine import AnonymizationConfig, NoSolutionError, anonymize
from fedanon.errors import InputError
from fedanon.model.criterion import CriterionContext
from fedanon.model.privacy.ddisclosure import DeltaDisclosure
from fedanon.model.registry import ClassView, ParseContext, model_types
from fedanon.oracle.exhaustive import exhaustive_optimum
from fedanon.oracle.verify import verify_anonymized



def _judge(delta: float, totals: list[int], classes: list[list[int]]) -> tuple[list[bool], list[bool]]:
    """The criterion's verdict on dense and on sparse class histograms."""
    criterion = DeltaDisclosure(delta, "s").criterion()
    criterion.prepare(CriterionContext(n_rows=sum(totals), histograms_total={"s": np.array(totals)}))
    return dense_and_sparse_verdicts(criterion, classes)


def test_hand_computed_classes():
    # table: 4 x a, 4 x b, so p(a|T) = p(b|T) = 1/2.
    # class 0 = (2 a, 2 b): ratios 1 and 1, |ln| = 0            -> passes every delta
    # class 1 = (3 a, 1 b): ratios 1.5 and 0.5, max |ln| = ln 2 = 0.6931...
    # class 2 = (2 a, 0 b): b missing, ratio 0, |ln| = infinity  -> fails every delta
    totals, classes = [4, 4], [[2, 2], [3, 1], [2, 0]]
    for delta, expected in ((0.70, [True, True, False]), (0.69, [True, False, False]), (5.0, [True, True, False])):
        dense, sparse = _judge(delta, totals, classes)
        assert dense == expected and sparse == expected, (delta, dense, sparse)
    # a value absent from the whole table is not required in a class
    dense, sparse = _judge(0.5, [4, 0, 4], [[2, 0, 2], [2, 0, 2]])
    assert dense == sparse == [True, True]


def test_verifier_reads_the_definition_independently():
    model = DeltaDisclosure(0.69, "s")
    overall = {"s": {b"a": 0.5, b"b": 0.5}}
    view = lambda counts: ClassView(size=sum(counts.values()), sensitive_counts={"s": Counter(counts)},  # noqa: E731
                                    overall=overall)
    assert model.violation(view({b"a": 2, b"b": 2})) is None
    assert "0.693147 > delta=0.69" in model.violation(view({b"a": 3, b"b": 1}))
    assert "missing" in DeltaDisclosure(5.0, "s").violation(view({b"a": 2}))
    assert DeltaDisclosure(0.7, "s").violation(view({b"a": 3, b"b": 1})) is None


def test_parsing_and_validation():
    ctx = ParseContext(sensitive="s")
    assert DeltaDisclosure.parse("1.5", ctx) == DeltaDisclosure(1.5, "s")
    assert DeltaDisclosure.parse(2, ctx) == DeltaDisclosure(2.0, "s")
    assert DeltaDisclosure.parse({"delta": 0.5}, ctx) == DeltaDisclosure(0.5, "s")
    with pytest.raises(InputError, match="not a number"):
        DeltaDisclosure.parse("x", ctx)
    with pytest.raises(InputError, match="sensitive attribute"):
        DeltaDisclosure.parse("1.5", ParseContext())
    with pytest.raises(InputError, match="delta > 0"):
        AnonymizationConfig(["q"], models=[DeltaDisclosure(0.0, "s")]).validate()
    assert "delta_disclosure" in model_types()
    config = AnonymizationConfig(["q"], models=[DeltaDisclosure(1.5, "s")])
    assert AnonymizationConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


@st.composite
def instances(draw):
    q = draw(st.integers(1, 3))
    names = [f"q{i}" for i in range(q)]
    hier = {n: draw(hierarchies(n, max_values=5, max_height=3)) for n in names}
    n_rows = draw(st.integers(2, 30))
    leaves = {n: [r[0].decode() for r in hier[n].rows] for n in names}
    sensitive = draw(st.sampled_from([["x", "y"], ["x", "y", "z"]]))
    rows = [[draw(st.sampled_from(leaves[n])) for n in names] + [draw(st.sampled_from(sensitive))]
            for _ in range(n_rows)]
    table = EncodedTable.from_rows(names + ["s"], rows)
    config = AnonymizationConfig(names, k=draw(st.sampled_from([1, 1, 2])),
                                 suppression=draw(st.sampled_from([0.0, 0.2, 0.5])),
                                 metric=draw(st.sampled_from(["loss", "nonuniform-entropy", "discernibility",
                                                              "ambiguity"])),
                                 models=[DeltaDisclosure(draw(st.sampled_from([0.3, 0.7, 1.2, 2.5])), "s")])
    return table, hier, config, rows


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_flash_equals_exhaustive_and_the_verifier_agrees(data):
    table, hier, config, rows = data.draw(instances())
    expected, expected_loss = exhaustive_optimum(table, hier, config, None)
    if expected is None:
        with pytest.raises(NoSolutionError):
            anonymize(table, hier, config)
        return
    result = anonymize(table, hier, config)
    assert result.transformation == expected
    assert math.isclose(result.information_loss, expected_loss, rel_tol=1e-9, abs_tol=1e-9)
    out = [[v.decode() for v in r] for r in result.output.decode_rows()]
    assert verify_anonymized(table.columns, rows, table.columns, out, config, hier,
                             transformation=result.transformation, suppressed=list(result.suppressed),
                             reported_suppressed_rows=result.suppressed_rows, reported_classes=result.classes) == []



def test_cli_flag_toml_and_frame_give_the_same_release(tmp_path):
    flag_toml_and_frame_agree(
        tmp_path, ["--sensitive", "diagnosis", "--delta-disclosure", "1.0", "--suppression", "0.5"],
        ['sensitive = "diagnosis"', "suppression = 0.5", "delta_disclosure = 1.0"],
        dict(sensitive="diagnosis", delta_disclosure="1.0", suppression=0.5),
        [{"model": "delta_disclosure", "delta": 1.0, "attribute": "diagnosis"}])


def test_bad_value_is_one_line_exit_2(capsys):
    bad_anonymize_flags_fail(capsys, ["--sensitive", "diagnosis", "--delta-disclosure", "-1"], "delta > 0")


@pytest.mark.slow
def test_simulate_protocol_b_equals_central(tmp_path):
    simulate_b_equals_anonymize(tmp_path, ["--sensitive", "diagnosis", "--delta-disclosure", "1.0",
                                           "--suppression", "0.5"])
