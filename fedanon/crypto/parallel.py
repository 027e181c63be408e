"""Spread batch crypto work over all cores.

Python threads do not help: gmpy2 and the cffi calls into libsecp256k1 are short calls
that hold the GIL. So batches go to a process pool. Design choices, and why:

* Workers come from a *forkserver* (not plain fork): party daemons run gRPC threads, and
  forking a process that has live gRPC threads can deadlock the child.
* The pool is created lazily once per worker count and reused: starting processes costs
  tenths of a second, far more than a typical batch.
* Items are sent in a few large chunks per worker so pickling/IPC stays small next to the
  crypto work; results are reassembled in input order.
* Workers re-import the main script (as for any spawn/forkserver pool), so scripts that
  use parallel crypto need the usual `if __name__ == "__main__":` guard; the `fedanon`
  console script, pytest and `bench/crypto.py` have it.
* Small batches (or `workers=1`) run in-process: for them the IPC round trip costs more
  than the work. If the pool breaks (a worker killed by the OS) the batch is redone
  serially rather than failing a long protocol run.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from fedanon.kit.cores import available_cores
from fedanon.errors import FedanonError

T = TypeVar("T")
R = TypeVar("R")

#: Below this many items a batch runs in the calling process.
DEFAULT_MIN_PARALLEL = 2048
#: Chunks per worker: a few, so a slow worker does not leave the others idle at the end.
CHUNKS_PER_WORKER = 4

_log = logging.getLogger(__name__)
_pools: dict[int, ProcessPoolExecutor] = {}
_lock = threading.Lock()


def resolve_workers(workers: int | None) -> int:
    """None or 0 means all available cores; otherwise a positive count."""
    if workers is None or workers == 0:
        return available_cores()
    if workers < 0:
        raise ValueError(f"workers must be >= 0 (0/None = all cores), got {workers}")
    return workers


def _pool(workers: int) -> ProcessPoolExecutor:
    with _lock:
        pool = _pools.get(workers)
        if pool is None:
            try:
                ctx = multiprocessing.get_context("forkserver")
                ctx.set_forkserver_preload(["fedanon.crypto.commutative", "fedanon.crypto.paillier",
                                            "fedanon.crypto.elgamal"])
            except ValueError:  # pragma: no cover - platforms without forkserver
                ctx = multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
            _pools[workers] = pool
        return pool


def shutdown() -> None:
    """Stop all worker pools (also registered at interpreter exit)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for p in pools:
        p.shutdown(wait=True, cancel_futures=True)


atexit.register(shutdown)


@dataclass(frozen=True)
class ChunkProgress:
    """Report progress of a long batch: chunks of at most `items` items, `tick()` after each.

    Why: a party encrypting its row counters must tell its waiting peer that the work
    advances (fedanon.protocols.kit.progress), but cutting the batch into separate calls made
    every chunk wait for the previous one -- cores idle at each chunk's tail and the next
    submission. With this, `map_batches` submits every chunk at once and calls `tick` in
    the calling process as each chunk's results arrive (in input order).
    """

    tick: Callable[[], None]
    items: int


def _serial(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], progress: ChunkProgress | None) -> list[R]:
    if progress is None:
        return list(fn(items))
    out: list[R] = []
    for start in range(0, len(items), max(1, progress.items)):
        out.extend(fn(items[start: start + progress.items]))
        progress.tick()
    return out


def _redo_serially(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], progress: ChunkProgress | None,
                   w: int, exc: BaseException) -> list[R]:
    # OSError: the platform cannot start worker processes (e.g. no /dev/shm in a sandbox).
    _log.warning("crypto worker pool unavailable (%s: missing __main__ guard, killed worker or "
                 "no process support); redoing %d items serially", type(exc).__name__, len(items))
    with _lock:
        broken = _pools.pop(w, None)
    if broken is not None:
        broken.shutdown(wait=False, cancel_futures=True)
    return _serial(fn, items, progress)


def map_batches(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T], *, workers: int | None = None,
                chunk_size: int | None = None, min_parallel: int = DEFAULT_MIN_PARALLEL,
                progress: ChunkProgress | None = None) -> list[R]:
    """Apply `fn` (a picklable function of a list of items -> list of results) to all items.

    Results are in input order. `fn` must return exactly one result per item. With
    `progress`, chunks hold at most `progress.items` items and `progress.tick()` runs
    after each (also when the batch runs in this process).
    """
    n = len(items)
    w = resolve_workers(workers)
    if w == 1 or n < max(min_parallel, 2):
        return _serial(fn, items, progress)
    if chunk_size is None:
        chunk_size = max(1, -(-n // (w * CHUNKS_PER_WORKER)))
    if progress is not None:
        chunk_size = max(1, min(chunk_size, progress.items))
    chunks = [items[i: i + chunk_size] for i in range(0, n, chunk_size)]
    try:
        pool = _pool(w)
        futures = [pool.submit(fn, list(c)) for c in chunks]
    except (BrokenProcessPool, OSError) as exc:
        return _redo_serially(fn, items, progress, w, exc)
    out: list[R] = []
    for k, f in enumerate(futures):
        try:
            out.extend(f.result())
        except FedanonError as exc:
            # Item numbers in a worker's message are relative to its chunk: say where it was.
            start = k * chunk_size
            raise type(exc)(f"{exc} [in batch items {start}..{min(start + chunk_size, n) - 1}]") from exc
        except (BrokenProcessPool, OSError) as exc:
            return _redo_serially(fn, items, progress, w, exc)
        if progress is not None:
            progress.tick()  # outside the try: its own errors (e.g. a transport's) are not the pool's
    if len(out) != n:
        raise RuntimeError(f"batch function returned {len(out)} results for {n} items")
    return out


def worker_pids(workers: int | None = None) -> list[int]:
    """Process ids of the live workers of the pool for `workers` (for CPU-time accounting)."""
    with _lock:
        pool = _pools.get(resolve_workers(workers))
    procs = getattr(pool, "_processes", None) or {}
    return list(procs)


def warm_up(workers: int | None = None) -> None:
    """Start the worker processes now (e.g. while waiting for peers), not on the first batch."""
    w = resolve_workers(workers)
    if w > 1:
        pool = _pool(w)
        for f in [pool.submit(available_cores) for _ in range(w)]:
            f.result()
