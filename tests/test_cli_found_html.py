"""`--html` without matplotlib stops at the argument check, before any work or output file.

The report extra is optional; a missing matplotlib used to be noticed only after the whole
anonymization (output written, report missing). Each run below blocks the import of
matplotlib in a fresh interpreter, as on an install without `fedanon[report]`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import fedanon

EX = Path(fedanon.__file__).parent / "data" / "example"
ROOT = Path(fedanon.__file__).parent.parent

# An interpreter in which `import matplotlib` fails like on an install without the extra.
WITHOUT_MATPLOTLIB = ("import sys; sys.modules['matplotlib'] = None; "
                      "from fedanon.cli import main; sys.exit(main(sys.argv[1:]))")


def _run_without_matplotlib(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", WITHOUT_MATPLOTLIB, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", [["anonymize"], ["simulate", "--in-memory", "--parties", "2"]])
def test_html_without_matplotlib_fails_before_any_output(tmp_path, command) -> None:
    args = [*command, str(EX / "example.csv"), "--qi", f"age={EX / 'example_hierarchy_age.csv'}",
            "--qi", f"sex={EX / 'example_hierarchy_sex.csv'}", "--k", "2",
            "-o", "out.csv", "--report", "r.json", "--html", "r.html", "-q"]
    proc = _run_without_matplotlib(args, tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--html" in lines[0] and "pip install 'fedanon[report]'" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written: no out.csv, no report


def test_without_html_the_missing_extra_does_not_matter(tmp_path) -> None:
    args = ["anonymize", str(EX / "example.csv"), "--qi", f"age={EX / 'example_hierarchy_age.csv'}",
            "--k", "2", "-o", "out.csv", "-q"]
    proc = _run_without_matplotlib(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.csv").exists()


def test_run_html_without_matplotlib_fails_before_contacting_parties(tmp_path) -> None:
    """`fedanon run --html`: the check comes before the config's parties are dialled."""
    import tomli_w

    from fedanon.parties.pki import certs
    from fedanon.parties.config import RunConfig, RunPartyEntry, TlsFiles, run_config_dict

    certs.init_ca(tmp_path, force=True)
    certs.issue(tmp_path, "steward")
    cfg = RunConfig(coordinator="steward", tls=TlsFiles(tmp_path / "steward.crt", tmp_path / "steward.key",
                                                        tmp_path / "ca.crt"),
                    protocol="B", distribution="horizontal",
                    parties=[RunPartyEntry("p1", "127.0.0.1:1", "primary"), RunPartyEntry("p2", "127.0.0.1:2", "primary"),
                             RunPartyEntry("helper", "127.0.0.1:3", "helper")],
                    result_recipient="p1", privacy={"quasi_identifiers": ["age"], "k": 2}, options={},
                    output=tmp_path / "out" / "result.csv", report=None)
    run_toml = tmp_path / "run.toml"
    run_toml.write_text(tomli_w.dumps(run_config_dict(cfg)))
    (tmp_path / "out").mkdir()
    proc = _run_without_matplotlib(["run", "--config", str(run_toml), "--no-progress", "--html", "r.html"], tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--html" in lines[0] and "pip install 'fedanon[report]'" in lines[0]  # not an unreachable party
    assert list((tmp_path / "out").iterdir()) == []
