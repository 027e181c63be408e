"""Preparing an input table for anonymization: column roles, hierarchy coverage, the research subset.

The same checks for every entry point -- the commands, the party daemons, the Python API -- so a
table is refused for the same reason, with the same message naming file and row, wherever it
enters. Everything works on the columnar codes; no Python object per row is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from fedanon.data.io.columnar import ColumnarTable, delimiter_hint
from fedanon.data.io.registry import read_table
from fedanon.errors import InputError

MAX_LISTED = 20  # missing hierarchy values named one by one; the rest are counted


def column_roles(table: ColumnarTable, quasi_identifiers: Sequence[str], sensitive: Sequence[str] = (),
                 insensitive: Sequence[str] = (), aggregated: Sequence[str] = (), *,
                 tid_column: str | None = None, subset_column: str | None = None) -> tuple[list[str], list[str]]:
    """(kept columns in input order, removed identifying columns).

    As in ARX, every column has a role; a column given none (not a QI, the
    sensitive attribute, declared insensitive or aggregated) is identifying and
    never reaches an output. Declared columns must exist. A party's table may also hold the shared
    tuple identifier of a vertical split (`tid_column`, kept: the parties join on it) and
    a research-subset flag column (`subset_column`, read by `subset_from_column`; neither
    kept nor reported as removed).
    """
    if subset_column:
        _check_columns(table, subset_column, "subset")
    if tid_column:
        _check_columns(table, tid_column, "TID")
    for name in quasi_identifiers:
        _check_columns(table, name, "quasi-identifier")
    for name in sensitive:
        _check_columns(table, name, "sensitive attribute")
    for name in insensitive:
        _check_columns(table, name, "insensitive")
    for name in aggregated:
        _check_columns(table, name, "aggregated")
    declared = {*quasi_identifiers, *sensitive, *insensitive, *aggregated, *([tid_column] if tid_column else [])}
    kept = [c for c in table.columns if c in declared]
    removed = [c for c in table.columns if c not in declared and c != subset_column]
    return kept, removed


_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no"}


def subset_from_column(table: ColumnarTable, column: str) -> np.ndarray:
    """The research-subset mask from a flag column (1/0, true/false, yes/no in any case).

    Why a column rather than a subset file here: a party daemon cannot match a subset file
    against rows that other parties hold, so each party marks its own rows. The first value
    that is not a flag is named with its row.
    """
    _check_columns(table, column, "subset")
    c = table.index(column)
    dictionary = [v.strip().lower() for v in table.dictionaries[c]]
    for code, value in enumerate(dictionary):
        if value not in _TRUE and value not in _FALSE:
            row = int(np.flatnonzero(table.codes[c] == code)[0])
            raise InputError(f"{table.source}, {table.where([row])[0]}: subset column {column!r} must be 0 or 1, "
                             f"got {table.dictionaries[c][code][:200]!r}")
    return np.array([v in _TRUE for v in dictionary], dtype=bool)[table.codes[c]]


def _check_columns(table: ColumnarTable, name: str, what: str) -> None:
    if name not in table.columns:
        raise InputError(f"{table.source}, line 1: unknown column {name!r} ({what}); "
                         f"the table has columns: {', '.join(table.columns)}"
                         f"{delimiter_hint(table.columns, table.delimiter)}")


def check_values_in_hierarchies(table: ColumnarTable, hierarchies: dict[str, Any]) -> None:
    """Report every input cell missing from its hierarchy in one message.

    The first MAX_LISTED cells are named with their line, the rest counted, so a
    steward fixes all of them in one pass instead of one per run.
    """
    missing_rows: list[tuple[int, str, str]] = []  # (data row, column, value)
    total = 0
    for attr, h in hierarchies.items():
        if attr not in table.columns:
            continue
        c = table.index(attr)
        dictionary = table.dictionaries[c]
        missing = h.missing_codes([v.encode("utf-8") for v in dictionary])
        if not missing:
            continue
        rows = np.flatnonzero(np.isin(table.codes[c], np.asarray(missing, dtype=table.codes[c].dtype)))
        total += int(rows.size)
        missing_rows.extend((int(r), attr, dictionary[int(table.codes[c][r])]) for r in rows[:MAX_LISTED])
    if not total:
        return
    missing_rows.sort()
    shown = missing_rows[:MAX_LISTED]
    places = table.where([r for r, _a, _v in shown])
    sources = {a: h.source for a, h in hierarchies.items()}
    parts = [f"{place}: {attr} {value[:200]!r}" for place, (_r, attr, value) in zip(places, shown)]
    more = f"; and {total - len(shown)} more" if total > len(shown) else ""
    where = ", ".join(sorted({f"{a} -> {sources[a]}" for _r, a, _v in missing_rows}))
    raise InputError(f"{table.source}: {total} value(s) missing from their hierarchies ({where}): "
                     + "; ".join(parts) + more)


def match_subset(table: ColumnarTable, subset_path: Path) -> np.ndarray:
    """Mark the research-subset rows of the input.

    The subset file has the input's header; its rows are matched to input rows
    as a multiset of full rows: a row that occurs m times in the subset must
    occur at least m times in the input, and the first m occurrences are
    marked. Why full rows: the subset must be unambiguous without an ID column,
    and duplicates are indistinguishable for every model anyway. Works on codes
    (np.unique over rows), not on per-row Python tuples.
    """
    subset = read_table(subset_path, table.delimiter, table.encoding)
    if subset.columns != table.columns:
        raise InputError(f"{subset_path}, line 1: header {table.delimiter.join(subset.columns)[:200]!r} differs "
                         f"from the input header {table.delimiter.join(table.columns)[:200]!r}")
    n, m = table.n_rows, subset.n_rows
    mapped = np.empty((m, len(table.columns)), dtype=np.int64)
    inputs = np.empty((n, len(table.columns)), dtype=np.int64)
    for c, (codes, dictionary) in enumerate(zip(subset.codes, subset.dictionaries)):
        index = {v: i for i, v in enumerate(table.dictionaries[c])}
        lookup = np.array([index.get(v, -1) for v in dictionary], dtype=np.int64)
        mapped[:, c] = lookup[codes]
        inputs[:, c] = table.codes[c]
    groups = np.unique(np.vstack([inputs, mapped]), axis=0, return_inverse=True)[1].reshape(-1)
    g_in, g_sub = groups[:n], groups[n:]
    have = np.bincount(g_in, minlength=int(groups.max()) + 1)
    need = np.bincount(g_sub, minlength=have.size)
    absent = (mapped < 0).any(axis=1) | (_rank_in_group(g_sub) >= have[g_sub])
    if absent.any():
        row = int(np.flatnonzero(absent)[0])
        place = subset.where([row])[0]
        text = table.delimiter.join(subset.dictionaries[c][int(subset.codes[c][row])] for c in range(len(table.columns)))
        raise InputError(f"{subset_path}, {place}: row {text[:200]!r} does not occur in {table.source} "
                         f"(or occurs there fewer times than in the subset)")
    mask = _rank_in_group(g_in) < need[g_in]  # the first `need` occurrences of each row
    return mask


def _rank_in_group(groups: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements share its group (0 for the first)."""
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    rank = np.empty(groups.size, dtype=np.int64)
    rank[order] = np.arange(groups.size) - np.searchsorted(ordered, ordered, side="left")
    return rank


# --------------------------------------------------------------------------- progress
