"""Interval hierarchies for numbers: fixed-width intervals, coarser by a fan-out per level.

Level 1 puts each value into an interval `[a, b[` of width w1; level j+1 joins
`fanout[j]` neighbouring level-j intervals (or uses the next explicit width, which
must be a multiple of the previous one so every interval lies in exactly one
parent -- that is what keeps the hierarchy monotone). Values below `bottom` /
at or above `top` are coded `<bottom` / `>=top` at every interval level
(bottom/top coding), so outliers do not force wide intervals on everybody.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import InputError
from fedanon.data.builders.common import MISSING, fanout_list, finish, fmt_number, parse_number, split_missing


def nice_width(span: float, target_intervals: int = 10) -> float:
    """A 1/2/5 x 10^k width giving about `target_intervals` intervals over `span`."""
    if span <= 0:
        return 1.0
    raw = span / target_intervals
    exp = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        w = m * 10.0 ** exp
        if w >= raw:
            return float(w) if w < 1 else float(round(w))
    return float(10.0 ** (exp + 1))


def _level_widths(width: float | None, widths: Sequence[float] | None, fanout: list[int],
                  origin: float, hi: float, attribute: str) -> list[float]:
    if widths:
        ws = [float(w) for w in widths]
        if any(w <= 0 for w in ws):
            raise InputError(f"column {attribute!r}: interval widths must be > 0, got {list(widths)}")
        for a, b in zip(ws, ws[1:]):
            ratio = b / a
            if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 2:
                raise InputError(f"column {attribute!r}: each interval width must be a multiple (>= 2x) of the "
                                 f"previous one (got {fmt_number(a)} then {fmt_number(b)})")
        return ws
    if width is None or width <= 0:
        raise InputError(f"column {attribute!r}: interval width must be > 0, got {width!r}")
    ws = [float(width)]
    i = 0
    while origin + ws[-1] <= hi:  # grow until one interval covers every value
        ws.append(ws[-1] * fanout[min(i, len(fanout) - 1)])
        i += 1
    return ws


def _check_positive(width: float | None, widths: Sequence[float] | None, attribute: str) -> None:
    """Every width a finite number > 0 (a zero width would divide by zero while aligning)."""
    given = [float(w) for w in widths] if widths else [width]
    if any(w is None or not (math.isfinite(w) and w > 0) for w in given):
        shown = [fmt_number(w) if w is not None and math.isfinite(w) else str(w) for w in given]
        raise InputError(f"column {attribute!r}: interval width{'s' if widths else ''} must be finite and > 0, "
                         f"got {', '.join(shown)}")


def _drop_single_interval(ws: list[float], coded: bool) -> list[float]:
    """A last level with one interval for all values says nothing '*' does not (unless outliers are coded)."""
    return ws[:-1] if len(ws) > 1 and not coded else ws


def interval_hierarchy(
    attribute: str,
    values: Iterable[str],
    *,
    width: float | None = None,
    widths: Sequence[float] | None = None,
    fanout: int | Sequence[int] = 2,
    bottom: float | None = None,
    top: float | None = None,
    missing: Sequence[str] = MISSING,
) -> Hierarchy:
    """Build an interval hierarchy; `width=None` and no `widths` picks a 1/2/5 width (~10 intervals)."""
    present, absent = split_missing(values, missing)
    numbers = {v: parse_number(v, attribute) for v in present}
    if bottom is not None and top is not None and bottom >= top:
        raise InputError(f"column {attribute!r}: bottom coding {bottom:g} must be below top coding {top:g}")
    inner = [x for x in numbers.values() if (bottom is None or x >= bottom) and (top is None or x < top)]
    lo = bottom if bottom is not None else (min(inner) if inner else 0.0)
    hi = (top if top is not None else (max(inner) if inner else lo)) - (1e-12 if top is not None else 0.0)
    if width is None and not widths:
        width = nice_width(hi - lo)
    _check_positive(width, widths, attribute)  # before any division by a width
    first = float(widths[0]) if widths else float(width)  # type: ignore[arg-type]
    # align to the second level's width too, so coarser labels start on round numbers
    align = float(widths[1]) if widths and len(widths) > 1 else first * fanout_list(fanout)[0]
    origin = lo if bottom is not None else math.floor(lo / align) * align
    ws = _level_widths(width, widths, fanout_list(fanout), origin, hi, attribute)
    if not widths:
        ws = _drop_single_interval(ws, bottom is not None or top is not None)
    rows: list[list[str]] = []
    for v, x in numbers.items():
        row = [v]
        for w in ws:
            if bottom is not None and x < bottom:
                row.append(f"<{fmt_number(bottom)}")
            elif top is not None and x >= top:
                row.append(f">={fmt_number(top)}")
            else:
                start = origin + math.floor((x - origin) / w + 1e-9) * w
                end = start + w
                if top is not None:
                    end = min(end, top)
                row.append(f"[{fmt_number(start)}, {fmt_number(end)}[")
        rows.append(row)
    return finish(attribute, rows, absent, source=f"interval hierarchy of {attribute!r}")
