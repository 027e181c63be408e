"""β-likeness, basic and enhanced: hand-computed cases, Flash == exhaustive == reference, every entry point.

The model is one module (fedanon/model/privacy/blikeness.py) on the model registry.
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
from fedanon.model.privacy.blikeness import BetaLikeness
from fedanon.model.registry import ClassView, ParseContext, model_types
from model_cases import bad_anonymize_flags_fail, dense_and_sparse_verdicts, flag_toml_and_frame_agree, \
    property_tests, simulate_b_equals_anonymize


def _criterion(beta: float, variant: str, totals: list[int]):
    criterion = BetaLikeness(beta, variant, "s").criterion()  # type: ignore[arg-type]
    criterion.prepare(CriterionContext(n_rows=sum(totals), histograms_total={"s": np.array(totals)}))
    return criterion


def _judge(beta: float, variant: str, totals: list[int], classes: list[list[int]]) -> tuple[list[bool], list[bool]]:
    """The criterion's verdict on dense and on sparse class histograms."""
    return dense_and_sparse_verdicts(_criterion(beta, variant, totals), classes)


# table: 6 x a, 2 x b, so p(a|T) = 0.75, p(b|T) = 0.25; -ln 0.75 = 0.2877, -ln 0.25 = 1.3863.
# class 0 = (2 a, 2 b): gain(a) = (0.5 - 0.75)/0.75 < 0; gain(b) = (0.5 - 0.25)/0.25 = 1
# class 1 = (4 a, 0 b): gain(a) = (1 - 0.75)/0.75 = 1/3;  b absent (never fails)
# class 2 = (0 a, 1 b): gain(b) = (1 - 0.25)/0.25 = 3
# enhanced caps the bound at -ln p: a at 0.2877 (class 1 fails for every beta), b at 1.3863
HAND = [
    (1.0, "basic", [True, True, False]),
    (0.99, "basic", [False, True, False]),    # class 0's gain 1 > 0.99
    (3.0, "basic", [True, True, True]),       # class 2 exactly at the bound passes
    (1.0, "enhanced", [True, False, False]),  # bound(b) = min(1, 1.386) = 1: class 0 at the bound
    (5.0, "enhanced", [True, False, False]),  # bound(b) = 1.386 < 3; bound(a) = 0.2877 < 1/3
]


@pytest.mark.parametrize("beta,variant,expected", HAND)
def test_hand_computed_classes(beta, variant, expected):
    dense, sparse = _judge(beta, variant, [6, 2], [[2, 2], [4, 0], [0, 1]])
    assert dense == expected and sparse == expected


def test_smallest_passing_class_size():
    # basic beta=1: a one-row class of a has gain 1/3 <= 1, so size 1 passes.
    assert _criterion(1.0, "basic", [6, 2]).min_class_size == 1
    # enhanced beta=1: one row of a gains 1/3 > 0.2877, one row of b gains 3 > 1: no 1-row class;
    # (1 a, 1 b) gains -1/3 and exactly 1: the smallest passing class has 2 rows.
    assert _criterion(1.0, "enhanced", [6, 2]).min_class_size == 2
    # table 1 x a, 9 x b, basic beta=0.5: a may hold at most 0.1 * 1.5 = 15 % of a class and b at
    # most 0.9 * 1.5 = 135 %, so a class of b alone passes: size 1.
    assert _criterion(0.5, "basic", [1, 9]).min_class_size == 1
    # table 5 x a, 5 x b, basic beta=0.2: each value at most 0.5 * 1.2 = 60 % of a class; a 1-row
    # class holds 100 % of its value, (1 a, 1 b) holds 50 % each: size 2
    assert _criterion(0.2, "basic", [5, 5]).min_class_size == 2
    # table 4 x a, 3 x b, 3 x c, basic beta=0.1: caps floor(0.44 m) for a, floor(0.33 m) for b and c.
    # m = 1..6 fall short (m=4: 1+1+1 = 3; m=5: 2+1+1 = 4; m=6: 2+1+1 = 4); m=7: 3+2+2 = 7, i.e. the
    # class (3 a, 2 b, 2 c) with gain(a) = (3/7 - 0.4)/0.4 = 0.0714 <= 0.1
    assert _criterion(0.1, "basic", [4, 3, 3]).min_class_size == 7


def test_verifier_reads_the_definition_independently():
    overall = {"s": {b"a": 0.75, b"b": 0.25}}

    def view(counts):
        return ClassView(size=sum(counts.values()), sensitive_counts={"s": Counter(counts)}, overall=overall)

    assert BetaLikeness(1.0, "basic", "s").violation(view({b"a": 2, b"b": 2})) is None
    assert "1.000000 > 0.990000" in BetaLikeness(0.99, "basic", "s").violation(view({b"a": 2, b"b": 2}))
    assert "0.333333 > 0.287682" in BetaLikeness(5.0, "enhanced", "s").violation(view({b"a": 4}))
    assert BetaLikeness(3.0, "basic", "s").violation(view({b"b": 1})) is None


def test_parsing_and_validation():
    ctx = ParseContext(sensitive="s")
    assert BetaLikeness.parse("1.5", ctx) == BetaLikeness(1.5, "basic", "s")
    assert BetaLikeness.parse("1.5:enhanced", ctx) == BetaLikeness(1.5, "enhanced", "s")
    assert BetaLikeness.parse(2, ctx) == BetaLikeness(2.0, "basic", "s")
    assert BetaLikeness.parse({"beta": 0.5, "variant": "enhanced"}, ctx) == BetaLikeness(0.5, "enhanced", "s")
    with pytest.raises(InputError, match="not a number"):
        BetaLikeness.parse("x:basic", ctx)
    with pytest.raises(InputError, match="unknown variant"):
        BetaLikeness.parse("1:strong", ctx)
    with pytest.raises(InputError, match="unknown key"):
        BetaLikeness.parse({"beta": 1, "gamma": 2}, ctx)
    with pytest.raises(InputError, match="sensitive attribute"):
        BetaLikeness.parse("1.5", ParseContext())
    with pytest.raises(InputError, match="beta > 0"):
        AnonymizationConfig(["q"], models=[BetaLikeness(0.0, "basic", "s")]).validate()
    assert "beta_likeness" in model_types()
    config = AnonymizationConfig(["q"], models=[BetaLikeness(1.5, "enhanced", "s")])
    assert AnonymizationConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config


def _model(draw) -> BetaLikeness:
    return BetaLikeness(draw(st.sampled_from([0.2, 0.5, 1.0, 2.0, 4.0])), draw(st.sampled_from(["basic", "enhanced"])), "s")


test_flash_equals_exhaustive_and_the_verifier_agrees, test_engine_equals_the_independent_reference = property_tests(
    _model, lambda m: {"beta_likeness": (m.beta, m.variant, "s")})


def test_cli_flag_toml_and_frame_give_the_same_release(tmp_path):
    flag_toml_and_frame_agree(
        tmp_path, ["--sensitive", "diagnosis", "--beta-likeness", "1.0:enhanced", "--suppression", "0.5"],
        ['sensitive = "diagnosis"', "suppression = 0.5", "[beta_likeness]", "beta = 1.0", 'variant = "enhanced"'],
        dict(sensitive="diagnosis", beta_likeness="1.0:enhanced", suppression=0.5),
        [{"model": "beta_likeness", "beta": 1.0, "variant": "enhanced", "attribute": "diagnosis"}])


def test_bad_value_is_one_line_exit_2(capsys):
    bad_anonymize_flags_fail(capsys, ["--sensitive", "diagnosis", "--beta-likeness", "0:basic"], "beta > 0")


@pytest.mark.slow
def test_simulate_protocol_b_equals_central(tmp_path):
    simulate_b_equals_anonymize(tmp_path, ["--sensitive", "diagnosis", "--beta-likeness", "1.0:enhanced",
                                           "--suppression", "0.5"])
