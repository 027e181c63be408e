"""(α, k)-anonymity: hand-computed cases, Flash == exhaustive == reference, every entry point.

The model is one module (fedanon/model/privacy/alphak.py) on the model registry.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import strategies as st

from fedanon.engine import AnonymizationConfig
from fedanon.errors import InputError
from fedanon.model.criterion import CriterionContext
from fedanon.model.privacy.alphak import AlphaK
from fedanon.model.registry import ClassView, ParseContext, model_types
from model_cases import bad_anonymize_flags_fail, dense_and_sparse_verdicts, flag_toml_and_frame_agree, \
    property_tests, simulate_b_equals_anonymize


def _criterion(alpha: float, totals: list[int]):
    criterion = AlphaK(alpha, "s").criterion()
    criterion.prepare(CriterionContext(n_rows=sum(totals), histograms_total={"s": np.array(totals)}))
    return criterion


def _judge(alpha: float, classes: list[list[int]]) -> tuple[list[bool], list[bool]]:
    criterion = _criterion(alpha, np.array(classes, dtype=np.int64).sum(axis=0).tolist())
    return dense_and_sparse_verdicts(criterion, classes)


# largest shares: class 0 = (2, 2) -> 1/2; class 1 = (3, 1) -> 3/4; class 2 = (1, 0) -> 1; class 3 = (2, 1) -> 2/3
HAND = [
    (0.5, [True, False, False, False]),
    (2 / 3, [True, False, False, True]),   # class 3 exactly at the bound passes
    (0.75, [True, True, False, True]),
    (1.0, [True, True, True, True]),
]


@pytest.mark.parametrize("alpha,expected", HAND)
def test_hand_computed_classes(alpha, expected):
    dense, sparse = _judge(alpha, [[2, 2], [3, 1], [1, 0], [2, 1]])
    assert dense == expected and sparse == expected


def test_smallest_passing_class_size():
    # alpha 0.5 over 2 values: 1 row is 100 % of one value; (1, 1) passes -> 2
    assert _criterion(0.5, [4, 4]).min_class_size == 2
    # alpha 0.4 over 3 values: m=2 allows floor(0.8) = 0 per value; m=3 allows 1 each -> (1, 1, 1): 3
    assert _criterion(0.4, [3, 3, 3]).min_class_size == 3
    # alpha 0.3 over 3 values: 3 values x 30 % < 100 % for every m: no class passes; the bound is the table
    assert _criterion(0.3, [3, 3, 3]).min_class_size == 9
    # alpha 1: any class passes
    assert _criterion(1.0, [3, 3, 3]).min_class_size == 1


def test_verifier_reads_the_definition_independently():
    def view(counts):
        return ClassView(size=sum(counts.values()), sensitive_counts={"s": Counter(counts)}, overall={})

    assert AlphaK(0.5, "s").violation(view({b"a": 2, b"b": 2})) is None
    assert "share 0.750000 > alpha=0.5" in AlphaK(0.5, "s").violation(view({b"a": 3, b"b": 1}))
    assert AlphaK(2 / 3, "s").violation(view({b"a": 2, b"b": 1})) is None


def test_parsing_and_validation():
    ctx = ParseContext(sensitive="s")
    assert AlphaK.parse("0.5", ctx) == AlphaK(0.5, "s")
    assert AlphaK.parse(1, ctx) == AlphaK(1.0, "s")
    assert AlphaK.parse({"alpha": 0.25}, ctx) == AlphaK(0.25, "s")
    with pytest.raises(InputError, match="not a number"):
        AlphaK.parse("half", ctx)
    with pytest.raises(InputError, match="sensitive attribute"):
        AlphaK.parse("0.5", ParseContext())
    for bad in (0.0, 1.5, float("nan")):
        with pytest.raises(InputError, match="0 < alpha <= 1"):
            AnonymizationConfig(["q"], models=[AlphaK(bad, "s")]).validate()
    assert "alpha_k" in model_types()
    config = AnonymizationConfig(["q"], k=3, models=[AlphaK(0.5, "s")])
    assert AnonymizationConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def _model(draw) -> AlphaK:
    return AlphaK(draw(st.sampled_from([0.4, 0.5, 2 / 3, 0.75, 0.9])), "s")


test_flash_equals_exhaustive_and_the_verifier_agrees, test_engine_equals_the_independent_reference = property_tests(
    _model, lambda m: {"alpha_k": (m.alpha, "s")})


def test_cli_flag_toml_and_frame_give_the_same_release(tmp_path):
    flag_toml_and_frame_agree(
        tmp_path, ["--sensitive", "diagnosis", "--k", "2", "--alpha-k", "0.7", "--suppression", "0.25"],
        ['sensitive = "diagnosis"', "k = 2", "suppression = 0.25", "[alpha_k]", "alpha = 0.7"],
        dict(sensitive="diagnosis", k=2, alpha_k="0.7", suppression=0.25),
        [{"model": "alpha_k", "alpha": 0.7, "attribute": "diagnosis"}])


def test_bad_value_is_one_line_exit_2(capsys):
    bad_anonymize_flags_fail(capsys, ["--sensitive", "diagnosis", "--alpha-k", "2"], "0 < alpha <= 1")


@pytest.mark.slow
def test_simulate_protocol_b_equals_central(tmp_path):
    simulate_b_equals_anonymize(tmp_path, ["--sensitive", "diagnosis", "--k", "2", "--alpha-k", "0.7",
                                           "--suppression", "0.25"])
