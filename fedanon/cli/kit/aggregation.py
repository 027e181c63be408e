"""Aggregated columns in the anonymizing commands: read as numbers up front, aggregated per
released class once the transformation is known.

Shared by `fedanon anonymize` (the engine's result in memory) and `fedanon simulate` (the
protocol's decrypted result at the recipient, rows permuted, suppressed rows known only by
their '*' and the reported count). Both end in `microagg.classwise.aggregate_table`, which
depends on the multiset of each class's values only, so both release the same text.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from fedanon.data.io.columnar import ColumnarTable
from fedanon.data.table import EncodedTable
from fedanon.engine.result import AnonymizationResult
from fedanon.errors import FedanonError, InputError
from fedanon.microagg.classwise import AggregatedColumn, aggregate_table, parse_numbers
from fedanon.microagg.io import numeric_column
from fedanon.report.risk import suppressed_rows_mask


def aggregated_values(table: ColumnarTable, functions: Mapping[str, str]) -> dict[str, np.ndarray]:
    """Each aggregated column as float64, one per input row; `InputError` naming file, line and
    value at the first cell that is not a finite number (before any work starts)."""
    return {name: numeric_column(table, name) for name in functions}


def check_fixed_point(table: ColumnarTable, names: Sequence[str], fits: Callable[[str], bool], what: str) -> None:
    """`InputError` naming file, line and value at the first cell of `names` that `fits` refuses."""
    for name in names:
        c = table.index(name)
        bad = [code for code, value in enumerate(table.dictionaries[c]) if not fits(value)]
        if bad:
            row = int(np.flatnonzero(np.isin(table.codes[c], bad))[0])
            value = table.dictionaries[c][int(table.codes[c][row])]
            raise InputError(f"{table.source}, {table.where([row])[0]}: column {name!r} holds {value[:40]!r}; {what}")


def loss_report(columns: Mapping[str, AggregatedColumn]) -> dict[str, dict[str, Any]]:
    """The JSON report's `aggregation` section: function and SSE/SST figures per column."""
    return {name: dict(column.loss) for name, column in columns.items()}


def aggregate_engine_result(result: AnonymizationResult, quasi_identifiers: Sequence[str],
                            values: Mapping[str, np.ndarray], functions: Mapping[str, str],
                            subset: np.ndarray | None = None) -> tuple[AnonymizationResult, dict[str, AggregatedColumn]]:
    """The engine's result with every aggregated column replaced by its class aggregates.

    Released with values: rows not suppressed (and in the research subset, where δ-presence
    releases only those). A sampled release (differential privacy) holds the sampled rows only;
    their values are taken by `result.released`.
    """
    if not functions:
        return result, {}
    rows = result.released
    per_row = {name: (v if rows is None else v[rows]) for name, v in values.items()}
    scope = None if subset is None or rows is not None else np.asarray(subset, dtype=bool)
    released = ~np.asarray(result.suppressed, dtype=bool)
    if scope is not None:
        released &= scope
    output, columns = aggregate_table(result.output, quasi_identifiers, released, per_row, functions, scope)
    return dataclasses.replace(result, output=output), columns


def aggregate_rows(columns: Sequence[str], rows: Sequence[Sequence[str]], quasi_identifiers: Sequence[str],
                   suppressed_rows: int | None, functions: Mapping[str, str]
                   ) -> tuple[list[list[str]], dict[str, AggregatedColumn]]:
    """A protocol's decrypted result (text rows) with every aggregated column aggregated per class.

    Suppressed rows are the ones with '*' in every quasi-identifier, as many as the protocol
    reports. Where only some of those are suppressed (all quasi-identifiers at a '*' level),
    which rows' values form the released class is unknown: refused rather than guessed.
    """
    if not functions:
        return [list(r) for r in rows], {}
    table = EncodedTable.from_rows(list(columns), rows)
    suppressed, exact = suppressed_rows_mask(table, list(quasi_identifiers), suppressed_rows)
    if not exact:
        raise FedanonError("the result has rows with '*' in every quasi-identifier of which only some were "
                           "suppressed; which values form the released class is unknown, so the aggregated "
                           f"column(s) {', '.join(functions)} cannot be aggregated from the result")
    values = {}
    for name in functions:
        c = table.column_index(name)
        numbers, bad = parse_numbers([v.decode("utf-8") for v in table.dictionaries[c]])
        if bad is not None:
            raise FedanonError(f"the result's column {name!r} holds {table.dictionaries[c][bad][:40]!r}, not a number")
        values[name] = numbers[table.codes[:, c]]
    output, aggregated = aggregate_table(table, quasi_identifiers, ~suppressed, values, functions)
    return [[v.decode("utf-8") for v in row] for row in output.decode_rows()], aggregated
