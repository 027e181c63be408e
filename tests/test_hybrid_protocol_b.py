"""Protocol B on hybrid layouts: equal to the engine on the joined table in memory; errors (over
daemons with TLS and the error cases A and C share: test_hybrid_protocols.py).

The joined table is what a trusted party would anonymize: the pooled rows of the persons every
column group holds (persons missing from a group are dropped, see docs/protocols/hybrid.md).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import fedanon.protocols.b.protocol as protocol_b

from fedanon.data.hierarchy import Hierarchy
from hybrid_cases import (ADULT_COLUMNS, adult_config, adult_layout, example_case, example_k_config, run_equal_to_joined,
                          run_hybrid)
from protocol_cases import sample_adult


@pytest.fixture(scope="module")
def adult_sample() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    columns, rows, hierarchies = sample_adult(ADULT_COLUMNS, 1500, seed=20240502)
    return columns, rows, hierarchies


def _config(model: str):
    return adult_config(model, 0.02, "loss" if model == "k" else "nonuniform-entropy")


@pytest.mark.parametrize("model", ["k", "recursive-l"])
@pytest.mark.parametrize("layout_name", ["2+1", "2+2"])
def test_adult_sample_in_memory_equals_the_joined_table(adult_sample, layout_name: str, model: str) -> None:
    columns, rows, hierarchies = adult_sample
    layout = adult_layout(layout_name)
    run = run_equal_to_joined("B", layout, columns, rows, hierarchies, _config(model))
    out = run.outcomes[layout.names[0]]
    integration = run.outcomes["helper"].report["integration"]
    joined = len(layout.joined_rows(len(rows)))
    assert integration["rows"] == joined == len(out.output_rows)
    # 2+2: the census lacks every fourth person, who is dropped (and only they)
    assert integration["persons_dropped"] == len(rows) - joined == (len(rows) // 4 if layout_name == "2+2" else 0)


def test_the_recipient_may_be_a_column_party(adult_sample) -> None:
    columns, rows, hierarchies = adult_sample
    layout = adult_layout("2+2")
    layout.parties = layout.parties[2:] + layout.parties[:2]  # census first: it receives the result
    assert layout.names[0] == "census"
    run_equal_to_joined("B", layout, columns, rows, hierarchies, _config("k"))


def test_parties_sharing_a_column_must_share_all_columns() -> None:
    columns, rows, hierarchies, layout = example_case()

    def widen(local) -> None:  # clinic2 announces zipcode too: a partial overlap with the registry
        registry = {r[0]: r[1] for r in local["registry"].rows}
        data = local["clinic2"]
        data.columns.append("zipcode")
        data.rows = [r + [registry.get(r[0], "81667")] for r in data.rows]
        data.hierarchies = dict(data.hierarchies, zipcode=local["registry"].hierarchies["zipcode"])

    run = run_hybrid("B", layout, columns, rows, hierarchies, example_k_config(), local_edit=widen)
    assert run.errors and "helper" in run.errors
    text = str(run.errors["helper"])
    assert "column 'zipcode' is held by parties" in text and "run stopped before any data was sent" in text, text


def test_an_identifier_twice_at_one_party_stops_before_any_data() -> None:
    columns, rows, hierarchies, layout = example_case()

    def twice(local) -> None:  # the registry lists person 2 a second time (with other cells)
        local["registry"].rows.append(["2"] + local["registry"].rows[0][1:])

    run = run_hybrid("B", layout, columns, rows, hierarchies, example_k_config(), local_edit=twice, record=True)
    assert set(run.errors) == {"clinic1", "clinic2", "registry", "helper"}, run.errors
    for party, exc in run.errors.items():
        assert "party 'registry': duplicate TIDs in column 'pid'" in str(exc), (party, exc)
    assert "'2'" in str(run.errors["registry"]) and "'2'" not in str(run.errors["helper"])  # named locally only
    assert {topic for _, topic, _ in run.transports["helper"].recorded} == {"b/hello"}  # no data was sent


def _deviating_run(adult_sample, monkeypatch, deviate):
    """A helper that changes the engine's output before returning it (outside the semi-honest model)."""
    real = protocol_b.anonymize

    def deviating(table, *args, **kwargs):
        result = real(table, *args, **kwargs)
        output = deviate(result.output)
        return dataclasses.replace(result, output=output,
                                   suppressed=np.asarray(result.suppressed, dtype=bool)[:output.n_rows])

    monkeypatch.setattr(protocol_b, "anonymize", deviating)
    columns, rows, hierarchies = adult_sample
    layout = adult_layout("2+2")
    return run_hybrid("B", layout, columns, rows, hierarchies, _config("k"))


def test_a_helper_altering_a_column_partys_cells_is_caught_by_that_groups_tallies(adult_sample, monkeypatch) -> None:
    def flip_salary(out):
        codes = out.codes.copy()
        col = list(out.columns).index("salary-class")
        codes[:, col] = (codes[:, col] + 1) % len(out.dictionaries[col])
        return type(out)(list(out.columns), codes, out.dictionaries)

    run = _deviating_run(adult_sample, monkeypatch, flip_salary)
    assert set(run.errors) == {"clinic1", "clinic2", "census", "payroll", "helper"}, run.errors
    assert "the result's columns of parties ['payroll'] are not their rows" in str(run.errors["clinic1"])
    assert "['clinic1', 'clinic2']" not in str(run.errors["clinic1"])  # the clinics' group is intact


def test_a_helper_dropping_a_joined_person_is_caught(adult_sample, monkeypatch) -> None:
    run = _deviating_run(adult_sample, monkeypatch,
                            lambda out: type(out)(list(out.columns), out.codes[1:].copy(), out.dictionaries))
    assert set(run.errors) == {"clinic1", "clinic2", "census", "payroll", "helper"}, run.errors
    # the helper's tally requests follow its own output, so the counts agree; the digests do not
    text = str(run.errors["clinic1"])
    assert "the helper deviated from the protocol" in text and "multiset digest differs" in text, text
    assert all("it was not accepted" in str(run.errors[p]) for p in ("clinic2", "census", "payroll")), run.errors
