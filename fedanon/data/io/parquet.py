"""Parquet input (pyarrow): a table read straight into dictionary-encoded columns.

Every column is read as text (numbers and dates as pyarrow renders them), so hierarchies and
the rest of the pipeline see the same values a CSV export of the file would hold. A Parquet file
has no lines, so errors name the data row (1-based) instead.
"""

from __future__ import annotations

from pathlib import Path
import numpy as np

from fedanon.data.io.columnar import ColumnarTable, narrow_codes, numpy_integers
from fedanon.data.io.registry import register_reader
from fedanon.errors import InputError


@register_reader("parquet", (".parquet", ".parq", ".pq"))
def read_parquet(path: Path, delimiter: str = ";", encoding: str = "utf-8") -> ColumnarTable:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({str(exc)[:200]})") from None
    if table.num_rows == 0:
        raise InputError(f"{path}: file has no data rows")
    columns = [str(name) for name in table.column_names]
    if len(set(columns)) != len(columns):
        raise InputError(f"{path}: column names repeat: {columns}")
    codes: list[np.ndarray] = []
    dictionaries: list[list[str]] = []
    for name, column in zip(columns, table.columns):
        if column.null_count:
            first = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"{path}, row {first + 1}: column {name!r} has a missing value")
        text = pc.utf8_trim_whitespace(column.cast(pa.string()))
        encoded = pc.dictionary_encode(text).combine_chunks()
        values = encoded.dictionary.to_pylist()
        codes.append(narrow_codes(numpy_integers(encoded.indices), len(values)))
        dictionaries.append(values)
    return ColumnarTable(path, columns, codes, dictionaries, delimiter, encoding)  # rows named "row N"
