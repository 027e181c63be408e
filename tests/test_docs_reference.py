"""The hand-written reference pages name every key the code accepts or writes.

The configuration reference lists every run-file key and every `[limits]` key (taken from the
code's own lists: the run file's error message and `LIMIT_KEYS`), and the report reference names
every key of a real report, so a new key cannot ship undocumented.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from fedanon.parties.config import LIMIT_KEYS
from tools.docs_hooks import expand

ROOT = Path(__file__).resolve().parent.parent
# as the site shows it: the rows of registered privacy models are generated at build time
CONFIG_PAGE = expand((ROOT / "docs" / "reference" / "config.md").read_text(encoding="utf-8"))
REPORT_PAGE = (ROOT / "docs" / "reference" / "report.md").read_text(encoding="utf-8")
EXAMPLE = ROOT / "fedanon" / "data" / "example"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedanon", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)


def _section(page: str, heading: str) -> str:
    start = page.index(heading)
    end = page.find("\n## ", start + len(heading))
    return page[start:end if end >= 0 else len(page)]


def test_every_run_file_key_is_documented(tmp_path: Path) -> None:
    run = tmp_path / "run.toml"
    run.write_text('no_such_key = 1\n', encoding="utf-8")
    proc = _run("anonymize", "--config", str(run), cwd=tmp_path)
    assert proc.returncode == 2
    allowed = re.search(r"known settings: (.*)$", proc.stderr.strip()).group(1).split(", ")
    section = _section(CONFIG_PAGE, "## Run file")
    missing = [key for key in allowed if f"`{key}`" not in section and f"`[{key}]`" not in section]
    assert len(allowed) >= 10 and not missing, missing


def test_every_limit_is_documented() -> None:
    section = _section(CONFIG_PAGE, "## Limits")
    missing = [key for key in LIMIT_KEYS if f"| `{key}` |" not in section]
    assert not missing, missing


def _keys(value: object, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(value, dict):
        for key, sub in value.items():
            out.add(prefix + key)
            if key not in ("transformation", "distributions", "metrics", "sensitive", "recursive_c", "config"):
                out |= _keys(sub, prefix + key + ".")
    return out


def test_every_report_key_is_documented(tmp_path: Path) -> None:
    proc = _run("anonymize", str(EXAMPLE / "example.csv"),
                "--qi", f"age={EXAMPLE / 'example_hierarchy_age.csv'}", "--qi", f"sex={EXAMPLE / 'example_hierarchy_sex.csv'}",
                "--qi", f"zipcode={EXAMPLE / 'example_hierarchy_zipcode.csv'}", "--sensitive", "diagnosis",
                "--l-diversity", "distinct:2", "--k", "2", "--suppression", "0.25",
                "-o", "out.csv", "--report", "r.json", "--verify", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    leaves = {key.rsplit(".", 1)[-1] for key in _keys(report)}
    # every name written in a code span of the page (`risk.output`, `prosecutor.{highest, average}`, ...)
    documented = {word for span in re.findall(r"`([^`]+)`", REPORT_PAGE) for word in re.findall(r"[\w-]+", span)}
    missing = sorted(leaves - documented)
    assert not missing, missing
