"""Checks that stop a Protocol B run before any (encrypted) data leaves a party.

Two layers, because of who may see what:

* `local_checks` runs at each primary on its own plaintext. It returns a *public*
  message (safe to send to the helper: names the problem, column and party, never a
  value) and a *private* one (adds the offending values and rows, shown only locally).
* `check_schemas` runs at the helper on what the primaries announced in their hello
  (column names, which hierarchies they hold, row counts, public keys) and finds
  mismatches between parties: different columns (horizontal), overlapping columns or
  differing TID columns / row counts (vertical), missing hierarchies, research-subset
  flags held by the wrong parties.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.kit.api import LocalData

_SAMPLE = 5


@dataclass
class LocalProblem:
    public: str  # for every party and the helper: no plaintext values
    private: str  # for this party only: with values and line numbers


def _show(values: list[str]) -> str:
    shown = ", ".join(repr(v) for v in values[:_SAMPLE])
    return shown + (f" and {len(values) - _SAMPLE} more" if len(values) > _SAMPLE else "")


def needed_hierarchies(config: AnonymizationConfig) -> list[str]:
    """Columns whose hierarchy the engine needs: every QI, plus the hierarchical-t attribute."""
    out = list(config.quasi_identifiers)
    for model in config.models:
        attribute = model.needs_hierarchy()
        if attribute is not None and attribute not in out:
            out.append(attribute)
    return out


def local_checks(me: str, local: LocalData, config: AnonymizationConfig, distribution: str) -> list[LocalProblem]:
    """Problems in one party's own share that make the run pointless or wrong."""
    problems: list[LocalProblem] = []
    columns = list(local.columns)
    dupes = [c for c, n in Counter(columns).items() if n > 1]
    if dupes:
        msg = f"party {me!r}: column names appear twice: {_show(dupes)}"
        problems.append(LocalProblem(msg, msg))
    width = len(columns)
    if set(map(len, local.rows)) - {width}:  # C-speed scan; find the row only on the error path
        i, row = next((i, r) for i, r in enumerate(local.rows, start=1) if len(r) != width)
        problems.append(LocalProblem(
            f"party {me!r}: ragged data (a row has {len(row)} values, expected {width})",
            f"party {me!r}: data row {i} has {len(row)} values, expected {width} ({', '.join(columns)})",
        ))
        return problems
    index = {c: i for i, c in enumerate(columns)}
    if distribution in ("vertical", "hybrid"):  # rows joined on the TID
        tid = local.tid_column
        if not tid or tid not in index:
            msg = f"party {me!r}: {distribution} distribution needs a TID column, but {tid!r} is not among its columns {columns}"
            problems.append(LocalProblem(msg, msg))
        else:
            c = index[tid]
            values = list(map(itemgetter(c), local.rows))
            dup = [v for v, n in Counter(values).items() if n > 1] if len(set(values)) != len(values) else []
            if dup:
                lines = [i for i, row in enumerate(local.rows, start=1) if row[c] in set(dup[:_SAMPLE])]
                problems.append(LocalProblem(
                    f"party {me!r}: duplicate TIDs in column {tid!r} ({len(dup)} values occur more than once)",
                    f"party {me!r}: duplicate TIDs in column {tid!r}: {_show(dup)} (data rows {lines[:2 * _SAMPLE]})",
                ))
    for column in needed_hierarchies(config):
        if column not in index:
            continue
        hierarchy = local.hierarchies.get(column)
        if hierarchy is None:
            msg = f"party {me!r}: no hierarchy for column {column!r}"
            problems.append(LocalProblem(msg, msg))
            continue
        known = {row[0] for row in hierarchy.rows}
        distinct = set(map(itemgetter(index[column]), local.rows))
        missing = sorted(v for v in distinct if v.encode("utf-8") not in known)
        if missing:
            problems.append(LocalProblem(
                f"party {me!r}: {len(missing)} value(s) of column {column!r} are missing from its hierarchy",
                f"party {me!r}: values of column {column!r} missing from its hierarchy "
                f"{hierarchy.source or ''}: {_show(missing)}".replace("  ", " "),
            ))
    subset = local.research_subset
    if config.needs_subset and subset is not None and len(subset) != len(local.rows):
        msg = f"party {me!r}: research-subset flags cover {len(subset)} rows, but the party has {len(local.rows)}"
        problems.append(LocalProblem(msg, msg))
    return problems


def hello_summary(local: LocalData, config: AnonymizationConfig) -> dict[str, Any]:
    """The schema facts a primary announces (names and counts only, never values)."""
    held = [c for c in needed_hierarchies(config) if c in local.columns and c in local.hierarchies]
    return {
        "columns": list(local.columns),
        "tid_column": local.tid_column,
        "rows": len(local.rows),
        "subset": local.research_subset is not None,
        "hierarchies": held,
        "heights": {c: local.hierarchies[c].height for c in held},
    }


@dataclass
class SchemaVerdict:
    errors: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # integrated column order
    owners: dict[str, str] = field(default_factory=dict)  # column -> party (vertical)
    subset_holder: str | None = None  # vertical delta-presence


def check_schemas(distribution: str, config: AnonymizationConfig, hellos: dict[str, dict[str, Any]]) -> SchemaVerdict:
    """Compare the primaries' announcements; every error names the parties and columns."""
    verdict = SchemaVerdict()
    errors = verdict.errors
    parties = list(hellos)
    for party, hello in hellos.items():
        errors.extend(hello.get("local_errors") or [])
    errors.extend(p for p in (model.distributed_problem() for model in config.models) if p)
    required = list(config.quasi_identifiers) + [a for a in config.sensitive_attributes if a not in config.quasi_identifiers]
    needed = needed_hierarchies(config)
    delta = config.needs_subset
    if distribution == "horizontal":
        leader = parties[0]
        reference = hellos[leader]["columns"]
        verdict.columns = list(reference)
        for party in parties[1:]:
            cols = hellos[party]["columns"]
            if set(cols) != set(reference) or len(cols) != len(reference):
                extra = sorted(set(cols) - set(reference))
                lacking = sorted(set(reference) - set(cols))
                errors.append(
                    f"schema mismatch (horizontal): party {party!r} has columns {cols}, party {leader!r} has "
                    f"{reference}" + (f"; only at {party!r}: {extra}" if extra else "")
                    + (f"; missing at {party!r}: {lacking}" if lacking else "")
                )
        for party in parties:
            cols = hellos[party]["columns"]
            absent = [c for c in required if c not in cols]
            if absent:
                errors.append(f"party {party!r} lacks column(s) {absent} that the privacy model names")
            for c in needed:
                if c in cols and c not in hellos[party]["hierarchies"]:
                    errors.append(f"party {party!r} has no hierarchy for column {c!r}")
            for c, height in hellos[party].get("heights", {}).items():
                ref = hellos[leader].get("heights", {}).get(c)
                if party != leader and ref is not None and ref != height:
                    errors.append(f"hierarchies of column {c!r} differ: {ref} levels at party {leader!r}, "
                                  f"{height} at party {party!r}")
            if delta and not hellos[party]["subset"]:
                errors.append(f"delta-presence: party {party!r} sent no research-subset flags for its rows")
    elif distribution == "vertical":
        tids = {party: hellos[party]["tid_column"] for party in parties}
        if len(set(tids.values())) != 1:
            errors.append(f"the parties name different TID columns: {tids}")
        tid = tids[parties[0]]
        rows = {party: hellos[party]["rows"] for party in parties}
        if len(set(rows.values())) != 1:
            errors.append(f"TID sets differ: the parties hold different numbers of rows {rows}")
        owners: dict[str, str] = {}
        for party in parties:
            for c in hellos[party]["columns"]:
                if c == tid:
                    continue
                if c in owners:
                    errors.append(
                        f"schema mismatch (vertical): column {c!r} is held by both party {owners[c]!r} and "
                        f"party {party!r}; vertical shares must have disjoint columns besides the TID"
                    )
                else:
                    owners[c] = party
                    verdict.columns.append(c)
        verdict.owners = owners
        absent = [c for c in required if c not in owners]
        if absent:
            errors.append(f"no party holds column(s) {absent} that the privacy model names")
        for c in needed:
            party = owners.get(c)
            if party is not None and c not in hellos[party]["hierarchies"]:
                errors.append(f"party {party!r} has no hierarchy for column {c!r}")
        holders = [p for p in parties if hellos[p]["subset"]]
        if delta:
            if len(holders) != 1:
                errors.append(
                    "delta-presence (vertical): exactly one party must hold the research-subset flags, "
                    f"but {len(holders)} do ({holders})"
                )
            else:
                verdict.subset_holder = holders[0]
    else:
        errors.append(f"unknown distribution {distribution!r} (horizontal or vertical)")
    return verdict
