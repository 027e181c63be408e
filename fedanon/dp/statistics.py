"""A statistics release as a request and as the JSON that reports it, wherever the counts come from.

`fedanon stats` counts one local table (`release_statistics`); the protocols count a
table no party holds (`fedanon.protocols.stats`). Both release the same queries -- the total
row count and marginals over hierarchy levels -- with the same budget split and write the same
JSON, so that a reader (and a test) can compare a distributed release with a local one. This
module holds what they share: the request as it travels in a run's options, the plan (ε per
query, noise scale), and the assembly of the released JSON with its ledger.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from fedanon.data.hierarchy import Hierarchy
from fedanon.dp.accounting import Ledger
from fedanon.data.table import EncodedTable
from fedanon.dp.marginals import MAX_CELLS, MarginalSpec, contingency, level_domain
from fedanon.dp.randomness import Randomness
from fedanon.errors import InputError

SENSITIVITY = "each row changes one cell of each table by 1"


@dataclass(frozen=True)
class StatisticsRequest:
    """What to release: ε in all, the marginals, whether the total count is one of the queries,
    and (tests only) the seed of every party's draws."""

    epsilon: float
    marginals: tuple[MarginalSpec, ...]
    total: bool = True
    seed: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.epsilon, bool) or not isinstance(self.epsilon, (int, float)) \
                or not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise InputError(f"--epsilon must be a positive number, got {self.epsilon!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0):
            raise InputError(f"--seed must be an integer >= 0, got {self.seed!r}")
        if self.queries == 0:
            raise InputError("nothing to release: give --stats-marginal ATTR[:LEVEL],... (or leave --no-total out)")

    @property
    def queries(self) -> int:
        return len(self.marginals) + (1 if self.total else 0)

    @property
    def epsilon_per_query(self) -> float:
        return self.epsilon / self.queries

    @property
    def scale(self) -> float:
        """Noise scale of every query: sensitivity 1 over its ε share."""
        return 1.0 / self.epsilon_per_query

    @property
    def attributes(self) -> list[str]:
        return list(dict.fromkeys(a for m in self.marginals for a in m.attributes))

    def to_options(self) -> dict[str, Any]:
        """The run option `statistics` (JSON), as every party receives it."""
        return {"epsilon": float(self.epsilon), "marginals": [m.describe() for m in self.marginals],
                "total": bool(self.total), "seed": self.seed}

    @classmethod
    def from_options(cls, value: Any) -> "StatisticsRequest":
        """Parse the run option (from a run file or off the wire): one InputError naming the setting."""
        if not isinstance(value, Mapping):
            raise InputError("option statistics must be a table with epsilon and marginals")
        unknown = sorted(set(value) - {"epsilon", "marginals", "total", "seed"})
        if unknown:
            raise InputError(f"option statistics: unknown key(s) {', '.join(unknown)} "
                             "(known: epsilon, marginals, total, seed)")
        if "epsilon" not in value:
            raise InputError("option statistics needs epsilon")
        marginals = value.get("marginals", [])
        if isinstance(marginals, str) or not isinstance(marginals, Sequence) \
                or not all(isinstance(m, str) for m in marginals):
            raise InputError("option statistics: marginals must be a list of \"ATTR[:LEVEL],...\" strings")
        total = value.get("total", True)
        if not isinstance(total, bool):
            raise InputError(f"option statistics: total must be true or false, got {total!r}")
        return cls(value["epsilon"], tuple(MarginalSpec.parse(m) for m in marginals), total, value.get("seed"))


def domains(request: StatisticsRequest, hierarchies: Mapping[str, Hierarchy]) -> list[list[list[bytes]]]:
    """Per marginal, per attribute: the values of its level, in hierarchy order (the cells)."""
    out = []
    for spec in request.marginals:
        per_attribute = []
        for name, level in zip(spec.attributes, spec.levels):
            if name not in hierarchies:
                raise InputError(f"--stats-marginal {spec.describe()}: {name!r} has no hierarchy; give --qi "
                                 f"{name}=FILE.csv (the cells must come from a hierarchy, not from the data)")
            per_attribute.append(level_domain(hierarchies[name], level))
        cells = math.prod(len(d) for d in per_attribute)
        if cells > MAX_CELLS:
            raise InputError(f"--stats-marginal {spec.describe()}: {cells:,} cells, more than {MAX_CELLS:,}; "
                             "choose coarser levels or fewer attributes")
        out.append(per_attribute)
    return out


def segment_sizes(request: StatisticsRequest, marginal_domains: list[list[list[bytes]]]) -> list[int]:
    """The lengths of the count vector's segments: the total (1), then every marginal's cells."""
    return ([1] if request.total else []) + [math.prod(len(d) for d in doms) for doms in marginal_domains]


def assemble(request: StatisticsRequest, marginal_domains: list[list[list[bytes]]], noisy: Sequence[np.ndarray],
             mechanism: str, randomness: str, seeded: bool) -> dict[str, Any]:
    """The released JSON (as `fedanon stats` writes it): `noisy` holds one vector per segment
    (`segment_sizes`), the cells of a marginal in row-major order of its domains."""
    ledger = Ledger()
    share, scale = request.epsilon_per_query, request.scale
    out: dict[str, Any] = {"epsilon": request.epsilon, "delta": 0.0, "mechanism": mechanism,
                           "randomness": randomness, "seeded": seeded, "sensitivity": SENSITIVITY}
    vectors = list(noisy)
    if request.total:
        ledger.spend("total row count", mechanism, share, scale=scale)
        out["total"] = {"count": int(vectors.pop(0)[0]), "epsilon": share, "scale": scale}
    marginals = []
    for spec, doms, counts in zip(request.marginals, marginal_domains, vectors):
        shape = tuple(len(d) for d in doms)
        ledger.spend(f"marginal {spec.describe()}", mechanism, share, scale=scale, cells=int(np.prod(shape)))
        cells = [[*(d[i].decode("utf-8", "backslashreplace") for d, i in zip(doms, index)), int(c)]
                 for index, c in zip(np.ndindex(*shape), np.asarray(counts).tolist())]
        marginals.append({"attributes": list(spec.attributes), "levels": list(spec.levels),
                          "epsilon": share, "scale": scale, "cells": cells})
    out["marginals"] = marginals
    out["budget"] = ledger.to_dict()
    return out


def release_statistics(table: EncodedTable, hierarchies: dict[str, Hierarchy], specs: list[MarginalSpec],
                       epsilon: float, rng: Randomness, *, total: bool = True) -> dict[str, Any]:
    """Noisy total count and marginals of one local table, ε split evenly over them; the
    ledger says how. The noise is drawn in the order the JSON lists the queries (total first),
    which is the order a protocol's noisy vectors take too."""
    if not specs and not total:
        raise InputError("nothing to release: give --marginal ATTR[:LEVEL],... (or leave --no-total out)")
    request = StatisticsRequest(epsilon, tuple(specs), total)
    mechanism = "discrete Laplace (OpenDP, exact)" if not rng.seeded else "discrete Laplace (seeded, tests only)"
    noisy: list[np.ndarray] = []
    if total:
        noisy.append(np.array([table.n_rows + rng.discrete_laplace(1, request.scale)[0]], dtype=np.int64))
    marginal_domains = []
    for spec in specs:
        doms, counts = contingency(table, hierarchies, spec)
        marginal_domains.append(doms)
        noisy.append(counts.reshape(-1) + rng.discrete_laplace(counts.size, request.scale))
    return assemble(request, marginal_domains, noisy, mechanism, rng.name, rng.seeded)
