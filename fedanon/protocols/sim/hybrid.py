"""Deal one pooled table over the parties of a hybrid layout (for `simulate`, tests, bench).

Every party gets the layout's identifier column (the pooled row number, so that the
simulated parties share it as a consortium's pseudonymization service would) plus its
columns, for the rows its person rule selects. The centralized reference of such a run is
`joined_rows`: the pooled rows of the persons every column group holds, and
`centralized_joined` anonymizes them as a trusted party would (`fedanon demo`, the tests).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Sequence

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.layout import Layout, check_against_columns
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.sim.equivalence import Central, centralized
from fedanon.protocols.sim.split import Share


def split_hybrid(columns: Sequence[str], rows: Sequence[Sequence[str]], layout: Layout) -> list[Share]:
    """One share per layout party, in layout order; the layout is checked against the table first."""
    check_against_columns(layout, columns, len(rows))
    tid = layout.identifier
    index = {c: i for i, c in enumerate(columns)}
    shares = []
    for party in layout.parties:
        pick = [index[c] for c in party.columns]
        getter = itemgetter(*pick) if len(pick) > 1 else (lambda row, i=pick[0]: (row[i],))
        data = [[str(r + 1), *getter(rows[r])] for r in party.persons(len(rows))]
        shares.append(Share([tid] + list(party.columns), data, tid, None))
    return shares


def joined_rows(columns: Sequence[str], rows: Sequence[Sequence[str]], layout: Layout) -> list[list[str]]:
    """The joined table in the pooled column order: what a trusted party would anonymize."""
    return [list(rows[i]) for i in layout.joined_rows(len(rows))]


def centralized_joined(columns: Sequence[str], rows: Sequence[Sequence[str]], layout: Layout,
                       hierarchies: dict[str, Hierarchy], config: AnonymizationConfig) -> Central:
    """The central anonymization of the joined table: the result a hybrid run must equal.

    Persons missing from a column group are not in it (the drop rule of docs/protocols/hybrid.md)."""
    return centralized(columns, joined_rows(columns, rows, layout), hierarchies, config)
