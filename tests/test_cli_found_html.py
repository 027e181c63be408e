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
