"""Command-line options a new user reaches for: a second --sensitive, --encoding and
--hierarchy-delimiter on `risk` and `hierarchy`, `run -o`, `--version`."""

from __future__ import annotations

from pathlib import Path

import pytest

import fedanon
from fedanon.cli import main
from cli_checks import one_line_error as _one_line_error

EX = Path(fedanon.__file__).parent / "data" / "example"




# ----------------------------------------------------------------------------- a second --sensitive
@pytest.mark.parametrize("command", ["anonymize", "simulate"])
def test_second_sensitive_never_silently_replaces_the_first(tmp_path, capsys, command) -> None:
    """Two sensitive attributes are allowed, but a model must then say which one it judges: a model
    without an attribute is refused (naming both), never applied to one while the other is dropped."""
    out = tmp_path / "out.csv"
    line = _one_line_error(capsys, command, EX / "example.csv", "--qi", f"age={EX / 'example_hierarchy_age.csv'}",
                           "--sensitive", "diagnosis", "--sensitive", "sex", "--l-diversity", "distinct:2",
                           "-o", out)
    assert "--l-diversity" in line and "diagnosis" in line and "sex" in line
    assert not out.exists()


def test_one_sensitive_still_works(tmp_path, capsys) -> None:
    out = tmp_path / "out.csv"
    assert main(["anonymize", str(EX / "example.csv"), "--qi", f"age={EX / 'example_hierarchy_age.csv'}",
                 "--sensitive", "diagnosis", "--l-diversity", "distinct:2", "-o", str(out), "-q"]) == 0
    assert out.read_text().splitlines()[0] == "age;diagnosis"


# ----------------------------------------------------------------------------- --encoding, --hierarchy-delimiter
def _latin1_table(tmp_path: Path) -> Path:
    """The example table, comma-separated, in latin-1 with a non-ASCII city per row."""
    lines = (EX / "example.csv").read_text().splitlines()
    cities = ["Zürich", "Genève", "Köln"]
    out = [lines[0].replace(";", ",") + ",city"]
    out += [line.replace(";", ",") + "," + cities[i % 3] for i, line in enumerate(lines[1:])]
    path = tmp_path / "latin1.csv"
    path.write_bytes(("\n".join(out) + "\n").encode("latin-1"))
    return path


def test_risk_reads_another_encoding_and_hierarchy_delimiter(tmp_path, capsys) -> None:
    table = _latin1_table(tmp_path)
    report = tmp_path / "risk.json"
    # the table is comma-separated; the shipped hierarchies are ;-separated
    code = main(["risk", str(table), "--delimiter", ",", "--encoding", "latin-1", "--hierarchy-delimiter", ";",
                 "--qi", f"age={EX / 'example_hierarchy_age.csv'},city",
                 "--sensitive", f"diagnosis={EX / 'example_hierarchy_diagnosis.csv'}",
                 "--json", str(report), "-q"])
    assert code == 0, capsys.readouterr().err
    import json

    doc = json.loads(report.read_text())
    assert doc["quasi_identifiers"] == ["age", "city"]
    assert "t_hierarchical" in doc["satisfies"]["sensitive"]["diagnosis"]


def test_risk_without_encoding_still_names_the_option(tmp_path, capsys) -> None:
    line = _one_line_error(capsys, "risk", _latin1_table(tmp_path), "--delimiter", ",", "--qi", "age,city")
    assert "--encoding" in line


def test_hierarchy_reads_another_encoding_and_writes_it(tmp_path, capsys) -> None:
    table = _latin1_table(tmp_path)
    hier = tmp_path / "city.csv"
    assert main(["hierarchy", "order", "--from", str(table), "--column", "city", "--delimiter", ",",
                 "--encoding", "latin-1", "-o", str(hier)]) == 0, capsys.readouterr().err
    assert "Zürich".encode("latin-1") in hier.read_bytes()
    out = tmp_path / "out.csv"
    code = main(["anonymize", str(table), "--delimiter", ",", "--encoding", "latin-1",
                 "--qi", f"city={hier}", "--k", "2", "-o", str(out), "-q"])
    assert code == 0, capsys.readouterr().err


def test_unknown_encoding_is_one_line(tmp_path, capsys) -> None:
    line = _one_line_error(capsys, "hierarchy", "order", "--values", "a,b", "--encoding", "klingon")
    assert "klingon" in line


# ----------------------------------------------------------------------------- fedanon --version, run -o, LICENSE
ROOT = Path(fedanon.__file__).resolve().parent.parent


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_version_prints_the_package_version() -> None:
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "fedanon", "--version"], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"fedanon {_pyproject()['project']['version']}"


def test_license_file_matches_pyproject() -> None:
    assert _pyproject()["project"]["license"] == {"text": "Apache-2.0"}
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 150  # the full text, not a stub


def test_run_short_output_option(tmp_path, capsys) -> None:
    import tomli_w

    from fedanon.parties.config import run_config_dict
    from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

    parties = [SimulatedParty("p1", "primary"), SimulatedParty("p2", "helper")]
    with SimulatedNetwork(parties) as net:  # real daemons, gRPC over mutual TLS on loopback
        cfg = net.run_config("check")
        cfg.output = cfg.report = None
        run_toml = tmp_path / "run.toml"
        run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
        out = tmp_path / "rtt.csv"
        assert main(["run", "--config", str(run_toml), "--no-progress", "-o", str(out)]) == 0, capsys.readouterr().err
    lines = out.read_text().splitlines()
    assert lines[0] == "party;peer;rtt_ms" and [line.split(";")[:2] for line in lines[1:]] == [["p1", "p2"]]
