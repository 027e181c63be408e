"""Ordered-group hierarchies: neighbours in a given (or natural) order are joined level by level.

Fits ordinal categories (education, income bands, small integer scales): level
j+1 joins `fanout[j]` neighbouring level-j groups; a group is labelled
`first..last`. Nested groups keep the hierarchy monotone.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import InputError
from fedanon.data.builders.common import MISSING, fanout_list, finish, split_missing


def natural_order(values: list[str]) -> list[str]:
    """Numeric order when every value is a number, else alphabetical."""
    try:
        return sorted(values, key=float)
    except ValueError:
        return sorted(values)


def order_hierarchy(
    attribute: str,
    values: Iterable[str],
    *,
    order: Sequence[str] | None = None,
    fanout: int | Sequence[int] = 2,
    missing: Sequence[str] = MISSING,
) -> Hierarchy:
    """`order` lists every value once (values absent from the data are allowed); default: natural order."""
    present, absent = split_missing(values, missing)
    if order is None:
        ordered = natural_order(present)
    else:
        ordered = list(dict.fromkeys(order))
        known = set(ordered)
        unknown = [v for v in present if v not in known]
        if unknown:
            raise InputError(f"column {attribute!r}: value {unknown[0][:200]!r} is not in the given order "
                             f"({len(unknown)} values missing from it)")
    fans = fanout_list(fanout)
    # groups[j] = list of (first index, last index) at level j+1
    levels: list[list[tuple[int, int]]] = []
    current = [(i, i) for i in range(len(ordered))]
    j = 0
    while len(current) > 1:
        f = fans[min(j, len(fans) - 1)]
        current = [(current[i][0], current[min(i + f, len(current)) - 1][1]) for i in range(0, len(current), f)]
        if len(current) > 1:
            levels.append(current)
        j += 1
    # values of the order that the data lacks still get rows: the file stays reusable
    rows = [[v] for v in ordered]
    for groups in levels:
        for first, last in groups:
            label = ordered[first] if first == last else f"{ordered[first]}..{ordered[last]}"
            for i in range(first, last + 1):
                rows[i].append(label)
    if not rows:
        raise InputError(f"column {attribute!r}: no values to order")
    return finish(attribute, rows, absent, source=f"order hierarchy of {attribute!r}")
