"""Does a distributed run equal the centralized anonymization of the pooled data?

This is the correctness criterion of every protocol (docs/design.md): same transformation,
same column set, same row multiset. Rows are compared as multisets because the
protocols permute rows on purpose. A run that reports no transformation, lacks a
column or has an extra one is never equivalent.

The centralized side runs the same engine, so a bug in the engine would be shared by
both sides. `differences` therefore also runs the independent verifier
(`engine/verify.py`, plain Python, no engine code) on the run's output against the
pooled input: the release must be a valid anonymization of the input at the reported
transformation, row for row. With δ-presence the release holds only the research
subset, which cannot be matched to population classes on its own; there the verifier
checks the centralized full output (every population row) and the multiset equality
carries that over to the run.
`fedanon demo` and the tests use it; it runs the engine in-process on plaintext.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fedanon.engine.anonymizer import anonymize
from fedanon.model.config import AnonymizationConfig
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import AnonymizationResult
from fedanon.data.table import EncodedTable
from fedanon.oracle.verify import verify_release, verify_result


@dataclass
class Central:
    columns: list[str]
    rows: list[list[str]]
    result: AnonymizationResult
    # the pooled input the run is judged against (for the independent verifier)
    input_table: EncodedTable | None = None
    hierarchies: dict[str, Hierarchy] | None = None
    config: AnonymizationConfig | None = None
    research_subset: np.ndarray | None = None


def centralized(columns: Sequence[str], rows: Sequence[Sequence[str]], hierarchies: dict[str, Hierarchy],
                config: AnonymizationConfig, research_subset: np.ndarray | None = None) -> Central:
    """Run the engine on the pooled plaintext (what a trusted third party would do).

    With delta-presence only the research subset is released, as by `fedanon anonymize`.
    """
    table = EncodedTable.from_rows(list(columns), rows)
    result = anonymize(table, hierarchies, config, research_subset=research_subset)
    out = [[v.decode("utf-8") for v in row] for row in result.output.decode_rows()]
    if config.needs_subset and research_subset is not None:
        out = [row for row, keep in zip(out, np.asarray(research_subset, dtype=bool)) if keep]  # released rows
    return Central(list(result.output.columns), out, result, table, dict(hierarchies), config,
                   None if research_subset is None else np.asarray(research_subset, dtype=bool))


def differences(central: Central, transformation: dict[str, int] | None, columns: Sequence[str],
                rows: Sequence[Sequence[str]]) -> list[str]:
    """Human-readable differences; an empty list means the run is equivalent."""
    problems: list[str] = []
    if transformation is None:
        problems.append("the run reported no transformation")
    elif dict(transformation) != dict(central.result.transformation):
        problems.append(f"transformation {dict(transformation)} differs from the centralized "
                        f"{dict(central.result.transformation)}")
    missing = [c for c in central.columns if c not in columns]
    extra = [c for c in columns if c not in central.columns]
    if missing:
        problems.append(f"output lacks columns {missing} of the centralized result")
    if extra:
        problems.append(f"output has columns {extra} the centralized result lacks")
    if len(set(columns)) != len(columns):
        problems.append(f"output names a column twice: {list(columns)}")
    if missing or extra or len(set(columns)) != len(columns):
        return problems
    mine = [list(columns).index(c) for c in central.columns]
    got = Counter(tuple(row[i] for i in mine) for row in rows)
    want = Counter(tuple(row) for row in central.rows)
    if got != want:
        only_run = list((got - want).items())[:3]
        only_central = list((want - got).items())[:3]
        problems.append(f"row multisets differ ({sum(got.values())} vs {sum(want.values())} rows); "
                        f"only in the run: {only_run}; only centralized: {only_central}")
    problems += [f"independent verifier: {p}" for p in verify_against_input(central, transformation, columns, rows)]
    return problems


def verify_against_input(central: Central, transformation: dict[str, int] | None, columns: Sequence[str],
                         rows: Sequence[Sequence[str]]) -> list[str]:
    """The independent verifier on the run's release (see the module docstring)."""
    if central.input_table is None or central.config is None or central.hierarchies is None:
        return ["no pooled input recorded for the verifier"]
    table = central.input_table
    if central.config.needs_subset:
        return verify_result(table, central.hierarchies, central.config, central.result, central.research_subset)
    if transformation is None:
        return []  # already reported
    raw_rows = [[v.decode("utf-8") for v in row] for row in table.decode_rows()]
    released = [c for c in table.columns if c in columns]
    if released != list(table.columns):  # the engine's output omits columns: check what is released
        index = [list(table.columns).index(c) for c in released]
        raw_rows = [[row[i] for i in index] for row in raw_rows]
    return verify_release(released, raw_rows, list(columns), rows, central.config, central.hierarchies,
                          dict(transformation))
