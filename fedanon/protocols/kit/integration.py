"""Integration of encrypted shares at the helper (Protocol B/C, §4.4.4.1.2).

Horizontal: append the parties' rows (merging their column dictionaries, which works
because equal plaintexts are equal ciphertexts) and merge their hierarchies, dropping
duplicate rules. Vertical: join the parties' columns on the encrypted tuple identifier
and drop it. Everything here runs on opaque bytes; inconsistencies are reported as
structured findings (column, ciphertext, parties) so the helper can ask the owning
parties to name the offending value in plaintext -- the helper itself never can.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.errors import ProtocolError


@dataclass
class HierarchyConflict:
    """Two parties' hierarchies generalize one (encrypted) value differently."""

    column: str
    level: int
    value: bytes  # ciphertext of the value at `level`
    parties: tuple[str, str]


@dataclass
class MergedHierarchies:
    hierarchies: dict[str, Hierarchy] = field(default_factory=dict)
    conflicts: list[HierarchyConflict] = field(default_factory=list)
    height_mismatch: list[str] = field(default_factory=list)  # human-readable, names parties
    rules_received: int = 0
    rules_kept: int = 0


def append_tables(tables: Sequence[EncodedTable]) -> EncodedTable:
    """Row-wise union of tables with identical columns; dictionaries are merged per column."""
    if not tables:
        raise ProtocolError("nothing to integrate: no tables received")
    columns = list(tables[0].columns)
    for t in tables[1:]:
        if list(t.columns) != columns:
            raise ProtocolError(f"cannot append tables with columns {t.columns} and {columns}")
    blocks: list[np.ndarray] = []
    dictionaries: list[list[bytes]] = [[] for _ in columns]
    lookups: list[dict[bytes, int]] = [{} for _ in columns]
    for t in tables:
        block = np.empty_like(t.codes)
        for c in range(len(columns)):
            lookup, merged = lookups[c], dictionaries[c]
            remap = np.empty(len(t.dictionaries[c]), dtype=np.int32)
            for i, value in enumerate(t.dictionaries[c]):
                code = lookup.get(value)
                if code is None:
                    code = len(merged)
                    lookup[value] = code
                    merged.append(value)
                remap[i] = code
            block[:, c] = remap[t.codes[:, c]] if t.n_rows else block[:, c]
        blocks.append(block)
    codes = np.concatenate(blocks, axis=0) if blocks else np.zeros((0, len(columns)), dtype=np.int32)
    return EncodedTable(columns, codes, dictionaries)


def merge_hierarchies(shares: Sequence[tuple[str, Hierarchy]]) -> tuple[Hierarchy | None, list[HierarchyConflict], str | None]:
    """Union of the rules of one column's hierarchies from several parties.

    Returns (merged, conflicts, height_problem). A conflict is a value (at any level)
    whose parent differs between two parties; the helper cannot say which value it is,
    only which parties disagree, so the ciphertext is kept for them to decrypt.
    """
    if not shares:
        raise ProtocolError("no hierarchies to merge")
    attribute = shares[0][1].attribute
    first_party, first = shares[0]
    for party, h in shares[1:]:
        if h.height != first.height:
            return None, [], (
                f"hierarchies of column {attribute!r} have different heights: "
                f"{first.height} levels at party {first_party!r}, {h.height} at party {party!r}"
            )
    height = first.height
    rows: list[list[bytes]] = []
    seen_rows: set[tuple[bytes, ...]] = set()
    # parent[level][value] = (parent value, party that first stated the rule)
    parent: list[dict[bytes, tuple[bytes, str]]] = [{} for _ in range(height - 1)]
    conflicts: list[HierarchyConflict] = []
    reported: set[tuple[int, bytes]] = set()
    for party, h in shares:
        for row in h.rows:
            key = tuple(row)
            if key in seen_rows:
                continue  # duplicate rule from another party: dropped
            conflict_here = False
            for level in range(height - 1):
                known = parent[level].get(row[level])
                if known is None:
                    parent[level][row[level]] = (row[level + 1], party)
                elif known[0] != row[level + 1]:
                    conflict_here = True
                    if (level, row[level]) not in reported:
                        reported.add((level, row[level]))
                        conflicts.append(HierarchyConflict(attribute, level, row[level], (known[1], party)))
                    break
            if not conflict_here:
                seen_rows.add(key)
                rows.append(list(row))
    if conflicts:
        return None, conflicts, None
    return Hierarchy(attribute, rows, source=f"integrated hierarchy of {attribute!r}"), [], None


def merge_all_hierarchies(shares: dict[str, list[tuple[str, Hierarchy]]]) -> MergedHierarchies:
    """Merge every column's hierarchies; collects all problems instead of stopping at the first."""
    out = MergedHierarchies()
    for column, column_shares in shares.items():
        out.rules_received += sum(len(h.rows) for _, h in column_shares)
        merged, conflicts, height_problem = merge_hierarchies(column_shares)
        if height_problem:
            out.height_mismatch.append(height_problem)
        out.conflicts.extend(conflicts)
        if merged is not None:
            out.hierarchies[column] = merged
            out.rules_kept += len(merged.rows)
    return out


@dataclass
class TidMismatch:
    """Encrypted TIDs some party holds but another lacks (vertical integration)."""

    missing_at: dict[str, int]  # party -> number of TIDs the others have but it lacks
    only_at: dict[str, list[bytes]]  # party -> (a few) TID tokens it holds that another party lacks
    duplicates_at: dict[str, int] = field(default_factory=dict)


def _sorted(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of (n, w) uint64 token words in lexicographic order (first word most significant)."""
    order = np.lexsort(keys.T[::-1]) if keys.shape[1] else np.arange(len(keys))
    return order, keys[order]


def _duplicates(sorted_keys: np.ndarray) -> int:
    if len(sorted_keys) < 2:
        return 0
    return int(np.all(sorted_keys[1:] == sorted_keys[:-1], axis=1).sum())


def check_tids(tokens: dict[str, np.ndarray], sample: int = 5) -> TidMismatch | None:
    """Compare the parties' TID token sets ((n, w) uint64 each, see `token_keys`); None when all are equal."""
    parties = list(tokens)
    sorted_keys = {p: _sorted(k)[1] for p, k in tokens.items()}
    duplicates = {p: d for p in parties if (d := _duplicates(sorted_keys[p]))}
    ref = sorted_keys[parties[0]]
    if not duplicates and all(len(sorted_keys[p]) == len(ref) and np.array_equal(sorted_keys[p], ref)
                              for p in parties[1:]):
        return None
    # error path only: plain sets are clear and fast enough
    sets = {p: {bytes(k.astype(">u8").tobytes()) for k in sorted_keys[p]} for p in parties}
    union: set[bytes] = set().union(*sets.values())
    missing_at = {p: len(union - s) for p, s in sets.items() if len(s) != len(union)}
    only_at: dict[str, list[bytes]] = {}
    for party, s in sets.items():
        others = [o for q, o in sets.items() if q != party]
        lacking = [t for t in s if any(t not in o for o in others)]
        if lacking:
            only_at[party] = sorted(lacking)[:sample]
    return TidMismatch(missing_at, only_at, duplicates)


def join_on_tid(tables: dict[str, EncodedTable], tokens: dict[str, np.ndarray]
                ) -> tuple[EncodedTable, dict[str, np.ndarray]]:
    """Join column shares on their TID tokens (sets must be equal: `check_tids` first).

    Sorting every party's tokens aligns equal TIDs (vectorized, O(n log n)). Returns the
    joined table (columns in party order) and, per party, the row index into that
    party's table of every joined row (to align side data such as subset flags).
    """
    parties = list(tables)
    ref_order, ref_sorted = _sorted(tokens[parties[0]])
    n = len(ref_order)
    columns: list[str] = []
    blocks: list[np.ndarray] = []
    dictionaries: list[list[bytes]] = []
    alignment: dict[str, np.ndarray] = {}
    for party in parties:
        table = tables[party]
        order_p, sorted_p = _sorted(tokens[party])
        if len(order_p) != n or table.n_rows != n or not np.array_equal(sorted_p, ref_sorted):
            raise ProtocolError(f"party {party!r}: TID set differs from party {parties[0]!r}'s")
        order = np.empty(n, dtype=np.int64)  # order[i] = this party's row for joined row i
        order[ref_order] = order_p
        alignment[party] = order
        columns.extend(table.columns)
        blocks.append(table.codes[order])
        dictionaries.extend(table.dictionaries)
    codes = np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0), dtype=np.int32)
    return EncodedTable(columns, codes, dictionaries), alignment
