"""The manual builds with mkdocs in strict mode: a broken link, a missing anchor, a page left out
of the navigation or a failing generator is an error, not a warning nobody reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mkdocs", reason="mkdocs is in the test extra: pip install -e '.[test]'")
pytest.importorskip("material", reason="mkdocs-material is in the test extra: pip install -e '.[test]'")


def _build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_MKDOCS_2_WARNING="1")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, env=env, capture_output=True, text=True,
                          timeout=600)


def test_the_manual_builds_strictly_with_the_generated_cli_reference(tmp_path: Path) -> None:
    proc = _build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-4000:]
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    assert not warnings, warnings
    cli = (tmp_path / "site" / "reference" / "cli.html").read_text(encoding="utf-8")
    # generated at build time from the parser: every subcommand and a flag of each kind is there
    for text in ("fedanon party serve", "fedanon hierarchy interval", "--node-budget", "--counters", "--ready-file"):
        assert text in cli, text
    assert "generated: cli-reference" not in cli
    api = (tmp_path / "site" / "guide" / "python-api.html").read_text(encoding="utf-8")
    assert "anonymize_frame" in api and "frame_anonymize.py" in api  # the example is included verbatim


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """Strict mode is really on: the same configuration over a copy with one dead link fails."""
    copy = tmp_path / "repo"
    for name in ("docs", "tools", "examples"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    page = copy / "docs" / "install.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nSee [nowhere](no-such-page.md).\n", encoding="utf-8")
    proc = _build(copy / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode != 0
    assert "no-such-page.md" in proc.stderr
