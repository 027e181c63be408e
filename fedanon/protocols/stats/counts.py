"""One primary's own counts of a statistics request, and the digest that shows the cells agree.

A primary counts its own rows in every cell of every requested table (the cells come from
the hierarchies, as in `fedanon stats`) and adds nothing else: what leaves the party is these
counts encrypted under the key holder's Paillier key, so the helper sees only ciphertexts.
The digest of the cells (attributes, levels and every value of every level's domain, in
order) lets the key holder's peers check that they count the same cells in the same order
without sending a value; it travels only between primaries, which hold the same hierarchies.
"""

from __future__ import annotations

import hashlib
import json
from typing import Mapping

import numpy as np

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.dp.marginals import contingency
from fedanon.dp.statistics import StatisticsRequest
from fedanon.errors import InputError


def cells_digest(request: StatisticsRequest, marginal_domains: list[list[list[bytes]]]) -> str:
    """SHA-256 of the request and of every marginal's cells (hex)."""
    doc = {"request": {k: v for k, v in request.to_options().items() if k != "seed"},
           "domains": [[[v.hex() for v in domain] for domain in doms] for doms in marginal_domains]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def own_counts(request: StatisticsRequest, table: EncodedTable, hierarchies: Mapping[str, Hierarchy]
               ) -> list[np.ndarray]:
    """One int64 vector per segment (the total, then every marginal's cells): this primary's
    counts of its own rows (a horizontal split: every primary holds every column)."""
    for name in request.attributes:
        if name not in table.columns:
            raise InputError(f"--stats-marginal: this party's table has no column {name!r}")
    out: list[np.ndarray] = []
    if request.total:
        out.append(np.array([table.n_rows], dtype=np.int64))
    for spec in request.marginals:
        _domains, counts = contingency(table, dict(hierarchies), spec)
        out.append(counts.reshape(-1).astype(np.int64))
    return out
