"""Finding 5 of issue 11: a killed `simulate`/`demo` leaves no daemon, no share and no CA key behind.

Before the fix, SIGTERM or SIGKILL of the simulating process left four daemons running and the
plaintext share CSVs and the CA private key in TMPDIR (only SIGINT cleaned up).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

import fedanon

ROOT = Path(fedanon.__file__).resolve().parent.parent
EXAMPLE = ROOT / "fedanon" / "data" / "example"


def _env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["TMPDIR"] = str(tmp)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@contextmanager
def _running(cmd: list[str], tmp: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`cmd` started with TMPDIR=`tmp`; killed at the end of the block should it still run."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp), cwd=tmp)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _kill_and_expect_nothing_left(proc: subprocess.Popen[bytes], tmp: Path, sig: int = signal.SIGKILL,
                                  daemons: list[int] | None = None) -> None:
    """Send `sig`; then the `daemons` must stop and no temporary folder may remain in `tmp`."""
    proc.send_signal(sig)
    proc.wait(20)
    assert _wait(lambda: not any(_alive(p) for p in daemons or []), 15), "daemons still running"
    assert _wait(lambda: not list(tmp.glob("fedanon-*")), 15), list(tmp.iterdir())


def _simulate_cmd(out: Path) -> list[str]:
    """`fedanon simulate` of the bundled example, k=2 over two parties, writing `out`."""
    return [sys.executable, "-m", "fedanon", "simulate", str(EXAMPLE / "example.csv"),
            "--qi", f"age={EXAMPLE / 'example_hierarchy_age.csv'}", "--qi", f"sex={EXAMPLE / 'example_hierarchy_sex.csv'}",
            "--qi", f"zipcode={EXAMPLE / 'example_hierarchy_zipcode.csv'}",
            "--k", "2", "--parties", "2", "-o", str(out), "-q"]


def _party_daemons(pid: int) -> list[int]:
    return [p for p in _children(pid) if "party" in Path(f"/proc/{p}/cmdline").read_text()]


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


SCRIPT = textwrap.dedent("""
    import sys, tempfile, time
    from pathlib import Path
    from fedanon.parties import reaper
    from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

    def main(args):
        with tempfile.TemporaryDirectory(prefix="fedanon-simulate-") as tmp, reaper.guarded_dir(Path(tmp)):
            (Path(tmp) / "p1.csv").write_text("age;zip\\n34;81667\\n")   # a plaintext share
            with SimulatedNetwork([SimulatedParty("p1", "primary"), SimulatedParty("h", "helper")]) as net:
                print("UP", net.dir, flush=True)
                time.sleep(120)
        return 0

    sys.exit(reaper.sigterm_safe(main)(None))
""")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killed_simulation_stops_its_daemons_and_removes_shares_and_keys(tmp_path: Path, sig: int) -> None:
    with _running([sys.executable, "-c", SCRIPT], tmp_path) as proc:
        line = proc.stdout.readline().decode()  # type: ignore[union-attr]
        assert line.startswith("UP"), proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
        sim_dir = Path(line.split()[1])
        assert not (sim_dir / "certs" / "ca.key").exists()  # the CA key is gone as soon as certificates exist
        daemons = _party_daemons(proc.pid)
        assert len(daemons) == 2
        assert list(tmp_path.glob("fedanon-simulate-*/p1.csv")) and sim_dir.exists()
        _kill_and_expect_nothing_left(proc, tmp_path, sig, daemons)


@pytest.mark.slow
def test_fedanon_simulate_killed_mid_run_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    with _running(_simulate_cmd(out), tmp_path) as proc:
        # kill as soon as the daemons are up (all ready files written)
        _wait(lambda: len(list(tmp_path.glob("fedanon-sim-*/*.ready"))) >= 3 or proc.poll() is not None, 60)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""  # it must still run to be killed
        _kill_and_expect_nothing_left(proc, tmp_path, daemons=_party_daemons(proc.pid))
        assert not out.exists() or out.stat().st_size > 0  # never a partial output file


def test_simulation_killed_before_it_starts_leaves_no_folder(tmp_path: Path) -> None:
    """A network's own folder exists from construction on: SIGKILL before `with` was entered
    (no daemon, no certificate yet) must still remove it, so its name is known to the reaper first."""
    script = textwrap.dedent("""
        import time
        from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
        net = SimulatedNetwork([SimulatedParty("p1", "primary"), SimulatedParty("h", "helper")])
        print("MADE", net.dir, flush=True)
        time.sleep(120)
    """)
    with _running([sys.executable, "-c", script], tmp_path) as proc:
        line = proc.stdout.readline().decode()  # type: ignore[union-attr]
        assert line.startswith("MADE"), proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
        assert Path(line.split()[1]).is_dir()
        _kill_and_expect_nothing_left(proc, tmp_path)


@pytest.mark.parametrize("moment", ["fedanon-hier-*", "fedanon-simulate-*", "fedanon-sim-*", "fedanon-sim-*/*.ready"])
def test_fedanon_simulate_killed_leaves_no_temporary_folder(tmp_path: Path, moment: str) -> None:
    """SIGKILL as soon as the temporary hierarchy folder exists, and once the daemons are up:
    the folder of normalized hierarchies (written even when unused) was never handed to the reaper."""
    with _running(_simulate_cmd(tmp_path / "out.csv"), tmp_path) as proc:
        reached = _wait(lambda: bool(list(tmp_path.glob(moment))) or proc.poll() is not None, 60)
        assert reached and proc.poll() is None, "the simulation ended before it could be killed"
        _kill_and_expect_nothing_left(proc, tmp_path)
