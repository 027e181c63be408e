"""Hypothesis strategies for random small tables with random monotone hierarchies.

Shared by the engine property tests (k-anonymity here; other models reuse it).
"""

from __future__ import annotations

from hypothesis import strategies as st

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable


@st.composite
def hierarchies(draw, name: str, max_values: int = 6, max_height: int = 4) -> Hierarchy:
    """A random tree-shaped hierarchy: each level groups the previous level's values."""
    n_values = draw(st.integers(1, max_values))
    height = draw(st.integers(1, max_height))
    values = [f"{name}{i}" for i in range(n_values)]
    rows = [[v] for v in values]
    current = list(range(n_values))  # group id of each row at the current level
    n_groups = n_values
    for level in range(1, height):
        # merge groups: map each current group to one of fewer (or equal) parents
        n_parents = draw(st.integers(1, max(1, n_groups)))
        parent = [draw(st.integers(0, n_parents - 1)) for _ in range(n_groups)]
        current = [parent[g] for g in current]
        n_groups = n_parents
        for row, g in zip(rows, current):
            row.append(f"{name}L{level}G{g}")
    return Hierarchy.from_rows(name, rows)


@st.composite
def instances(draw, max_qis: int = 3, max_rows: int = 24, extra_columns: tuple[str, ...] = ()):
    """(table, hierarchies, qi names): rows draw QI values from each hierarchy's leaves."""
    q = draw(st.integers(1, max_qis))
    names = [f"q{i}" for i in range(q)]
    hier = {n: draw(hierarchies(n)) for n in names}
    n_rows = draw(st.integers(1, max_rows))
    rows = []
    for _ in range(n_rows):
        row = [draw(st.sampled_from([r[0].decode() for r in hier[n].rows])) for n in names]
        row += [draw(st.sampled_from(["s0", "s1", "s2"])) for _ in extra_columns]
        rows.append(row)
    return EncodedTable.from_rows(names + list(extra_columns), rows), hier, names
