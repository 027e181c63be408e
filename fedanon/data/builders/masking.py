"""Masking hierarchies for codes (zip codes, ICD codes): hide characters right to left.

Level j replaces the last j*step characters with the mask character; the value
length is kept, so codes of different length never meet before the top level
and the hierarchy stays monotone.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import InputError
from fedanon.data.builders.common import MISSING, finish, split_missing


def mask_hierarchy(
    attribute: str,
    values: Iterable[str],
    *,
    char: str = "*",
    step: int = 1,
    levels: int | None = None,
    missing: Sequence[str] = MISSING,
) -> Hierarchy:
    """One level per `step` masked characters (up to `levels` masking levels), then '*'."""
    if len(char) != 1 or char == ";":
        raise InputError(f"mask character must be one character other than ';', got {char!r}")
    if step < 1:
        raise InputError(f"mask step must be >= 1, got {step}")
    present, absent = split_missing(values, missing)
    longest = max((len(v) for v in present), default=0)
    n_levels = -(-longest // step) if levels is None else int(levels)
    if n_levels < 0:
        raise InputError(f"mask levels must be >= 0, got {levels}")
    if levels is None and n_levels > 0:
        n_levels -= 1  # fully masked equals the top level '*' in meaning; stop one before
    rows = []
    for v in present:
        row = [v]
        for j in range(1, n_levels + 1):
            hidden = min(len(v), j * step)
            row.append(v[: len(v) - hidden] + char * hidden)
        rows.append(row)
    return finish(attribute, rows, absent, source=f"mask hierarchy of {attribute!r}")
