"""A /dev/shm too small for the shared-memory blocks (Docker's default is 64 MiB) gives a clear
error or a fallback, never a SIGBUS ("Bus error": the process killed without a message).

Each case runs in a child process inside its own mount namespace (`unshare -m`) whose
/dev/shm is a 64 KiB tmpfs; skipped where namespaces cannot be made (not root, no unshare).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import fedanon

from datasets import ADULT_DIR as ADULT
ROOT = Path(fedanon.__file__).resolve().parent.parent


def _in_small_shm(command: str) -> subprocess.CompletedProcess:
    """`command` (a shell line) with /dev/shm a 64 KiB tmpfs in a private mount namespace."""
    return subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs /dev/shm && {command}"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def _namespaces_available() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return _in_small_shm("true").returncode == 0


pytestmark = pytest.mark.skipif(not _namespaces_available(),
                                reason="needs root and unshare to give a child a small /dev/shm")


def test_a_block_larger_than_the_free_shared_memory_is_an_oserror_not_a_bus_error():
    code = ("import errno; from fedanon.kit.shm import create_block, release\n"
            "try:\n    create_block(8 << 20)\nexcept OSError as e:\n"
            "    print('refused', e.errno == errno.ENOSPC, e.strerror)\n"
            "b = create_block(4096); b.buf[:4096] = bytes(4096); release(b); print('small block written')\n")
    proc = _in_small_shm(f"{sys.executable} -c \"{code}\"")
    assert proc.returncode == 0, proc.stderr[-500:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("refused True shared memory: a block of 8.0 MiB does not fit in /dev/shm")
    assert lines[1] == "small block written"


def test_workers_fall_back_to_one_process_with_one_warning_and_the_same_output(tmp_path):
    qis = ["age", "sex", "education"]
    args = [str(ADULT / "adult.csv"), "-q", "--k", "5", "--suppression", "0.05"]
    for a in qis:
        args += ["--qi", f"{a}={ADULT / f'adult_hierarchy_{a}.csv'}"]
    one = subprocess.run([sys.executable, "-m", "fedanon", "anonymize", *args, "-o", str(tmp_path / "one.csv")],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert one.returncode == 0, one.stderr[-500:]
    line = " ".join([sys.executable, "-m", "fedanon", "anonymize", *args, "-o", str(tmp_path / "two.csv"),
                     "--workers", "2", "--report", str(tmp_path / "two.json")])
    two = _in_small_shm(line)
    assert two.returncode == 0, (two.returncode, two.stderr[-500:])  # a SIGBUS would be -7 / 135
    warning = two.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("--workers 2: shared memory: a block of ")
    assert warning[0].endswith("grouping in one process (same result)")
    assert (tmp_path / "two.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
    assert json.loads((tmp_path / "two.json").read_text())["workers"] == 1  # what really grouped the rows
