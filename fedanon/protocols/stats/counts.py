"""One primary's own counts of a statistics request, and the digest that shows the cells agree.

A primary counts its own rows in every cell of every requested table (the cells come from
the hierarchies, as in `fedanon stats`) and adds nothing else: what leaves the party is these
counts encrypted under the key holder's Paillier key, so the helper sees only ciphertexts.
The digest of the cells (attributes, levels and every value of every level's domain, in
order) lets the key holder's peers check that they count the same cells in the same order
without sending a value; it travels only between primaries, which hold the same hierarchies.
In a vertical split a primary counts only the tables whose attributes it holds (a table across
several parties' columns is counted on a join, `joined.py`), and the key
holder checks with a digest of every party's identifiers that all of them hold the same persons.
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
from fedanon.errors import InputError, with_public


def cells_digest(request: StatisticsRequest, marginal_domains: list[list[list[bytes]]]) -> str:
    """SHA-256 of the request and of every marginal's cells (hex)."""
    doc = {"request": {k: v for k, v in request.to_options().items() if k != "seed"},
           "domains": [[[v.hex() for v in domain] for domain in doms] for doms in marginal_domains]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode("utf-8")).hexdigest()


def own_counts(request: StatisticsRequest, table: EncodedTable, hierarchies: Mapping[str, Hierarchy],
               counted: list[bool] | None = None, sizes: list[int] | None = None) -> list[np.ndarray]:
    """One int64 vector per segment (the total, then every marginal's cells): this primary's counts
    of its own rows. Horizontal: every primary counts every segment. Vertical: only the segments
    `counted` marks (those it holds every attribute of); zeros of `sizes` elsewhere."""
    flags = list(counted) if counted is not None else [True] * request.queries
    out: list[np.ndarray] = []
    if request.total:
        out.append(np.array([table.n_rows if flags.pop(0) else 0], dtype=np.int64))
    for spec, mine in zip(request.marginals, flags):
        missing = [a for a in spec.attributes if a not in table.columns]
        if mine and missing:
            raise InputError(f"--stats-marginal {spec.describe()}: this party's table has no column {missing[0]!r}")
    for i, (spec, mine) in enumerate(zip(request.marginals, flags)):
        if mine:
            _domains, counts = contingency(table, dict(hierarchies), spec)
            out.append(counts.reshape(-1).astype(np.int64))
        else:
            assert sizes is not None, "a segment this party does not count needs its size"
            out.append(np.zeros(sizes[i + (1 if request.total else 0)], dtype=np.int64))
    return out


def held_marginals(request: StatisticsRequest, columns: list[str], protocol: str, joins: bool = False) -> list[bool]:
    """Vertical split: which marginals this party holds every attribute of. One that it holds only
    some attributes of crosses several parties' columns: counted on a join where the protocol
    joins (`joins`: B and C on the helper's join, `joined.py`; A round its ring, `ring.py`), refused
    by a protocol that does not."""
    out = []
    for spec in request.marginals:
        held = [a in columns for a in spec.attributes]
        if any(held) and not all(held) and not joins:
            # names only the request's attributes and protocols, which every party knows: public
            text = (f"--stats-marginal {spec.describe()} crosses the columns of several parties: Protocol "
                    f"{protocol}'s statistics mode counts only a table whose attributes one party holds")
            raise with_public(InputError(text), text)
        out.append(all(held))
    return out


def persons_digest(run_id: str, tids: list[str]) -> str:
    """SHA-256 of the run id and the sorted identifiers: equal at every party of a vertical split
    exactly when they hold the same persons (sent only to the key holder, who holds them too)."""
    h = hashlib.sha256(b"fedanon/stats/persons/" + run_id.encode("utf-8"))
    for tid in sorted(tids):
        h.update(tid.encode("utf-8") + b"\x00")
    return h.hexdigest()
