"""`fedanon demo` and `fedanon simulate` over real daemons (gRPC, mutual TLS, 127.0.0.1).

These are the end-to-end runs: separate processes per party, fresh certificates,
the real network layer. ADULT runs horizontally and vertically (via the demo, which
itself compares with the centralized engine), the example with delta-presence through
`simulate` against `fedanon anonymize`, and a hierarchy conflict must stop the run.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from fedanon.cli import main
from fedanon.data.io.delimited import read_table_csv
from fedanon.errors import FedanonError
from fedanon.parties.simulation import SimulatedParty, run_simulation

from datasets import EXAMPLE_DIR as EXAMPLE
QI_FLAGS = [f"--qi={q}={EXAMPLE / f'example_hierarchy_{q}.csv'}" for q in ("age", "sex", "zipcode")]


@pytest.mark.slow
def test_demo_adult_horizontal_and_vertical_over_daemons(capsys, tmp_path: Path) -> None:
    # A and B on ADULT; Protocol C's demo (minutes on ADULT: one key-holder round trip per
    # checked node) runs on the example in tests/test_protocol_c_cli.py
    # (the hybrid case has its own test, tests/test_demo_hybrid.py)
    assert main(["demo", "--protocol", "A", "--protocol", "B", "--split", "horizontal", "--split", "vertical",
                 "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("OK: identical to the centralized anonymization") == 4
    assert "summary (daemons started once per split)" in out
    assert "MISMATCH" not in out
    assert out.count("of the baseline's loss") == 2  # the §4.3 comparison, once per split
    for phase in ("encrypt", "integrate", "anonymize", "decrypt"):
        assert phase in out


def _rows(path: Path) -> tuple[list[str], Counter]:
    header, rows = read_table_csv(path)
    return header, Counter(tuple(r) for r in rows)


@pytest.mark.parametrize("split", ["horizontal", "vertical"])
def test_simulate_matches_anonymize_with_delta_presence(tmp_path: Path, split: str) -> None:
    subset = tmp_path / "subset.csv"
    subset.write_text("age;sex;zipcode;diagnosis\n34;male;82667;pneumonia\n66;male;81925;gastritis\n"
                      "21;male;82451;gastritis\n", encoding="utf-8")
    model = [*QI_FLAGS, "--k", "2", "--delta-presence", f"0,0.6:{subset}", "--suppression", "0.25"]
    sim_out, sim_report, ref_out = tmp_path / "sim.csv", tmp_path / "sim.json", tmp_path / "ref.csv"
    assert main(["simulate", "--protocol", "B", "--split", split, "--parties", "2", str(EXAMPLE / "example.csv"),
                 *model, "--output", str(sim_out), "--report", str(sim_report), "-q"]) == 0
    # --verify re-reads ref.csv with the independent verifier; sim.csv equal to it is verified too
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *model, "--output", str(ref_out), "--verify", "-q"]) == 0
    assert _rows(sim_out) == _rows(ref_out)
    report = json.loads(sim_report.read_text())
    assert report["simulation"]["transport"].startswith("gRPC")
    phases = {(r["party"], r["phase"]) for r in report["phase_table"]}
    assert ("helper", "anonymize") in phases and ("p1", "decrypt") in phases
    helper_bytes = sum(r["bytes_received"] for r in report["phase_table"] if r["party"] == "helper")
    assert helper_bytes > 0


def test_conflicting_hierarchies_stop_a_daemon_run(tmp_path: Path) -> None:
    header, rows = read_table_csv(EXAMPLE / "example.csv")
    bad = tmp_path / "age_bad.csv"
    lines = (EXAMPLE / "example_hierarchy_age.csv").read_text().splitlines()
    bad.write_text("\n".join(l.replace("18;1-19", "18;20-60") for l in lines) + "\n")
    parties = []
    for i, part in enumerate((rows[:4], rows[4:])):
        csv = tmp_path / f"p{i + 1}.csv"
        csv.write_text(";".join(header) + "\n" + "\n".join(";".join(r) for r in part) + "\n")
        age = bad if i == 1 else EXAMPLE / "example_hierarchy_age.csv"
        parties.append(SimulatedParty(f"p{i + 1}", "primary", csv,
                                      {"age": age, "sex": EXAMPLE / "example_hierarchy_sex.csv",
                                       "zipcode": EXAMPLE / "example_hierarchy_zipcode.csv"},
                                      {"diagnosis": None}))
    parties.append(SimulatedParty("helper", "helper"))
    from fedanon.model.config import AnonymizationConfig
    with pytest.raises(FedanonError, match="hierarchies of column 'age' disagree between party 'p1' and party 'p2'"):
        run_simulation(parties, "B", "horizontal", AnonymizationConfig(["age", "sex", "zipcode"], k=2), "p1")


def test_simulate_vertical_per_party_keys_over_daemons(tmp_path: Path) -> None:
    """Every owner decrypts its own columns; sealed plaintext dictionaries are relayed to p2."""
    out, ref, report = tmp_path / "sim.csv", tmp_path / "ref.csv", tmp_path / "rep.json"
    model = [*QI_FLAGS, "--k", "2", "--suppression", "0.25", "--metric", "aecs"]
    assert main(["simulate", "--split", "vertical", "--parties", "3", "--per-party-keys", "--recipient", "p2",
                 str(EXAMPLE / "example.csv"), *model, "--output", str(out), "--report", str(report), "-q"]) == 0
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *model, "--output", str(ref), "-q"]) == 0
    assert _rows(out) == _rows(ref)
    rows = json.loads(report.read_text())["phase_table"]
    for owner in ("p1", "p3"):  # owners other than the recipient took part in decryption
        assert sum(r["bytes_sent"] for r in rows if r["party"] == owner and r["phase"] == "decrypt") > 0


def test_demo_full_flag_selects_rows_per_protocol() -> None:
    """Default: Protocol C on a fixed sample of ADULT, A and B on every row; --full: every
    protocol on every row. (Argument handling only; the full matrix is not run here.)"""
    import argparse

    from fedanon.cli import demo
    from fedanon.protocols.registry import protocol_spec

    parser = argparse.ArgumentParser()
    demo.register(parser.add_subparsers())
    assert parser.parse_args(["demo", "--full"]).full is True
    assert parser.parse_args(["demo"]).full is False
    pick = demo.sample_rows("C", 30162, full=False)
    assert pick is not None and len(pick) == protocol_spec("C").demo_sample_rows == len(set(pick))
    assert pick == demo.sample_rows("C", 30162, full=False)  # seeded: the same sample every run
    assert demo.sample_rows("C", 30162, full=True) is None
    assert demo.sample_rows("A", 30162, full=False) is None and demo.sample_rows("B", 30162, full=False) is None
    assert demo.sample_rows("C", 8, full=False) is None  # a small data set runs whole
