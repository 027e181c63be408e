"""Shared-memory blocks that one process creates and its workers read: the whole lifecycle.

Two places hand bulk data to worker processes this way -- the engine's row partitions
(`fedanon.engine.parallel_grouping`) and Protocol C's row ciphertexts
(`fedanon.crypto.paillier_rows`). The rules are easy to get subtly wrong, so they live
here once: the creator owns the block and must `release` it (close *and* unlink, else the
interpreter's resource tracker unlinks it at exit and warns); a reader attaches by name
and only closes its mapping (unlinking is the creator's job). Neutral module: it knows
nothing of the engine, the crypto or the protocols.
"""

from __future__ import annotations

from contextlib import contextmanager
from multiprocessing.shared_memory import SharedMemory
from typing import Iterator

__all__ = ["SharedMemory", "attached", "create_block", "release"]


def create_block(size: int) -> SharedMemory:
    """A new block of at least `size` bytes (at least 1: a zero-size block is refused by the OS).

    OSError where the platform has no shared memory (e.g. no /dev/shm in a sandbox); callers
    that can work without it catch that.
    """
    return SharedMemory(create=True, size=max(1, int(size)))


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
