"""Protocol A on hybrid layouts: the n-fold encrypted shares keep their TIDs through the ring's
integration and the master appends each column group and joins the groups; equal to the engine on
the joined table in memory (over daemons with TLS and the shared error cases: test_hybrid_protocols.py)."""

from __future__ import annotations

import pytest

from fedanon.data.hierarchy import Hierarchy
from hybrid_cases import ADULT_COLUMNS, OPTIONS, adult_config, adult_layout, run_equal_to_joined
from protocol_cases import sample_adult


@pytest.fixture(scope="module")
def adult_sample() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    return sample_adult(ADULT_COLUMNS, 800, seed=20240504)


@pytest.mark.parametrize("model", ["k", "recursive-l"])
@pytest.mark.parametrize("layout_name", ["2+1", "2+2"])
def test_adult_sample_in_memory_equals_the_joined_table(adult_sample, layout_name: str, model: str) -> None:
    columns, rows, hierarchies = adult_sample
    layout = adult_layout(layout_name)
    run = run_equal_to_joined("A", layout, columns, rows, hierarchies, adult_config(model, 0.02),
                              options=OPTIONS["A"])
    out = run.outcomes[layout.names[0]]  # the recipient
    integration = out.report["integration"]  # the master's, told to every party
    assert integration["persons_dropped"] == (len(rows) // 4 if layout_name == "2+2" else 0)
    assert integration["rows"] == len(layout.joined_rows(len(rows))) == len(out.output_rows)
    assert sorted(integration["persons_per_group"]) == sorted(
        len({i for p in g for i in p.persons(len(rows))}) for g in layout.column_groups())
