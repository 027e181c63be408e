"""Row groupings on a Dask cluster: partitions persisted on the workers, class tables summed.

The same map/reduce as the process backend (`backends/processes.py`), with Dask's
distributed scheduler instead of pipes and shared memory, so the workers may be other
machines. Each partition of the rows is sent to one worker once, where it becomes a
partition `Grouper` held in that worker's memory for the whole search (a task result the
driver keeps a future of). A check sends the node's levels and receives the partition's
class table; the driver merges them (`merge_partition_classes`) exactly as the process
backend does. Where class sizes are the only statistic, a node with many classes is grouped
by the key-range shuffle instead: each worker counts its partition's classes as (exact key,
size) pairs and cuts them into the pieces each worker merges; the pieces travel from worker
to worker (Dask moves a task's inputs between workers), never through the driver, which
receives only each worker's merged ranges, already in canonical order. The search, its
snapshots and roll-ups stay in the driver.

Why Dask: it is NumPy-native (arrays travel pickled out-of-band, without copies), a task
costs about a millisecond, and one `distributed.Client` talks to a local cluster or a
remote scheduler alike.

`dask[distributed]` is an optional dependency (`pip install fedanon[cluster]`); it is
imported when this backend is attached, so the package works without it.

Partitions pinned to workers: a partition's tasks run only on the worker that holds it
(`allow_other_workers=False`), and the local cluster runs without a memory limit, so no
partition is spilled to disk or moved. A worker that dies loses its partition: the check
then fails with a one-line error instead of computing on part of the rows.
"""

from __future__ import annotations

import logging
import operator
import uuid
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np

from fedanon.engine.check.backends.base import register_backend
from fedanon.engine.check.backends import processes
from fedanon.engine.check.backends.processes import (SHUFFLE_RANGES_PER_WORKER, classes_by_range, join_ranges,
                                                     level0_part, merge_partition_classes, merge_ranges,
                                                     partition_grouper)
from fedanon.engine.check.checker import ClassSums, class_sums, failing_by_class
from fedanon.engine.check.grouping import Grouper
from fedanon.errors import InputError
from fedanon.kit.threads import limit_this_process
from fedanon.model.criterion import Criterion
from fedanon.stats.classes import Classes, ClassStats
from fedanon.stats.keys import mixed_radix_digits

_log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


# --------------------------------------------------------------------------- on the workers
@dataclass
class PartitionRows:
    """One partition's rows as sent to its worker (level-0 QI codes in the narrowest unsigned type of
    their dictionaries, and statistics columns)."""

    columns: list[np.ndarray]
    sensitive: dict[str, np.ndarray]
    subset: np.ndarray | None


@dataclass
class GroupingSetup:
    """What every partition's grouper shares with the driver's: code maps and statistics choices."""

    code_maps: list[np.ndarray]
    sensitive_sizes: dict[str, int]
    sparse: set[str]
    saturation: dict[str, int]
    column_cache_mib: int


class Partition:
    """A partition held in a worker's memory: its grouper (and nothing else per row: a shuffle's
    classes are a task's temporary, sized by the classes, not a buffer of 16 bytes a row)."""

    def __init__(self, rows: PartitionRows, setup: GroupingSetup) -> None:
        limit_this_process()  # the parallelism is the workers; see fedanon.kit.threads
        self.grouper = partition_grouper(rows.columns, setup.code_maps, rows.sensitive, setup.sensitive_sizes,
                                         rows.subset, setup.sparse, setup.saturation, setup.column_cache_mib)
        self.n_rows = self.grouper.n_rows


def build_partition(rows: PartitionRows, setup: GroupingSetup) -> Partition:
    return Partition(rows, setup)


def partition_size(part: Partition) -> int:
    """The partition's rows: a task whose result is an int, so that waiting for a partition to be
    built moves nothing (gathering the partition itself would copy all its rows to the driver)."""
    return part.n_rows


def held_arrays(part: Partition) -> dict[str, tuple[str, int]]:
    """The per-row arrays a partition holds for the whole search: name -> (dtype, bytes); the
    level-0 QI codes, the statistics columns and, for a table read on the workers, the local
    columns kept for output. What a test checks is narrow and a measurement sums (cached
    generalized columns and a check's temporaries come on top)."""
    g = part.grouper
    held = {f"qi{i}": g.qi_column(i) for i in range(g.n_qis)}
    held.update({f"sens:{a}": c for a, c in g.sensitive_codes.items()})
    if g.subset is not None:
        held["subset"] = g.subset
    source = getattr(part, "source", None)  # set where the partition was read on the worker
    if source is not None:
        held.update({f"source{c}": codes for c, codes in enumerate(source.codes) if codes.size})
    return {name: (a.dtype.str, int(a.nbytes)) for name, a in held.items()}


def group_partition(part: Partition, levels: tuple[int, ...]) -> tuple[np.ndarray, Any]:
    """This partition's class table at `levels` (codes, stats)."""
    classes = part.grouper.group_rows(levels)
    return classes.codes, classes.stats


def shuffle_pieces(part: Partition, levels: tuple[int, ...], n_ranges: int,
                   n_workers: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Shuffle step 1: this partition's classes cut into one piece per worker: worker w gets
    the (key, size) rows of ranges w, w + W, ... in ascending order, with their count per range."""
    present, sizes, counts = classes_by_range(part.grouper, levels, n_ranges)
    out = np.empty((present.shape[0], 2), dtype=np.int64)  # (key, size) rows, as the merge reads them
    out[:, 0] = present
    out[:, 1] = sizes
    del present, sizes
    starts = np.concatenate([[0], np.cumsum(counts)])
    pieces = []
    for w in range(n_workers):
        mine = range(w, n_ranges, n_workers)
        rows = [out[starts[r]:starts[r + 1]] for r in mine]
        piece = np.concatenate(rows) if rows else np.zeros((0, 2), dtype=np.int64)
        pieces.append((piece, counts[list(mine)]))
    return pieces


def merge_pieces(pieces: list[tuple[np.ndarray, np.ndarray]], w: int, n_ranges: int,
                 radices: list[int], digits: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle step 2 on worker `w`: its ranges merged over every partition's piece
    (`merge_ranges` with the other ranges counted empty; `digits` as there)."""
    mine = list(range(w, n_ranges, len(pieces)))
    counts = np.zeros((len(pieces), n_ranges), dtype=np.int64)
    for p, (_, piece_counts) in enumerate(pieces):
        counts[p, mine] = piece_counts
    return merge_ranges([piece for piece, _ in pieces], counts, mine, radices, digits)


Merged = tuple[np.ndarray, np.ndarray, np.ndarray]  # a worker's merged ranges: (classes per range, keys, sizes)


def merged_sums(merged: Merged, criteria: list[Criterion], implied_k: int) -> ClassSums:
    """The `ClassSums` of one worker's merged ranges (whole classes: no other worker has them)."""
    return class_sums(ClassStats(merged[2], {}), criteria, implied_k)


def merged_codes(merged: Merged, radices: list[int]) -> Merged:
    """One worker's merged ranges with class codes instead of keys (as `merge_pieces` returns them)."""
    return merged[0], mixed_radix_digits(merged[1], radices), merged[2]


def merged_failing(merged: Merged, criteria: list[Criterion], radices: list[int]) -> Merged:
    """One worker's merged ranges cut down to the classes the criteria reject, still per range,
    with their codes."""
    per_range, keys, sizes = merged
    failing = failing_by_class(criteria, ClassStats(sizes, {}))
    ends = np.concatenate([[0], np.cumsum(per_range)])
    kept_before = np.concatenate([[0], np.cumsum(failing)])
    return np.diff(kept_before[ends]), mixed_radix_digits(keys[failing], radices), sizes[failing]


# --------------------------------------------------------------------------- the driver's side
def new_token() -> str:
    """A prefix that keeps one search's task keys apart from another's on a shared cluster."""
    return uuid.uuid4().hex[:12]


def grouping_setup(grouper: Grouper) -> GroupingSetup:
    """What the partitions' groupers take over from the driver's."""
    return GroupingSetup(grouper.code_maps, dict(grouper.sensitive_sizes), set(grouper.sparse),
                         dict(grouper.saturation), max(8, grouper.column_cache_bytes >> 20))


def connect(scheduler: str | None, workers: int) -> tuple[Any, Any]:
    """(client, cluster): a client of `scheduler`, or of a new local cluster of `workers` processes on
    loopback (cluster None when connected to a scheduler)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError("--backend dask needs dask[distributed]: pip install 'fedanon[cluster]'") from None
    if scheduler:
        try:
            return Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError) as exc:
            raise InputError(f"--scheduler {scheduler[:200]}: cannot connect ({str(exc)[:200]})") from None
    # no memory limit: a partition must never be spilled (it would be pickled to disk and back)
    with warnings.catch_warnings():  # the scheduler's health endpoint moves off a busy default port: no matter
        warnings.filterwarnings("ignore", message="Port .* is already in use")
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host=LOOPBACK,
                               dashboard_address=None, memory_limit=0, silence_logs=logging.ERROR)
    try:
        return Client(cluster), cluster
    except BaseException:
        cluster.close()
        raise


def release_futures(futures: list[Any]) -> None:
    """Let the scheduler forget `futures` and their workers free the memory.

    Released, never cancelled: the scheduler reports a cancel to every client connected to it,
    and a client of another search that is still in its handshake then reads that report beside
    the scheduler's welcome, which `distributed` refuses (it fails to connect).
    """
    for future in futures:
        future.release()


def cluster_workers(client: Any, wanted: int | None = None) -> list[str]:
    """Addresses of the cluster's workers (sorted, so partition p always goes to the same one),
    the first `wanted` of them; waits up to 20 s for a first worker."""
    client.wait_for_workers(1, timeout=20)
    addresses = sorted(client.scheduler_info(n_workers=-1)["workers"])
    return addresses[:wanted] if wanted else addresses


class DaskRowGrouper:
    """Groups the rows of a `Grouper`'s table on Dask workers, one persisted partition each.

    `send` cuts the driver's rows into contiguous partitions and sends each once; a table
    read on the workers (`dask_tables.py`) passes its partitions as they are and
    `rows_elsewhere`: every row grouping then goes to the workers. Otherwise `takes`
    follows the process backend's rule, so the same nodes leave the driver. The answers
    equal `Grouper.group_rows`.
    """

    def __init__(self, client: Any, grouper: Grouper, addresses: list[str], parts: list[Any], token: str) -> None:
        self.client = client
        self.grouper = grouper
        self.addresses = addresses
        self.workers = len(addresses)
        self.parts = parts
        self.groupings = 0
        self.shuffles = 0
        self.can_shuffle = not grouper.sensitive_codes and not grouper.sensitive_sizes and grouper.subset is None
        self._token = token
        self._checks = 0

    @classmethod
    def send(cls, client: Any, grouper: Grouper, addresses: list[str]) -> "DaskRowGrouper":
        """Partitions of the driver's rows, one per worker, built there (all before the search)."""
        token = new_token()
        bounds = np.linspace(0, grouper.n_rows, len(addresses) + 1).astype(np.int64)
        setup = grouping_setup(grouper)
        parts = []
        for p, address in enumerate(addresses):
            lo, hi = int(bounds[p]), int(bounds[p + 1])
            rows = PartitionRows([level0_part(grouper, i, lo, hi) for i in range(grouper.n_qis)],
                                 {a: c[lo:hi] for a, c in grouper.sensitive_codes.items()},
                                 None if grouper.subset is None else grouper.subset[lo:hi])
            # hash=False: a key of its own, so an equal partition of another run (same content, same
            # hash) cannot be released under this one by that run's clean-up ("lost dependencies")
            [sent] = client.scatter([rows], workers=[address], direct=True, hash=False)
            parts.append(client.submit(build_partition, sent, setup, workers=[address], allow_other_workers=False,
                                       pure=False, key=f"fedanon-partition-{token}-{p}"))
            del sent
        pool = cls(client, grouper, addresses, parts, token)
        pool.wait_built()
        return pool

    def wait_built(self) -> None:
        """Every partition built (and any worker's error raised) before the search; only row
        counts come back, never a partition."""
        self.client.gather([self._on(p, partition_size, part) for p, part in enumerate(self.parts)])

    def _on(self, p: int, fn: Any, *args: Any, key: str | None = None) -> Any:
        """Run `fn(*args)` on partition p's worker."""
        self._checks += 1
        return self.client.submit(fn, *args, workers=[self.addresses[p]], allow_other_workers=False, pure=False,
                                  key=key or f"fedanon-{fn.__name__}-{self._token}-{self._checks}-{p}")

    def held_arrays(self) -> list[dict[str, tuple[str, int]]]:
        """Per partition, its per-row arrays on its worker (`held_arrays` there); only names,
        types and sizes travel."""
        return self.client.gather([self._on(p, held_arrays, part) for p, part in enumerate(self.parts)])

    def _small_merge(self, levels: tuple[int, ...]) -> bool:
        share = processes.MERGE_SPAN_SHARE  # read at each check, so a test can send every node here
        return self.workers * self.grouper.key_shape(levels)[1] <= share * self.grouper.n_rows

    def _shuffled(self, levels: tuple[int, ...]) -> bool:
        return self.can_shuffle and self.grouper.key_shape(levels)[2]

    def takes(self, levels: tuple[int, ...]) -> bool:
        """Every node where the rows are only on the workers; else the process backend's rule:
        small merges, and by a shuffle the sizes-only nodes."""
        return self.grouper.rows_elsewhere or self._small_merge(levels) or self._shuffled(levels)

    def group_rows(self, levels: tuple[int, ...]) -> Classes:
        levels = tuple(int(x) for x in levels)
        self.groupings += 1
        if self.workers == 1:  # one partition is the whole table: its classes are the answer, no merge
            codes, stats = self.client.gather(self._on(0, group_partition, self.parts[0], levels))
            return Classes(levels, codes, stats)
        if not self._small_merge(levels) and self._shuffled(levels):
            return self._shuffle(levels)
        parts = self.client.gather([self._on(p, group_partition, part, levels) for p, part in enumerate(self.parts)])
        return merge_partition_classes(levels, parts, self.grouper.key_shape(levels)[0])

    def _merged(self, levels: tuple[int, ...], digits: bool = True) -> list[Any]:
        """The shuffle up to its merge: futures of each worker's merged ranges, held there (with
        the classes' keys instead of their codes where not `digits`: a third of the memory)."""
        self.shuffles += 1
        n_ranges = self.workers * SHUFFLE_RANGES_PER_WORKER
        radices = self.grouper.key_shape(levels)[0]
        cut = [self._on(p, shuffle_pieces, part, levels, n_ranges, self.workers) for p, part in enumerate(self.parts)]
        # piece w of partition p, split off on p's worker: only that piece travels to worker w
        pieces = [[self._on(p, operator.getitem, cut[p], w) for p in range(self.workers)]
                  for w in range(self.workers)]
        return [self._on(w, merge_pieces, pieces[w], w, n_ranges, radices, digits) for w in range(self.workers)]

    def _shuffle(self, levels: tuple[int, ...]) -> Classes:
        merged = self._merged(levels)
        return join_ranges(levels, self.client.gather(merged), self.workers * SHUFFLE_RANGES_PER_WORKER)

    def splits(self, levels: tuple[int, ...]) -> bool:
        """Nodes grouped by the shuffle: each worker ends with whole classes of its key ranges."""
        levels = tuple(int(x) for x in levels)
        return self.workers > 1 and not self._small_merge(levels) and bool(self._shuffled(levels))

    def split(self, levels: tuple[int, ...], criteria: list[Criterion], implied_k: int) -> "WorkerClasses":
        """Shuffle `levels` and leave each worker's merged ranges there; only their counts come back."""
        levels = tuple(int(x) for x in levels)
        self.groupings += 1
        merged = self._merged(levels, digits=False)
        sums = sum(self.client.gather([self._on(w, merged_sums, m, criteria, implied_k) for w, m in enumerate(merged)]),
                   ClassSums())
        return WorkerClasses(self, levels, merged, criteria, sums)

    def close(self) -> None:
        """Drop the partitions from the workers (idempotent)."""
        release_futures(self.parts)
        self.parts = []


class WorkerClasses:
    """A node's classes held on the workers, one part of whole classes each (`checker.SplitClasses`)."""

    def __init__(self, pool: DaskRowGrouper, levels: tuple[int, ...], merged: list[Any], criteria: list[Criterion],
                 sums: ClassSums) -> None:
        self._pool = pool
        self._levels = levels
        self._merged = merged
        self._criteria = criteria
        self.sums = sums

    def _join(self, parts: list[Merged]) -> Classes:
        return join_ranges(self._levels, parts, self._pool.workers * SHUFFLE_RANGES_PER_WORKER)

    def whole(self) -> Classes:
        pool, radices = self._pool, self._pool.grouper.key_shape(self._levels)[0]
        return self._join(pool.client.gather([pool._on(w, merged_codes, m, radices)
                                              for w, m in enumerate(self._merged)]))

    def failing(self) -> Classes:
        pool, radices = self._pool, self._pool.grouper.key_shape(self._levels)[0]
        return self._join(pool.client.gather([pool._on(w, merged_failing, m, self._criteria, radices)
                                              for w, m in enumerate(self._merged)]))

    def release(self) -> None:
        release_futures(self._merged)
        self._merged = []


@register_backend("dask")
@contextmanager
def dask_rows(grouper: Grouper, workers: int, scheduler: str | None = None,
              client: Any = None) -> Iterator[DaskRowGrouper]:
    """Row groupings of `grouper` on a Dask cluster while the block runs.

    `scheduler`: the address of a running scheduler (tcp://host:port), whose workers (at most
    `workers` of them where `workers` > 1, else all) hold the partitions; None: a local cluster
    of `workers` processes on loopback, started here and stopped on exit. `client`: a
    `distributed.Client` the caller owns (used as it is, left open), instead of either.
    """
    own = client is None
    cluster = None
    if own:
        client, cluster = connect(scheduler, max(1, int(workers)))
    remote = scheduler is not None or not own
    pool = None
    try:
        addresses = cluster_workers(client, int(workers) if not remote or workers > 1 else None)
        pool = DaskRowGrouper.send(client, grouper, addresses)
        grouper.row_partitions = pool
        yield pool
    finally:
        grouper.row_partitions = None
        if pool is not None:
            pool.close()
        if own:
            client.close()
        if cluster is not None:
            cluster.close()
