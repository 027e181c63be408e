"""CSV columns as numbers and numbers back as CSV text, with errors naming file, line and value.

Why here and not in the command: the API's users read files too, and both must reject a
non-numeric cell the same way (one line: file, line, column, value).
"""

from __future__ import annotations

import math

import numpy as np

from fedanon.data.io.columnar import ColumnarTable
from fedanon.errors import InputError, clip


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def numeric_column(table: ColumnarTable, name: str) -> np.ndarray:
    """Column `name` as float64; InputError at the first cell that is not a finite number."""
    c = table.index(name)
    dictionary = table.dictionaries[c]
    numbers = [_number(v) for v in dictionary]
    bad = [code for code, value in enumerate(numbers) if value is None]
    if bad:
        codes = table.codes[c]
        row = int(np.flatnonzero(np.isin(codes, bad))[0])
        line = table.line_numbers([row])[0]
        value = dictionary[int(codes[row])]
        what = "an empty cell" if value == "" else f"{clip(value)!r}"
        raise InputError(f"{table.source}, line {line}: column {name!r} must hold numbers, got {what}")
    return np.asarray(numbers, dtype=np.float64)[table.codes[c]]


def number_text(value: float) -> str:
    """Shortest text that reads back as the same float; integral values without '.0'."""
    return np.format_float_positional(value, trim="-")


def encode_numbers(values: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Codes and dictionary (as `write_columns` takes them) for a float column."""
    distinct, codes = np.unique(values, return_inverse=True)
    return codes.reshape(-1), [number_text(float(v)) for v in distinct]
