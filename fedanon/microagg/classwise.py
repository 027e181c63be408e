"""Per-class aggregation: a numeric attribute released as its equivalence class's aggregate.

After an anonymization has chosen its transformation, an *aggregated* attribute is not
generalized through a hierarchy: every released row carries its class's mean, median,
interval "[min, max]" or mode, where the classes are the released rows grouped by their
generalized quasi-identifier values. Suppressed rows release '*'. The search never sees
an aggregated attribute (it is not a quasi-identifier, as in ARX), so the transformation,
the suppressed rows and every privacy guarantee are those of the run without it; since the
value is identical within a class, it tells an attacker nothing that singles out a row
of the class.

The released text, for each function (computed on the class's values sorted, so the
answer depends on the multiset of values only, never on row order -- a protocol delivers
its rows permuted and must release the same text as the local run):

* mean: the arithmetic mean rounded to MEAN_DECIMALS decimals, a tie to the even last digit,
  written without trailing zeros (39.5, 40, 39.33);
* median: the middle value, or the mean of the two middle values of an even-sized class;
* interval: "[min, max]" (also when equal);
* mode: the most frequent value; a tie goes to the smallest of the tied values.

The arithmetic is exact: the values (read from decimal texts) are taken as integers in
units of 10^-d for the smallest d that holds them all (`fixed_point`), so sums, the
rounding of the mean and the midpoint of the median are decided on exact integers and the
text is the exact decimal. Values needing more than MAX_DECIMALS decimals, or sums beyond
int64, fall back to binary floating point (the shortest text that reads back as the float).

Information loss per aggregated attribute is SSE/SST (as `quality.sse_sst` defines it): SST the sum of
squared deviations of the released scope's values from their mean, SSE the sum of squared
differences between each value and its released number -- the released aggregate (for an
interval, its midpoint), and for a suppressed row the overall mean, so a suppressed row
loses its whole share of SST. 0 = nothing lost, 1 = no more than the overall mean tells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from fedanon.data.table import EncodedTable
from fedanon.microagg.io import number_text
from fedanon.stats.keys import group_keys

FUNCTIONS = ("mean", "median", "interval", "mode")
MEAN_DECIMALS = 2
MAX_DECIMALS = 9          # finer values are aggregated in binary floating point
SUM_LIMIT = float(2 ** 62)
FLOAT_EXACT = float(2 ** 53)  # integers (and their sums) below this are exact in float64  # bound on |value| x 10^d x rows x 200: class sums (x 100 for the mean) stay in int64
SUPPRESSED = "*"


def check_function(name: str) -> str:
    """The function's name, or ValueError naming the known ones."""
    if name not in FUNCTIONS:
        raise ValueError(f"unknown aggregate function {name!r}; known: {', '.join(FUNCTIONS)}")
    return name


def parse_numbers(texts: Sequence[str]) -> tuple[np.ndarray, int | None]:
    """Floats of `texts` and the index of the first text that is not a finite number (None: all are)."""
    out = np.empty(len(texts), dtype=np.float64)
    for i, text in enumerate(texts):
        try:
            value = float(text)
        except ValueError:
            return out, i
        if not np.isfinite(value):
            return out, i
        out[i] = value
    return out, None


def class_labels(qi_codes: Sequence[np.ndarray], radices: Sequence[int], released: np.ndarray) -> np.ndarray:
    """Each row's released class (0..g-1, in ascending order of the QI code tuples), -1 for a row
    not released (suppressed, or outside the research subset)."""
    released = np.asarray(released, dtype=bool)
    labels = np.full(released.shape[0], -1, dtype=np.int64)
    rows = np.flatnonzero(released)
    if rows.size == 0:
        return labels
    if not qi_codes:  # no quasi-identifier: the whole release is one class
        labels[rows] = 0
        return labels
    _first, inverse = group_keys([np.asarray(c)[rows].astype(np.int64) for c in qi_codes], list(radices))
    labels[rows] = inverse.reshape(-1)
    return labels


def fixed_point(values: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(integers, d) with values = integers / 10^d exactly for the smallest d <= MAX_DECIMALS, or
    None when there is no such d or a class sum could leave int64.

    Why: the values come from decimal texts; as units of 10^-d they are exact integers, so
    sums, means and midpoints are exact (no binary rounding, no dependence on summation
    order) and the released text is the decimal the definition gives (0.1 and 0.2 have the
    median 0.15, not 0.15000000000000002).
    """
    if values.size == 0:
        return np.zeros(0, dtype=np.int64), 0
    top = float(np.abs(values).max())
    for d in range(MAX_DECIMALS + 1):
        scaled = values * 10.0 ** d
        if top * 10.0 ** d * values.size * 200 >= SUM_LIMIT:
            return None
        ints = np.rint(scaled)
        if np.array_equal(ints / 10.0 ** d, values):
            return ints.astype(np.int64), d
    return None


def decimal_text(numerator: int, exponent: int) -> str:
    """numerator / 10^exponent written exactly, without trailing zeros (-0.05, 40, 39.5)."""
    sign = "-" if numerator < 0 else ""
    digits = str(abs(numerator)).rjust(exponent + 1, "0")
    whole, frac = (digits[:-exponent], digits[-exponent:]) if exponent else (digits, "")
    frac = frac.rstrip("0")
    return sign + whole + ("." + frac if frac else "") if (whole != "0" or frac) else "0"


def round_half_even(numerator: int, denominator: int) -> int:
    """numerator / denominator (> 0) rounded to an integer, a tie to the even one."""
    q, r = divmod(numerator, denominator)
    if 2 * r > denominator or (2 * r == denominator and q % 2):
        q += 1
    return q


def class_aggregates(values: np.ndarray, labels: np.ndarray, function: str) -> tuple[list[str], np.ndarray]:
    """(released text, released number) of each class 0..g-1 of the rows with label >= 0.

    The released number is what SSE compares with: the aggregate itself, an interval's midpoint.
    """
    check_function(function)
    keep = labels >= 0
    lab, val = labels[keep], np.asarray(values, dtype=np.float64)[keep]
    if lab.size == 0:
        return [], np.zeros(0)
    exact = fixed_point(val)
    if exact is None:
        return _float_aggregates(val, lab, function)
    ints, d = exact
    sizes = np.bincount(lab)
    sums = None
    if function == "mean" and float(np.abs(ints).max()) * ints.size < FLOAT_EXACT:
        # integer sums below 2^53 are exact in float64 whatever the order: one pass, no sort
        sums = np.rint(np.bincount(lab, weights=ints.astype(np.float64), minlength=sizes.size)).astype(np.int64)
    else:
        lab, ints = _sorted_by_class(lab, ints)  # by class, then value: the multiset, not row order, decides
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        last = starts + sizes - 1
    if function == "mean":
        if sums is None:
            sums = np.add.reduceat(ints, starts)  # int64, exact (fixed_point bounds every sum)
        hundredths = [round_half_even(int(t) * 10 ** MEAN_DECIMALS, int(n) * 10 ** d)
                      for t, n in zip(sums.tolist(), sizes.tolist())]
        texts = [decimal_text(q, MEAN_DECIMALS) for q in hundredths]
        numbers = np.asarray(hundredths, dtype=np.float64) / 10 ** MEAN_DECIMALS
    elif function == "median":
        twice = ints[starts + (sizes - 1) // 2] + ints[starts + sizes // 2]  # the two middle values (equal if odd)
        texts = [decimal_text(int(t) * 5, d + 1) for t in twice.tolist()]
        numbers = twice / (2.0 * 10 ** d)
    elif function == "interval":
        lo, hi = ints[starts], ints[last]
        texts = [f"[{decimal_text(a, d)}, {decimal_text(b, d)}]" for a, b in zip(lo.tolist(), hi.tolist())]
        numbers = (lo + hi) / (2.0 * 10 ** d)
    else:  # mode
        best = _modes(ints, lab, sizes.size)
        texts = [decimal_text(int(v), d) for v in best.tolist()]
        numbers = best / 10.0 ** d
    return texts, np.asarray(numbers, dtype=np.float64)


def _sorted_by_class(lab: np.ndarray, ints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows sorted by (class, value): one sort of a combined int64 key where class x value span
    fits (several times faster than a two-key lexsort), else the lexsort."""
    lo = int(ints.min())
    span = int(ints.max()) - lo + 1
    classes = int(lab.max()) + 1
    if classes * span < 2 ** 62:
        key = np.sort(lab.astype(np.int64) * span + (ints - lo))
        return key // span, key % span + lo
    order = np.lexsort((ints, lab))
    return lab[order], ints[order]


def _modes(ordered: np.ndarray, lab: np.ndarray, classes: int) -> np.ndarray:
    """Per class the most frequent value, the smallest among equally frequent ones; rows sorted
    by (class, value)."""
    new_run = np.ones(ordered.size, dtype=bool)
    new_run[1:] = (lab[1:] != lab[:-1]) | (ordered[1:] != ordered[:-1])
    run_starts = np.flatnonzero(new_run)
    run_counts = np.diff(np.append(run_starts, ordered.size))
    run_label, run_value = lab[run_starts], ordered[run_starts]
    best = np.lexsort((run_value, -run_counts, run_label))  # per class: highest count, then smallest value
    first = np.ones(best.size, dtype=bool)
    first[1:] = run_label[best][1:] != run_label[best][:-1]
    out = np.zeros(classes, dtype=ordered.dtype)
    out[run_label[best][first]] = run_value[best][first]
    return out


def _float_aggregates(val: np.ndarray, lab: np.ndarray, function: str) -> tuple[list[str], np.ndarray]:
    """The aggregates in binary floating point, for values no decimal scale holds exactly
    (more than MAX_DECIMALS decimals, or sums beyond int64): the mean is the sum of the
    class's values in ascending order, divided and rounded by numpy."""
    order = np.lexsort((val, lab))
    lab, val = lab[order], val[order]
    sizes = np.bincount(lab)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    if function == "mean":
        numbers = np.round(np.add.reduceat(val, starts) / sizes, MEAN_DECIMALS)
    elif function == "median":
        numbers = (val[starts + (sizes - 1) // 2] + val[starts + sizes // 2]) / 2.0
    elif function == "interval":
        lo, hi = val[starts], val[starts + sizes - 1]
        return ([f"[{number_text(float(a))}, {number_text(float(b))}]" for a, b in zip(lo, hi)],
                (lo + hi) / 2.0)
    else:
        numbers = _modes(val, lab, sizes.size)
    return [number_text(float(x)) for x in numbers], numbers


@dataclass
class AggregatedColumn:
    """One aggregated attribute of a release: each class's text and number, each row's class,
    and the loss figures."""

    name: str
    function: str
    labels: np.ndarray               # each row's class, -1 for a row not released
    class_texts: list[str]
    class_numbers: np.ndarray
    loss: dict[str, Any] = field(default_factory=dict)

    def encoded(self) -> tuple[np.ndarray, list[bytes]]:
        """(codes, dictionary) of the released texts, SUPPRESSED for rows not released, for an
        `EncodedTable` column: one lookup per row, no Python object per row."""
        distinct, class_code = np.unique(np.asarray(self.class_texts + [SUPPRESSED], dtype=object),
                                         return_inverse=True)
        class_code = class_code.reshape(-1).astype(np.int32)
        codes = class_code[self.labels]  # label -1 picks the last entry: SUPPRESSED
        return codes, [str(t).encode("utf-8") for t in distinct]

    def numbers(self) -> np.ndarray:
        """Each row's released number; NaN for a row not released."""
        out = np.full(self.labels.size, np.nan)
        released = self.labels >= 0
        out[released] = self.class_numbers[self.labels[released]]
        return out

    def texts(self) -> list[str]:
        codes, dictionary = self.encoded()
        words = [d.decode("utf-8") for d in dictionary]
        return [words[c] for c in codes.tolist()]


def aggregate_column(name: str, values: np.ndarray, labels: np.ndarray, function: str,
                     scope: np.ndarray | None = None) -> AggregatedColumn:
    """Release `values` (one per row) as their class's aggregate; labels -1 = not released.

    `scope`: the rows the release speaks for (all rows, or a research subset); SSE/SST is
    computed over them, suppressed ones counted with the scope's mean.
    """
    values = np.asarray(values, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    scope = np.ones(values.size, dtype=bool) if scope is None else np.asarray(scope, dtype=bool)
    class_texts, class_numbers = class_aggregates(values, labels, function)
    column = AggregatedColumn(name, function, labels, class_texts, class_numbers)
    released = labels >= 0
    column.loss = within_class_loss(values[scope], column.numbers()[scope], released[scope])
    column.loss.update({"function": function, "classes": len(class_texts), "released_rows": int(released.sum()),
                        "suppressed_rows": int((scope & ~released).sum())})
    return column


def within_class_loss(values: np.ndarray, numbers: np.ndarray, released: np.ndarray) -> dict[str, Any]:
    """SSE, SST and SSE/SST of releasing `numbers` for `values` (see the module docstring).

    Unstandardized sums in the column's units; their ratio equals `quality.sse_sst`'s figure
    for one attribute (standardizing scales SSE and SST alike)."""
    if values.size == 0:
        return {"sse": 0.0, "sst": 0.0, "sse_sst": 0.0}
    mean = values.mean()
    stand_in = np.where(released, numbers, mean)
    sst = float(((values - mean) ** 2).sum())
    sse = float(((values - stand_in) ** 2).sum())
    return {"sse": sse, "sst": sst, "sse_sst": sse / sst if sst > 0 else 0.0}


def aggregate_table(output: EncodedTable, quasi_identifiers: Sequence[str], released: np.ndarray,
                    values: Mapping[str, np.ndarray], functions: Mapping[str, str],
                    scope: np.ndarray | None = None) -> tuple[EncodedTable, dict[str, AggregatedColumn]]:
    """`output` with each column of `functions` replaced by its per-class aggregate.

    `released`: the rows released with their values (not suppressed, in the research subset);
    the classes are those rows grouped by their generalized QI codes in `output`. `values`:
    each aggregated column's numbers, one per output row.
    """
    qi_index = [output.column_index(q) for q in quasi_identifiers]
    labels = class_labels([output.codes[:, c] for c in qi_index],
                          [max(len(output.dictionaries[c]), 1) for c in qi_index], released)
    codes = np.array(output.codes, order="F", copy=True)
    dictionaries = [list(d) for d in output.dictionaries]
    columns: dict[str, AggregatedColumn] = {}
    for name, function in functions.items():
        column = aggregate_column(name, values[name], labels, function, scope)
        c = output.column_index(name)
        codes[:, c], dictionaries[c] = column.encoded()
        columns[name] = column
    return EncodedTable(list(output.columns), codes, dictionaries), columns


__all__ = ["FUNCTIONS", "MEAN_DECIMALS", "SUPPRESSED", "AggregatedColumn", "aggregate_column", "aggregate_table", "check_function",
           "class_aggregates", "class_labels", "decimal_text", "fixed_point", "parse_numbers", "round_half_even",
           "within_class_loss"]
