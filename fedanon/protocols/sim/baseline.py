"""The §4.3 baseline for a simulated split: what the parties would get without fedanon.

`fedanon simulate --baseline`, `fedanon demo` and `bench/baselines.py` deal a pooled
table over parties exactly as the protocol run does (`split.py`) and hand the same
row or column groups to the engine's baselines, so the percentage printed next to a
run compares the secure result with anonymize-then-integrate on the very same shares.
Only `simulate` and the demo can do this: they hold the pooled table. In a real run
over daemons no party holds it, so no baseline is computed there.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fedanon.engine.anonymizer import anonymize
from fedanon.data.layout import Layout
from fedanon.errors import InputError
from fedanon.oracle.baselines import BaselineResult, horizontal_baseline, hybrid_baseline, vertical_baseline
from fedanon.model.config import AnonymizationConfig
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult
from fedanon.data.table import EncodedTable
from fedanon.protocols.sim.split import horizontal_row_groups, vertical_column_groups


def baseline_for_split(columns: Sequence[str], rows: Sequence[Sequence[str]], hierarchies: dict[str, Hierarchy],
                       config: AnonymizationConfig, distribution: str, parties: int, *,
                       split_mode: str = "round-robin", column_groups: Sequence[Sequence[str]] | None = None,
                       central: AnonymizationResult | None = None, layout: Layout | None = None) -> BaselineResult:
    """Baseline on the shares a protocol run with these settings deals (or on given column groups).

    Hybrid: on the joined table (the persons every column group holds), each group with its
    parties' rows of it, as `split_hybrid` deals them."""
    if distribution == "hybrid":
        if layout is None:
            raise InputError("a hybrid baseline needs the layout")
        joined = layout.joined_rows(len(rows))
        position = {r: i for i, r in enumerate(joined)}
        groups = [(list(g[0].columns), [[position[r] for r in p.persons(len(rows)) if r in position] for p in g])
                  for g in layout.column_groups()]
        rows = [rows[r] for r in joined]
    table = EncodedTable.from_rows(list(columns), rows)
    if central is None:
        central = anonymize(table, hierarchies, config)
    secure = (central.transformation, np.asarray(central.suppressed, dtype=bool))
    if distribution == "hybrid":
        return hybrid_baseline(table, hierarchies, config, groups, secure)
    if distribution == "horizontal":
        row_groups = horizontal_row_groups(len(rows), parties, split_mode)  # type: ignore[arg-type]
        return horizontal_baseline(table, hierarchies, config, row_groups, secure)
    return vertical_baseline(table, hierarchies, config, column_groups or vertical_column_groups(columns, parties),
                             secure)
