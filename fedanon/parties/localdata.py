"""Build a party's `LocalData` from the [data] section of its own config.

Only the columns the config gives a role (QIs, sensitive attributes, insensitive
columns, the TID) leave this module: every other column is identifying (e.g. a
name the steward forgot to drop) and never reaches a protocol, so it never
leaves the party's daemon. `load_party_data` also says which were dropped (for the
owner's own log only). A δ-presence `subset_column` is
turned into the boolean research-subset mask and removed from the data.
"""

from __future__ import annotations

import os

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.registry import read_table
from fedanon.data.prepare import column_roles, subset_from_column
from fedanon.errors import InputError
from fedanon.parties.config import DataConfig
from fedanon.protocols.kit.api import LocalData


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
    """The party's LocalData plus the identifying columns left out of it.

    Column roles and the research-subset column are resolved by `fedanon.data.prepare`, the
    input preparation the commands and the Python API use, so a party refuses a table for the
    same reason and with the same message as `fedanon anonymize` does.
    """
    table = read_table(data.csv, data.delimiter, data.encoding)
    subset = subset_from_column(table, data.subset_column) if data.subset_column else None
    keep, removed = column_roles(table, list(data.quasi_identifiers), list(data.sensitive), data.insensitive,
                                 tid_column=data.tid_column, subset_column=data.subset_column)
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
    return local, removed
