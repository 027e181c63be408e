"""Protocol C on hybrid layouts: pseudotuples with one run-wide set of fake identifiers, real-row
counters dealt over the column groups; equal to the engine on the joined table, in memory and over
daemons with TLS. ElGamal counters keep the runs short (Paillier is exercised by C's own tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.consortium.simulation import simulate_table
from fedanon.data.hierarchy import Hierarchy
from hybrid_cases import ADULT_COLUMNS, ADULT_QIS, hybrid_differences, run_hybrid, write_layout
from datasets import hierarchy_path
from protocol_cases import MODELS, load, sample_adult

OPTIONS = {"counters": "elgamal"}


@pytest.fixture(scope="module")
def adult_sample() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    return sample_adult(ADULT_COLUMNS, 800, seed=20240503)


def _config(model: str, suppression: float):
    config = MODELS[model](ADULT_QIS, "salary-class", suppression, "loss")
    if model == "k":
        config.k = 5
    return config


@pytest.mark.parametrize("model", ["k", "recursive-l"])
@pytest.mark.parametrize("layout_name", ["2+1", "2+2"])
def test_adult_sample_in_memory_equals_the_joined_table(adult_sample, tmp_path: Path, layout_name: str,
                                                        model: str) -> None:
    columns, rows, hierarchies = adult_sample
    layout = write_layout(tmp_path, layout_name)
    config = _config(model, 0.02)
    run = run_hybrid("C", layout, columns, rows, hierarchies, config, options=OPTIONS)
    assert not run.errors, run.errors
    out = run.outcomes[layout.names[0]]  # the key holder
    assert hybrid_differences(layout, columns, rows, hierarchies, config, out.report.get("transformation"),
                              out.output_columns, out.output_rows) == []
    integration = run.outcomes["helper"].report["integration"]
    assert integration["persons_dropped"] == (len(rows) // 4 if layout_name == "2+2" else 0)
    # every group padded with the same fake identifiers: the groups hold equally many rows
    assert len(set(integration["persons_per_group"])) == 1 or layout_name == "2+2"
    assert out.report["pseudotuples_dropped"] > 0


def test_a_person_at_two_row_parties_stops_the_run(tmp_path: Path) -> None:
    columns, rows, hierarchies = load("example", ["age", "sex", "zipcode"])
    layout = write_layout(tmp_path, "2+1")
    for party in layout.parties:
        party.columns = {"registry": ["zipcode", "diagnosis"]}.get(party.name, ["age", "sex"])

    def claim_twice(local) -> None:
        local["clinic2"].rows.append(["1"] + local["clinic1"].rows[0][1:])

    run = run_hybrid("C", layout, columns, rows, hierarchies,
                     MODELS["k"](["age", "sex", "zipcode"], "diagnosis", 0.0, "loss"), local_edit=claim_twice,
                     options=OPTIONS)
    assert set(run.errors) == {"clinic1", "clinic2", "registry", "helper"}, run.errors
    for party, exc in run.errors.items():
        assert "an identifier occurs twice in the column group of ['clinic1', 'clinic2']" in str(exc), (party, exc)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["k", "recursive-l"])
@pytest.mark.parametrize("layout_name", ["2+1", "2+2"])
def test_adult_over_daemons_with_tls_equals_the_joined_table(tmp_path: Path, layout_name: str, model: str) -> None:
    columns, rows, hierarchies = load("adult", ADULT_COLUMNS)
    index = [columns.index(c) for c in ADULT_COLUMNS]
    rows = [[r[i] for i in index] for r in rows]
    columns = list(ADULT_COLUMNS)
    layout = write_layout(tmp_path, layout_name)
    config = _config(model, 0.0)
    paths = {a: hierarchy_path("adult", a) for a in ADULT_COLUMNS}
    sim = simulate_table(columns, rows, paths, config, "hybrid", 0, transport="grpc", layout=layout, protocol="C",
                         options=OPTIONS)
    assert sim.report["simulation"]["daemons"] == len(layout.parties) + 1
    key_holder = sim.party_reports[layout.names[0]]
    assert hybrid_differences(layout, columns, rows, hierarchies, config, key_holder.get("transformation"),
                              sim.columns, sim.rows) == []


@pytest.mark.parametrize("recipient", ["clinic1", "registry"])
def test_entropy_metric_when_pseudotuples_carry_values_of_dropped_persons_only(tmp_path: Path, recipient: str) -> None:
    """The registry holds only clinic1's persons, so every clinic2 person is dropped, while clinic2's
    pseudotuple (resampled from its own rows) still joins: its age (unique per person in the example)
    is a leaf without any real row. The key holder's entropy context must leave such leaves out."""
    columns, rows, hierarchies = load("example", ["age", "sex", "zipcode"])
    layout = write_layout(tmp_path, "2+1")
    for party in layout.parties:
        party.columns = {"registry": ["zipcode", "diagnosis"]}.get(party.name, ["age", "sex"])
    layout.parties[2].rules = layout.parties[0].rules  # the registry holds clinic1's persons only
    config = MODELS["k"](["age", "sex", "zipcode"], "diagnosis", 0.0, "nonuniform-entropy")
    run = run_hybrid("C", layout, columns, rows, hierarchies, config, options=OPTIONS, recipient=recipient)
    assert not run.errors, run.errors
    out = run.outcomes[recipient]
    assert len(out.output_rows) == 4 and out.report["pseudotuples_dropped"] >= 1
    assert hybrid_differences(layout, columns, rows, hierarchies, config, out.report.get("transformation"),
                              out.output_columns, out.output_rows) == []
