"""A new user's first two commands, on a clean clone in a brand-new virtual environment.

Reproduces the reported failure: `tomli_w` was imported but not declared, so `fedanon demo`
died with ModuleNotFoundError on a fresh machine while CI (which had it installed by hand)
passed. Here the clone gets its own venv, is installed exactly as the README's quick start
says (`pip install -e .`, runtime dependencies only: no test extras), and must run the demo
end to end (daemons, gRPC, mutual TLS) with nothing borrowed from the test environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _clean_env() -> dict[str, str]:
    """No PYTHONPATH or venv of ours leaks into the new environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def test_fresh_clone_fresh_venv_runs_the_demo(tmp_path: Path) -> None:
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout: no clean clone to make")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=120)
    venv = tmp_path / "venv"
    env = _clean_env()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120, env=env)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-e", "."], cwd=clone,
                             capture_output=True, text=True, timeout=900, env=env)
    assert install.returncode == 0, install.stderr[-3000:]
    # runtime install only: the test tools are not there, so nothing can come from them
    probe = subprocess.run([str(python), "-c", "import pytest"], capture_output=True, timeout=60, env=env)
    assert probe.returncode != 0
    demo = subprocess.run([str(venv / "bin" / "fedanon"), "demo", "--dataset", "example"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600, env=env)
    assert demo.returncode == 0, (demo.stdout[-2000:], demo.stderr[-2000:])
    assert "Traceback" not in demo.stderr
    assert demo.stdout.count("OK") >= 2, demo.stdout[-2000:]  # horizontal and vertical match the centralized run
