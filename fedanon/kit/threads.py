"""One core per engine process: BLAS stays single-threaded while the engine computes.

Why: a few hot steps are float matrix products (the mixed-radix roll-up keys,
`grouping.Grouper._rollup_key`; the transport of hierarchical t-closeness). OpenBLAS runs
large ones on a thread per core, and its threads then busy-wait between calls, so they burn
CPU through the whole search. On resampled ADULT with 1.2 M rows and 5 % suppression, a
search took 8.0 CPU-s for 5.0 s of wall time (one thread: about 5 CPU-s). The engine's own
parallelism is by processes (`--workers`, `parallel_grouping`), and a protocol run puts
several parties on one machine, so BLAS threads only compete with those.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from typing import Iterator

import numpy as np  # noqa: F401  (loads the BLAS the controller must see)
from threadpoolctl import ThreadpoolController


@lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    """Finding the loaded thread pools scans the process's libraries (~0.4 ms, a few percent
    of a 15 ms ADULT search), so it happens once; NumPy's BLAS is loaded by then."""
    return ThreadpoolController()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread inside the `with` body, the caller's setting restored after
    (about 7 µs to enter and leave)."""
    with _controller().limit(limits=1, user_api="blas"):
        yield


def limit_this_process() -> None:
    """For the engine's own worker processes: one BLAS thread for the process's lifetime."""
    _controller().limit(limits=1, user_api="blas")
