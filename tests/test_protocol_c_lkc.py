"""LKC-privacy in Protocol C: the key holder judges projection groups from per-node labels.

The helper sends, with each check, a random label per class and QI (fresh per node and QI,
`protocols/c/projections.py`); the key holder runs the engine's LKC criterion on them. The
runs must equal the engine on the pooled plaintext, also where suppression makes the
criterion suppress classes in rounds, and the labels must keep the equality pattern of the
codes without being the codes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedanon.errors import ProtocolError
from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.lkc import LKCPrivacy
from fedanon.protocols.kit import codec
from fedanon.protocols.c.projections import LabelledCriterion, projection_labels, read_labels
from fedanon.stats.classes import ClassStats
from protocol_cases import EX_ATTRS, EX_QIS, check_equivalent, load, run_protocol

#: Without suppression the optimum is (2,1,4); with 50 % it is (2,0,4), where the criterion suppresses.
CASES = [(0.0, {"age": 2, "sex": 1, "zipcode": 4}), (0.5, {"age": 2, "sex": 0, "zipcode": 4})]


@pytest.mark.parametrize("split", ["horizontal", "vertical"])
@pytest.mark.parametrize("suppression,optimum", CASES)
def test_lkc_in_protocol_c_equals_central(split: str, suppression: float, optimum: dict) -> None:
    config = AnonymizationConfig(EX_QIS, metric="loss", suppression=suppression,
                                 models=[LKCPrivacy(2, 2, 0.7, "diagnosis")])
    run, central = check_equivalent("C", load("example", EX_ATTRS), config, split, 3, None, {"counters": "elgamal"})
    assert central is not None and dict(central.result.transformation) == optimum


def test_lkc_in_protocol_c_with_paillier_and_an_entropy_metric() -> None:
    config = AnonymizationConfig(EX_QIS, metric="nonuniform-entropy", suppression=0.5,
                                 models=[LKCPrivacy(2, 2, 0.7, "diagnosis")])
    check_equivalent("C", load("example", EX_ATTRS), config, "vertical", 2, None, {"counters": "paillier"})


def test_labels_keep_the_equality_pattern_but_not_the_codes() -> None:
    rng = np.random.default_rng(7)
    codes = rng.integers(0, 40, size=(300, 3))
    order = rng.permutation(300)
    same_as_codes = 0
    for _ in range(5):
        labels = read_labels(projection_labels(codes, [40, 40, 40], order), 300, 3)
        for i in range(3):
            ours, theirs = codes[order, i], labels[:, i]
            assert np.array_equal(ours[:, None] == ours[None, :], theirs[:, None] == theirs[None, :])
            assert theirs.min() >= 0 and theirs.max() < 40
            same_as_codes += int(np.array_equal(ours, theirs))
    assert same_as_codes == 0  # a fresh permutation per node and QI, not the codes


def test_a_check_without_labels_or_with_malformed_labels_is_refused() -> None:
    criterion = LabelledCriterion(LKCPrivacy(1, 2, 1.0, "diagnosis").criterion())
    stats = ClassStats(np.array([3, 1], dtype=np.int64), {"diagnosis": np.array([[2, 1], [1, 0]])}, None)
    with pytest.raises(ProtocolError, match="projection labels"):
        criterion.enforce_classes(stats, None, np.zeros(2, dtype=bool))
    with pytest.raises(ProtocolError, match="malformed projection labels"):
        read_labels(b"\x00" * 12, 2, 3)
    criterion.labels = np.array([[0], [1]])
    assert criterion.enforce_classes(stats, None, np.zeros(2, dtype=bool)).tolist() == [False, True]


def test_the_key_holder_gets_labels_and_sums_during_the_search_never_a_cell() -> None:
    """Every check the key holder (p1) receives carries one label per class and QI beside the
    encrypted sums; no QI or sensitive value of the table occurs in anything it receives then;
    the helper hears only verdicts."""
    table = load("example", EX_ATTRS)
    config = AnonymizationConfig(EX_QIS, metric="loss", suppression=0.5, models=[LKCPrivacy(2, 2, 0.7, "diagnosis")])
    run, _ = run_protocol("C", table, config, "horizontal", 3, options={"counters": "elgamal"}, record=True)
    assert not run.errors, run.errors
    checks = [blob for _, topic, blob in run.transports["p1"].recorded if topic == "c/check"]
    assert len(checks) > 2
    values = {cell.encode() for row in table[1] for cell in row if len(cell) > 2}
    for blob in checks:
        parts = codec.unpack_message(blob)
        control = json.loads(parts["control"])
        if "levels" in control and "classes" in control:
            assert len(parts["labels"]) == control["classes"] * len(EX_QIS) * 4
        assert not any(value in blob for value in values)
    answers = [blob for _, topic, blob in run.transports["helper"].recorded if topic == "c/answer"]
    assert answers and all(set(json.loads(a)) <= {"anonymous", "anonymous_strict", "implied_k_ok", "loss", "bound"}
                           for a in answers)
