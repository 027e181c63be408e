"""A Dask cluster on loopback for the tests that need one, with the settings the backend is
documented for: worker processes of one thread, no memory limit (a worker must not spill or be
restarted mid-check), quiet logs. Import it after `pytest.importorskip("distributed")`."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import distributed


@contextmanager
def loopback_cluster(workers: int) -> Iterator[tuple[str, distributed.Client]]:
    """Start `workers` workers on 127.0.0.1; yields (scheduler address, client); stops both."""
    local = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                     dashboard_address=None, memory_limit=0, silence_logs=logging.ERROR)
    client = distributed.Client(local)
    try:
        yield local.scheduler_address, client
    finally:
        client.close()
        local.close()
