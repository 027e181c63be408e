"""Parquet input (pyarrow): a table read straight into dictionary-encoded columns.

Every column is read as text (numbers and dates as pyarrow renders them, see
`arrowtables.columnar_from_arrow`), so hierarchies and the rest of the pipeline see the same values
a CSV export of the file would hold. A Parquet file has no lines, so errors name the data row
(1-based) instead.
"""

from __future__ import annotations

from pathlib import Path

from fedanon.data.io.arrowtables import columnar_from_arrow
from fedanon.data.io.columnar import ColumnarTable
from fedanon.data.io.registry import register_reader
from fedanon.errors import InputError


@register_reader("parquet", (".parquet", ".parq", ".pq"))
def read_parquet(path: Path, delimiter: str = ";", encoding: str = "utf-8") -> ColumnarTable:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({str(exc)[:200]})") from None
    return columnar_from_arrow(path, table, delimiter, encoding)
