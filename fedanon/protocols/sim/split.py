"""Deal one pooled table over several simulated parties (for `simulate`, demo, tests, bench).

Horizontal: every party gets all columns and a disjoint set of rows (round-robin or
contiguous blocks). Vertical: every party gets the shared TID column plus a disjoint
set of columns dealt round-robin, and all rows. In the vertical case the research-subset
flags (delta-presence) are held by the first party only: one institution defines the
research subset; the protocol carries the flag with that party's share.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import itemgetter
from typing import Literal, Sequence

import numpy as np

from fedanon.data.hierarchy import Hierarchy
from fedanon.errors import InputError
from fedanon.protocols.kit.api import LocalData

DEFAULT_TID = "tid"


@dataclass
class Share:
    """One simulated party's share of the pooled table."""

    columns: list[str]
    rows: list[list[str]]
    tid_column: str | None
    research_subset: np.ndarray | None

    def local_data(self, hierarchies: dict[str, Hierarchy]) -> LocalData:
        held = {c: h for c, h in hierarchies.items() if c in self.columns}
        return LocalData(list(self.columns), self.rows, held, self.tid_column, self.research_subset)


def free_tid_name(columns: Sequence[str], wanted: str = DEFAULT_TID) -> str:
    """A TID column name that does not collide with a data column."""
    name = wanted
    while name in columns:
        name = "_" + name
    return name


def horizontal_row_groups(n: int, parties: int, mode: Literal["round-robin", "blocks"] = "round-robin"
                          ) -> list[list[int]]:
    """Which rows each party holds in a horizontal split (also used by the baselines)."""
    if parties < 1:
        raise InputError(f"need at least one party, got {parties}")
    if n < parties:
        raise InputError(f"cannot deal {n} rows over {parties} parties (each needs at least one row)")
    if mode == "round-robin":
        return [list(range(p, n, parties)) for p in range(parties)]
    if mode == "blocks":
        bounds = np.linspace(0, n, parties + 1).astype(int)
        return [list(range(bounds[p], bounds[p + 1])) for p in range(parties)]
    raise InputError(f"unknown horizontal split mode {mode!r} (round-robin, blocks)")


def vertical_column_groups(columns: Sequence[str], parties: int) -> list[list[str]]:
    """Which data columns each party holds in a vertical split: dealt round-robin."""
    if parties < 1:
        raise InputError(f"need at least one party, got {parties}")
    if len(columns) < parties:
        raise InputError(f"cannot deal {len(columns)} columns over {parties} parties (each needs one)")
    return [list(columns[p::parties]) for p in range(parties)]


def split_horizontal(columns: Sequence[str], rows: Sequence[Sequence[str]], parties: int,
                     mode: Literal["round-robin", "blocks"] = "round-robin",
                     research_subset: np.ndarray | None = None) -> list[Share]:
    groups = horizontal_row_groups(len(rows), parties, mode)
    shares = []
    for group in groups:
        subset = None if research_subset is None else np.asarray(research_subset, dtype=bool)[group]
        shares.append(Share(list(columns), [list(rows[i]) for i in group], None, subset))
    return shares


def split_vertical(columns: Sequence[str], rows: Sequence[Sequence[str]], parties: int,
                   research_subset: np.ndarray | None = None, tid_column: str | None = None) -> list[Share]:
    """Columns dealt round-robin; a generated TID (row number) is shared by all parties."""
    groups = vertical_column_groups(columns, parties)
    tid = tid_column or free_tid_name(columns)
    tids = [str(i + 1) for i in range(len(rows))]
    shares = []
    for p, group in enumerate(groups):
        idx = [list(columns).index(c) for c in group]
        cols = [tid] + list(group)
        data = [list(r) for r in zip(tids, *(map(itemgetter(i), rows) for i in idx))]
        subset = np.asarray(research_subset, dtype=bool) if (research_subset is not None and p == 0) else None
        shares.append(Share(cols, data, tid, subset))
    return shares
