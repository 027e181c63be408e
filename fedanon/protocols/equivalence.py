"""Does a distributed run equal the centralized anonymization of the pooled data?

This is the correctness criterion of every protocol (DESIGN.md): same transformation,
same row multiset. Rows are compared as multisets because the protocols permute rows
on purpose, and on the columns both sides have (a vertical run drops the TID).
`fedanon demo` and the tests use it; it runs the engine in-process on plaintext.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fedanon.engine.anonymizer import anonymize
from fedanon.engine.config import AnonymizationConfig
from fedanon.engine.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult
from fedanon.engine.table import EncodedTable


@dataclass
class Central:
    columns: list[str]
    rows: list[list[str]]
    result: AnonymizationResult


def centralized(columns: Sequence[str], rows: Sequence[Sequence[str]], hierarchies: dict[str, Hierarchy],
                config: AnonymizationConfig, research_subset: np.ndarray | None = None) -> Central:
    """Run the engine on the pooled plaintext (what a trusted third party would do).

    With delta-presence only the research subset is released, as by `fedanon anonymize`.
    """
    table = EncodedTable.from_rows(list(columns), rows)
    result = anonymize(table, hierarchies, config, research_subset=research_subset)
    out = [[v.decode("utf-8") for v in row] for row in result.output.decode_rows()]
    if config.delta_presence is not None and research_subset is not None:
        out = [row for row, keep in zip(out, np.asarray(research_subset, dtype=bool)) if keep]  # released rows
    return Central(list(columns), out, result)


def differences(central: Central, transformation: dict[str, int] | None, columns: Sequence[str],
                rows: Sequence[Sequence[str]]) -> list[str]:
    """Human-readable differences; an empty list means the run is equivalent."""
    problems: list[str] = []
    if transformation is not None and dict(transformation) != dict(central.result.transformation):
        problems.append(f"transformation {dict(transformation)} differs from the centralized "
                        f"{dict(central.result.transformation)}")
    shared = [c for c in central.columns if c in columns]
    if set(columns) - set(shared):
        problems.append(f"output has columns {sorted(set(columns) - set(shared))} the pooled table lacks")
    mine = [list(columns).index(c) for c in shared]
    theirs = [central.columns.index(c) for c in shared]
    got = Counter(tuple(row[i] for i in mine) for row in rows)
    want = Counter(tuple(row[i] for i in theirs) for row in central.rows)
    if got != want:
        extra = list((got - want).items())[:3]
        lacking = list((want - got).items())[:3]
        problems.append(f"row multisets differ ({sum(got.values())} vs {sum(want.values())} rows); "
                        f"only in the run: {extra}; only centralized: {lacking}")
    return problems
