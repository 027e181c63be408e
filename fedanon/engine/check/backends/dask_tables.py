"""A Parquet dataset read by partition on Dask workers, and its output written there too.

No row passes through the driver. The driver plans partitions from the files' footers
(`data/io/parquet_parts.py`); each worker reads its row groups and dictionary-encodes them
on its own; the driver gathers only the per-partition dictionaries, unifies them and sends
each partition the remap of its local codes onto the global ones, from which the worker
builds the partition grouper the Dask backend checks against. Table-wide counts the search
needs (per-QI value counts, sensitive totals) are sums of per-partition counts. At the
optimum the driver sends the levels and the codes of the classes to suppress; each worker
writes its partition of the output as one Parquet file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.data.io.columnar import narrow_codes
from fedanon.data.io.parquet_parts import LocalColumns, PartitionPlan, plan_partitions, read_partition, \
    unify_dictionaries
from fedanon.engine.check.backends.dask import (DaskRowGrouper, GroupingSetup, Partition, PartitionRows,
                                                new_token, release_futures)
from fedanon.engine.check.grouping import Grouper
from fedanon.errors import InputError
from fedanon.stats.keys import combined_key

SUPPRESSED = "*"


# --------------------------------------------------------------------------- on the workers
def load_partition(plan: PartitionPlan, columns: list[str]) -> LocalColumns:
    return read_partition(plan, columns)


def local_dictionaries(local: LocalColumns) -> list[list[str]]:
    return local.dictionaries


@dataclass
class ColumnRoles:
    """Positions (in the columns read) of the QIs and of the sensitive attributes."""

    qis: list[int]
    sensitive: dict[str, int]


def build_read_partition(local: LocalColumns, remaps: list[np.ndarray], roles: ColumnRoles,
                         setup: GroupingSetup) -> Partition:
    """The partition grouper over global codes (QIs in the narrowest unsigned type of their global
    dictionaries, sensitive int64), the local columns kept for output."""
    # the remap narrowed, not the rows: no wider copy per row is ever made
    columns = [np.take(narrow_codes(remaps[c], int(setup.code_maps[i].shape[1])), local.codes[c])
               for i, c in enumerate(roles.qis)]
    sensitive = {a: np.take(remaps[c], local.codes[c]) for a, c in roles.sensitive.items()}
    part = Partition(PartitionRows(columns, sensitive, None), setup)
    # for output only the other columns' local codes: a QI is written from the grouper's
    # generalized codes, so its local codes (a second copy per row) are dropped here
    qis = set(roles.qis) - set(roles.sensitive.values())
    # (a new empty array, not codes[:0]: a view would keep the whole column alive)
    part.source = LocalColumns([np.zeros(0, dtype=codes.dtype) if c in qis else codes  # type: ignore[attr-defined]
                                for c, codes in enumerate(local.codes)], local.dictionaries)
    return part


def partition_counts(part: Partition, qi_sizes: list[int], sensitive_sizes: dict[str, int]) -> tuple[list, dict]:
    """Per QI the level-0 value counts of this partition; per sensitive attribute its value counts."""
    g = part.grouper
    qis = [np.bincount(g.qi_column(i), minlength=n) for i, n in enumerate(qi_sizes)]
    sens = {a: np.bincount(c, minlength=sensitive_sizes[a]) for a, c in g.sensitive_codes.items()}
    return qis, sens


@dataclass
class OutputPlan:
    """What a worker needs to write its output partition."""

    directory: str
    columns: list[str]                      # names, in the order read
    qi_levels: dict[int, tuple[int, int]]   # column position -> (QI index, level)
    level_values: dict[int, list[str]]      # column position -> the values of its level ("*" appended)
    radices: list[int]
    failing_keys: np.ndarray                # exact mixed-radix keys of the classes to suppress, sorted


WRITE_ROWS = 1 << 22  # rows per written batch: the Arrow copy of a batch, not of the partition


def write_partition(part: Partition, p: int, plan: OutputPlan) -> tuple[int, int]:
    """Write this partition's output file `part-<p>.parquet`; returns (rows, suppressed rows).

    Batch by batch of WRITE_ROWS rows, each a row group: the generalized codes of a batch are
    gathered from the search's cached columns, so the memory on top of the partition is one batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    g = part.grouper
    local: LocalColumns = part.source  # type: ignore[attr-defined]
    levels = [0] * g.n_qis
    for qi, level in plan.qi_levels.values():
        levels[qi] = level
    dictionaries = [pa.array(plan.level_values[c] if c in plan.qi_levels else local.dictionaries[c], type=pa.string())
                    for c in range(len(plan.columns))]
    generalized = [g.column(i, l) for i, l in enumerate(levels)]  # once: 1-2 bytes a row each, not per batch
    columns = [generalized[plan.qi_levels[c][0]] if c in plan.qi_levels else local.codes[c]
               for c in range(len(plan.columns))]
    schema = pa.schema([(name, pa.dictionary(pa.int32(), pa.string())) for name in plan.columns])
    path = Path(plan.directory) / f"part-{p:05d}.parquet"
    suppressed_rows = 0
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, max(g.n_rows, 1), WRITE_ROWS):
            stop = min(g.n_rows, start + WRITE_ROWS)
            suppressed = None
            if plan.failing_keys.size:
                key, _, _ = combined_key([col[start:stop] for col in generalized], plan.radices)
                suppressed = np.isin(key, plan.failing_keys)
                suppressed_rows += int(suppressed.sum())
            arrays = []
            for c in range(len(plan.columns)):
                codes = columns[c][start:stop].astype(np.int32)
                if suppressed is not None and c in plan.qi_levels:
                    codes[suppressed] = len(plan.level_values[c]) - 1  # the appended "*"
                arrays.append(pa.DictionaryArray.from_arrays(pa.array(codes), dictionaries[c]))
            writer.write_table(pa.Table.from_arrays(arrays, schema=schema))
    return g.n_rows, suppressed_rows


# --------------------------------------------------------------------------- the driver's side
class RemoteTable:
    """A Parquet dataset held by Dask workers, one partition each: the driver keeps only its
    column names, the unified dictionaries and the row count."""

    def __init__(self, client: Any, addresses: list[str], path: str | Path, columns: list[str] | None = None) -> None:
        self.client = client
        self.token = new_token()
        names, plans = plan_partitions(path, len(addresses))
        self.columns = list(columns) if columns is not None else names
        missing = [c for c in self.columns if c not in names]
        if missing:
            raise InputError(f"{path}: unknown column(s) {missing}; the dataset has columns: {', '.join(names)}")
        self.addresses = addresses[: len(plans)]
        self.plans = plans
        self.n_rows = sum(p.rows for p in plans)
        self._local = [self._on(p, load_partition, plan, self.columns, name="read")
                       for p, plan in enumerate(plans)]
        per_part = client.gather([self._on(p, local_dictionaries, f, name="dicts") for p, f in enumerate(self._local)])
        self.dictionaries, self._remaps = unify_dictionaries(per_part)
        self.parts: list[Any] = []

    def _on(self, p: int, fn: Any, *args: Any, name: str) -> Any:
        return self.client.submit(fn, *args, workers=[self.addresses[p]], allow_other_workers=False, pure=False,
                                  key=f"fedanon-{name}-{self.token}-{p}")

    def index(self, name: str) -> int:
        return self.columns.index(name)

    def build(self, grouper: Grouper, roles: ColumnRoles, setup: GroupingSetup) -> DaskRowGrouper:
        """Partition groupers over global codes on the workers, attached to the driver's row-less `grouper`."""
        self.parts = [self._on(p, build_read_partition, local, self._remaps[p], roles, setup, name="partition")
                      for p, local in enumerate(self._local)]
        pool = DaskRowGrouper(self.client, grouper, self.addresses, self.parts, self.token)
        pool.wait_built()
        self._local = []  # the partitions hold their local columns now
        grouper.row_partitions = pool
        return pool

    def counts(self, qi_sizes: list[int], sensitive_sizes: dict[str, int]) -> tuple[list[np.ndarray], dict]:
        """Table-wide level-0 value counts per QI and value counts per sensitive attribute."""
        per_part = self.client.gather([self._on(p, partition_counts, f, qi_sizes, sensitive_sizes, name="counts")
                                       for p, f in enumerate(self.parts)])
        qis = [np.sum([c[0][i] for c in per_part], axis=0) for i in range(len(qi_sizes))]
        sens = {a: np.sum([c[1][a] for c in per_part], axis=0) for a in sensitive_sizes}
        return qis, sens

    def write(self, plan: OutputPlan) -> tuple[int, int]:
        """Every partition's output file; (rows, suppressed rows) in total."""
        Path(plan.directory).mkdir(parents=True, exist_ok=True)
        done = self.client.gather([self._on(p, write_partition, f, p, plan, name="write")
                                   for p, f in enumerate(self.parts)])
        return sum(r for r, _ in done), sum(s for _, s in done)

    def close(self) -> None:
        release_futures(self.parts + self._local)
        self.parts, self._local = [], []
