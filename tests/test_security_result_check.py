"""Finding 7 of issue 11: the recipient checks the decrypted result before accepting it.

A helper that deviates from the protocol (outside the semi-honest model) replaces the
engine's output. Before the fix the recipient decrypted and returned whatever came —
including one primary's own un-anonymized rows — and the run succeeded everywhere.
Now the recipient runs the independent verifier on the output and looks for its own rows
at the reported transformation; a rejection fails the run at every party, and what the
other parties hear of it names no value.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import fedanon.protocols.b.protocol as protocol_b
import fedanon.protocols.c.protocol as protocol_c
from fedanon.model.config import AnonymizationConfig
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import split_horizontal

from datasets import DATA_DIR as DATA
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


@pytest.fixture(scope="module")
def adult():
    columns, rows = read_table_csv(DATA / "adult" / "adult.csv")
    pick = np.random.default_rng(11).choice(len(rows), size=1200, replace=False)
    hierarchies = {a: Hierarchy.read_csv(DATA / "adult" / f"adult_hierarchy_{a}.csv", a) for a in QIS}
    return columns, [rows[i] for i in sorted(pick.tolist())], hierarchies


def _run(adult, monkeypatch, deviate):
    columns, rows, hierarchies = adult
    real = protocol_b.anonymize

    def deviating(table: EncodedTable, *args, **kwargs):
        result = real(table, *args, **kwargs)
        return deviate(table, result)

    monkeypatch.setattr(protocol_b, "anonymize", deviating)
    config = AnonymizationConfig(QIS, k=5, suppression=0.02, metric="loss")
    shares = split_horizontal(columns, rows, 2, "blocks")
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    settings = RunSettings("deviating-helper", "B", "horizontal", config, {"p1": "primary", "p2": "primary",
                                                                           "helper": "helper"}, "p1", {})
    return run_in_memory(settings, local, timeout_s=120), local


def test_helper_returning_a_primarys_raw_rows_fails_the_run_everywhere(adult, monkeypatch) -> None:
    def raw_rows_of_p1(table: EncodedTable, result):
        n1 = len(table.codes) // 2  # p1's block comes first in the integrated table
        output = EncodedTable(list(table.columns), table.codes[:n1].copy(), table.dictionaries)
        return dataclasses.replace(result, output=output, suppressed=np.zeros(n1, dtype=bool), suppressed_rows=0,
                                   transformation={q: 0 for q in QIS})

    run, local = _run(adult, monkeypatch, raw_rows_of_p1)
    assert sorted(run.errors) == ["helper", "p1", "p2"], run.errors
    assert all(o.output_rows is None for o in run.outcomes.values())
    # caught by the primaries' tallies (600 of 1,200 rows) before the privacy check would see it
    assert ("violates the run's privacy model" in str(run.errors["p1"])
            or "the helper deviated from the protocol" in str(run.errors["p1"])), run.errors["p1"]
    # the others learn that the result was rejected, but no value of p1
    for party in ("helper", "p2"):
        text = str(run.errors[party])
        assert "it was not accepted" in text
        values = {v for row in local["p1"].rows for v in row if len(v) > 3}
        assert not [v for v in values if v in text]


def test_helper_altering_the_recipients_own_rows_is_caught(adult, monkeypatch) -> None:
    def swap_sensitive(table: EncodedTable, result):
        out = result.output
        codes = out.codes.copy()
        col = list(out.columns).index("salary-class")
        codes[:, col] = (codes[:, col] + 1) % len(out.dictionaries[col])  # flip every salary class
        return dataclasses.replace(result, output=EncodedTable(list(out.columns), codes, out.dictionaries))

    run, _ = _run(adult, monkeypatch, swap_sensitive)
    assert sorted(run.errors) == ["helper", "p1", "p2"], run.errors
    # the multiset digest of the primaries' tallies differs before anything is decrypted
    assert "the multiset digest differs" in run.errors["p1"].private
    assert "the multiset digest differs" in str(run.errors["p2"])  # the public part


def test_an_honest_helper_is_accepted(adult, monkeypatch) -> None:
    run, _ = _run(adult, monkeypatch, lambda table, result: result)
    assert not run.errors
    assert len(run.outcomes["p1"].output_rows or []) == 1200


# ----------------------------------------------------------------------------- Protocol C
C_QIS = ["sex", "age", "race", "marital-status", "education"]


def _run_c(adult, monkeypatch, deviate_search=None, deviate_output=None):
    """Protocol C (ElGamal counters) with 2 primaries; the deviation hooks replace the helper's search/output."""
    columns, rows, hierarchies = adult
    keep = C_QIS + ["salary-class"]
    idx = [columns.index(c) for c in keep]
    rows = [[row[j] for j in idx] for row in rows[:400]]
    blocks: list[int] = []
    real_append, real_search, real_generalize = protocol_c.append_tables, protocol_c.search, protocol_c.generalize

    def recording_append(tables):
        blocks[:] = [t.n_rows for t in tables]  # p1's padded block comes first in the integrated table
        return real_append(tables)

    def search(structure, checker):
        found = real_search(structure, checker)
        return found if deviate_search is None else deviate_search(structure, found)

    def generalize(structure, levels):
        output = real_generalize(structure, levels)
        return output if deviate_output is None else deviate_output(output, blocks[0])

    monkeypatch.setattr(protocol_c, "append_tables", recording_append)
    monkeypatch.setattr(protocol_c, "search", search)
    monkeypatch.setattr(protocol_c, "generalize", generalize)
    config = AnonymizationConfig(C_QIS, k=5, suppression=0.02, metric="loss")
    shares = split_horizontal(keep, rows, 2, "blocks")
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    settings = RunSettings("deviating-helper-c", "C", "horizontal", config,
                           {"p1": "primary", "p2": "primary", "helper": "helper"}, "p1", {"counters": "elgamal"})
    return run_in_memory(settings, local, timeout_s=120), local


def test_c_helper_returning_raw_rows_fails_the_run_everywhere(adult, monkeypatch) -> None:
    """The helper claims the bottom node: every row, the key holder's own included, comes back un-generalized.

    The key holder drops the pseudotuples and suppresses the classes that fail on the true
    rows, so its own rows *are* in the result at the claimed transformation and every
    released class has k rows; what gives the deviation away is the privacy model's
    suppression limit (far more rows suppressed than it allows), which the key holder's
    count judge already noticed before the recipient check existed -- but the helper had
    already told p2 "done", so p2 and the helper succeeded. Now the helper waits for the
    key holder's acceptance and the run fails at every party.
    """
    run, local = _run_c(adult, monkeypatch,
                        deviate_search=lambda structure, found: dataclasses.replace(found, node=structure.lattice.bottom))
    assert sorted(run.errors) == ["helper", "p1", "p2"], run.errors
    assert all(o.output_rows is None for o in run.outcomes.values())
    assert ("violates the run's privacy model" in str(run.errors["p1"])
            or "not anonymous on the true rows" in str(run.errors["p1"])), run.errors["p1"]
    for party in ("helper", "p2"):  # the others learn of the rejection, not p1's values
        text = str(run.errors[party])
        assert "party 'p1'" in text
        values = {v for row in local["p1"].rows for v in row if len(v) > 3}
        assert not [v for v in values if v in text]


def test_c_helper_altering_the_key_holders_rows_is_caught(adult, monkeypatch) -> None:
    def swap_salary(output: EncodedTable, n1: int) -> EncodedTable:
        codes = output.codes.copy()
        col = list(output.columns).index("salary-class")
        codes[:, col] = (codes[:, col] + 1) % len(output.dictionaries[col])
        return EncodedTable(list(output.columns), codes, output.dictionaries)

    run, _ = _run_c(adult, monkeypatch, deviate_output=swap_salary)
    assert sorted(run.errors) == ["helper", "p1", "p2"], run.errors
    # the primaries' tallies disagree with the rows kept as real before a cell is decrypted
    assert "the multiset digest differs" in run.errors["p1"].private
    assert "the multiset digest differs" in str(run.errors["p2"])


def test_c_an_honest_helper_is_accepted(adult, monkeypatch) -> None:
    run, _ = _run_c(adult, monkeypatch)
    assert not run.errors, run.errors
    assert len(run.outcomes["p1"].output_rows or []) == 400
    assert run.outcomes["p2"].report.get("transformation") == run.outcomes["p1"].report.get("transformation")
