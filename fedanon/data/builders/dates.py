"""Date hierarchies: a date generalizes to its month, quarter, year, decade (a nested chain).

Only nested units are offered (a week can straddle two months, so it is left
out): that is what makes the result monotone.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Iterable, Sequence

from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import InputError
from fedanon.data.builders.common import MISSING, finish, split_missing

UNITS = ("month", "quarter", "year", "decade", "century")
FORMATS = ("%Y-%m-%d", "%d.%m.%Y", "%m/%d/%Y", "%Y/%m/%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y%m%d")


def _label(d: date, unit: str) -> str:
    if unit == "month":
        return f"{d.year:04d}-{d.month:02d}"
    if unit == "quarter":
        return f"{d.year:04d}-Q{(d.month - 1) // 3 + 1}"
    if unit == "year":
        return f"{d.year:04d}"
    if unit == "decade":
        start = d.year // 10 * 10
        return f"{start}-{start + 9}"
    start = d.year // 100 * 100
    return f"{start}-{start + 99}"


def detect_format(values: Sequence[str]) -> str | None:
    """The first known format that parses every value, or None."""
    for fmt in FORMATS:
        try:
            for v in values:
                datetime.strptime(v, fmt)
        except ValueError:
            continue
        return fmt
    return None


def _parses(value: str, fmt: str) -> bool:
    try:
        datetime.strptime(value, fmt)
        return True
    except ValueError:
        return False


def _undetected(attribute: str, present: Sequence[str]) -> str:
    """Why no format fits: name a value that breaks the format most values have.

    Why not just the first value: with one invalid date (`2020-02-30`) among valid
    ones, the first value is usually valid, and naming it sends the user looking at
    the wrong cell.
    """
    counts = {fmt: sum(_parses(v, fmt) for v in present) for fmt in FORMATS}
    best = max(FORMATS, key=lambda f: counts[f])  # first of the best on a tie (FORMATS order)
    if not present or counts[best] == 0:
        example = present[0][:200] if present else ""
        return (f"column {attribute!r}: cannot detect the date format of e.g. {example!r}; "
                f"give one with --format (strptime pattern, e.g. %d.%m.%Y)")
    bad = [v for v in present if not _parses(v, best)]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return (f"column {attribute!r}: value {bad[0][:200]!r}{more} is not a valid date in the format {best!r} "
            f"(which {counts[best]} of the {len(present)} values have); correct it, or give --format")


def date_hierarchy(
    attribute: str,
    values: Iterable[str],
    *,
    format: str | None = None,
    units: Sequence[str] = ("month", "year", "decade"),
    missing: Sequence[str] = MISSING,
) -> Hierarchy:
    """`format` is a strptime pattern (detected among common ones when None)."""
    present, absent = split_missing(values, missing)
    bad = [u for u in units if u not in UNITS]
    if bad:
        raise InputError(f"unknown date level {bad[0]!r}; choose from {', '.join(UNITS)}")
    idx = [UNITS.index(u) for u in units]
    if idx != sorted(set(idx)) or not idx:
        raise InputError(f"date levels must be distinct and go from fine to coarse ({', '.join(UNITS)}), "
                         f"got {', '.join(units)}")
    fmt = format or detect_format(present)
    if fmt is None:
        raise InputError(_undetected(attribute, present))
    rows = []
    for v in present:
        try:
            d = datetime.strptime(v, fmt).date()
        except ValueError:
            raise InputError(f"column {attribute!r}: value {v[:200]!r} does not match the date format {fmt!r}") from None
        rows.append([v] + [_label(d, u) for u in units])
    return finish(attribute, rows, absent, source=f"date hierarchy of {attribute!r}")
