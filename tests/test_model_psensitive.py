"""p-sensitive k-anonymity: hand-computed cases, Flash == exhaustive == reference, every entry point.

The model is one module (fedanon/model/privacy/psensitive.py) on the model registry.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import strategies as st

from fedanon.engine import AnonymizationConfig
from fedanon.errors import InputError
from fedanon.model.criterion import CriterionContext, saturation_thresholds
from fedanon.model.privacy.psensitive import PSensitive
from fedanon.model.registry import ClassView, ParseContext, model_types
from model_cases import bad_anonymize_flags_fail, dense_and_sparse_verdicts, flag_toml_and_frame_agree, \
    property_tests, simulate_b_equals_anonymize


def _judge(p: int, classes: list[list[int]]) -> tuple[list[bool], list[bool]]:
    criterion = PSensitive(p, "s").criterion()
    criterion.prepare(CriterionContext(n_rows=0))
    return dense_and_sparse_verdicts(criterion, classes)


def test_hand_computed_classes():
    # class 0 = (2, 1, 0): 2 distinct values; class 1 = (3, 0, 0): 1; class 2 = (1, 1, 1): 3
    classes = [[2, 1, 0], [3, 0, 0], [1, 1, 1]]
    assert _judge(1, classes) == ([True, True, True], [True, True, True])
    assert _judge(2, classes) == ([True, False, True], [True, False, True])
    assert _judge(3, classes) == ([False, False, True], [False, False, True])
    assert _judge(4, classes) == ([False, False, False], [False, False, False])


def test_traits_the_search_relies_on():
    # with suppression monotone (failing rows only shrink), p rows per passing class, and
    # classes with p distinct values may be forgotten by the statistics (saturation)
    criterion = PSensitive(3, "s").criterion()
    assert criterion.monotone and criterion.monotone_with_suppression
    assert criterion.min_class_size == 3 and saturation_thresholds([criterion]) == {"s": 3}


def test_verifier_reads_the_definition_independently():
    def view(counts):
        return ClassView(size=sum(counts.values()), sensitive_counts={"s": Counter(counts)}, overall={})

    assert PSensitive(2, "s").violation(view({b"a": 2, b"b": 1})) is None
    assert "1 distinct sensitive values < p=2" in PSensitive(2, "s").violation(view({b"a": 3}))


def test_parsing_and_validation():
    ctx = ParseContext(sensitive="s")
    assert PSensitive.parse("3", ctx) == PSensitive(3, "s")
    assert PSensitive.parse(2, ctx) == PSensitive(2, "s")
    assert PSensitive.parse({"p": 4}, ctx) == PSensitive(4, "s")
    with pytest.raises(InputError, match="not an integer"):
        PSensitive.parse("2.5", ctx)
    with pytest.raises(InputError, match="not a number"):
        PSensitive.parse("two", ctx)
    with pytest.raises(InputError, match="sensitive attribute"):
        PSensitive.parse("2", ParseContext())
    with pytest.raises(InputError, match="p >= 1"):
        AnonymizationConfig(["q"], models=[PSensitive(0, "s")]).validate()
    assert "p_sensitive" in model_types()
    config = AnonymizationConfig(["q"], k=3, models=[PSensitive(2, "s")])
    assert AnonymizationConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def _model(draw) -> PSensitive:
    return PSensitive(draw(st.sampled_from([1, 2, 3])), "s")


test_flash_equals_exhaustive_and_the_verifier_agrees, test_engine_equals_the_independent_reference = property_tests(
    _model, lambda m: {"p_sensitive": (m.p, "s")})


def test_cli_flag_toml_and_frame_give_the_same_release(tmp_path):
    flag_toml_and_frame_agree(
        tmp_path, ["--sensitive", "diagnosis", "--k", "2", "--p-sensitive", "2", "--suppression", "0.25"],
        ['sensitive = "diagnosis"', "k = 2", "suppression = 0.25", "p_sensitive = 2"],
        dict(sensitive="diagnosis", k=2, p_sensitive=2, suppression=0.25),
        [{"model": "p_sensitive", "p": 2, "attribute": "diagnosis"}])


def test_bad_value_is_one_line_exit_2(capsys):
    bad_anonymize_flags_fail(capsys, ["--sensitive", "diagnosis", "--p-sensitive", "1.5"], "not an integer")


@pytest.mark.slow
def test_simulate_protocol_b_equals_central(tmp_path):
    simulate_b_equals_anonymize(tmp_path, ["--sensitive", "diagnosis", "--k", "2", "--p-sensitive", "2",
                                           "--suppression", "0.25"])
