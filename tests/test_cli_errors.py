"""Every reported traceback / silently-wrong case now ends in one line on stderr and exit 2.

Each test reproduces one reported failure (issue 8): a directory or a non-UTF-8 file as
`--config`, bad `certs` arguments, an unusable `--ready-file`, a quoted boolean in TOML,
`demo --k 0`, and `party check-config` approving what `party serve` rejects.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import tomli_w

import fedanon
from fedanon.cli import main
from fedanon.parties.pki import certs
from fedanon.parties.config import DataConfig, PartyConfig, RunConfig, RunPartyEntry, TlsFiles
from fedanon.parties.config import party_config_dict, run_config_dict

from datasets import EXAMPLE_DIR as EX


def _one_line_error(capsys, *args: object) -> str:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, out, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


# ----------------------------------------------------------------------------- config files
@pytest.mark.parametrize("command", [["anonymize"], ["run"], ["party", "serve"], ["party", "check-config"]])
def test_config_naming_a_directory(tmp_path, capsys, command) -> None:
    line = _one_line_error(capsys, *command, "--config", tmp_path)
    assert str(tmp_path) in line and "directory" in line


@pytest.mark.parametrize("command", [["anonymize"], ["run"], ["party", "check-config"]])
def test_config_that_is_not_utf8(tmp_path, capsys, command) -> None:
    bad = tmp_path / "run.toml"
    bad.write_bytes('k = 2\n# Zürich\n'.encode("latin-1"))
    line = _one_line_error(capsys, *command, "--config", bad)
    assert str(bad) in line and "UTF-8" in line


def test_quoted_boolean_in_toml_is_rejected(tmp_path, capsys) -> None:
    run = tmp_path / "run.toml"
    run.write_text(f'input = "{EX / "example.csv"}"\noutput = "o.csv"\nk = 2\ndrop_suppressed = "false"\n'
                   f'[qi]\nage = "{EX / "example_hierarchy_age.csv"}"\n')
    line = _one_line_error(capsys, "anonymize", "--config", run)
    assert "drop_suppressed" in line and "boolean" in line and "'false'" in line
    assert not (tmp_path / "o.csv").exists()


def test_k_given_as_a_string_in_toml_is_rejected(tmp_path, capsys) -> None:
    run = tmp_path / "run.toml"
    run.write_text(f'input = "{EX / "example.csv"}"\noutput = "o.csv"\nk = "5"\n'
                   f'[qi]\nage = "{EX / "example_hierarchy_age.csv"}"\n')
    assert "k must be a integer" in _one_line_error(capsys, "anonymize", "--config", run).replace("an integer", "a integer")


# ----------------------------------------------------------------------------- certs / serve / demo
def test_certs_init_dir_is_an_existing_file(tmp_path, capsys) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    line = _one_line_error(capsys, "certs", "init", "--dir", target)
    assert str(target) in line and "not a directory" in line
    assert target.read_text() == "x"


def test_certs_negative_days(tmp_path, capsys) -> None:
    assert "--days must be at least 1" in _one_line_error(capsys, "certs", "init", "--dir", tmp_path / "ca",
                                                          "--days", "-5")
    assert not (tmp_path / "ca" / "ca.crt").exists()


def test_ready_file_in_a_missing_folder(tmp_path, capsys) -> None:
    line = _one_line_error(capsys, "party", "serve", "--config", tmp_path / "p.toml",
                           "--ready-file", "/nonexistent/x")
    assert "/nonexistent/x" in line


def test_demo_k_zero_is_rejected(capsys) -> None:
    assert "k must be an integer >= 1, got 0" in _one_line_error(capsys, "demo", "--k", "0", "--in-memory")


# ----------------------------------------------------------------------------- check-config = serve's checks
@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    certs.init_ca(folder, force=True)
    for name in ("clinic-a", "clinic-b", "steward"):
        certs.issue(folder, name, hosts=["127.0.0.1"])
    return folder


def _party_config(folder: Path, pki: Path, tls: TlsFiles | None = None, listen: str | None = None) -> Path:
    tls = tls or TlsFiles(pki / "clinic-a.crt", pki / "clinic-a.key", pki / "ca.crt")
    cfg = PartyConfig(name="clinic-a", listen=listen or "127.0.0.1:0", tls=tls, peers={"clinic-b": "127.0.0.1:1"},
                      coordinators=["steward"],
                      data=DataConfig(csv=EX / "example.csv",
                                      quasi_identifiers={q: EX / f"example_hierarchy_{q}.csv" for q in ("age", "sex")},
                                      insensitive=["zipcode"]))
    path = folder / "clinic-a.toml"
    path.write_bytes(tomli_w.dumps(party_config_dict(cfg)).encode())
    return path


def test_check_config_accepts_a_good_config_and_names_removed_columns(tmp_path, pki, capsys) -> None:
    assert main(["party", "check-config", "--config", str(_party_config(tmp_path, pki))]) == 0
    out = capsys.readouterr().out
    assert "tls: ok" in out and "8 rows" in out and "removed (identifying, no role): diagnosis" in out


@pytest.mark.parametrize("files, needle", [
    (("clinic-b.crt", "clinic-b.key", "ca.crt"), "certificate is for 'clinic-b', but this party is 'clinic-a'"),
    (("clinic-a.key", "clinic-a.key", "ca.crt"), "not a PEM certificate (the file holds a private key)"),
    (("clinic-a.crt", "clinic-a.crt", "ca.crt"), "not an unencrypted PEM private key (the file holds a certificate)"),
    (("clinic-a.crt", "clinic-a.key", "clinic-b.crt"), "is not a CA certificate"),
    (("clinic-a.crt", "clinic-b.key", "ca.crt"), "private key does not belong to certificate"),
    (("clinic-a.crt", "missing.key", "ca.crt"), "cannot read TLS key file"),
])
def test_check_config_rejects_what_serve_rejects(tmp_path, pki, capsys, files, needle) -> None:
    cert, key, ca = (pki / f for f in files)
    config = _party_config(tmp_path, pki, TlsFiles(cert, key, ca))
    check = _one_line_error(capsys, "party", "check-config", "--config", config)
    serve = _one_line_error(capsys, "party", "serve", "--config", config)
    assert needle in check and needle in serve


def test_check_config_rejects_a_certificate_of_another_ca(tmp_path, pki, capsys) -> None:
    other = tmp_path / "other"
    certs.init_ca(other, force=True)
    certs.issue(other, "clinic-a")
    config = _party_config(tmp_path, pki, TlsFiles(other / "clinic-a.crt", other / "clinic-a.key", pki / "ca.crt"))
    assert "is not signed by the run CA" in _one_line_error(capsys, "party", "check-config", "--config", config)


def _subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    root = str(Path(fedanon.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def test_port_in_use_is_one_line_without_grpc_log(tmp_path, pki) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = _party_config(tmp_path, pki, listen=f"127.0.0.1:{port}")
        proc = subprocess.run([sys.executable, "-m", "fedanon", "party", "serve", "--config", str(config)],
                              capture_output=True, text=True, timeout=60, env=_subprocess_env())
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in lines[0]


def test_coordinator_key_not_matching_its_certificate(tmp_path, pki) -> None:
    """Reported: 18 raw gRPC log lines, then a wrong diagnosis ('not signed by the run CA')."""
    cfg = RunConfig(coordinator="steward", tls=TlsFiles(pki / "steward.crt", pki / "clinic-a.key", pki / "ca.crt"),
                    protocol="check", distribution="horizontal",
                    parties=[RunPartyEntry("clinic-a", "127.0.0.1:9", "primary"),
                             RunPartyEntry("clinic-b", "127.0.0.1:10", "helper")],
                    result_recipient="clinic-a", privacy={}, options={}, output=None, report=None)
    run_toml = tmp_path / "run.toml"
    run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
    proc = subprocess.run([sys.executable, "-m", "fedanon", "run", "--config", str(run_toml), "--no-progress"],
                          capture_output=True, text=True, timeout=60, env=_subprocess_env())
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "private key does not belong to certificate" in lines[0] and "steward.crt" in lines[0]
