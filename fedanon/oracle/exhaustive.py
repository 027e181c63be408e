"""Reference optimum by brute force: evaluate every node of the lattice.

Slow on purpose and free of any pruning or tagging, so tests can compare Flash's
answer against it for any criterion/metric combination.
"""

from __future__ import annotations

import math

import numpy as np

from fedanon.engine.anonymizer import prepare
from fedanon.model.config import AnonymizationConfig
from fedanon.engine.search.flash import better
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable


def exhaustive_optimum(
    table: EncodedTable,
    hierarchies: dict[str, Hierarchy],
    config: AnonymizationConfig,
    research_subset: np.ndarray | None = None,
) -> tuple[dict[str, int] | None, float]:
    """(transformation, loss) of the best anonymous node, or (None, inf) if there is none.

    Every node is grouped from the rows (no roll-up), judged, and the winner chosen
    by (loss, stable order) exactly as the contract defines.
    """
    prep = prepare(table, hierarchies, config, research_subset)
    lat = prep.lattice
    best_node, best_loss, best_rank = -1, math.inf, -1
    for node in range(lat.size):
        levels = lat.node_levels(node)
        classes = prep.grouper.group_rows(levels)
        ev = prep.checker.judge(levels, classes)
        if ev.anonymous and better(ev.loss, int(lat.rank[node]), best_loss, best_rank):
            best_node, best_loss, best_rank = node, ev.loss, int(lat.rank[node])
    if best_node < 0:
        return None, math.inf
    levels = lat.node_levels(best_node)
    return {q: int(l) for q, l in zip(config.quasi_identifiers, levels)}, best_loss
