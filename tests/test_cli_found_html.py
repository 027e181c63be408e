"""`--html` works on the default install: the HTML report needs no plotting library.

The report's charts are written as SVG by fedanon itself. A missing matplotlib once stopped
`--html` only after the whole anonymization (output written, report missing); now matplotlib is
not needed at all. Each run below blocks the import of matplotlib in a fresh interpreter, as on
an install without it, and must produce the complete page.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from datasets import EXAMPLE_DIR as EX

ROOT = EX.parents[2]

# An interpreter in which `import matplotlib` fails like on an install without it.
WITHOUT_MATPLOTLIB = ("import sys; sys.modules['matplotlib'] = None; "
                      "from fedanon.cli import main; sys.exit(main(sys.argv[1:]))")


def _run_without_matplotlib(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", WITHOUT_MATPLOTLIB, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", [["anonymize"], ["simulate", "--in-memory", "--parties", "2"]])
def test_html_without_matplotlib_writes_the_whole_page(tmp_path, command) -> None:
    args = [*command, str(EX / "example.csv"), "--qi", f"age={EX / 'example_hierarchy_age.csv'}",
            "--qi", f"sex={EX / 'example_hierarchy_sex.csv'}", "--k", "2",
            "-o", "out.csv", "--report", "r.json", "--html", "r.html", "-q"]
    proc = _run_without_matplotlib(args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<svg" in page and "</html>" in page  # the charts are inline SVG
    assert (tmp_path / "out.csv").exists() and (tmp_path / "r.json").exists()
