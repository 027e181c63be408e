"""Differentially private counts and contingency tables (marginals) of one table.

A marginal over attributes A₁..Aₘ at hierarchy levels l₁..lₘ counts the rows in every cell of
the product of the levels' value sets. The cells come from the hierarchies, never from the
data: a cell that no row holds is released too (with noise), because leaving it out would tell
that no row holds it. Adding or removing one row changes one cell of each marginal by one, so
each marginal has L1 sensitivity 1 and gets discrete Laplace noise of scale 1/ε_marginal
(the geometric mechanism, ε_marginal-DP). The budget is split evenly over the released
marginals (and the total count, when asked for) by sequential composition; the ledger in the
output lists every part.

Noisy counts can be negative or inconsistent between marginals; they are released as drawn.
Rounding negatives to 0 or making marginals consistent is post-processing and costs no
budget, but it biases sums, so it is left to the reader.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.errors import InputError

#: cells one marginal may have (noise is drawn for every cell)
MAX_CELLS = 1_000_000


@dataclass(frozen=True)
class MarginalSpec:
    """Which attributes a marginal crosses, each at which hierarchy level."""

    attributes: tuple[str, ...]
    levels: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> "MarginalSpec":
        """`ATTR[:LEVEL],ATTR[:LEVEL],...` (level 0 = the original values)."""
        names, levels = [], []
        for part in text.split(","):
            name, sep, level = part.strip().partition(":")
            if not name.strip():
                raise InputError(f"--marginal {text!r}: expected ATTR[:LEVEL],ATTR[:LEVEL],...")
            try:
                lv = int(level) if sep else 0
            except ValueError:
                raise InputError(f"--marginal {text!r}: level {level!r} of {name.strip()!r} is not an integer") from None
            names.append(name.strip())
            levels.append(lv)
        if len(set(names)) != len(names):
            raise InputError(f"--marginal {text!r}: an attribute is named twice")
        return cls(tuple(names), tuple(levels))

    def describe(self) -> str:
        return ",".join(f"{a}:{l}" for a, l in zip(self.attributes, self.levels))


def level_domain(hierarchy: Hierarchy, level: int) -> list[bytes]:
    """The values of one hierarchy level, in order of first appearance in the hierarchy."""
    if not 0 <= level < hierarchy.height:
        raise InputError(f"level {level} of {hierarchy.attribute!r} does not exist "
                         f"(its hierarchy has levels 0..{hierarchy.height - 1})")
    return list(dict.fromkeys(row[level] for row in hierarchy.rows))


def contingency(table: EncodedTable, hierarchies: dict[str, Hierarchy],
                spec: MarginalSpec) -> tuple[list[list[bytes]], np.ndarray]:
    """The exact counts of every cell (domains from the hierarchies, shape = domain sizes)."""
    domains, keys = cell_keys(table, hierarchies, spec)
    sizes = [len(d) for d in domains]
    cells = int(np.prod(sizes, dtype=np.float64))
    counts = np.bincount(keys, minlength=cells).reshape(sizes)
    return domains, counts


def cell_keys(table: EncodedTable, hierarchies: dict[str, Hierarchy],
              spec: MarginalSpec) -> tuple[list[list[bytes]], np.ndarray]:
    """Every row's cell of the marginal (its row-major index over the domains), with the domains:
    what a party of a vertical split sends (permuted) for the part of a table it holds."""
    domains, keys, sizes = [], np.zeros(table.n_rows, dtype=np.int64), []
    for name, level in zip(spec.attributes, spec.levels):
        if name not in hierarchies:
            raise InputError(f"--marginal {spec.describe()}: {name!r} has no hierarchy; give --hierarchy "
                             f"{name}=FILE.csv (the cells must come from a hierarchy, not from the data)")
        hierarchy = hierarchies[name]
        domain = level_domain(hierarchy, level)
        column = table.column_index(name)
        code_map, level_dicts = hierarchy.code_map(table.dictionaries[column])
        index = {v: i for i, v in enumerate(domain)}
        to_domain = np.array([index[v] for v in level_dicts[level]], dtype=np.int64)
        codes = to_domain[code_map[level][table.codes[:, column]]] if len(to_domain) else np.zeros(0, np.int64)
        keys = keys * len(domain) + codes
        domains.append(domain)
        sizes.append(len(domain))
    cells = int(np.prod(sizes, dtype=np.float64))
    if cells > MAX_CELLS:
        raise InputError(f"--marginal {spec.describe()}: {cells:,} cells, more than {MAX_CELLS:,}; "
                         "choose coarser levels or fewer attributes")
    return domains, keys
