"""Row groupings of large tables in worker processes: partitions grouped apart, class tables summed.

A check that cannot roll up from a stored snapshot groups every row of the table at
its node (`Grouper.group_rows`). On millions of rows that pass dominates the search.
It splits cleanly: the rows are cut into contiguous partitions, each partition is
grouped on its own -- by the very same `Grouper.group_rows`, in its own process --
and the per-partition class tables are merged by grouping their class codes once
more and summing every statistic (sizes, sensitive histograms dense or sparse,
research-subset counts). All statistics are additive, so the merged table is exactly
the one a single process computes, in the same canonical class order (ascending
mixed-radix key) and with sparse entries sorted by (class, value) as from the rows.

Why this shape: it is the map/reduce a distributed engine would run (each site
groups its own rows, a coordinator sums class tables), and a check ships only node
levels and class tables between processes, never rows -- the partitions sit in
shared memory (`multiprocessing.shared_memory`) that each worker maps once at start.
The process that owns the search groups the first partition itself while the workers
group theirs. Roll-ups from snapshots and the grouping that materializes the result
(it needs a class per row) stay in the owning process.

That merge is small only where a node has few classes. A node with many (the fine nodes
of a search with suppression: ~300,000 classes on 4.8 M rows) would merge up to
workers x that many, more than the partitions saved. Where class sizes are the only
statistic (no sensitive attribute, no research subset) such a node is grouped by a
*shuffle* instead. Each process counts its partition's classes as (exact key, size) pairs,
ascending, into shared memory, and says how many fall into each of workers x
SHUFFLE_RANGES_PER_WORKER key ranges. Then each process merges its own ranges from every
partition (sorted pieces: one stable sort merges them) and sums the sizes of equal keys.
A key lies in exactly one range, so the ranges' class tables are disjoint and, in range
order, already the canonical ascending order: no final merge. Other large nodes stay in
the owning process.

Workers are started with the `spawn` method (no fork of a process that may hold
threads, e.g. pyarrow's or gRPC's) and stopped by `close()` / the context manager.
"""

from __future__ import annotations

import logging
import sys
import types
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any, Iterator

import numpy as np

from fedanon.data.io.columnar import narrow_codes
from fedanon.kit.cores import available_cores
from fedanon.stats.classhist import SparseHistogram
from fedanon.stats.classes import ClassStats
from fedanon.stats.classes import Classes
from fedanon.engine.check.backends.base import register_backend
from fedanon.engine.check.grouping import Grouper
from fedanon.stats.keys import combined_key, group_keys, key_sizes, key_span, mixed_radix_digits, run_starts
from fedanon.stats.histograms import sum_by_group
from fedanon.kit.threads import limit_this_process
from fedanon.errors import InputError
from fedanon.kit.shm import SharedMemory, attached, create_block, release

_log = logging.getLogger(__name__)

#: below this many rows `--workers auto` stays in one process: starting workers (~1 s
#: each) and shipping class tables costs more than a row grouping saves. On a 2-core VM,
#: 2 workers against 1 (search time, k = 5, 0 % / 5 %): x1.27 / x1.04 at 2.4 M rows,
#: x1.01 / x0.98 at 4.8 M, x0.90 at 12 M (5 %)
AUTO_MIN_ROWS = 5_000_000
#: at most this many processes for `auto`: on a 16-core machine 4 workers gave the best search
#: time on 4.8 M rows (x0.88 of one process at 0 % suppression); 16 were no faster (x0.97)
AUTO_MAX_WORKERS = 4
#: a node is grouped by the workers only where workers x its key span <= this share of the
#: rows. The merge regroups every partition's classes, up to workers x span of them; where
#: that approaches the row count (the fine nodes of a search with suppression: ~300,000
#: classes on 4.8 M rows) the merge and shipping the class tables cost more than the
#: partitions saved -- measured on a 16-core machine, 16 workers made such a search 1.45x
#: slower -- so those nodes are shuffled where sizes are the only statistic (module
#: docstring), and otherwise grouped by the owning process alone.
MERGE_SPAN_SHARE = 0.25
#: key ranges per process in a shuffle: each process counts several interleaved ranges, so
#: keys crowded in one part of the span (a frequent leading value) still spread over all
SHUFFLE_RANGES_PER_WORKER = 8


def resolve_workers(value: str | int, n_rows: int) -> int:
    """Number of processes for `--workers` (an integer >= 1 or "auto"); InputError otherwise.

    "auto": one per CPU this process may use (at most AUTO_MAX_WORKERS) for tables of at
    least AUTO_MIN_ROWS rows, else 1.
    """
    if isinstance(value, str) and value.strip().lower() == "auto":
        if n_rows < AUTO_MIN_ROWS:
            return 1
        return max(1, min(available_cores(), AUTO_MAX_WORKERS))
    try:
        workers = int(value)
    except (TypeError, ValueError):
        raise InputError(f"--workers must be a whole number >= 1 or 'auto', got {str(value)[:200]!r}") from None
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    return workers


# --------------------------------------------------------------------------- merging
def merge_partition_classes(levels: tuple[int, ...], parts: list[tuple[np.ndarray, ClassStats]],
                            radices: list[int]) -> Classes:
    """One class table from per-partition class tables of the same node (codes + stats).

    Equal class codes from different partitions are one class: the concatenated codes
    are grouped by the same mixed-radix key as rows are (so the class order is the
    canonical one) and every statistic is summed per merged class.
    """
    n_qis = len(levels)
    codes_all = np.concatenate([c for c, _ in parts]) if parts else np.zeros((0, n_qis), dtype=np.int32)
    first, inverse = group_keys([codes_all[:, i] for i in range(n_qis)], radices)
    n_classes = int(first.shape[0])
    codes = np.ascontiguousarray(codes_all[first], dtype=np.int32)
    stats = [s for _, s in parts]
    sizes = sum_by_group(inverse, n_classes, np.concatenate([s.sizes for s in stats]))
    hists: dict[str, Any] = {}
    for attr, first_hist in stats[0].histograms.items():
        if isinstance(first_hist, SparseHistogram):
            hists[attr] = _merge_sparse([s.histograms[attr] for s in stats], inverse, n_classes)
        else:
            hists[attr] = sum_by_group(inverse, n_classes, np.concatenate([s.histograms[attr] for s in stats]))
    subset_sizes = None
    if stats[0].subset_sizes is not None:
        subset_sizes = sum_by_group(inverse, n_classes, np.concatenate([s.subset_sizes for s in stats]))
    return Classes(tuple(levels), codes, ClassStats(sizes, hists, subset_sizes))


def _merge_sparse(hists: list[SparseHistogram], inverse: np.ndarray, n_classes: int) -> SparseHistogram:
    """Sparse entries of all partitions re-keyed onto the merged classes and summed, sorted by
    (class, value) as `SparseHistogram.from_rows` sorts them.

    With saturation the merge is a roll-up of the joined partitions: a merged class with a
    saturated part is saturated, and one whose unsaturated parts together reach the
    threshold becomes saturated -- as when one process counts all its rows.
    """
    offsets = np.cumsum([0] + [h.n_classes for h in hists])
    saturate_at = hists[0].saturate_at
    saturated = None
    if saturate_at > 0:
        saturated = np.concatenate([np.zeros(h.n_classes, dtype=bool) if h.saturated is None else h.saturated
                                    for h in hists])
    joined = SparseHistogram(np.concatenate([h.cls + off for h, off in zip(hists, offsets)]),
                             np.concatenate([h.value for h in hists]), np.concatenate([h.count for h in hists]),
                             int(offsets[-1]), hists[0].domain, saturate_at, saturated)
    merged = joined.rollup(inverse, n_classes)
    key = merged.cls * merged.domain + merged.value
    if key.size > 1 and bool((key[1:] < key[:-1]).any()):  # a pure renumbering keeps partition order
        order = np.argsort(key, kind="stable")
        merged = SparseHistogram(merged.cls[order], merged.value[order], merged.count[order], n_classes,
                                 merged.domain, saturate_at, merged.saturated)
    return merged


# --------------------------------------------------------------------------- workers
@contextmanager
def _no_main_import() -> Iterator[None]:
    """Start spawned workers without re-running the caller's main script in them.

    `spawn` re-imports the parent's `__main__` file in each child, which re-runs a script
    that lacks an `if __name__ == "__main__"` guard; the workers need nothing from it.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


@dataclass
class _Layout:
    """Where one partition's arrays lie in its shared-memory block (picklable, no rows)."""

    shm_name: str
    n_rows: int
    arrays: list[tuple[str, str, int]]  # (name, dtype, byte offset): "qi0".., "sens:<attr>", "subset"
    code_maps: list[np.ndarray]
    sensitive_sizes: dict[str, int]
    sparse: set[str]
    saturation: dict[str, int]
    column_cache_mib: int
    partition: int = 0  # this worker's partition (the owner's is 0)
    shuffle_blocks: list[str] | None = None  # per partition: its shuffle classes, (key, size) int64 rows
    partition_rows: list[int] | None = None


def _views(shm: SharedMemory, layout: _Layout) -> dict[str, np.ndarray]:
    return {name: np.ndarray((layout.n_rows,), dtype=np.dtype(dtype), buffer=shm.buf, offset=offset)
            for name, dtype, offset in layout.arrays}


def level0_part(grouper: Grouper, qi: int, lo: int, hi: int) -> np.ndarray:
    """Rows lo..hi of one QI's level-0 codes in the narrowest unsigned type of its dictionary
    (1 byte a row up to 256 values, 2 up to 65,536, else 4): what a worker's partition holds,
    instead of the table's int32 (any backend's workers)."""
    return narrow_codes(grouper.qi_column(qi)[lo:hi], int(grouper.code_maps[qi].shape[1]))


def partition_grouper(columns: list[np.ndarray], code_maps: list[np.ndarray], sensitive: dict[str, np.ndarray],
                      sensitive_sizes: dict[str, int], subset: np.ndarray | None, sparse: set[str],
                      saturation: dict[str, int], column_cache_mib: int) -> Grouper:
    """The grouper of one partition's rows, with the owner's statistics choices (any backend's workers)."""
    # the owner's saturation too: a class saturated in a partition is saturated in the merged
    # table (it has at least as many distinct values there), so partitions may forget it early
    grouper = Grouper(columns, code_maps, sensitive, sensitive_sizes, subset, column_cache_mib=column_cache_mib,
                      saturation=saturation)
    grouper.sparse = set(sparse)  # the owner's choice of sparse statistics, whatever its threshold
    return grouper


# --------------------------------------------------------------------------- shuffle steps
def _range_width(span: int, n_ranges: int) -> int:
    """Keys [r*width, (r+1)*width) form range r; width = ceil(span / n_ranges), so the ranges
    cover the span (the last one may reach past it)."""
    return max(1, -(-span // n_ranges))


def classes_by_range(grouper: Grouper, levels: tuple[int, ...], n_ranges: int) -> tuple[np.ndarray, np.ndarray,
                                                                                         np.ndarray]:
    """Shuffle step 1 on one partition: its classes at `levels` as (present exact keys ascending,
    their sizes, how many classes fall into each key range)."""
    radices = grouper.key_shape(levels)[0]
    key, span, _ = combined_key([grouper.column(i, l) for i, l in enumerate(levels)], radices)
    present, sizes = key_sizes(key, span, key.shape[0])
    width = _range_width(span, n_ranges)
    return present, sizes, np.diff(np.searchsorted(present, np.arange(n_ranges + 1, dtype=np.int64) * width))


def partition_classes(grouper: Grouper, levels: tuple[int, ...], n_ranges: int, out: np.ndarray) -> np.ndarray:
    """`classes_by_range` written to `out` (int64 rows [key, size], shared memory the other
    processes read); returns the classes per key range."""
    present, sizes, counts = classes_by_range(grouper, levels, n_ranges)
    out[: present.shape[0], 0] = present
    out[: present.shape[0], 1] = sizes
    return counts


def merge_ranges(classes_of: list[np.ndarray], counts: np.ndarray, ranges: list[int],
                 radices: list[int], digits: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shuffle step 2: the classes of key ranges `ranges` (ascending), merged from every partition.

    `classes_of[p]`: partition p's (key, size) rows, ascending; `counts[p, r]`: how many of
    them lie in range r. Each partition's piece of a range is sorted, so a stable sort of
    the joined pieces merges runs. Returns (classes per range, class codes, sizes); with
    `digits` False the classes' keys (8 bytes a class) instead of their codes (4 a QI), for a
    caller that decodes only some of them (`mixed_radix_digits`).
    """
    n_parts = counts.shape[0]
    starts = np.zeros((n_parts, counts.shape[1] + 1), dtype=np.int64)
    np.cumsum(counts, axis=1, out=starts[:, 1:])
    pieces = [classes_of[p][starts[p, r]:starts[p, r + 1]] for r in ranges for p in range(n_parts)]
    joined = np.concatenate(pieces) if pieces else np.zeros((0, 2), dtype=np.int64)
    order = np.argsort(joined[:, 0], kind="stable")  # merges the sorted pieces (runs)
    keys = joined[order, 0]
    if keys.shape[0]:
        first = np.flatnonzero(run_starts(keys))
        present, sizes = keys[first], np.add.reduceat(joined[order, 1], first)
    else:
        present, sizes = keys, np.zeros(0, dtype=np.int64)
    span = key_span(radices)[0]
    width = _range_width(span, int(counts.shape[1]))
    ends = [ranges[0] * width] + [(r + 1) * width for r in ranges] if ranges else [0]
    per_range = np.diff(np.searchsorted(present, ends))
    return per_range, mixed_radix_digits(present, radices) if digits else present, sizes


def join_ranges(levels: tuple[int, ...], parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
                n_ranges: int) -> Classes:
    """The node's classes from the shuffle's merged ranges: `parts[w]` is what `merge_ranges`
    returned for the ranges w, w + W, w + 2W, ... (W = len(parts)); concatenated in range
    order they are the canonical ascending order, with no further merge."""
    n_parts = len(parts)
    offsets = [np.concatenate([[0], np.cumsum(per_range)]) for per_range, _, _ in parts]
    # range r was merged by part r % W, as its (r // W)-th range
    order = [(r % n_parts, r // n_parts) for r in range(n_ranges)]
    codes = np.concatenate([parts[w][1][offsets[w][k]:offsets[w][k + 1]] for w, k in order])
    sizes = np.concatenate([parts[w][2][offsets[w][k]:offsets[w][k + 1]] for w, k in order])
    return Classes(tuple(levels), codes, ClassStats(sizes, {}))


def _serve(conn: Any, layout: _Layout) -> None:
    """Worker loop: group this partition at each node asked for, reply with codes + stats."""
    limit_this_process()  # the parallelism is these processes; see fedanon.kit.threads
    try:
        with attached(layout.shm_name) as shm, ExitStack() as stack:
            views = _views(shm, layout)
            n_qis = len(layout.code_maps)
            grouper = partition_grouper([views[f"qi{i}"] for i in range(n_qis)], layout.code_maps,
                                         {a: views[f"sens:{a}"] for a in layout.sensitive_sizes},
                                         layout.sensitive_sizes, views.get("subset"), layout.sparse,
                                         layout.saturation, layout.column_cache_mib)
            classes_of = []  # per partition: its classes of a shuffle, (key, size) rows
            for name, rows in zip(layout.shuffle_blocks or [], layout.partition_rows or []):
                block = stack.enter_context(attached(name))
                classes_of.append(np.ndarray((rows, 2), dtype=np.int64, buffer=block.buf))
            conn.send(("ready", None))
            while True:
                message = conn.recv()
                if message is None:
                    break
                try:
                    if message[0] == "classes":  # shuffle step 1: ("classes", levels, ranges)
                        reply: Any = partition_classes(grouper, message[1], message[2], classes_of[layout.partition])
                    elif message[0] == "merge":  # shuffle step 2: ("merge", levels, counts, my ranges)
                        levels, counts, ranges = message[1], message[2], message[3]
                        reply = merge_ranges(classes_of, counts, ranges, grouper.key_shape(levels)[0])
                    else:  # ("group", levels): this partition's class table
                        classes = grouper.group_rows(message[1])
                        reply = (classes.codes, classes.stats)
                    conn.send(("ok", reply))
                except Exception as exc:  # reported by the owner, which stops the search
                    conn.send(("error", f"{type(exc).__name__}: {str(exc)[:200]}"))
            del grouper, views, classes_of
    finally:
        conn.close()


class ParallelRowGrouper:
    """Groups the rows of a `Grouper`'s table in `workers` processes (one is the caller).

    Attach with `parallel_rows(grouper, workers)`; every `grouper.group_rows` without
    `keep_rows` at a node this pool `takes` then runs here: merged partition class tables
    where the merge stays small, a shuffle where sizes are the only statistic.
    """

    def __init__(self, grouper: Grouper, workers: int) -> None:
        n = grouper.n_rows
        self.workers = max(1, min(int(workers), n))
        self.grouper = grouper
        self.groupings = 0  # row groupings done here (a test can see the workers were used)
        bounds = np.linspace(0, n, self.workers + 1).astype(np.int64)
        self.bounds = bounds
        cache = max(8, (grouper.column_cache_bytes >> 20) // self.workers)
        columns = [grouper.qi_column(i) for i in range(grouper.n_qis)]
        subset = grouper.subset
        sizes = dict(grouper.sensitive_sizes)

        def part(a: np.ndarray | None, p: int) -> np.ndarray | None:
            return None if a is None else a[bounds[p]:bounds[p + 1]]

        self._local = partition_grouper([c[: bounds[1]] for c in columns], grouper.code_maps,
                                         {a: c[: bounds[1]] for a, c in grouper.sensitive_codes.items()},
                                         sizes, part(subset, 0), grouper.sparse, grouper.saturation, cache)
        self._blocks: list[SharedMemory] = []
        self._layouts: list[_Layout] = []
        self._conns: list[Any] = []
        self._procs: list[Any] = []
        # a shuffle needs class sizes to be the only statistic (no per-row histograms to carry)
        self.can_shuffle = not grouper.sensitive_codes and grouper.subset is None
        self.shuffles = 0  # groupings done by a shuffle (a test can see it ran)
        self._shuffle_blocks: list[SharedMemory] = []
        self._classes_of: list[np.ndarray] = []
        ctx = get_context("spawn")
        try:
            if self.can_shuffle:
                for p in range(self.workers):
                    rows = int(bounds[p + 1] - bounds[p])
                    block = create_block(16 * rows)
                    self._shuffle_blocks.append(block)
                    self._classes_of.append(np.ndarray((rows, 2), dtype=np.int64, buffer=block.buf))
            for p in range(1, self.workers):
                arrays = ([(f"qi{i}", level0_part(grouper, i, bounds[p], bounds[p + 1])) for i in range(len(columns))]
                          + [(f"sens:{a}", c[bounds[p]:bounds[p + 1]]) for a, c in grouper.sensitive_codes.items()]
                          + ([("subset", subset[bounds[p]:bounds[p + 1]])] if subset is not None else []))
                layout, block = self._share(arrays, int(bounds[p + 1] - bounds[p]), grouper, cache)
                layout.partition = p
                layout.shuffle_blocks = [b.name for b in self._shuffle_blocks] or None
                layout.partition_rows = [int(bounds[q + 1] - bounds[q]) for q in range(self.workers)]
                parent, child = ctx.Pipe()
                proc = ctx.Process(target=_serve, args=(child, layout), daemon=True,
                                   name=f"fedanon-grouping-{p}")
                with _no_main_import():
                    proc.start()
                child.close()
                self._conns.append(parent)
                self._procs.append(proc)
            for conn in self._conns:
                self._receive(conn)  # "ready": the worker has mapped its partition
        except BaseException:
            self.close()
            raise

    def _share(self, arrays: list[tuple[str, np.ndarray]], n_rows: int, grouper: Grouper,
               cache: int) -> tuple[_Layout, SharedMemory]:
        """Copy one partition's arrays into a new shared-memory block."""
        offsets, total = [], 0
        for _, a in arrays:
            offsets.append(total)
            total += -(-a.nbytes // 64) * 64  # 64-byte aligned
        block = create_block(total)
        self._blocks.append(block)
        layout = _Layout(block.name, n_rows, [(name, a.dtype.str, off) for (name, a), off in zip(arrays, offsets)],
                         grouper.code_maps, dict(grouper.sensitive_sizes), set(grouper.sparse),
                         dict(grouper.saturation), cache)
        for (name, a), view in zip(arrays, _views(block, layout).values()):
            view[:] = a
        self._layouts.append(layout)
        return layout, block

    def held_arrays(self) -> list[dict[str, tuple[str, int]]]:
        """Per worker process, the per-row arrays its partition holds in shared memory for the
        whole search: name -> (dtype, bytes). What a test checks is narrow and a measurement sums."""
        return [{name: (dtype, layout.n_rows * np.dtype(dtype).itemsize) for name, dtype, _ in layout.arrays}
                for layout in self._layouts]

    @staticmethod
    def _receive(conn: Any) -> Any:
        try:
            status, payload = conn.recv()
        except EOFError:
            raise RuntimeError("a grouping worker process ended unexpectedly") from None
        if status == "error":
            raise RuntimeError(f"grouping worker failed: {payload}")
        return payload

    def _small_merge(self, levels: tuple[int, ...]) -> bool:
        """workers x key span <= MERGE_SPAN_SHARE x rows (see there)."""
        return self.workers * self.grouper.key_shape(levels)[1] <= MERGE_SPAN_SHARE * self.grouper.n_rows

    def _shuffled(self, levels: tuple[int, ...]) -> bool:
        """Sizes-only statistics and an exact key: grouped by a shuffle where the merge would be large."""
        return self.can_shuffle and self.grouper.key_shape(levels)[2]

    def takes(self, levels: tuple[int, ...]) -> bool:
        """Nodes whose partition merge stays small, and by a shuffle those with class sizes only."""
        return self._small_merge(levels) or self._shuffled(levels)

    def group_rows(self, levels: tuple[int, ...]) -> Classes:
        levels = tuple(int(x) for x in levels)
        self.groupings += 1
        if not self._small_merge(levels) and self._shuffled(levels):
            return self._shuffle(levels)
        for conn in self._conns:
            conn.send(("group", levels))
        own = self._local.group_rows(levels)
        parts = [(own.codes, own.stats)] + [self._receive(conn) for conn in self._conns]
        radices = self.grouper.key_shape(levels)[0]
        return merge_partition_classes(levels, parts, radices)

    def _shuffle(self, levels: tuple[int, ...]) -> Classes:
        """Group by key ranges (module docstring): every partition's classes, then each process
        merges its ranges over all partitions; concatenated in range order."""
        self.shuffles += 1
        n_ranges = self.workers * SHUFFLE_RANGES_PER_WORKER
        for conn in self._conns:
            conn.send(("classes", levels, n_ranges))
        counts = np.stack([partition_classes(self._local, levels, n_ranges, self._classes_of[0])]
                          + [self._receive(conn) for conn in self._conns])
        mine = [list(range(w, n_ranges, self.workers)) for w in range(self.workers)]
        for w, conn in enumerate(self._conns, start=1):
            conn.send(("merge", levels, counts, mine[w]))
        radices = self.grouper.key_shape(levels)[0]
        parts = [merge_ranges(self._classes_of, counts, mine[0], radices)]
        parts += [self._receive(conn) for conn in self._conns]
        return join_ranges(levels, parts, n_ranges)

    def close(self) -> None:
        """Stop the workers and free the shared memory (idempotent)."""
        for conn in self._conns:
            try:
                conn.send(None)
            except (OSError, ValueError):
                pass
        for proc in self._procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        for conn in self._conns:
            conn.close()
        self._classes_of = []  # views into the shuffle blocks: gone before the blocks are unmapped
        for block in self._blocks + self._shuffle_blocks:
            release(block)
        self._conns, self._procs, self._blocks, self._shuffle_blocks = [], [], [], []


@register_backend("processes")
@contextmanager
def parallel_rows(grouper: Grouper, workers: int) -> Iterator[ParallelRowGrouper | None]:
    """Row groupings of `grouper` in `workers` processes while the block runs (1: no processes).

    Where the partitions do not fit in shared memory (no /dev/shm, or one too small: a
    container's default is 64 MiB, and 4.8 M rows need ~250 MiB) the rows are grouped in
    this process -- the same result, more slowly -- and a warning on the log says why.
    """
    if workers <= 1 or grouper.n_rows < 2:
        yield None
        return
    try:
        pool = ParallelRowGrouper(grouper, workers)
    except OSError as exc:
        _log.warning("--workers %d: %s; grouping in one process (same result)", workers, exc.strerror or exc)
        yield None
        return
    grouper.row_partitions = pool
    try:
        yield pool
    finally:
        grouper.row_partitions = None
        pool.close()
