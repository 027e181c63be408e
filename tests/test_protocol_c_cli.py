"""Protocol C from the command line: `fedanon simulate --protocol C`, `fedanon run` with
protocol "C" against running daemons, and `fedanon demo --protocol C` -- each over real
daemons (gRPC, mutual TLS, 127.0.0.1) and checked against `fedanon anonymize`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import tomli_w

from fedanon.cli import main
from fedanon.data.io.delimited import read_table_csv
from fedanon.parties.config import run_config_dict
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

from datasets import EXAMPLE_DIR as EXAMPLE
QIS = ("age", "sex", "zipcode")
QI_FLAGS = [f"--qi={q}={EXAMPLE / f'example_hierarchy_{q}.csv'}" for q in QIS]


def _rows(path: Path) -> Counter:
    _, rows = read_table_csv(path)
    return Counter(tuple(r) for r in rows)


@pytest.mark.slow
@pytest.mark.parametrize("split,counters", [("vertical", "elgamal"), ("horizontal", "paillier")])
def test_simulate_protocol_c_matches_anonymize(tmp_path, split, counters):
    model = [*QI_FLAGS, "--k", "2", "--suppression", "0.25", "--metric", "loss"]
    out, rep, ref = tmp_path / "c.csv", tmp_path / "c.json", tmp_path / "ref.csv"
    assert main(["simulate", "--protocol", "C", "--counters", counters, "--pseudotuples", "0.5", "--split", split,
                 "--parties", "3", str(EXAMPLE / "example.csv"), *model, "--output", str(out), "--report", str(rep),
                 "-q"]) == 0
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *model, "--output", str(ref), "-q"]) == 0
    assert _rows(out) == _rows(ref)
    report = json.loads(rep.read_text())
    assert report["protocol"] == "C" and report["simulation"]["transport"].startswith("gRPC")
    helper = report["party_reports"]["helper"]
    assert helper["counters"] == counters and helper["pseudotuple_share"] == 0.5 and helper["checks"] > 0


def test_counter_flags_need_protocol_c(tmp_path, capsys):
    code = main(["simulate", "--protocol", "B", "--counters", "elgamal", str(EXAMPLE / "example.csv"), *QI_FLAGS,
                 "--k", "2", "--output", str(tmp_path / "o.csv"), "-q"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--counters" in err[0] and "Protocol C" in err[0]


@pytest.mark.parametrize("metric", ["nonuniform-entropy", "nonuniform-entropy-monotonic", "entropy"])
def test_entropy_metrics_from_the_command_line(tmp_path, metric):
    model = [*QI_FLAGS, "--k", "2", "--suppression", "0.25", "--metric", metric]
    out, ref = tmp_path / "c.csv", tmp_path / "ref.csv"
    assert main(["simulate", "--protocol", "C", "--counters", "elgamal", "--in-memory", "--split", "vertical",
                 str(EXAMPLE / "example.csv"), *model, "--output", str(out), "-q"]) == 0
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *model, "--output", str(ref), "-q"]) == 0
    assert _rows(out) == _rows(ref)


@pytest.mark.slow
def test_fedanon_run_protocol_c_against_daemons(tmp_path):
    lines = (EXAMPLE / "example.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    shares = {"p1": rows[:3], "p2": rows[3:6], "p3": rows[6:]}
    for name, part in shares.items():
        (tmp_path / f"{name}.csv").write_text("\n".join([header, *part]) + "\n")
    hier = {q: EXAMPLE / f"example_hierarchy_{q}.csv" for q in QIS}
    parties = [SimulatedParty(n, "primary", csv_path=tmp_path / f"{n}.csv", qi_hierarchies=hier,
                              sensitive={"diagnosis": None}) for n in shares]
    parties.append(SimulatedParty("h", "helper"))
    with SimulatedNetwork(parties) as net:
        cfg = net.run_config("C", config={"quasi_identifiers": list(QIS), "k": 2, "suppression": 0.0,
                                          "metric": "discernibility"}, options={"counters": "elgamal"})
        cfg.output, cfg.report = tmp_path / "out.csv", tmp_path / "report.json"
        run_toml = tmp_path / "run.toml"
        run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
        assert main(["run", "--config", str(run_toml)]) == 0
    ref = tmp_path / "ref.csv"
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, "--insensitive", "diagnosis", "--k", "2",
                 "--metric", "discernibility", "--output", str(ref), "-q"]) == 0
    assert _rows(tmp_path / "out.csv") == _rows(ref)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["protocol"] == "C" and report["party_reports"]["p1"]["pseudotuples_dropped"] > 0


@pytest.mark.slow
def test_demo_shows_protocol_c(capsys, tmp_path):
    assert main(["demo", "--protocol", "C", "--dataset", "example", "--metric", "loss", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.count("OK: identical to the centralized anonymization") == 2
    assert "Protocol C" in out and "MISMATCH" not in out
