"""Result and report files appear whole or not at all (`fedanon/kit/atomicfile.py`).

A write that fails halfway (a full disk here) must leave neither a truncated release that
looks like a result nor a temporary file, and must not destroy the previous file. Unit
tests of the helper, then `fedanon anonymize` on a full file system: a 1 MiB tmpfs in a
private mount namespace (skipped where namespaces cannot be made).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import fedanon
from fedanon.kit.atomicfile import atomic_binary, write_text_atomic

from datasets import ADULT_DIR as ADULT
ROOT = Path(fedanon.__file__).resolve().parent.parent
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation",
       "salary-class"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("previous release\n")
    with pytest.raises(RuntimeError):
        with atomic_binary(target) as fh:
            fh.write(b"half a new rel")
            raise RuntimeError("disk full, say")
    assert target.read_text() == "previous release\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_a_complete_write_replaces_the_file_with_the_usual_mode(tmp_path):
    target = tmp_path / "r.json"
    old = os.umask(0o022)
    try:
        write_text_atomic(target, "{}\n")
        write_text_atomic(target, '{"a": 1}\n')
    finally:
        os.umask(old)
    assert target.read_text() == '{"a": 1}\n'
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # as open(path, "w") under umask 022
    target.chmod(0o600)
    write_text_atomic(target, "[]\n")
    assert target.read_text() == "[]\n" and stat.S_IMODE(target.stat().st_mode) == 0o600  # kept
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_symlink_keeps_pointing_at_its_target_and_a_missing_folder_is_an_error(tmp_path):
    real = tmp_path / "real.csv"
    real.write_text("old")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    write_text_atomic(link, "new\n")
    assert link.is_symlink() and real.read_text() == "new\n"
    with pytest.raises(FileNotFoundError):
        write_text_atomic(tmp_path / "missing" / "x.csv", "x")


def _namespaces_available() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


@pytest.mark.skipif(not _namespaces_available(), reason="needs root and unshare for a private full tmpfs")
def test_anonymize_on_a_full_disk_keeps_the_previous_release_and_says_so(tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    qi = " ".join(f"--qi {a}={ADULT / f'adult_hierarchy_{a}.csv'}" for a in QIS)
    command = (f"mount -t tmpfs -o size=1m tmpfs {full} && printf 'previous release\\n' > {full}/out.csv && "
               f"{sys.executable} -m fedanon anonymize {ADULT / 'adult.csv'} {qi} --k 5 -q -o {full}/out.csv; "
               f"echo rc=$?; cat {full}/out.csv; ls -A {full}")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    lines = proc.stdout.splitlines()
    assert lines[0] == "rc=2", proc.stdout + proc.stderr  # ~3.5 MB of output cannot fit in 1 MiB
    assert lines[1] == "previous release"  # not replaced by a truncated table
    assert lines[2:] == ["out.csv"]  # and no temporary file left behind
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == 1 and "out.csv: cannot write (No space left on device)" in errors[0]
