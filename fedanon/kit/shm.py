"""Shared-memory blocks that one process creates and its workers read: the whole lifecycle.

Two places hand bulk data to worker processes this way -- the engine's row partitions
(`fedanon.engine.check.backends.processes`) and Protocol C's row ciphertexts
(`fedanon.crypto.paillier_rows`). The rules are easy to get subtly wrong, so they live
here once: the creator owns the block and must `release` it (close *and* unlink, else the
interpreter's resource tracker unlinks it at exit and warns); a reader attaches by name
and only closes its mapping (unlinking is the creator's job). Neutral module: it knows
nothing of the engine, the crypto or the protocols.
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from multiprocessing.shared_memory import SharedMemory
from typing import Iterator

__all__ = ["SharedMemory", "attached", "create_block", "release"]

#: where Linux keeps POSIX shared memory (a tmpfs; Docker gives it 64 MiB by default)
SHM_DIR = "/dev/shm"


def create_block(size: int) -> SharedMemory:
    """A new block of at least `size` bytes (at least 1: a zero-size block is refused by the OS),
    its pages reserved.

    Why reserve: a block on a tmpfs too small for it is created without complaint, and the
    first write past the free space kills the process with SIGBUS ("Bus error", no
    traceback, no message). Reserving the pages (`posix_fallocate`) turns that into an
    OSError (ENOSPC) here. OSError also where the platform has no shared memory (e.g. no
    /dev/shm in a sandbox); callers that can work without it catch that.
    """
    size = max(1, int(size))
    block = SharedMemory(create=True, size=size)
    path = os.path.join(SHM_DIR, block.name.lstrip("/"))
    if hasattr(os, "posix_fallocate") and os.path.exists(path):
        try:
            fd = os.open(path, os.O_RDWR)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
        except OSError as exc:
            release(block)
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                return SharedMemory(create=True, size=size)  # cannot reserve here: unchecked, as before
            free = _free_bytes()
            raise OSError(exc.errno, f"shared memory: a block of {_mib(size)} does not fit in {SHM_DIR}"
                                     + (f" ({_mib(free)} free)" if free is not None else "")) from None
    return block


def _free_bytes() -> int | None:
    try:
        st = os.statvfs(SHM_DIR)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def release(block: SharedMemory) -> None:
    """The creator's end of a block: unmap it here and remove it (idempotent on a removed block)."""
    block.close()
    try:
        block.unlink()
    except FileNotFoundError:
        pass


@contextmanager
def attached(name: str) -> Iterator[SharedMemory]:
    """A reader's mapping of the block `name` while the `with` body runs, closed afterwards."""
    block = SharedMemory(name=name)
    try:
        yield block
    finally:
        block.close()
