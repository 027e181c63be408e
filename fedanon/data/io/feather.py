"""Arrow IPC / Feather input (pyarrow): `.arrow`, `.feather`, `.fea`, read into dictionary-encoded columns.

Feather version 2 is the Arrow IPC file format, so one reader serves both names; an `.arrow`
file written as an IPC *stream* (no footer) is read as well, and Feather version 1 files as
pyarrow reads them. As for Parquet, every column is read as text (numbers and dates as pyarrow
renders them), so the release equals that of the same table exported to CSV; a column of a
type with no text form (a list, a struct) is refused naming it. The file has rows, not lines:
errors name the data row (1-based).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedanon.data.io.columnar import ColumnarTable, narrow_codes, numpy_integers
from fedanon.data.io.registry import register_reader
from fedanon.errors import InputError


def _read_arrow(path: Path):  # type: ignore[no-untyped-def]
    """The whole file as one pyarrow table: the IPC file format (Feather v2) or Feather v1 first,
    then the IPC stream format."""
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.ipc as ipc

    try:
        return feather.read_table(path, memory_map=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not an Arrow/Feather file") from None
    except (pa.ArrowInvalid, OSError) as file_error:
        try:
            with pa.OSFile(str(path), "rb") as source:
                return ipc.open_stream(source).read_all()
        except (pa.ArrowInvalid, OSError):
            raise InputError(f"{path}: not a readable Arrow IPC / Feather file ({str(file_error)[:200]})") from None


@register_reader("feather", (".arrow", ".feather", ".fea"))
def read_feather(path: Path, delimiter: str = ";", encoding: str = "utf-8") -> ColumnarTable:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = _read_arrow(path)
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
        try:
            text = pc.utf8_trim_whitespace(column.cast(pa.string()))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            raise InputError(f"{path}: column {name!r} of type {column.type} has no text form; "
                             f"store it as text or numbers") from None
        encoded = pc.dictionary_encode(text).combine_chunks()
        values = encoded.dictionary.to_pylist()
        codes.append(narrow_codes(numpy_integers(encoded.indices), len(values)))
        dictionaries.append(values)
    return ColumnarTable(path, columns, codes, dictionaries, delimiter, encoding)  # rows named "row N"
