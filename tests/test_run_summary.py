"""`fedanon run` shows and records its result; a check run leaves the real run's files alone;
`simulate --config` takes the whole TOML; tables fit an 80-column terminal (issue 8)."""

from __future__ import annotations

import json

import pytest
import tomli_w

from fedanon.cli import main
from fedanon.model.config import AnonymizationConfig
from fedanon.parties.config import run_config_dict
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

from example_parties import example_primaries

from datasets import EXAMPLE_DIR as EX
QIS = ("age", "sex", "zipcode")


@pytest.fixture(scope="module")
def network(tmp_path_factory):
    parties = example_primaries(tmp_path_factory.mktemp("shares"), insensitive=["diagnosis"])
    parties.append(SimulatedParty("helper", "helper"))
    with SimulatedNetwork(parties) as net:
        yield net


@pytest.mark.slow
def test_run_prints_the_summary_and_writes_it_at_the_top_of_the_report(network, tmp_path, capsys) -> None:
    cfg = network.run_config("B", config=AnonymizationConfig(list(QIS), k=2))
    cfg.output, cfg.report = tmp_path / "result.csv", tmp_path / "report.json"
    run_toml = tmp_path / "run.toml"
    run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
    assert main(["run", "--config", str(run_toml), "--no-progress"]) == 0
    out = capsys.readouterr().out
    for label in ("transformation", "information loss", "suppressed rows", "classes"):
        assert label in out, out
    assert "age=1, sex=0, zipcode=3" in out  # the example's 2-anonymous optimum
    assert max(len(line) for line in out.splitlines()) <= 80
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["transformation"] == {"age": 1, "sex": 0, "zipcode": 3}
    assert report["classes"] == 4 and report["suppressed_rows"] == 0
    assert report["metric"] == "nonuniform-entropy" and report["information_loss"] > 0

    # the README's connectivity check on the same run.toml must not replace these files
    before = {p: p.read_bytes() for p in (tmp_path / "result.csv", tmp_path / "report.json")}
    assert main(["run", "--config", str(run_toml), "--protocol", "check", "--no-progress"]) == 0
    assert {p: p.read_bytes() for p in before} == before
    # ... and writes its round-trip table where asked
    assert main(["run", "--config", str(run_toml), "--protocol", "check", "--no-progress",
                 "--report", str(tmp_path / "check.json")]) == 0
    check = json.loads((tmp_path / "check.json").read_text())
    assert check["protocol"] == "CHECK" and set(check["party_reports"]) == {"p1", "p2", "helper"}


def test_simulate_takes_input_output_and_report_from_the_toml(tmp_path, capsys) -> None:
    run = tmp_path / "sim.toml"
    qi = "\n".join(f'{q} = "{EX / f"example_hierarchy_{q}.csv"}"' for q in QIS)
    run.write_text(f'input = "{EX / "example.csv"}"\noutput = "sim.csv"\nreport = "sim.json"\nk = 2\n'
                   f'insensitive = ["diagnosis"]\n[qi]\n{qi}\n')
    assert main(["simulate", "--config", str(run), "--in-memory", "--parties", "2", "-q"]) == 0, capsys.readouterr()
    assert (tmp_path / "sim.csv").read_text().splitlines()[0] == "age;sex;zipcode;diagnosis"
    report = json.loads((tmp_path / "sim.json").read_text())
    assert report["transformation"] == {"age": 1, "sex": 0, "zipcode": 3} and report["removed_columns"] == []


def test_phase_tables_fit_80_columns(capsys) -> None:
    from fedanon.cli.run import print_phase_summary
    from fedanon.consortium.simulation import print_phase_table

    phases = {"encrypt": 1.5, "integrate": 0.25, "anonymize": 12.125, "decrypt": 0.5}
    reports = {name: {"role": role, "phases": phases,
                      "traffic": {"phase_seconds": phases,
                                  "bytes_sent_by_phase": {p: 123_456_789 for p in phases},
                                  "bytes_received_by_phase": {p: 98_765_432 for p in phases}}}
               for name, role in (("hospital-number-one", "primary"), ("p2", "primary"), ("helper", "helper"))}
    print_phase_table(reports, "time and bytes per phase and party")
    print_phase_summary(reports)
    out, err = capsys.readouterr()
    assert "120563.3" in out and "anonymize" in err  # 123,456,789 B in kB, in both tables
    assert max(len(line) for line in (out + err).splitlines()) <= 80
