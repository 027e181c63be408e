"""The contract every anonymizing protocol of the registry keeps, as one parametrized test.

For every protocol the registry lists as anonymizing, every split, party count, privacy model
and suppression limit: the decrypted result equals what the engine computes on the pooled
plaintext (same transformation, same row multiset; `protocol_cases.check_equivalent`), and the
dissertation's running example gives its published optimum. A protocol added to the registry
is held to this contract without a new test file; its own file keeps only what is specific to
it (its messages, its threat model, its failure modes).
"""

from __future__ import annotations

import pytest

from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.registry import available_protocols
from protocol_cases import EX_ATTRS, EX_QIS, MODELS, check_equivalent, load, research_subset

PROTOCOLS = available_protocols(anonymizing=True)


@pytest.fixture(scope="module")
def example():
    return load("example", EX_ATTRS)


def test_the_registry_lists_the_protocols_we_ship():
    assert set(PROTOCOLS) >= {"A", "B", "C"}


@pytest.mark.parametrize("suppression", [0.0, 0.25])
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_example_equals_centralized(example, protocol, distribution, n, model, suppression):
    columns, rows, hierarchies = example
    metric = "aecs" if model == "recursive-l" else ("discernibility" if protocol == "C" else "nonuniform-entropy")
    config = MODELS[model](EX_QIS, "diagnosis", suppression, metric)
    subset = research_subset(len(rows)) if model == "delta" else None
    check_equivalent(protocol, (columns, rows, hierarchies), config, distribution, n, subset)


@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_example_reference_optimum(example, protocol, distribution):
    """The dissertation's running example: 2-anonymity, no suppression -> (1, 0, 3), distributed too."""
    columns, rows, hierarchies = example
    run, central = check_equivalent(protocol, (columns, rows, hierarchies),
                                    AnonymizationConfig(EX_QIS, k=2, metric="height"), distribution, 3)
    assert central is not None and central.result.transformation == {"age": 1, "sex": 0, "zipcode": 3}
    assert run.outcomes["p1"].report["transformation"] == {"age": 1, "sex": 0, "zipcode": 3}
