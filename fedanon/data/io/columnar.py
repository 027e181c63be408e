"""The one table type from reading to the engine: per-column codes plus dictionaries.

Readers (one module per format, `fedanon.data.io.registry`) return a `ColumnarTable`; the
commands, the party daemons and the Python API prepare inputs on it and hand the engine its
`encoded()` form. No Python object per row is built on the way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from fedanon.data.table import EncodedTable
from fedanon.errors import InputError

DEFAULT_DELIMITER = ";"
DEFAULT_ENCODING = "utf-8"


def narrow_codes(codes: np.ndarray, size: int) -> np.ndarray:
    """The codes in the narrowest unsigned integer type that holds `size` distinct values."""
    dtype = np.uint8 if size <= 1 << 8 else np.uint16 if size <= 1 << 16 else np.uint32
    return codes.astype(dtype, copy=False)


def numpy_integers(array) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The values of a pyarrow integer array without nulls as a NumPy array (a view)."""
    if array.null_count:
        raise ValueError("integer array with nulls")  # pragma: no cover - codes never have nulls
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def delimiter_hint(columns: Sequence[str], delimiter: str) -> str:
    """'; ... try --delimiter X' when a one-column header holds another common delimiter, else ''.

    Why: a comma-separated file read with the default ';' has a single column named
    `age,sex,...`, and "unknown column 'age'" alone does not say why.
    """
    if len(columns) != 1:
        return ""
    for candidate in (",", ";", "\t", "|"):
        if candidate != delimiter and candidate in columns[0]:
            shown = "'\\t'" if candidate == "\t" else candidate
            return f"; the header is a single column holding {candidate!r}: try --delimiter {shown}"
    return ""


@dataclass
class ColumnarTable:
    """A table as per-column integer codes plus per-column dictionaries of distinct values.

    `codes[c][r]` is the index of row r's value in `dictionaries[c]`; codes use the
    narrowest unsigned integer type that fits, and are assigned in order of first
    appearance. Row r is data row r (0-based) of `source`. Every reader returns this type
    (a subclass where the format has its own way to point at a row, see `where`).
    """

    source: Path
    columns: list[str]
    codes: list[np.ndarray]
    dictionaries: list[list[str]]
    delimiter: str = DEFAULT_DELIMITER
    encoding: str = DEFAULT_ENCODING

    @property
    def n_rows(self) -> int:
        return int(self.codes[0].shape[0]) if self.codes else 0

    def index(self, name: str) -> int:
        try:
            return self.columns.index(name)
        except ValueError:
            raise InputError(f"{self.source}, line 1: unknown column {name!r}; the table has columns: "
                             f"{', '.join(self.columns)}{delimiter_hint(self.columns, self.delimiter)}") from None


    def where(self, rows: Sequence[int]) -> list[str]:
        """How an error message points at each data row (0-based): "row N" (1-based) unless the
        format knows better (a text file names its physical line)."""
        return [f"row {int(r) + 1}" for r in rows]

    def select(self, names: Sequence[str]) -> "ColumnarTable":
        idx = [self.index(n) for n in names]
        return dataclasses.replace(self, columns=list(names), codes=[self.codes[i] for i in idx],
                                   dictionaries=[self.dictionaries[i] for i in idx])

    def encoded(self):  # type: ignore[no-untyped-def]
        """The engine's `EncodedTable` (int32 code matrix, UTF-8 byte dictionaries).

        The matrix is column-major: every column is contiguous, so the engine's grouper
        and the writer use its columns as they are instead of copying each one.
        """
        matrix = np.empty((self.n_rows, len(self.columns)), dtype=np.int32, order="F")
        for c, codes in enumerate(self.codes):
            matrix[:, c] = codes
        return EncodedTable(list(self.columns), matrix,
                            [[v.encode("utf-8") for v in d] for d in self.dictionaries])

    def rows(self) -> list[list[str]]:
        """Row-wise strings, for the few callers that need rows (protocol shares, verifier)."""
        columns = [np.asarray(d, dtype=object)[codes] if d else np.empty(len(codes), dtype=object)
                   for codes, d in zip(self.codes, self.dictionaries)]
        return [list(row) for row in zip(*columns)] if columns else []
