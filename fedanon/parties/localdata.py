"""Build a party's `LocalData` from the [data] section of its own config.

Only the columns the config names (QIs, sensitive attributes, the TID) leave
this module: anything else in the CSV (e.g. a direct identifier the steward
forgot to drop) never reaches a protocol. A δ-presence `subset_column` is
turned into the boolean research-subset mask and removed from the data.
"""

from __future__ import annotations

import numpy as np

from fedanon.errors import InputError
from fedanon.parties.config import DataConfig
from fedanon.protocols.api import LocalData

_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no"}


def load_local_data(data: DataConfig) -> LocalData:
    from fedanon.engine.csvio import read_table_csv
    from fedanon.engine.hierarchy import Hierarchy

    header, rows = read_table_csv(data.csv, delimiter=data.delimiter)
    index = {name: i for i, name in enumerate(header)}

    def need(column: str, what: str) -> int:
        if column not in index:
            raise InputError(
                f"{data.csv}: {what} column {column!r} is not in the header ({', '.join(header)})"
            )
        return index[column]

    subset = None
    if data.subset_column:
        col = need(data.subset_column, "subset")
        flags = np.zeros(len(rows), dtype=bool)
        for r, row in enumerate(rows):
            value = row[col].strip().lower()
            if value in _TRUE:
                flags[r] = True
            elif value not in _FALSE:
                raise InputError(
                    f"{data.csv}, data row {r + 1}: subset column {data.subset_column!r} must be 0 or 1, got {row[col]!r}"
                )
        subset = flags

    keep: list[str] = []
    if data.tid_column:
        need(data.tid_column, "TID")
    for name in header:
        if name == data.tid_column or name in data.quasi_identifiers or name in data.sensitive:
            keep.append(name)
    for name in list(data.quasi_identifiers) + list(data.sensitive):
        need(name, "quasi-identifier" if name in data.quasi_identifiers else "sensitive")
    if not keep:
        raise InputError(f"{data.csv}: the party config names no quasi-identifier, sensitive or TID column")
    cols = [index[name] for name in keep]
    out_rows = [[row[c] for c in cols] for row in rows]

    hierarchies = {}
    for name, path in list(data.quasi_identifiers.items()) + list(data.sensitive.items()):
        if path is not None:
            hierarchies[name] = Hierarchy.read_csv(path, name)
    return LocalData(columns=keep, rows=out_rows, hierarchies=hierarchies,
                     tid_column=data.tid_column, research_subset=subset)
