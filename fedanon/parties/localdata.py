"""Build a party's `LocalData` from the [data] section of its own config.

Only the columns the config gives a role (QIs, sensitive attributes, insensitive
columns, the TID) leave this module: every other column is identifying (e.g. a
name the steward forgot to drop) and never reaches a protocol, so it never
leaves the party's daemon. `removed_columns` says which were dropped (for the
owner's own log only). A δ-presence `subset_column` is
turned into the boolean research-subset mask and removed from the data.
"""

from __future__ import annotations

import os

import numpy as np

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.registry import read_table
from fedanon.errors import InputError
from fedanon.parties.config import DataConfig
from fedanon.protocols.kit.api import LocalData

_TRUE = {"1", "true", "yes"}
_FALSE = {"0", "false", "no"}


def removed_columns(header: list[str], data: DataConfig) -> list[str]:
    """Columns with no declared role: identifying, so never loaded into a protocol."""
    declared = set(data.quasi_identifiers) | set(data.sensitive) | set(data.insensitive)
    declared |= {c for c in (data.tid_column, data.subset_column) if c}
    return [name for name in header if name not in declared]


def check_data_files(data: DataConfig, source: object) -> None:
    """Every file [data] names is a readable file: checked when a daemon starts.

    Why at start: the data is read per run (so an updated file needs no restart), and a
    missing file would otherwise surface only as every run failing. The error names the
    path; it is printed on this party's own terminal, before anything listens, so it
    never reaches another party.
    """
    files = [("data.csv", data.csv)]
    files += [(f"data.quasi_identifiers.{name}", path) for name, path in data.quasi_identifiers.items()]
    files += [(f"data.sensitive.{name}", path) for name, path in data.sensitive.items() if path]
    for key, path in files:
        if not path.exists():
            raise InputError(f"{source}: {key} = {str(path)!r}: file not found")
        if not path.is_file():
            raise InputError(f"{source}: {key} = {str(path)!r}: not a file")
        if not os.access(path, os.R_OK):
            raise InputError(f"{source}: {key} = {str(path)!r}: not readable by this user")


def load_local_data(data: DataConfig) -> LocalData:
    return load_party_data(data)[0]


def load_party_data(data: DataConfig) -> tuple[LocalData, list[str]]:
    """The party's LocalData plus the identifying columns left out of it."""
    table = read_table(data.csv, data.delimiter, data.encoding)
    header = table.columns
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
        dictionary = [v.strip().lower() for v in table.dictionaries[col]]
        for code, value in enumerate(dictionary):
            if value not in _TRUE and value not in _FALSE:
                row = int(np.flatnonzero(table.codes[col] == code)[0])
                raise InputError(f"{data.csv}, {table.where([row])[0]}: subset column "
                                 f"{data.subset_column!r} must be 0 or 1, got {table.dictionaries[col][code][:200]!r}")
        subset = np.array([v in _TRUE for v in dictionary], dtype=bool)[table.codes[col]]

    keep: list[str] = []
    if data.tid_column:
        need(data.tid_column, "TID")
    for name in header:
        if (name == data.tid_column or name in data.quasi_identifiers or name in data.sensitive
                or name in data.insensitive):
            keep.append(name)
    for name in list(data.quasi_identifiers) + list(data.sensitive):
        need(name, "quasi-identifier" if name in data.quasi_identifiers else "sensitive")
    for name in data.insensitive:
        need(name, "insensitive")
    if not keep:
        raise InputError(f"{data.csv}: the party config names no quasi-identifier, sensitive or TID column")
    out_rows = table.select(keep).rows()

    hierarchies = {}
    for name, path in list(data.quasi_identifiers.items()) + list(data.sensitive.items()):
        if path is not None:
            hierarchies[name] = Hierarchy.read_csv(path, name, data.hierarchy_delimiter or data.delimiter,
                                                   data.encoding)
    local = LocalData(columns=keep, rows=out_rows, hierarchies=hierarchies,
                      tid_column=data.tid_column, research_subset=subset)
    return local, removed_columns(header, data)
