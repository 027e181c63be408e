"""Protocol A on hybrid layouts: the n-fold encrypted shares keep their TIDs through the ring's
integration and the master appends each column group and joins the groups; equal to the engine on
the joined table, in memory and over daemons with TLS."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.consortium.simulation import simulate_table
from fedanon.data.hierarchy import Hierarchy
from hybrid_cases import ADULT_COLUMNS, ADULT_QIS, hybrid_differences, run_hybrid, write_layout
from datasets import hierarchy_path
from protocol_cases import MODELS, load, sample_adult

OPTIONS: dict = {}


@pytest.fixture(scope="module")
def adult_sample() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    return sample_adult(ADULT_COLUMNS, 800, seed=20240504)


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
    run = run_hybrid("A", layout, columns, rows, hierarchies, config, options=OPTIONS)
    assert not run.errors, run.errors
    out = run.outcomes[layout.names[0]]  # the recipient
    assert hybrid_differences(layout, columns, rows, hierarchies, config, out.report.get("transformation"),
                              out.output_columns, out.output_rows) == []
    integration = out.report["integration"]  # the master's, told to every party
    assert integration["persons_dropped"] == (len(rows) // 4 if layout_name == "2+2" else 0)
    assert integration["rows"] == len(layout.joined_rows(len(rows))) == len(out.output_rows)
    assert sorted(integration["persons_per_group"]) == sorted(
        len({i for p in g for i in p.persons(len(rows))}) for g in layout.column_groups())


def test_a_person_at_two_row_parties_stops_the_run(tmp_path: Path) -> None:
    columns, rows, hierarchies = load("example", ["age", "sex", "zipcode"])
    layout = write_layout(tmp_path, "2+1")
    for party in layout.parties:
        party.columns = {"registry": ["zipcode", "diagnosis"]}.get(party.name, ["age", "sex"])

    def claim_twice(local) -> None:
        local["clinic2"].rows.append(["1"] + local["clinic1"].rows[0][1:])

    run = run_hybrid("A", layout, columns, rows, hierarchies,
                     MODELS["k"](["age", "sex", "zipcode"], "diagnosis", 0.0, "loss"), local_edit=claim_twice,
                     options=OPTIONS)
    assert set(run.errors) == {"clinic1", "clinic2", "registry"}, run.errors
    for party, exc in run.errors.items():
        # the master sees n-fold encrypted shares, not who sent them: it names the columns
        assert "an identifier occurs twice in the column group of columns ['age', 'sex']" in str(exc), (party, exc)


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
    sim = simulate_table(columns, rows, paths, config, "hybrid", 0, transport="grpc", layout=layout, protocol="A",
                         options=OPTIONS)
    assert sim.report["simulation"]["daemons"] == len(layout.parties)  # no helper in A
    key_holder = sim.party_reports[layout.names[0]]  # the recipient
    assert hybrid_differences(layout, columns, rows, hierarchies, config, key_holder.get("transformation"),
                              sim.columns, sim.rows) == []
