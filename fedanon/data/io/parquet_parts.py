"""Parquet input read by partition: a file or a directory of files cut into row-group partitions.

Why: a table of 100 M rows should be read where it is grouped -- each worker of a cluster
reads its own row groups straight from the files -- so no row passes through the process
that runs the search. That process needs only the dictionaries (to build code maps from the
hierarchies), and those are small: each partition is dictionary-encoded on its own
(`read_partition`), returns its local dictionaries, and `unify_dictionaries` makes one
dictionary per column plus, per partition, the remap from its local codes to the global
ones (first appearance in partition order, which is the order one reader of the whole
dataset gives). Cells are read as text exactly as `parquet.read_parquet` reads them, so a
partitioned read and a whole-file read encode the same values.

The plan (`plan_partitions`) reads only file footers: the row groups of every file, in
file-name order, are cut into contiguous runs of about equal rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from fedanon.data.io.delimited import narrow_codes, numpy_integers
from fedanon.errors import InputError

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")


@dataclass
class RowGroups:
    """Some row groups of one file: what one partition reads of that file."""

    path: str
    groups: list[int]
    first_row: int  # the 0-based row of the file where the first of these groups starts
    rows: int


@dataclass
class PartitionPlan:
    """One partition: runs of row groups, in dataset order."""

    pieces: list[RowGroups] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.pieces)


@dataclass
class LocalColumns:
    """One partition's columns, dictionary-encoded on their own: codes (narrowest unsigned) and dictionaries."""

    codes: list[np.ndarray]
    dictionaries: list[list[str]]

    @property
    def n_rows(self) -> int:
        return int(self.codes[0].shape[0]) if self.codes else 0


def dataset_files(path: str | Path) -> list[Path]:
    """The Parquet files of `path`: the file itself, or a directory's Parquet files by name."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in PARQUET_SUFFIXES and p.is_file())
        if not files:
            raise InputError(f"{path}: directory holds no Parquet files ({', '.join(PARQUET_SUFFIXES)})")
        return files
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    return [path]


def plan_partitions(path: str | Path, parts: int) -> tuple[list[str], list[PartitionPlan]]:
    """(column names, at most `parts` partitions of about equal rows) from the files' footers only."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    units: list[tuple[str, int, int, int]] = []  # (file, row group, first row in file, rows)
    columns: list[str] | None = None
    for f in dataset_files(path):
        try:
            meta = pq.ParquetFile(f).metadata
        except (pa.ArrowInvalid, OSError) as exc:
            raise InputError(f"{f}: not a readable Parquet file ({str(exc)[:200]})") from None
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        if columns is None:
            columns = names
            if len(set(names)) != len(names):
                raise InputError(f"{f}: column names repeat: {names}")
        elif names != columns:
            raise InputError(f"{f}: columns {names} differ from the first file's {columns}")
        first = 0
        for g in range(meta.num_row_groups):
            rows = meta.row_group(g).num_rows
            if rows:
                units.append((str(f), g, first, rows))
            first += rows
    total = sum(u[3] for u in units)
    if total == 0:
        raise InputError(f"{path}: no data rows")
    parts = max(1, min(int(parts), len(units)))
    plans = [PartitionPlan() for _ in range(parts)]
    done = 0
    for f, g, first, rows in units:  # a unit goes to the partition its first row falls in
        p = min(parts - 1, done * parts // total)
        pieces = plans[p].pieces
        if pieces and pieces[-1].path == f and pieces[-1].groups[-1] == g - 1:
            pieces[-1].groups.append(g)
            pieces[-1].rows += rows
        else:
            pieces.append(RowGroups(f, [g], first, rows))
        done += rows
    return list(columns or []), [p for p in plans if p.pieces]


def read_partition(plan: PartitionPlan, columns: list[str]) -> LocalColumns:
    """Read one partition's row groups (only `columns`) and dictionary-encode each column as text.

    Text columns are read dictionary-encoded as they are stored, and any other column is
    dictionary-encoded first, so only each chunk's distinct values are cast to text and
    trimmed: a partition of tens of millions of rows never becomes one string per cell.
    Values equal after trimming share one code, as in `parquet.read_parquet`."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    index: list[dict[str, int]] = [{} for _ in columns]
    chunks: list[list[np.ndarray]] = [[] for _ in columns]
    for piece in plan.pieces:
        table = pq.ParquetFile(piece.path, read_dictionary=columns).read_row_groups(piece.groups, columns=columns)
        for c, (name, column) in enumerate(zip(columns, table.columns)):
            if column.null_count:
                row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
                raise InputError(f"{piece.path}, row {piece.first_row + row + 1}: column {name!r} has a missing value")
            for chunk in column.chunks:
                if not pa.types.is_dictionary(chunk.type):
                    chunk = pc.dictionary_encode(chunk)
                values = pc.utf8_trim_whitespace(chunk.dictionary.cast(pa.string())).to_pylist()
                seen = index[c]
                remap = np.fromiter((seen.setdefault(v, len(seen)) for v in values), dtype=np.int64,
                                    count=len(values))
                # each chunk's codes at once in the narrowest type for the values seen so far
                # (concatenation widens earlier chunks where later ones need more)
                chunks[c].append(np.take(narrow_codes(remap, len(seen)), numpy_integers(chunk.indices)))
    codes = [narrow_codes(np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint8), len(seen))
             for parts, seen in zip(chunks, index)]
    return LocalColumns(codes, [list(seen) for seen in index])


def unify_dictionaries(per_partition: list[list[list[str]]]) -> tuple[list[list[str]], list[list[np.ndarray]]]:
    """(one dictionary per column, per partition and column the remap local code -> global code).

    Values keep their first appearance in partition order; remaps are int64 arrays indexed by
    a partition's local codes."""
    n_columns = len(per_partition[0]) if per_partition else 0
    merged: list[list[str]] = []
    remaps: list[list[np.ndarray]] = [[] for _ in per_partition]
    for c in range(n_columns):
        index: dict[str, int] = {}
        for p, dictionaries in enumerate(per_partition):
            remaps[p].append(np.fromiter((index.setdefault(v, len(index)) for v in dictionaries[c]),
                                         dtype=np.int64, count=len(dictionaries[c])))
        merged.append(list(index))
    return merged, remaps
