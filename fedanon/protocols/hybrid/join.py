"""Hybrid distributions: column groups of parties, joined on encrypted person identifiers.

A hybrid run generalizes both other distributions: parties announcing the same columns
form a *column group* and hold disjoint persons (horizontal inside the group); groups hold
disjoint columns and are joined on the identifier's tokens (vertical between groups). A
horizontal run is one group, a vertical one is one party per group. Everything here runs
on opaque bytes at the coordinating party:

* `check_hybrid_schemas`: the groups from the hellos (names and counts only), and every
  mismatch that must stop the run before data is sent;
* `join_groups`: append each group's shares, then keep the persons every group holds
  (the documented rule: a person missing from a group is dropped before the search, so
  no cell is ever made up), with which party row each joined row came from;
* `check_grouped_tallies`: the release-tally check (`release_tally`) per column group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from fedanon.data.table import EncodedTable
from fedanon.errors import ProtocolError
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.kit.api import LocalData
from fedanon.protocols.kit.integration import append_tables
from fedanon.protocols.kit.release_tally import MODULUS, Tally, release_digest, transformation_problems
from fedanon.protocols.kit.validation import SchemaVerdict, needed_hierarchies

HYBRID = "hybrid"


@dataclass
class HybridVerdict(SchemaVerdict):
    groups: list[list[str]] = field(default_factory=list)  # parties of each column group, in party order
    holders: dict[str, list[str]] = field(default_factory=dict)  # column -> parties holding it


def check_hybrid_schemas(config: AnonymizationConfig, hellos: dict[str, dict[str, Any]]) -> HybridVerdict:
    """Group the parties by the columns they announce; every error names parties and columns."""
    verdict = HybridVerdict()
    errors = verdict.errors
    parties = list(hellos)
    for hello in hellos.values():
        errors.extend(hello.get("local_errors") or [])
    tids = {p: hellos[p].get("tid_column") for p in parties}
    if len(set(tids.values())) != 1 or not tids[parties[0]]:
        errors.append(f"a hybrid run needs one identifier column named alike at every party, got {tids}")
    tid = tids[parties[0]]
    by_columns: dict[tuple[str, ...], list[str]] = {}
    for p in parties:
        cols = tuple(sorted(c for c in hellos[p]["columns"] if c != tid))
        by_columns.setdefault(cols, []).append(p)
    for cols, members in by_columns.items():
        verdict.groups.append(members)
        first = [c for c in hellos[members[0]]["columns"] if c != tid]
        for c in first:
            if c in verdict.holders:
                errors.append(
                    f"schema mismatch (hybrid): column {c!r} is held by parties {verdict.holders[c]} and by "
                    f"parties {members} with different other columns; parties that share a column must hold "
                    "the same columns")
                continue
            verdict.holders[c] = list(members)
            verdict.owners[c] = members[0]
            verdict.columns.append(c)
    required = list(config.quasi_identifiers) + [a for a in config.sensitive_attributes
                                                 if a not in config.quasi_identifiers]
    absent = [c for c in required if c not in verdict.holders]
    if absent:
        errors.append(f"no party holds column(s) {absent} that the privacy model names")
    for c in needed_hierarchies(config):
        heights: dict[str, int] = {}
        for p in verdict.holders.get(c, []):
            if c not in hellos[p]["hierarchies"]:
                errors.append(f"party {p!r} has no hierarchy for column {c!r}")
            elif (h := hellos[p].get("heights", {}).get(c)) is not None:
                heights[p] = h
        if len(set(heights.values())) > 1:
            errors.append(f"hierarchies of column {c!r} differ in height between the parties: {heights}")
    if config.needs_subset:
        errors.append("delta-presence is not supported for hybrid layouts (no party defines the research "
                      "subset for persons it does not hold)")
    return verdict


@dataclass
class Duplicate:
    """An identifier token that occurs more than once inside one column group."""

    token: bytes
    parties: list[str]  # the parties of the group holding it (one party twice, or two parties)


@dataclass
class GroupJoin:
    table: EncodedTable
    rows_of: dict[str, np.ndarray]  # per party: its row of every joined row, or -1
    persons_per_group: list[int]
    dropped: int  # persons held by some group but not by every group
    duplicates: list[Duplicate] = field(default_factory=list)


def _as_void(keys: np.ndarray) -> np.ndarray:
    """(n, w) uint64 token words as n opaque fixed-width scalars (sortable, comparable)."""
    keys = np.ascontiguousarray(keys)
    return keys.view(np.dtype((np.void, keys.shape[1] * keys.itemsize))).ravel()


def _compact(codes: np.ndarray, dictionary: list[bytes]) -> tuple[np.ndarray, list[bytes]]:
    """Drop the values only dropped persons had: the engine counts every dictionary value as
    present (value marginals, entropy), so the joined table must hold exactly its own values."""
    used, inverse = np.unique(codes, return_inverse=True)
    return inverse.astype(np.int32).reshape(-1), [dictionary[i] for i in used.tolist()]


def join_groups(groups: Sequence[Sequence[str]], tables: Mapping[str, EncodedTable],
                tokens: Mapping[str, np.ndarray], sample: int = 5) -> GroupJoin:
    """Append inside each group, join the groups on identifier tokens, drop persons some group lacks.

    The tables of one group must have the same columns in the same order. Duplicates inside
    a group are reported (a few tokens each, with the parties) and leave the table empty.
    """
    appended: list[EncodedTable] = []
    voids: list[np.ndarray] = []
    origin_party: list[np.ndarray] = []
    origin_row: list[np.ndarray] = []
    duplicates: list[Duplicate] = []
    for group in groups:
        appended.append(append_tables([tables[p] for p in group]))
        v = np.concatenate([_as_void(tokens[p]) for p in group])
        voids.append(v)
        origin_party.append(np.concatenate([np.full(tables[p].n_rows, i, dtype=np.int64)
                                            for i, p in enumerate(group)]))
        origin_row.append(np.concatenate([np.arange(tables[p].n_rows, dtype=np.int64) for p in group]))
        unique, counts = np.unique(v, return_counts=True)
        for token in unique[counts > 1][:sample]:
            holders = [group[i] for i in origin_party[-1][v == token]]
            wire = np.frombuffer(token.tobytes(), dtype=np.uint64).astype(">u8").tobytes()  # as the party sent it
            duplicates.append(Duplicate(wire, holders))
    rows_of = {p: np.zeros(0, dtype=np.int64) for g in groups for p in g}
    if duplicates:
        empty = EncodedTable([], np.zeros((0, 0), dtype=np.int32), [])
        return GroupJoin(empty, rows_of, [len(v) for v in voids], 0, duplicates)
    kept = voids[0]
    for v in voids[1:]:
        kept = np.intersect1d(kept, v, assume_unique=True)
    if len(voids) == 1:
        kept = np.sort(kept)
    union = voids[0]
    for v in voids[1:]:
        union = np.union1d(union, v)
    n = len(kept)
    columns: list[str] = []
    blocks: list[np.ndarray] = []
    dictionaries: list[list[bytes]] = []
    for group, table, v, op, orow in zip(groups, appended, voids, origin_party, origin_row):
        _, _, at = np.intersect1d(kept, v, assume_unique=True, return_indices=True)  # kept is sorted
        columns.extend(table.columns)
        for j, dictionary in enumerate(table.dictionaries):
            codes_j, values = _compact(table.codes[at, j], dictionary)
            blocks.append(codes_j[:, None])
            dictionaries.append(values)
        for i, p in enumerate(group):
            mine = np.full(n, -1, dtype=np.int64)
            here = op[at] == i
            mine[here] = orow[at][here]
            rows_of[p] = mine
    codes = np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0), dtype=np.int32)
    return GroupJoin(EncodedTable(columns, codes, dictionaries), rows_of, [len(v) for v in voids],
                     int(len(union) - n))


def released_local(local: LocalData, perm: np.ndarray, released: np.ndarray) -> LocalData:
    """This party's rows that are in the release (`released` in the order the rows were sent, i.e.
    permuted by `perm`): what the recipient checks its own rows against when some were dropped."""
    keep = np.zeros(len(local.rows), dtype=bool)
    keep[np.asarray(perm)[np.asarray(released, dtype=bool)]] = True
    rows = [row for row, k in zip(local.rows, keep.tolist()) if k]
    return LocalData(list(local.columns), rows, local.hierarchies, local.tid_column, None)


def check_grouped_tallies(tallies: Mapping[str, Tally], key: bytes, table: EncodedTable,
                          transformation: Mapping[str, int], groups: Sequence[Sequence[str]],
                          rows: np.ndarray | None = None) -> list[str]:
    """Per column group: the group's announced rows add up to the release (`rows` of `table`, a
    boolean mask; all rows when None), its digests to the release's digest over the group's
    columns (a vertical run is one party per group)."""
    problems = transformation_problems(tallies, transformation)
    if problems:
        return problems
    released = table.n_rows if rows is None else int(np.count_nonzero(rows))
    for group in groups:
        group_tallies = [tallies[p] for p in group if p in tallies]
        if len(group_tallies) != len(group):
            problems.append(f"release tallies missing from parties of group {list(group)}")
            continue
        columns = group_tallies[0].columns
        if any(t.columns != columns for t in group_tallies):
            problems.append(f"the release tallies of parties {list(group)} cover different columns")
            continue
        announced = sum(t.rows for t in group_tallies)
        if announced != released:
            each = ", ".join(f"{t.party}: {t.rows}" for t in group_tallies)
            problems.append(f"the result holds {released} rows, but parties {list(group)} announced {announced} "
                            f"({each})")
            continue
        expected = sum(int(t.digest, 16) for t in group_tallies) % MODULUS
        if release_digest(key, table, columns, rows) != expected:
            problems.append(f"the result's columns of parties {list(group)} are not their rows at the reported "
                            "transformation (the multiset digest differs)")
    return problems


def held_by(roster: Any, party: str) -> set[str]:
    """The columns `party` holds according to a roster (hybrid: `holders`; vertical: `owners`)."""
    holders: dict[str, list[str]] = getattr(roster, "holders", {}) or {}
    if holders:
        return {c for c, parties in holders.items() if party in parties}
    return {c for c, owner in roster.owners.items() if owner == party}


def my_group(roster: Any, party: str) -> tuple[int, list[str]]:
    """The index of `party`'s column group among `column_groups(roster)`, and its parties."""
    for index, group in enumerate(column_groups(roster)):
        if party in group:
            return index, group
    raise ProtocolError(f"party {party!r} holds no column of the run")


def column_groups(roster: Any) -> list[list[str]]:
    """The column groups (their parties) a roster's `holders` describe, in column order."""
    groups: list[list[str]] = []
    for parties in roster.holders.values():
        if list(parties) not in groups:
            groups.append(list(parties))
    return groups


def joined_flags(rows_of: np.ndarray, n_rows: int) -> np.ndarray:
    """Which of a party's `n_rows` (in the order it sent them) are in the joined table."""
    flags = np.zeros(n_rows, dtype=bool)
    rows_of = np.asarray(rows_of)
    flags[rows_of[rows_of >= 0]] = True
    return flags


def group_pseudotuples(group_rows: Sequence[int], share: float) -> int:
    """Protocol C: one pseudotuple count for the whole run, so that every column group pads with
    the same fake identifiers and the fake rows join; from the largest group's row count."""
    return int(round(max(group_rows, default=0) * share))
