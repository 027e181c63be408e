"""Protocol A over the in-memory transport: equivalence with the centralized engine, op counts, errors.

The central property: for every split, party count (2, 3, 5), privacy model and
suppression limit, the decrypted result equals the engine's result on the pooled
plaintext -- same transformation, same row multiset. Real EC crypto throughout; the
daemon runs are in test_protocol_a_integration.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.model.config import AnonymizationConfig
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import NoSolutionError
from fedanon.errors import PeerError, ProtocolError
from fedanon.protocols.kit.api import LocalData, RunSettings
from fedanon.protocols.sim.equivalence import centralized, differences
from fedanon.protocols.sim.local_run import LocalRun, run_in_memory
from fedanon.protocols.a.protocol import DOCTOR_OPTION, disagreement
from protocol_cases import (
    DATA,
    EX_ATTRS,
    EX_QIS,
    MODELS,
    assert_all_fail,
    check_equivalent,
    load,
    research_subset,
    run_protocol,
    sample_adult,
    settings_for,
)
from protocol_cases import shares_for as split_shares

ADULT_QIS = ["sex", "age", "race", "marital-status", "education"]


@pytest.fixture(scope="module")
def example() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    return load("example", EX_ATTRS)


@pytest.fixture(scope="module")
def adult_sample() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    return sample_adult(ADULT_QIS + ["salary-class"], 400, seed=20240502)


def shares_for(columns, rows, hierarchies, distribution: str, n: int, subset=None) -> dict[str, LocalData]:
    return split_shares((columns, rows, hierarchies), distribution, n, subset)


def run_a(columns, rows, hierarchies, config, distribution, n, subset=None, options=None, recipient="p1",
          record=False) -> tuple[LocalRun, dict[str, LocalData]]:
    return run_protocol("A", (columns, rows, hierarchies), config, distribution, n, subset, options, recipient,
                        record, timeout_s=180)


def assert_equivalent(columns, rows, hierarchies, config, distribution, n, subset=None, options=None,
                      recipient: str = "p1") -> LocalRun:
    run, central = check_equivalent("A", (columns, rows, hierarchies), config, distribution, n, subset, options,
                                    recipient, timeout_s=180)
    if central is not None:  # the master (never the recipient here) ran the engine: same loss
        master = run.outcomes[recipient].report["master"]
        assert master != recipient and run.outcomes[master].report["is_master"]
        assert run.outcomes[master].report["information_loss"] == pytest.approx(central.result.information_loss)
    return run


_subset = research_subset


@pytest.mark.parametrize("suppression", [0.0, 0.02])
@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
def test_adult_sample_five_parties_equals_centralized(adult_sample, distribution: str, model: str,
                                                      suppression: float) -> None:
    columns, rows, hierarchies = adult_sample
    config = MODELS[model](ADULT_QIS, "salary-class", suppression, "loss" if model == "k" else "nonuniform-entropy")
    subset = _subset(len(rows)) if model == "delta" else None
    assert_equivalent(columns, rows, hierarchies, config, distribution, 5, subset, recipient="p4")


@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
def test_counted_operations_match_the_analytical_model(example, distribution: str) -> None:
    """Every party encrypts every share once: Σ over shares of (distinct values + TIDs), the same at each.

    §4.4.3.4: e_h = n·d horizontally (each share's dictionary holds the whole hierarchy domain d),
    e_v = n·r + d vertically. Decryption strips one layer per distinct output value.
    """
    columns, rows, hierarchies = example
    n = 3
    run, local = run_a(columns, rows, hierarchies, AnonymizationConfig(EX_QIS, k=2), distribution, n)
    assert not run.errors, run.errors
    ops = {p: o.report["operations"] for p, o in run.outcomes.items()}
    # what each party hashes: per column the distinct values of data and hierarchy, plus its TIDs
    expected_hashed = {}
    for party, data in local.items():
        count = len(data.rows) if distribution == "vertical" else 0
        for j, column in enumerate(data.columns):
            if column == data.tid_column:
                continue
            values = {row[j] for row in data.rows}
            if column in EX_QIS:
                values |= {v.decode() for row in hierarchies[column].rows for v in row}
            count += len(values)
        expected_hashed[party] = count
    assert {p: o["hash"] for p, o in ops.items()} == expected_hashed
    total = sum(expected_hashed.values())  # e_h = n·d (each party's d spans the hierarchy domain), e_v = n·r + d
    for party, counted in ops.items():
        assert counted["encrypt"] == total, (party, counted, total)
    decrypts = {o["decrypt"] for o in ops.values()}
    assert len(decrypts) == 1 and decrypts.pop() > 0


def test_pre_generalization_restricts_the_lattice(example) -> None:
    """--min-level age=2: the owners lift age before encrypting; the optimum over the restricted lattice."""
    columns, rows, hierarchies = example
    config = AnonymizationConfig(EX_QIS, k=2)
    run, _ = run_a(columns, rows, hierarchies, config, "horizontal", 3, options={"min_levels": {"age": 2}})
    assert not run.errors, run.errors
    report = run.outcomes["p1"].report
    assert report["transformation"]["age"] >= 2
    assert report["restricted_lattice"]["min_levels"] == {"age": 2}
    # reference: the pooled data lifted to level 2 with the hierarchy cut there, anonymized centrally
    age = columns.index("age")
    lift = {r[0].decode(): r[2].decode() for r in hierarchies["age"].rows}
    lifted = [[lift[v] if i == age else v for i, v in enumerate(row)] for row in rows]
    cut = Hierarchy.from_rows("age", list(dict.fromkeys(tuple(r[2:]) for r in hierarchies["age"].rows)))
    central = centralized(columns, lifted, {**hierarchies, "age": cut}, config)
    expected = dict(central.result.transformation, age=central.result.transformation["age"] + 2)
    assert report["transformation"] == expected
    # in the lifted table's coordinates (age level - 2) the run's transformation is the central one
    lifted_levels = dict(report["transformation"], age=report["transformation"]["age"] - 2)
    assert differences(central, lifted_levels, run.outcomes["p1"].output_columns, run.outcomes["p1"].output_rows) == []


def test_min_level_above_the_hierarchy_stops_the_run(example) -> None:
    columns, rows, hierarchies = example
    run, _ = run_a(columns, rows, hierarchies, AnonymizationConfig(EX_QIS, k=2), "vertical", 2,
                   options={"min_levels": {"age": 9}})
    assert sorted(run.errors) == ["p1", "p2"]
    assert all("--min-level age=9 is above the hierarchy's top level" in str(e) for e in run.errors.values())


# ----------------------------------------------------------------------------- verified mode


@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
def test_verified_mode_agrees_and_reports_its_cost(example, distribution: str) -> None:
    columns, rows, hierarchies = example
    run = assert_equivalent(columns, rows, hierarchies, AnonymizationConfig(EX_QIS, k=2, suppression=0.25),
                            distribution, 3, options={"verified": True})
    for outcome in run.outcomes.values():
        assert outcome.report["verification"]["verified_by"] == ["p1", "p2", "p3"]
        assert outcome.report["phases"]["verify"] > 0
        assert outcome.report["traffic"]["bytes_sent_by_phase"]["verify"] > 0


def test_doctored_master_goes_unnoticed_without_verification(example) -> None:
    """The test hook really changes the result: without verified mode the output is wrong."""
    columns, rows, hierarchies = example
    config = AnonymizationConfig(EX_QIS, k=2)
    central = centralized(columns, rows, hierarchies, config)
    run, _ = run_a(columns, rows, hierarchies, config, "horizontal", 3, options={DOCTOR_OPTION: True})
    assert not run.errors, run.errors
    out = run.outcomes["p1"]
    assert differences(central, out.report["transformation"], out.output_columns, out.output_rows) != []


@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
def test_verified_mode_catches_a_doctored_master_before_decryption(example, distribution: str) -> None:
    columns, rows, hierarchies = example
    run, _ = run_a(columns, rows, hierarchies, AnonymizationConfig(EX_QIS, k=2), distribution, 3,
                   options={"verified": True, DOCTOR_OPTION: True}, record=True)
    assert sorted(run.errors) == ["p1", "p2", "p3"]
    master = "p2"  # the recipient's right neighbour
    for party, exc in run.errors.items():
        assert isinstance(exc, ProtocolError), (party, exc)
        assert f"disagreeing: party {master!r} (the master)" in str(exc), str(exc)
    for party, transport in run.transports.items():
        topics = {topic for _, topic, _ in transport.recorded}
        assert "a/dec" not in topics and "a/decode-ask" not in topics, (party, topics)
        assert "decrypt" not in transport.stats.bytes_sent_by_phase()


def test_disagreement_names_the_minority_or_both() -> None:
    ring = ["p1", "p2", "p3"]
    assert "disagreeing: party 'p2' (the master)." in disagreement({"p1": "a", "p2": "b", "p3": "a"}, "p2", ring)
    two = disagreement({"p1": "a", "p2": "b"}, "p2", ["p1", "p2"])
    assert "party 'p1', party 'p2' (the master)" in two


# ----------------------------------------------------------------------------- errors


def _all_fail(run: LocalRun, n: int, pattern: str, kind: type = ProtocolError) -> None:
    assert_all_fail(run, "A", n, pattern, kind)


def _run(local: dict[str, LocalData], distribution: str, config=None, options=None, record=False) -> LocalRun:
    config = config or AnonymizationConfig(EX_QIS, k=2)
    return run_in_memory(settings_for("A", distribution, len(local), config, options), local, record=record,
                         timeout_s=60)


def test_schema_mismatch_stops_every_party_before_data(example) -> None:
    columns, rows, hierarchies = example
    local = shares_for(columns, rows, hierarchies, "horizontal", 3)
    local["p3"].columns = ["age", "sex", "zip", "diagnosis"]
    run = _run(local, "horizontal", record=True)
    _all_fail(run, 3, "schema mismatch (horizontal): party 'p3'")
    for transport in run.transports.values():
        assert {topic for _, topic, _ in transport.recorded} <= {"a/hello", "a/roster"}


def test_missing_tids_detected_on_ciphertext(example) -> None:
    columns, rows, hierarchies = example
    local = shares_for(columns, rows, hierarchies, "vertical", 3)
    local["p3"].rows[4][0] = "9999"
    run = _run(local, "vertical")
    _all_fail(run, 3, "the parties' TID sets differ")


def test_conflicting_hierarchies_stop_the_integration(example) -> None:
    columns, rows, hierarchies = example
    local = shares_for(columns, rows, hierarchies, "horizontal", 3)
    h_rows = [list(r) for r in hierarchies["age"].rows]
    i = next(i for i, r in enumerate(h_rows) if r[0] == b"18")
    h_rows[i][1] = b"20-60"
    local["p3"].hierarchies = dict(local["p3"].hierarchies, age=Hierarchy.from_rows("age", h_rows))
    run = _run(local, "horizontal")
    _all_fail(run, 3, "hierarchies of column 'age' disagree between the parties")
    assert all("'18'" not in str(e) for e in run.errors.values())


def test_value_missing_from_hierarchy_named_only_locally(example) -> None:
    columns, rows, hierarchies = example
    local = shares_for(columns, rows, hierarchies, "horizontal", 2)
    local["p2"].rows[0][0] = "131"
    run = _run(local, "horizontal")
    _all_fail(run, 2, "value(s) of column 'age' are missing from its hierarchy")
    assert "'131'" in str(run.errors["p2"]) and "'131'" not in str(run.errors["p1"])


def test_no_solution_reaches_every_party(example) -> None:
    columns, rows, hierarchies = example
    run = _run(shares_for(columns, rows, hierarchies, "horizontal", 3), "horizontal",
               config=AnonymizationConfig(EX_QIS, k=9))
    _all_fail(run, 3, "no transformation satisfies", kind=NoSolutionError)


def test_local_failure_aborts_the_others_quickly(example) -> None:
    columns, rows, hierarchies = example
    local: dict = shares_for(columns, rows, hierarchies, "horizontal", 3)
    local["p3"] = None
    run = _run(local, "horizontal")
    assert "has no local data" in str(run.errors["p3"])
    for party in ("p1", "p2"):
        assert isinstance(run.errors[party], PeerError) and "'p3'" in str(run.errors[party])
    assert run.elapsed_s < 10


def test_a_helper_or_a_single_party_is_refused(example) -> None:
    columns, rows, hierarchies = example
    local = shares_for(columns, rows, hierarchies, "horizontal", 2)
    settings = RunSettings("r", "A", "horizontal", AnonymizationConfig(EX_QIS, k=2),
                           {"p1": "primary", "p2": "primary", "helper": "helper"}, "p1", {})
    run = run_in_memory(settings, local, timeout_s=30)
    assert "has no role 'helper'" in str(run.errors["helper"])
    assert all("no helper party" in str(run.errors[p]) for p in ("p1", "p2"))


def test_ph_cipher_runs_end_to_end(example) -> None:
    """Pohlig-Hellman-3072 (slow): the 8-row example, 2 parties."""
    columns, rows, hierarchies = example
    run = assert_equivalent(columns, rows, hierarchies, AnonymizationConfig(EX_QIS, k=2), "vertical", 2,
                            options={"cipher": "ph"})
    assert run.outcomes["p1"].report["cipher"] == "ph"


# ----------------------------------------------------------------------------- CLI flags


def test_simulate_flags_for_protocol_a(tmp_path: Path, capsys) -> None:
    from fedanon.cli import main

    example = DATA / "example"
    flags = [f"--qi={q}={example / f'example_hierarchy_{q}.csv'}" for q in EX_QIS]
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    base = ["simulate", str(example / "example.csv"), *flags, "--k", "2", "--output", str(out), "-q", "--in-memory"]
    assert main([*base, "--protocol", "A", "--split", "vertical", "--min-level", "age=1", "--verified",
                 "--report", str(rep)]) == 0
    import json

    report = json.loads(rep.read_text())
    assert report["transformation"]["age"] >= 1
    assert all(r["role"] == "primary" for r in report["party_reports"].values())
    assert all(r["verified"] and r["cipher"] == "ec" for r in report["party_reports"].values())
    for bad, message in ((["--protocol", "B", "--cipher", "ph"], "--cipher applies only to --protocol A"),
                         (["--protocol", "A", "--min-level", "age=x"], "expected NAME=LEVEL"),
                         (["--protocol", "A", "--min-level", "age=7"], "has levels 0..2"),
                         (["--protocol", "A", "--min-level", "diagnosis=1"], "is not a quasi-identifier")):
        capsys.readouterr()
        assert main([*base, *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
def test_recipient_rejects_a_raw_result_and_the_run_fails_everywhere(example, distribution: str) -> None:
    """A master publishing the integrated table un-anonymized (issue 11, finding 7, for A).

    Without verified mode only the recipient's own check stands between that table and the
    output file: it must fail the run at every party, and no outcome may carry rows.
    """
    columns, rows, hierarchies = example
    run, _ = run_a(columns, rows, hierarchies, AnonymizationConfig(EX_QIS, k=2), distribution, 3,
                   options={DOCTOR_OPTION: "raw"})
    assert sorted(run.errors) == ["p1", "p2", "p3"], run.errors
    assert all("violates the run's privacy model" in str(exc) for exc in run.errors.values()), run.errors
    for party, exc in run.errors.items():
        for raw_row in rows:  # the public message quotes no cell value
            assert raw_row[2] not in str(exc), (party, exc)
    assert all(o.output_rows is None for o in run.outcomes.values())
