"""Helpers every builder shares: missing-value tokens, numeric parsing, the final rows."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import InputError

TOP = "*"
# Cells that mean "unknown" in common exports (ADULT uses "?"). They are kept as
# their own branch (the value itself at every level, then "*") instead of failing
# a numeric or date parse.
MISSING = ("", "?", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")


def distinct(values: Iterable[str]) -> list[str]:
    """Distinct values in first-appearance order (stable output files)."""
    return list(dict.fromkeys(str(v) for v in values))


def split_missing(values: Iterable[str], missing: Sequence[str]) -> tuple[list[str], list[str]]:
    present, absent = [], []
    for v in distinct(values):
        (absent if v in missing else present).append(v)
    return present, absent


def parse_number(value: str, attribute: str) -> float:
    try:
        x = float(value)
    except ValueError:
        raise InputError(f"column {attribute!r}: value {value[:200]!r} is not a number "
                         f"(use the mask or order builder for codes and categories)") from None
    if not math.isfinite(x):
        raise InputError(f"column {attribute!r}: value {value[:200]!r} is not a finite number")
    return x


def fmt_number(x: float) -> str:
    """20.0 -> '20', 2.5 -> '2.5' (labels read like the data)."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def finish(attribute: str, rows: list[list[str]], missing_values: list[str], source: str) -> Hierarchy:
    """Append the top level and the missing-value branches; validate via Hierarchy.from_rows."""
    height = len(rows[0]) + 1 if rows else 2
    full = [row + [TOP] for row in rows]
    full += [[m] * (height - 1) + [TOP] for m in missing_values]
    if not full:
        raise InputError(f"column {attribute!r}: no values to build a hierarchy from")
    for row in full:
        for cell in row:
            if ";" in cell or "\n" in cell:
                raise InputError(f"column {attribute!r}: value {cell[:200]!r} contains ';' or a line break, "
                                 f"which the hierarchy CSV cannot hold")
    return Hierarchy.from_rows(attribute, full, source=source)


def fanout_list(fanout: int | Sequence[int]) -> list[int]:
    out = [int(fanout)] if isinstance(fanout, int) else [int(f) for f in fanout]
    if not out or any(f < 2 for f in out):
        raise InputError(f"fan-out must be integers >= 2, got {fanout!r}")
    return out
