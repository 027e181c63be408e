"""Clean-up that survives its owner: daemons and temporary directories of a local simulation.

`fedanon simulate`/`demo` start party daemons and write plaintext shares, certificates
and keys to temporary directories. A `with` block removes them on normal exit, an
exception or SIGINT — but not when the process is killed by SIGKILL (nor by SIGTERM,
whose default action skips Python's clean-up). So the first registration starts a small
watcher process in its own session, connected by a pipe whose write end only this
process holds. The kernel closes the pipe however this process ends; the watcher then
stops every registered daemon (SIGTERM, SIGKILL after a grace period) and deletes every
registered directory. Whatever was cleaned up normally is unregistered first, so the
watcher has nothing left to do on a normal exit.

`terminate_on_sigterm` turns SIGTERM into SystemExit in the main thread, so `with`
blocks unwind as they do for Ctrl-C.
"""

from __future__ import annotations

import atexit
import functools
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, TypeVar

T = TypeVar("T")

_GRACE_S = 5.0
_lock = threading.Lock()
_watcher: subprocess.Popen[bytes] | None = None


def _send(line: str) -> None:
    global _watcher
    with _lock:
        if _watcher is None or _watcher.poll() is not None:
            env = dict(os.environ)
            root = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
            _watcher = subprocess.Popen([sys.executable, "-m", "fedanon.parties.reaper"], stdin=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                        start_new_session=True, close_fds=True)
            atexit.register(_shutdown)
        assert _watcher.stdin is not None
        try:
            _watcher.stdin.write((line + "\n").encode())
            _watcher.stdin.flush()
        except (BrokenPipeError, OSError):
            pass


def _shutdown() -> None:
    """Normal interpreter exit: tell the watcher that nothing is left, then let it go."""
    global _watcher
    with _lock:
        watcher, _watcher = _watcher, None
    if watcher is not None and watcher.stdin is not None:
        try:
            watcher.stdin.write(b"done\n")
            watcher.stdin.close()
            watcher.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass


def guard_pid(pid: int) -> None:
    _send(f"+pid {pid}")


def release_pid(pid: int) -> None:
    _send(f"-pid {pid}")


def guard_dir(path: Path) -> None:
    _send(f"+dir {Path(path).resolve()}")


def release_dir(path: Path) -> None:
    _send(f"-dir {Path(path).resolve()}")


@contextmanager
def guarded_dir(path: Path) -> Iterator[Path]:
    """Within the block, `path` is removed by the watcher should this process be killed."""
    guard_dir(path)
    try:
        yield path
    finally:
        release_dir(path)


def new_guarded_temp_dir(prefix: str) -> Path:
    """A fresh private folder in the temporary directory that the watcher knows of *before* it exists.

    Why not `mkdtemp` + `guard_dir`: between creating the folder and registering it (which may
    first start the watcher process) a kill would leave the folder behind. Here the name is
    registered first; the watcher removes whatever exists under it when this process dies. The
    caller removes the folder and then calls `release_dir` (or uses `guarded_temp_dir`).
    """
    base = Path(tempfile.gettempdir())
    while True:
        path = (base / f"{prefix}{secrets.token_hex(8)}").resolve()
        guard_dir(path)
        try:
            path.mkdir(mode=0o700)
            return path
        except FileExistsError:  # someone else's: forget it at once and draw another name
            release_dir(path)


@contextmanager
def guarded_temp_dir(prefix: str) -> Iterator[Path]:
    """`new_guarded_temp_dir` for the block: removed and forgotten when it ends."""
    path = new_guarded_temp_dir(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        release_dir(path)


@contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM raises SystemExit(143) in the main thread (so clean-up runs)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def sigterm_safe(handler: Callable[[T], int]) -> Callable[[T], int]:
    """A CLI handler that unwinds (and so cleans up) on SIGTERM as it does on Ctrl-C."""
    @functools.wraps(handler)
    def wrapped(args: T) -> int:
        with terminate_on_sigterm():
            return handler(args)
    return wrapped


# ----------------------------------------------------------------------------- the watcher process

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie waiting for its (dead) parent's reaper counts as gone
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _watch() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pids: set[int] = set()
    dirs: set[str] = set()
    for raw in sys.stdin.buffer:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        if line == "done":
            return
        op, _, arg = line.partition(" ")
        if op == "+pid":
            pids.add(int(arg))
        elif op == "-pid":
            pids.discard(int(arg))
        elif op == "+dir":
            dirs.add(arg)
        elif op == "-dir":
            dirs.discard(arg)
    for pid in pids:  # EOF without "done": the owner died
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + _GRACE_S
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    _watch()
