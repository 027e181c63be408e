"""Protocol C on hybrid layouts: pseudotuples with one run-wide set of fake identifiers, real-row
counters dealt over the column groups; equal to the engine on the joined table in memory (over
daemons with TLS and the shared error cases: test_hybrid_protocols.py). ElGamal counters keep the
runs short (Paillier is exercised by C's own tests)."""

from __future__ import annotations

import pytest

from fedanon.data.hierarchy import Hierarchy
from hybrid_cases import (ADULT_COLUMNS, OPTIONS, adult_config, adult_layout, example_case, example_k_config,
                          run_equal_to_joined)
from protocol_cases import sample_adult


@pytest.fixture(scope="module")
def adult_sample() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    return sample_adult(ADULT_COLUMNS, 800, seed=20240503)


@pytest.mark.parametrize("model", ["k", "recursive-l"])
@pytest.mark.parametrize("layout_name", ["2+1", "2+2"])
def test_adult_sample_in_memory_equals_the_joined_table(adult_sample, layout_name: str, model: str) -> None:
    columns, rows, hierarchies = adult_sample
    layout = adult_layout(layout_name)
    run = run_equal_to_joined("C", layout, columns, rows, hierarchies, adult_config(model, 0.02),
                              options=OPTIONS["C"])
    out = run.outcomes[layout.names[0]]  # the key holder
    integration = run.outcomes["helper"].report["integration"]
    assert integration["persons_dropped"] == (len(rows) // 4 if layout_name == "2+2" else 0)
    # every group padded with the same fake identifiers: the groups hold equally many rows
    assert len(set(integration["persons_per_group"])) == 1 or layout_name == "2+2"
    assert out.report["pseudotuples_dropped"] > 0


@pytest.mark.parametrize("recipient", ["clinic1", "registry"])
def test_entropy_metric_when_pseudotuples_carry_values_of_dropped_persons_only(recipient: str) -> None:
    """The registry holds only clinic1's persons, so every clinic2 person is dropped, while clinic2's
    pseudotuple (resampled from its own rows) still joins: its age (unique per person in the example)
    is a leaf without any real row. The key holder's entropy context must leave such leaves out."""
    columns, rows, hierarchies, layout = example_case()
    layout.parties[2].rules = layout.parties[0].rules  # the registry holds clinic1's persons only
    run = run_equal_to_joined("C", layout, columns, rows, hierarchies, example_k_config("nonuniform-entropy"),
                              options=OPTIONS["C"], recipient=recipient)
    out = run.outcomes[recipient]
    assert len(out.output_rows) == 4 and out.report["pseudotuples_dropped"] >= 1
