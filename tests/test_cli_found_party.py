"""Party configs, certificates and `party serve`: mistakes are refused, not silently accepted.

A misspelled key in a party config (`insensitve`) used to pass `check-config` and silently
drop the column; `certs issue` replaced an existing certificate and key without a word;
`party serve` started although its data file was missing (every run then failed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

from example_parties import example_primaries

import fedanon
from fedanon.cli import main
from cli_checks import one_line_error as _one_line_error
from fedanon.model.config import AnonymizationConfig
from fedanon.parties.pki import certs
from fedanon.parties.config import DataConfig, PartyConfig, TlsFiles, party_config_dict, run_config_dict
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

EX = Path(fedanon.__file__).parent / "data" / "example"
ROOT = Path(fedanon.__file__).resolve().parent.parent




@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    certs.init_ca(folder, force=True)
    certs.issue(folder, "clinic-a", hosts=["127.0.0.1"])
    return folder


def _config_doc(pki: Path, csv: Path = EX / "example.csv") -> dict:
    cfg = PartyConfig(name="clinic-a", listen="127.0.0.1:0",
                      tls=TlsFiles(pki / "clinic-a.crt", pki / "clinic-a.key", pki / "ca.crt"),
                      peers={"clinic-b": "127.0.0.1:1"}, coordinators=["steward"],
                      data=DataConfig(csv=csv, quasi_identifiers={"age": EX / "example_hierarchy_age.csv"},
                                      insensitive=["zipcode"]))
    return party_config_dict(cfg)


def _write(path: Path, doc: dict) -> Path:
    path.write_text(tomli_w.dumps(doc))
    return path


def _serve_error(config: Path, ready: Path) -> str:
    """The one error line of a `party serve` that must refuse to start (in a subprocess: a
    daemon that does start would otherwise serve forever inside the test)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        proc = subprocess.run([sys.executable, "-m", "fedanon", "party", "serve", "--config", str(config),
                               "--ready-file", str(ready)], env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("party serve started (and kept serving) instead of refusing its config")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not ready.exists()  # it never listened
    return lines[0]


# ----------------------------------------------------------------------------- unknown keys
@pytest.mark.parametrize("table, good, bad", [
    ("data", "insensitive", "insensitve"),
    ("party", "coordinators", "coordinator"),
    ("tls", "revoked", "revoke"),
    ("", "limits", "limit"),
])
@pytest.mark.parametrize("command", ["check-config", "serve"])
def test_misspelled_key_in_party_config_is_refused(tmp_path, pki, capsys, table, good, bad, command) -> None:
    doc = _config_doc(pki)
    section = doc if not table else doc[table]
    if bad == "revoke":
        section[bad] = str(tmp_path / "revoked.txt")
    elif bad == "limit":
        section[bad] = {"heartbeat_s": 2.0}
    else:
        section[bad] = section.pop(good)
    config = _write(tmp_path / "clinic-a.toml", doc)
    line = (_one_line_error(capsys, "party", command, "--config", config) if command == "check-config"
            else _serve_error(config, tmp_path / "ready"))
    assert str(config) in line and f"unknown key {bad!r}" in line and f"did you mean {good!r}" in line


def test_good_party_config_still_passes(tmp_path, pki, capsys) -> None:
    config = _write(tmp_path / "clinic-a.toml", _config_doc(pki))
    assert main(["party", "check-config", "--config", str(config)]) == 0, capsys.readouterr().err
    assert "removed (identifying, no role): sex, diagnosis" in capsys.readouterr().out


# ----------------------------------------------------------------------------- certs issue
def test_certs_issue_refuses_to_replace_an_issued_certificate(tmp_path, capsys) -> None:
    certs.init_ca(tmp_path, force=True)
    assert main(["certs", "issue", "clinic-a", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    before = {p: (tmp_path / p).read_bytes() for p in ("clinic-a.crt", "clinic-a.key")}
    line = _one_line_error(capsys, "certs", "issue", "clinic-a", "--dir", tmp_path)
    assert str(tmp_path / "clinic-a.crt") in line and "--force" in line
    assert {p: (tmp_path / p).read_bytes() for p in before} == before  # untouched
    assert main(["certs", "issue", "clinic-a", "--dir", str(tmp_path), "--force"]) == 0  # deliberate rotation
    assert all((tmp_path / p).read_bytes() != data for p, data in before.items())


def test_certs_issue_refuses_when_only_the_key_is_left(tmp_path, capsys) -> None:
    certs.init_ca(tmp_path, force=True)
    (tmp_path / "clinic-b.key").write_text("deployed key\n")
    line = _one_line_error(capsys, "certs", "issue", "clinic-b", "--dir", tmp_path)
    assert "clinic-b.key" in line
    assert (tmp_path / "clinic-b.key").read_text() == "deployed key\n"


# ----------------------------------------------------------------------------- serve without its data
@pytest.mark.parametrize("missing", ["csv", "hierarchy"])
def test_serve_refuses_to_start_without_its_data_file(tmp_path, pki, missing) -> None:
    gone = tmp_path / "gone.csv"
    doc = _config_doc(pki, csv=gone if missing == "csv" else EX / "example.csv")
    if missing == "hierarchy":
        doc["data"]["quasi_identifiers"]["age"] = str(gone)
    config = _write(tmp_path / "clinic-a.toml", doc)
    line = _serve_error(config, tmp_path / "ready")
    assert str(gone) in line and "not found" in line


# ----------------------------------------------------------------------------- a data file gone after start
def test_data_file_gone_after_start_stays_local(tmp_path, capsys) -> None:
    """The path of a vanished data file is named in its owner's log only, never on the wire."""
    parties = [*example_primaries(tmp_path), SimulatedParty("helper", "helper")]
    share = tmp_path / "p2.csv"
    with SimulatedNetwork(parties) as net:  # real daemons, gRPC over mutual TLS on loopback
        share.unlink()
        run_toml = tmp_path / "run.toml"
        cfg = net.run_config("B", config=AnonymizationConfig(["age", "sex", "zipcode"], k=2))
        run_toml.write_text(tomli_w.dumps(run_config_dict(cfg)))
        capsys.readouterr()
        code = main(["run", "--config", str(run_toml), "--no-progress"])
        out, err = capsys.readouterr()
        logs = {name: (net.dir / "logs" / f"{name}.log").read_text(errors="replace") for name in ("p1", "p2", "helper")}
    assert code == 2, err
    assert "p2" in err and str(share) not in out + err and "p2.csv" not in out + err
    assert str(share) in logs["p2"]  # the owner sees which file
    assert all(str(share) not in logs[name] and "p2.csv" not in logs[name] for name in ("p1", "helper"))
