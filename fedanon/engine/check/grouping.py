"""The grouper: transform-and-group any lattice node, with roll-up and a bounded snapshot history (§3.6).

Rows are never visited in Python: a node's generalized QI codes are gathered
through per-level code maps and combined into one mixed-radix key per row, in the
narrowest unsigned type that holds the node's key span (1-4 bytes per row instead
of 8: building the key was the largest part of a row grouping). Where the span is
small the keys are grouped by counting -- one `bincount` gives the class sizes and
the present keys, whose mixed-radix digits are the class codes -- so the cost is
linear in the rows; larger spans are grouped with one sort. Because hierarchies
are monotone, the classes of a more general node are unions of the classes of any
more specific node, so once a node was grouped we can roll up from its (much
smaller) class table instead of the rows.
"""

from __future__ import annotations

from collections import OrderedDict

from typing import Protocol

import numpy as np

from fedanon.stats.classes import Classes, ClassStats, KeyDigits
from fedanon.stats.classhist import SparseHistogram
from fedanon.stats.histograms import KeyCounts, RowCounts, sum_by_class
from fedanon.stats import keys
from fedanon.stats.keys import (combined_key, count_keys, gather,
                                group_key, group_keys, key_sizes, key_span, level_fields,
                                narrowest_uint, packed_levels)

_FLOAT_EXACT = 1 << 53  # roll-up keys below this span are one float matrix-vector product (exact)
_ROLLUP_COUNTING = 4  # roll-ups count keys only where the span is at most this many times the classes
# a class of a snapshot costs a roll-up about three times what a row costs a grouping that needs
# the class sizes only (the roll-up's float key, arg-sort with the class map, gather and sums
# against the row keys' in-place sort and run lengths; ADULT: crossover near 0.3 x the rows):
# above this share of the rows, such a node is grouped from the rows instead
_SIZES_ROLLUP_SHARE = 0.3
# tables up to this many rows count a dense histogram from rows only when it is read: until then
# the node keeps its row -> class map or its rows' keys (at most 8 bytes a row, for every stored
# snapshot: at most 128 MiB over 256 snapshots); larger tables count at once, as their maps
# would hold too much memory
_DEFER_ROW_COUNTS = 1 << 16
# level-0 code columns kept in their own type (any other is copied to int32): every use widens
# them first (the key fold starts in the key's type, gathers index with them, counts bincount them)
_LEVEL0_TYPES = (np.dtype(np.int32), np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32))
_FREE_LEVEL = np.iinfo(np.int16).max
_FREE_COST = np.iinfo(np.int64).max
_MAX_RANK_COST = (1 << 31) - 2  # a snapshot's roll-up cost in the rank's upper half (clipped, never reached: a rank stays below _FREE_COST)
_TICK_MASK = (1 << 32) - 1


def _float_strides(radices: list[int]) -> np.ndarray:
    """Place values of the mixed-radix key over `radices` (QI 0 most significant), float64."""
    values = [1.0] * len(radices)
    for i in range(len(radices) - 2, -1, -1):
        values[i] = values[i + 1] * max(radices[i + 1], 1)
    return np.array(values, dtype=np.float64)


def _accumulate(total: np.ndarray | None, part: np.ndarray) -> np.ndarray:
    """`part` added into `total` in place; the first part becomes the total (no zeroed array)."""
    if total is None:
        return part
    total += part
    return total


def _rollup_cost(classes: Classes) -> int:
    """Work of rolling up from a snapshot: its classes plus its summed sparse histogram entries
    (with a large sensitive domain the entries, up to one per row, dominate; a pending
    roll-up's are summed only if a criterion reads them, so they are not counted)."""
    return classes.count + sum(h.entries for h in classes.stats.histograms.sparse() if not h.pending)


class RowPartitions(Protocol):
    """Something that groups all rows at a node, e.g. partition by partition in parallel."""

    def takes(self, levels: tuple[int, ...]) -> bool:
        """Whether grouping at `levels` goes here (else the grouper groups the rows itself)."""

    def group_rows(self, levels: tuple[int, ...]) -> Classes:
        """The classes of `levels` over all rows, as `Grouper.group_rows` computes them."""


class Grouper:
    """Transforms and groups one encoded table for any lattice node."""

    def __init__(
        self,
        qi_codes: np.ndarray | list[np.ndarray],
        code_maps: list[np.ndarray],
        sensitive_codes: dict[str, np.ndarray] | None = None,
        sensitive_sizes: dict[str, int] | None = None,
        subset: np.ndarray | None = None,
        history_size: int = 256,
        snapshot_fraction: float = 0.6,
        history_budget: float = 8.0,
        history_mib: int = 96,
        column_cache_mib: int = 160,
        sparse_domain: int = 32,
        saturation: dict[str, int] | None = None,
        n_rows: int | None = None,
    ) -> None:
        """`n_rows`: the table's rows where they are held by a backend's partitions elsewhere
        (a cluster's workers read them from the files); the columns are then empty, and every
        row grouping must go to that backend."""
        # one contiguous integer column per QI, and nothing else per row: a column that already is
        # contiguous int32 (a column-major table's) or unsigned of at most 4 bytes (a backend's
        # partition in the narrowest type of its dictionary: 1-2 bytes a row) is used as it is
        columns = list(qi_codes.T) if isinstance(qi_codes, np.ndarray) else list(qi_codes)
        self._qi_columns = [np.ascontiguousarray(c, dtype=c.dtype if c.dtype in _LEVEL0_TYPES else np.int32)
                            for c in columns]
        self.n_qis = len(self._qi_columns)
        held = int(qi_codes.shape[0] if isinstance(qi_codes, np.ndarray) else
                   self._qi_columns[0].shape[0] if self._qi_columns else 0)
        self.n_rows = held if n_rows is None else int(n_rows)
        self.rows_elsewhere = n_rows is not None and held != self.n_rows
        self.code_maps = code_maps
        self.level_sizes = [(m.max(axis=1) + 1).tolist() if m.shape[1] else [0] * m.shape[0] for m in code_maps]
        self.sensitive_codes = sensitive_codes or {}
        self.sensitive_sizes = sensitive_sizes or {}
        # flags, 1 byte a row (the counts use `_subset_rows`; nothing sums the flags as weights)
        self.subset = None if subset is None else subset if subset.dtype == np.bool_ else np.asarray(subset) != 0
        # the research subset's rows: counting their keys (an integer bincount over a tenth of
        # the rows, say) costs a fraction of a float-weighted bincount over all rows
        self._subset_rows = None if subset is None else np.flatnonzero(subset)
        # sensitive attributes with more distinct values than this keep sparse class histograms
        self.sparse = {a for a, d in self.sensitive_sizes.items() if d > sparse_domain}
        # the source of every generalized column (used as they are: no extra copy per row)
        self._base_columns = self._qi_columns
        # sparse histograms may forget classes with this many distinct values (criteria.saturation_thresholds)
        self.saturation = dict(saturation or {})
        # generalized codes in the narrowest unsigned type: 1-2 bytes per row and level instead
        # of 4, so on millions of rows 4x more cached columns fit and gathers move less memory
        self._narrow_maps = [m.astype(narrowest_uint(max(sizes) - 1 if m.size else 0))
                             for m, sizes in zip(code_maps, self.level_sizes)]
        self._columns: dict[tuple[int, int], np.ndarray] = {}
        self._column_bytes = 0
        self.column_cache_bytes = column_cache_mib << 20  # bound memory on very large tables
        self.history_size = history_size
        self.snapshot_limit = max(1, int(snapshot_fraction * self.n_rows))
        # total classes kept across all snapshots: at most history_budget x rows and history_mib MiB
        # bytes one stored class costs: QI codes, size, sensitive histograms, subset count
        per_class = (4 * self.n_qis + 8 + (8 if subset is not None else 0)
                     + sum(24 if a in self.sparse else 8 * d for a, d in self.sensitive_sizes.items()))
        by_memory = (history_mib << 20) // per_class
        self.history_budget = max(1, min(int(history_budget * self.n_rows), by_memory))
        self._history_classes = 0
        self._history: "OrderedDict[tuple[int, ...], Classes]" = OrderedDict()
        # stored snapshots in fixed slots, so finding the cheapest stored specialization is
        # one vectorized comparison with no per-check rebuilding; a free slot's levels are
        # above every node (never "below") and its cost is the maximum
        self._slot_levels = np.full((history_size, self.n_qis), _FREE_LEVEL, dtype=np.int16)
        # the same levels packed into one int64 per slot, a guard bit above each QI's field, where
        # they fit (`packed_levels`): "stored node below the asked one" is then three operations
        # on one small vector instead of a comparison and a row-wise reduction of the slot matrix
        self._level_offsets, self._guard = level_fields([len(sizes) - 1 for sizes in self.level_sizes])
        self._slot_packed = np.zeros(history_size, dtype=np.int64)
        # per slot: roll-up cost << 32 | last use (the LRU position, which breaks ties), so the
        # cheapest stored specialization, least recently used among equals, is one argmin
        self._slot_rank = np.full(history_size, _FREE_COST, dtype=np.int64)  # the maximum when free
        self._tick = 0
        self._slot_snap: list[Classes | None] = [None] * history_size
        self._slot_of: dict[tuple[int, ...], int] = {}
        self._free_slots = list(range(history_size - 1, -1, -1))
        self._level_maps: dict[tuple, np.ndarray] = {}
        self._shapes: dict[tuple[int, ...], tuple[list[int], int, bool, np.ndarray]] = {}  # levels -> `_shape`
        self.rollups = 0
        self.row_groupings = 0
        #: groups the rows of a node elsewhere (worker processes, `engine/parallel_grouping.py`);
        #: it must return exactly what `group_rows` returns without it
        self.row_partitions: "RowPartitions | None" = None

    # ------------------------------------------------------------------ helpers
    def qi_column(self, qi: int) -> np.ndarray:
        """Level-0 codes of one QI for all rows (contiguous; do not modify): int32 as a table holds
        them, or the narrowest unsigned type in a backend's partition -- widen before arithmetic."""
        return self._qi_columns[qi]

    def column(self, qi: int, level: int) -> np.ndarray:
        """Generalized codes of one QI at one level for all rows, in the narrowest unsigned type,
        cached (transform = lookup); do not modify. Public because the output table is built from
        the optimum's columns, which the search has mostly cached (`anonymizer.generalize`)."""
        key = (qi, level)
        col = self._columns.get(key)
        if col is None:
            # from the most general cached lower level if any: its 1-2 byte codes are read
            # instead of the 4-byte input codes (on millions of rows not every column fits)
            src = max((l for l in range(level) if (qi, l) in self._columns), default=None)
            if src is None:
                col = gather(self._narrow_maps[qi][level], self._base_columns[qi])
            else:
                col = gather(self._narrow_level_map(qi, src, level), self._columns[(qi, src)])
            if self._column_bytes + col.nbytes <= self.column_cache_bytes:
                self._columns[key] = col
                self._column_bytes += col.nbytes
        return col

    def level_map(self, qi: int, src: int, dst: int) -> np.ndarray:
        """Code at level `src` -> code at level `dst` (well defined: hierarchy is monotone).

        Public because class codes are lifted outside the grouper too (Protocol C's helper maps
        its cached nodes' classes onto coarser ones: `protocols.class_sums`)."""
        key = (qi, src, dst)
        m = self._level_maps.get(key)
        if m is None:
            cm = self.code_maps[qi]
            m = np.zeros(self.level_sizes[qi][src], dtype=np.int32)
            m[cm[src]] = cm[dst]
            self._level_maps[key] = m
        return m

    def _narrow_level_map(self, qi: int, src: int, dst: int) -> np.ndarray:
        """`level_map` in the narrowest unsigned type of the destination codes."""
        key = (qi, src, dst, "narrow")
        m = self._level_maps.get(key)
        if m is None:
            m = self.level_map(qi, src, dst).astype(self._narrow_maps[qi].dtype)
            self._level_maps[key] = m
        return m

    def key_shape(self, levels: tuple[int, ...]) -> tuple[list[int], int, bool]:
        """(radices, key span, exact) of a node's mixed-radix key: per QI the number of codes at
        its level, their product and whether it is exact (`key_span`); cached per node, so the
        list must not be modified. Public for the row partitions (`parallel_grouping.py`), which
        decide per node how to group it."""
        radices, span, exact, _ = self._shape(tuple(levels))
        return radices, span, exact

    def _shape(self, levels: tuple[int, ...]) -> tuple[list[int], int, bool, np.ndarray]:
        """(radices, key span, exact, float strides) of a node's key, cached per node: a check
        needs them once or twice, and building them cost ~10 us of Python per check."""
        shape = self._shapes.get(levels)
        if shape is None:
            radices = [self.level_sizes[i][l] for i, l in enumerate(levels)]
            span, exact = key_span(radices)
            shape = self._shapes[levels] = (radices, span, exact, _float_strides(radices))
        return shape

    def _float_level_map(self, qi: int, src: int, dst: int) -> np.ndarray:
        """`level_map` as float64 (gathered straight into the roll-up's float code matrix)."""
        key = (qi, src, dst, "float")
        m = self._level_maps.get(key)
        if m is None:
            m = self._level_maps[key] = self.level_map(qi, src, dst).astype(np.float64)
        return m

    def _rollup_key(self, base: Classes, changed: list[tuple[int, int, int]], strides: np.ndarray) -> np.ndarray:
        """Mixed-radix key at the roll-up's levels (`changed`: QI, from, to) of every class of `base`.

        One float matrix-vector product instead of a multiply and an add per QI (on class
        tables of a few thousand rows those NumPy calls were most of a roll-up). Exact where
        the span is at most 2^53: every product and partial sum is an integer below the span.
        """
        values = base.codes.astype(np.float64)
        for i, src, dst in changed:
            values[:, i] = self._float_level_map(i, src, dst)[base.codes[:, i]]
        return (values @ strides).astype(np.int64)

    # ------------------------------------------------------------------ grouping
    def group_rows(self, levels: tuple[int, ...], keep_rows: bool = False) -> Classes:
        """Group the full table at `levels` (no snapshot used)."""
        self.row_groupings += 1
        if self.row_partitions is not None and not keep_rows and self.row_partitions.takes(tuple(levels)):
            return self.row_partitions.group_rows(tuple(levels))
        if self.rows_elsewhere:
            raise RuntimeError("this table's rows are held by a backend's partitions; they cannot be grouped here")
        cols = [self.column(i, l) for i, l in enumerate(levels)]
        radices, span, exact, _ = self._shape(tuple(levels))
        if exact and span <= keys.BLOCK_SPAN and not keep_rows and not self.sparse and all(
                span * d <= keys.BLOCK_SPAN for d in self.sensitive_sizes.values()):
            return self._count_blocks(tuple(levels), cols, radices, span)
        key, span, exact = combined_key(cols, radices)
        if exact and not keep_rows and not self.sensitive_codes and self.subset is None:
            return self._sizes_only(tuple(levels), key, span, radices)
        if exact and span <= keys.counting_span(self.n_rows):
            keys_present, inverse = count_keys(key, span)  # the class codes are the keys' digits
            return self._row_stats(tuple(levels), KeyDigits(keys_present, radices), inverse, None, keep_rows)
        first, inverse = group_key(key, span)
        n_classes = first.shape[0]
        codes = np.empty((n_classes, len(levels)), dtype=np.int32)
        for i, col in enumerate(cols):
            codes[:, i] = col[first]
        return self._row_stats(tuple(levels), codes, inverse, None, keep_rows)

    def _sizes_only(self, levels: tuple[int, ...], key: np.ndarray, span: int, radices: list[int]) -> Classes:
        """Classes whose only statistic is their size (k-anonymity): no class per row needed.

        The sizes are counts of equal exact keys (a `bincount` over a small span, else
        run lengths of the sorted keys) and the class codes the present keys' digits, in
        ascending key order as on the other paths. Skipping the row -> class map saves
        the packed sort's index bits, the scatter of the inverse and a gather per QI.
        `key` is the caller's own temporary (`combined_key` always returns a new array)
        and is sorted in place: no second copy of 4 bytes a row.
        """
        present, sizes = key_sizes(key, span, self.n_rows)
        return Classes(levels, KeyDigits(present, radices), ClassStats(sizes, {}))

    def _count_blocks(self, levels: tuple[int, ...], cols: list[np.ndarray], radices: list[int],
                      span: int) -> Classes:
        """Every statistic by counting keys over the span, block by block of rows.

        Blocks of `keys.BLOCK_ROWS` keep the keys and bincount's temporaries in cache: on
        millions of rows one whole-table bincount cost 6-9x more per row than on one
        million (a fresh 8-byte copy of every key). The present keys are the classes, in
        ascending key order as on the sort path; their digits are the class codes.
        """
        n = self.n_rows
        # sums start as the first block's counts (no zeroed arrays to add into); later blocks add in place
        counts: np.ndarray | None = None
        cells: dict[str, np.ndarray] = {}
        subset: np.ndarray | None = None
        subset_rows = self._subset_rows
        defer = n <= min(_DEFER_ROW_COUNTS, keys.BLOCK_ROWS)  # one block: its keys give the cells when read
        for start in range(0, max(n, 1), keys.BLOCK_ROWS):
            stop = min(n, start + keys.BLOCK_ROWS)
            key, _, _ = combined_key([c[start:stop] for c in cols], radices)
            counts = _accumulate(counts, np.bincount(key, minlength=span))
            for attr, scodes in ({} if defer else self.sensitive_codes).items():
                d = self.sensitive_sizes[attr]
                cell = key.astype(np.int64)
                np.multiply(cell, d, out=cell)
                np.add(cell, scodes[start:stop], out=cell)
                cells[attr] = _accumulate(cells.get(attr), np.bincount(cell, minlength=span * d))
            if subset_rows is not None:
                lo, hi = np.searchsorted(subset_rows, (start, stop))
                subset = _accumulate(subset, np.bincount(np.take(key, subset_rows[lo:hi] - start), minlength=span))
        assert counts is not None  # the loop runs at least once
        present = np.flatnonzero(counts != 0)  # a bool mask: nonzero() on int64 is 4-6x slower
        hists: dict = {a: c.reshape(span, -1)[present] for a, c in cells.items()}
        if defer:
            hists = {a: KeyCounts(key, scodes, span, self.sensitive_sizes[a], present)
                     for a, scodes in self.sensitive_codes.items()}
        subset_sizes = None if subset is None else subset[present].astype(np.int64, copy=False)
        return Classes(levels, KeyDigits(present, radices), ClassStats(counts[present], hists, subset_sizes))

    def _row_stats(self, levels: tuple[int, ...], codes: np.ndarray | KeyDigits, inverse: np.ndarray,
                   sizes: np.ndarray | None, keep_rows: bool) -> Classes:
        """Classes from the class of each row: sizes, sensitive histograms, subset counts."""
        n_classes = len(codes)
        if sizes is None:
            sizes = np.bincount(inverse, minlength=n_classes).astype(np.int64, copy=False)
        hists: dict = {}
        for attr, scodes in self.sensitive_codes.items():
            d = self.sensitive_sizes[attr]
            if attr in self.sparse:
                hists[attr] = SparseHistogram.from_rows(inverse, scodes, n_classes, d,
                                                          self.saturation.get(attr, 0))
                continue
            counts = RowCounts(inverse, scodes, n_classes, d)  # counted when a criterion reads it
            hists[attr] = counts if self.n_rows <= _DEFER_ROW_COUNTS else counts.compute()
        subset_sizes = None
        if self._subset_rows is not None:
            subset_sizes = np.bincount(np.take(inverse, self._subset_rows), minlength=n_classes).astype(np.int64, copy=False)
        return Classes(levels, codes, ClassStats(sizes, hists, subset_sizes), inverse if keep_rows else None)

    def rollup(self, base: Classes, levels: tuple[int, ...]) -> Classes:
        """Classes at `levels` from the classes of a more specific node `base`."""
        self.rollups += 1
        radices, span, exact, strides = self._shape(levels)
        changed = [(i, src, dst) for i, (src, dst) in enumerate(zip(base.levels, levels)) if src != dst]
        if exact and span <= _FLOAT_EXACT:
            first, inverse = group_key(self._rollup_key(base, changed, strides), span,
                                       counting_limit=_ROLLUP_COUNTING * base.count)
        else:
            cols = [base.codes[:, i] for i in range(self.n_qis)]
            for i, src, dst in changed:
                cols[i] = self.level_map(i, src, dst)[cols[i]]
            first, inverse = group_keys(cols, radices)
        n_classes = first.shape[0]
        # one gather of whole rows, then the generalized columns mapped on the kept rows only
        codes = np.take(base.codes, first, axis=0)
        for i, src, dst in changed:
            codes[:, i] = self.level_map(i, src, dst)[codes[:, i]]
        st = base.stats
        # the histograms are summed when a criterion reads them (most nodes fail on sizes alone)
        hists = st.histograms.rolled_up(inverse, n_classes) if st.histograms else st.histograms
        sizes = sum_by_class(inverse, n_classes, st.sizes)
        subset_sizes = None if st.subset_sizes is None else sum_by_class(inverse, n_classes, st.subset_sizes)
        return Classes(tuple(levels), codes, ClassStats(sizes, hists, subset_sizes),
                       rolled_from=base.levels, mapping=inverse)

    def classes(self, levels: tuple[int, ...], keep_rows: bool = False) -> tuple[Classes, bool]:
        """Classes of a node, rolled up from the best stored snapshot when possible.

        Returns (classes, rolled_up). The best snapshot is a stored specialization
        that is cheapest to roll up (fewest classes plus sparse histogram entries). A rolled-up result names its
        snapshot (`rolled_from`) and the class mapping; one grouped from the rows
        carries `row_class` when `keep_rows`. Class order is canonical (ascending
        mixed-radix key), so rows and roll-up give the same order for a node.
        """
        levels = tuple(map(int, levels))
        hit = self._history.get(levels)
        if hit is not None:
            self._touch(levels)
            return hit, True
        best, packed = self._stored_base(levels)
        if best is not None and self._rows_cost_less(levels, best, keep_rows):
            best = None
        if best is not None:
            result = self.rollup(best, levels)
            self._touch(best.levels)
            rolled = True
        else:
            result = self.group_rows(levels, keep_rows=keep_rows)
            rolled = False
        self.remember(result, packed)
        return result, rolled

    def _rows_cost_less(self, levels: tuple[int, ...], base: Classes, keep_rows: bool) -> bool:
        """Whether grouping the rows costs less than rolling `base` up: where the node needs its
        class sizes alone (`group_rows`'s sizes-only and counting paths; wherever the rows are
        held, so that every backend groups the same nodes from rows) and `base` has more than
        `_SIZES_ROLLUP_SHARE` of the rows as classes."""
        if keep_rows or self.sensitive_codes or self.subset is not None:
            return False
        return base.rollup_cost > _SIZES_ROLLUP_SHARE * self.n_rows and self._shape(levels)[2]

    def _stored_base(self, levels: tuple[int, ...]) -> tuple[Classes | None, int | None]:
        """(the cheapest stored specialization of `levels` or None, the node's packed levels or None)."""
        if not self._history:
            return None, None
        packed = None
        if self._level_offsets is not None:
            packed = packed_levels(levels, self._level_offsets)
            asked = packed | self._guard
            below = ((asked - self._slot_packed) & self._guard) == self._guard
        else:
            below = (self._slot_levels <= np.array(levels, dtype=np.int16)).all(axis=1)
        rank = np.where(below, self._slot_rank, _FREE_COST)
        slot = int(rank.argmin())
        return (self._slot_snap[slot] if rank[slot] < _FREE_COST else None), packed

    def groups_rows_at(self, levels: tuple[int, ...]) -> bool:
        """Whether `classes(levels)` would group the rows (no stored snapshot of the node or of a
        specialization to roll up from). A checker that has the classes judged where the rows are
        (`check/checker.py`) asks this first, so a roll-up stays a roll-up."""
        levels = tuple(map(int, levels))
        return levels not in self._history and self._stored_base(levels)[0] is None

    def keeps(self, count: int) -> bool:
        """Whether `remember` would store a class table of `count` classes."""
        return count <= self.snapshot_limit and count <= self.history_budget

    def grouped_elsewhere(self, classes: Classes) -> None:
        """A node's classes grouped from the rows outside `classes` (and brought here whole): counted
        and remembered as `classes` does with its own row groupings."""
        self.row_groupings += 1
        self.remember(classes)

    def passed_over(self, levels: tuple[int, ...], count: int) -> None:
        """A node's `count` classes were grouped and judged elsewhere and not brought here: the
        row grouping is counted and the history makes room as `remember` would have, so the
        snapshots (and with them every later roll-up) are those of grouping the node here."""
        self.row_groupings += 1
        levels = tuple(map(int, levels))
        if count > self.snapshot_limit or levels in self._history:
            return
        self._make_room(count)

    def _make_room(self, count: int) -> None:
        """Evict least recently used snapshots until one of `count` classes fits the bounds."""
        while self._history and (len(self._history) >= self.history_size
                                 or self._history_classes + count > self.history_budget):
            old_levels, old = self._history.popitem(last=False)
            self._history_classes -= old.count
            slot = self._slot_of.pop(old_levels)
            if self._level_offsets is None:  # as `remember` writes it: only where levels do not pack
                self._slot_levels[slot] = _FREE_LEVEL
            self._slot_rank[slot] = _FREE_COST
            self._slot_snap[slot] = None
            self._free_slots.append(slot)

    def _touch(self, levels: tuple[int, ...]) -> None:
        """Mark a stored snapshot as most recently used."""
        self._history.move_to_end(levels)
        self._tick += 1
        slot = self._slot_of[levels]
        self._slot_rank[slot] = (self._slot_rank[slot] >> 32 << 32) | (self._tick & _TICK_MASK)

    def remembers(self, levels: tuple[int, ...]) -> bool:
        """Whether a snapshot of `levels` is stored (callers caching their own per-node sums use it)."""
        return tuple(int(x) for x in levels) in self._history

    def remember(self, classes: Classes, packed: int | None = None) -> None:
        """Keep a snapshot if it is small enough to make later roll-ups cheap (bounded LRU).

        `packed`: the node's `packed_levels` if the caller has them already."""
        if classes.count > self.snapshot_limit:
            return
        if classes.levels in self._history:
            return
        snapshot = classes.snapshot()
        # without sparse histograms the roll-up cost is the class count (`_rollup_cost`)
        snapshot.rollup_cost = _rollup_cost(snapshot) if self.sparse else snapshot.count
        self._make_room(classes.count)
        if classes.count > self.history_budget:
            return
        slot = self._free_slots.pop()
        self._history[classes.levels] = snapshot
        self._history_classes += classes.count
        self._slot_of[classes.levels] = slot
        if self._level_offsets is not None:  # the packed levels are all `classes` compares
            self._slot_packed[slot] = packed_levels(classes.levels, self._level_offsets) if packed is None else packed
        else:
            self._slot_levels[slot] = classes.levels
        self._tick += 1
        self._slot_rank[slot] = (min(snapshot.rollup_cost, _MAX_RANK_COST) << 32) | (self._tick & _TICK_MASK)
        self._slot_snap[slot] = snapshot
