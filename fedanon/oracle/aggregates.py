"""Independent check of aggregated columns in a written release (`fedanon anonymize --verify`).

Why a second implementation: the release computes the aggregates with vectorized NumPy
(`microagg.classwise`: sorted runs, `reduceat`, float rounding). This module shares no code
with it: it reads the written file back, groups the released rows with a dict by their QI
text, and recomputes each aggregate from its definition in exact arithmetic (`Fraction`,
`Decimal`, `statistics.median`, `Counter`), so a fault in the vectorized path -- or between
the rows in memory and the file -- shows up as a named violation.

The definitions (as documented for aggregated columns): mean rounded half to even to 2
decimals, median (mean of the two middle values of an even class), "[min, max]", mode with
the smallest value winning a tie; numbers written without trailing zeros; a suppressed row
releases '*'.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Mapping, Sequence

from fedanon.data.io.delimited import read_table_csv

MEAN_PLACES = Decimal("0.01")
LISTED = 20


def _text(x: Fraction | Decimal) -> str:
    value = x if isinstance(x, Decimal) else Decimal(x.numerator) / Decimal(x.denominator)
    if value == 0:  # a Decimal zero keeps its sign (a mean of -0.001 rounds to -0.00); a release writes 0
        return "0"
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def expected_aggregate(function: str, values: Sequence[str]) -> str:
    """The released text of a class holding `values` (texts of finite numbers), by definition."""
    xs = [Fraction(Decimal(v.strip())) for v in values]
    if function == "mean":
        mean = sum(xs, Fraction(0)) / len(xs)
        # the release rounds the binary float mean; a mean exactly halfway rounds the same way
        return _text((Decimal(mean.numerator) / Decimal(mean.denominator)).quantize(MEAN_PLACES, ROUND_HALF_EVEN))
    if function == "median":
        return _text(statistics.median(xs))
    if function == "interval":
        return f"[{_text(min(xs))}, {_text(max(xs))}]"
    if function == "mode":
        counts = Counter(xs)
        top = max(counts.values())
        return _text(min(x for x, c in counts.items() if c == top))
    raise ValueError(f"unknown aggregate function {function!r}")


def aggregate_violations(path: object, delimiter: str, raw_columns: Sequence[str], raw_rows: Sequence[Sequence[str]],
                         quasi_identifiers: Sequence[str], functions: Mapping[str, str], *,
                         written: Sequence[bool], suppressed: Sequence[bool], encoding: str = "utf-8") -> list[str]:
    """Violations of the aggregated columns in the written file (empty: all as defined).

    `raw_rows`: the input rows (all, in input order, columns `raw_columns`); `written[i]`
    whether input row i is in the file (in order), `suppressed[i]` whether it was suppressed.
    """
    header, file_rows = read_table_csv(path, delimiter, encoding)
    rows = iter(file_rows)
    pairs = [(raw, next(rows), bool(s)) for raw, w, s in zip(raw_rows, written, suppressed) if w]
    problems: list[str] = []
    qi_out = [header.index(q) for q in quasi_identifiers]
    classes: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i, (_raw, out, hidden) in enumerate(pairs):
        if not hidden:
            classes[tuple(out[c] for c in qi_out)].append(i)
    for name, function in functions.items():
        if name not in header:
            problems.append(f"{path}: aggregated column {name!r} is missing")
            continue
        c_out, c_raw = header.index(name), list(raw_columns).index(name)
        for i, (_raw, out, hidden) in enumerate(pairs):
            if hidden and out[c_out] != "*":
                problems.append(f"{path}: data row {i + 1}: suppressed, but {name!r} holds {out[c_out][:40]!r}")
        for key, members in classes.items():
            want = expected_aggregate(function, [pairs[i][0][c_raw] for i in members])
            wrong = [i for i in members if pairs[i][1][c_out] != want]
            if wrong:
                problems.append(f"{path}: data row {wrong[0] + 1}: {name!r} = {pairs[wrong[0]][1][c_out][:40]!r}, "
                                f"the class {function} is {want!r} ({len(wrong)} row(s) of class {key})")
        if len(problems) > LISTED:
            break
    return problems[:LISTED]
