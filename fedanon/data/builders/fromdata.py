"""Builders applied to the values of a table column, with defaults chosen from the data.

`auto` looks at the values: dates -> date hierarchy, numbers -> intervals,
equal-length codes of digits/letters (zip, ICD) -> masking, anything else ->
ordered groups in alphabetical order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import InputError
from fedanon.data.builders.common import MISSING, split_missing
from fedanon.data.builders.dates import date_hierarchy, detect_format
from fedanon.data.builders.intervals import interval_hierarchy
from fedanon.data.builders.masking import mask_hierarchy
from fedanon.data.builders.ordered import order_hierarchy

BUILDERS: dict[str, Callable[..., Hierarchy]] = {
    "interval": interval_hierarchy,
    "mask": mask_hierarchy,
    "order": order_hierarchy,
    "date": date_hierarchy,
}


def column_values(path: str | Path, column: str, delimiter: str = ";", encoding: str = "utf-8") -> list[str]:
    """Distinct values of one column of a CSV table (first-appearance order)."""
    from fedanon.data.io.columnar import delimiter_hint
    from fedanon.data.io.delimited import read_table_csv

    header, rows = read_table_csv(path, delimiter, encoding)
    if column not in header:
        raise InputError(f"{path}, line 1: unknown column {column!r}; the table has columns: {', '.join(header)}"
                         f"{delimiter_hint(header, delimiter)}")
    c = header.index(column)
    return list(dict.fromkeys(row[c] for row in rows))


def _is_number(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def guess_kind(values: Sequence[str]) -> str:
    """Which builder fits these values best (see module docstring)."""
    present, _ = split_missing(values, MISSING)
    if not present:
        return "order"
    lengths = {len(v) for v in present}
    if len(lengths) == 1 and all(v.isalnum() for v in present) and not all(v.isdigit() for v in present) \
            and len(present) > 10:
        return "mask"
    if len(lengths) == 1 and all(v.isdigit() for v in present) and next(iter(lengths)) >= 4 and present[0][0] == "0":
        return "mask"  # zero-padded codes are codes, not quantities
    if detect_format(present) is not None and not all(v.isdigit() for v in present):
        return "date"
    if all(_is_number(v) for v in present):
        if len(lengths) == 1 and next(iter(lengths)) >= 5 and all(v.isdigit() for v in present):
            return "mask"  # five-digit zip codes and the like
        return "interval"
    return "order"


def build_for_values(kind: str, attribute: str, values: Sequence[str], **options: Any) -> Hierarchy:
    """Build a hierarchy of `kind` (a BUILDERS key or 'auto') for these values."""
    if kind == "auto":
        kind = guess_kind(values)
        present, _ = split_missing(values, MISSING)
        if kind == "order" and "fanout" not in options and not all(_is_number(v) for v in present):
            # unordered categories: a flat hierarchy (value -> '*') is the only neutral choice
            options = {**options, "fanout": max(2, len(present))}
    builder = BUILDERS.get(kind)
    if builder is None:
        raise InputError(f"unknown hierarchy kind {kind!r}; choose one of: auto, {', '.join(BUILDERS)}")
    return builder(attribute, values, **options)
