"""An Arrow table in memory into the one columnar table type: what the Parquet and the Arrow IPC /
Feather readers share once the file is read.

Every column becomes text (numbers and dates as pyarrow renders them, surrounding blanks trimmed)
so that hierarchies and the rest of the pipeline see the values a CSV export of the file would
hold. Such files have rows, not lines: errors name the data row (1-based). pyarrow is optional,
so it is imported where a table is converted, not when the reader registry scans this package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fedanon.data.io.columnar import ColumnarTable, narrow_codes, numpy_integers
from fedanon.errors import InputError


def columnar_from_arrow(path: Path, table: Any, delimiter: str, encoding: str) -> ColumnarTable:
    """Dictionary-encode every column of the pyarrow `table` read from `path`; refuse a file
    without rows, repeated column names, a missing value (naming its row) and a column of a type
    with no text form (a list, a struct), each as one `InputError`."""
    import pyarrow as pa
    import pyarrow.compute as pc

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
