"""Mixed-radix key arithmetic for grouping rows by their generalized codes (§3.6).

Rows are never visited in Python: a node's generalized QI codes are combined into one
mixed-radix key per row, in the narrowest unsigned type that holds the node's key span
(1-4 bytes per row instead of 8: building the key was the largest part of a row grouping).
Where the span is small the keys are grouped by counting -- one `bincount` gives the class
sizes and the present keys, whose mixed-radix digits are the class codes -- so the cost is
linear in the rows; larger spans are grouped with one sort.

These functions are shared by the grouper (`fedanon.engine.check.grouping`), the privacy
models that key sensitive values per class, and the row-partition backends.
"""

from __future__ import annotations

import numpy as np

_KEY_LIMIT = 1 << 62
BLOCK_ROWS = 1 << 18  # rows per block when counting: keys and temporaries stay in cache
BLOCK_SPAN = 1 << 16  # largest key span counted block by block (the counts stay in L2)


def narrowest_uint(max_value: int) -> type:
    """Smallest unsigned NumPy integer type holding 0..max_value."""
    for t in (np.uint8, np.uint16, np.uint32):
        if max_value <= np.iinfo(t).max:
            return t
    return np.uint64


def key_dtype(span: int) -> type:
    """Narrowest type for mixed-radix keys in [0, span): unsigned up to 32 bits, else int64
    (what the sort path packs into)."""
    if span <= 1 << 8:
        return np.uint8
    if span <= 1 << 16:
        return np.uint16
    if span <= 1 << 32:
        return np.uint32
    return np.int64


def gather(table: np.ndarray, index: np.ndarray) -> np.ndarray:
    """`table[index]` by `np.take`, block by block.

    Subscripting with an index narrower than intp runs NumPy's casting iterator: 2.2x
    slower than `take` on 30 k rows. Blocks, because on millions of rows even `take`
    converts the whole index to intp first; per block that stays in cache (2x faster)."""
    n = index.shape[0]
    if n <= BLOCK_ROWS:
        return np.take(table, index)
    out = np.empty(n, dtype=table.dtype)
    for start in range(0, n, BLOCK_ROWS):
        np.take(table, index[start:start + BLOCK_ROWS], out=out[start:start + BLOCK_ROWS])
    return out


_COMPARE_DOMAIN = 8  # value counts of a column with at most this many values: one comparison per value


def value_counts(column: np.ndarray, size: int) -> np.ndarray:
    """How often each value 0..size-1 occurs in an integer column (int64).

    `bincount` adds one to a counter per row; where a column has only a few values
    (sex, race, a workclass), consecutive rows mostly add to the same counter and wait
    on each other: ~2 ns a row on ADULT's two-valued columns, against ~1 ns over 70
    values. A vectorized comparison and count per value is ~0.2 ns a row each, so up to
    `_COMPARE_DOMAIN` values counting by comparison is the faster way.
    """
    if size <= _COMPARE_DOMAIN:
        return np.array([np.count_nonzero(column == v) for v in range(size)], dtype=np.int64)
    return np.bincount(column, minlength=size).astype(np.int64, copy=False)


def key_span(radices: list[int]) -> tuple[int, bool]:
    """(span of the mixed-radix key, exact): exact if it fits without compaction."""
    total = 1
    for radix in radices:
        if radix > 1:
            total *= radix
    return total, total < _KEY_LIMIT


def combined_key(columns: list[np.ndarray], radices: list[int]) -> tuple[np.ndarray, int, bool]:
    """Fold integer columns into one mixed-radix key per row: (key, span, exact).

    `exact`: the key is the plain mixed radix number of the column values (so its
    digits are the values); False when the radix product would overflow 62 bits and
    a partial key had to be compacted to dense group ids first. The key has the
    narrowest type for its span (`key_dtype`); columns must be non-negative integers
    below their radix.
    """
    n = columns[0].shape[0]
    total, exact = key_span(radices)
    if exact and n > BLOCK_ROWS:
        return _blocked_key(columns, radices, total), total, True
    dtype = key_dtype(total) if exact else np.int64
    key: np.ndarray | None = None
    span = 1
    for col, radix in zip(columns, radices):
        if radix <= 1:
            continue
        if key is None:
            key = col.astype(dtype)
            span = radix
            continue
        if span * radix >= _KEY_LIMIT:
            first, key = group_key(key, span)
            span = max(int(first.shape[0]), 1)
        # in place: no temporaries on large tables; values stay below the final span,
        # so the unsafe cast of a wider column into a narrow key is exact
        np.multiply(key, radix, out=key)
        np.add(key, col, out=key, casting="unsafe")
        span *= radix
    if key is None:
        key = np.zeros(n, dtype=np.uint8)
    return key, span, exact


def _blocked_key(columns: list[np.ndarray], radices: list[int], span: int) -> np.ndarray:
    """The exact mixed-radix key (`combined_key`) built block of rows by block of rows.

    One multiply-add pass per column over the whole key streams it through memory once per
    column; on millions of rows the key (4 bytes a row) no longer stays in cache between the
    passes, so building it cost 7x more at 4.8 M rows than at 1.2 M. Per block all passes
    hit the cache and the cost is linear in the rows. Same values as the unblocked fold.
    """
    n = columns[0].shape[0]
    key = np.empty(n, dtype=key_dtype(span))
    used = [(col, radix) for col, radix in zip(columns, radices) if radix > 1]
    if not used:
        key[:] = 0
        return key
    for start in range(0, n, BLOCK_ROWS):
        part = key[start:start + BLOCK_ROWS]
        part[:] = used[0][0][start:start + BLOCK_ROWS]
        for col, radix in used[1:]:
            np.multiply(part, radix, out=part)
            np.add(part, col[start:start + BLOCK_ROWS], out=part, casting="unsafe")
    return key


def key_sizes(key: np.ndarray, span: int, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(present keys ascending, how often each occurs as int64) of keys in [0, span).

    A `bincount` where the span is small against `n_rows` (`sizes_counting_span`), else run
    lengths of the sorted keys. `key` is sorted in place on that path: pass a temporary.
    """
    if key.shape[0] == 0:
        return key[:0], np.zeros(0, dtype=np.int64)
    if span <= sizes_counting_span(n_rows):
        counts = np.bincount(key, minlength=span)
        present = np.flatnonzero(counts != 0)  # a bool mask: nonzero() on int64 is 4-6x slower
        return present, counts[present].astype(np.int64, copy=False)
    key.sort()
    starts = np.flatnonzero(run_starts(key))
    sizes = np.empty(starts.shape[0], dtype=np.int64)  # run lengths (np.diff with append concatenates)
    np.subtract(starts[1:], starts[:-1], out=sizes[:-1])
    sizes[-1] = key.shape[0] - starts[-1]
    return key[starts], sizes


def mixed_radix_digits(keys: np.ndarray, radices: list[int]) -> np.ndarray:
    """Column values of exact keys (`combined_key`): int32 (len(keys), len(radices)).

    Computed in 4-byte unsigned arithmetic where the span allows (half the memory
    traffic of int64 and a faster division by a scalar), digit by digit into
    contiguous rows of a (radices, keys) table that is transposed once at the end:
    the per-digit strided writes into (keys, radices) and the int64 temporaries cost
    about 2x. Exact: quotient x radix never exceeds the dividend.
    """
    n = keys.shape[0]
    total, _ = key_span(radices)
    # exact keys lie in [0, span), so below 2^32 the cast to uint32 is exact whatever their type
    rest = keys.astype(np.uint32 if total < 1 << 32 else np.int64)
    quotient = np.empty_like(rest)
    product = np.empty_like(rest)
    out = np.zeros((len(radices), n), dtype=np.int32)
    for i in range(len(radices) - 1, -1, -1):
        radix = radices[i]
        if radix > 1:
            # floor division by a scalar (NumPy's libdivide path) and a multiply-subtract
            np.floor_divide(rest, radix, out=quotient)
            np.multiply(quotient, radix, out=product)
            np.subtract(rest, product, out=product)
            out[i] = product
            rest, quotient = quotient, rest
    return np.ascontiguousarray(out.T)


def group_keys(columns: list[np.ndarray], radices: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Group rows of integer columns; returns (index of a representative per group, inverse).

    Columns are folded into one mixed-radix key (`combined_key`); group ids follow
    ascending key order.
    """
    key, span, _ = combined_key(columns, radices)
    return group_key(key, span)


def counting_span(n: int) -> int:
    """Largest key span grouped by counting instead of sorting (linear in rows and span)."""
    return max(4 * n, 1 << 16)


def sizes_counting_span(n: int) -> int:
    """Largest key span whose class sizes are counted (`bincount`) rather than sorted.

    Counting is linear in rows + span, but its table of int64 counts (8 bytes per key
    value, zeroed, scanned for the present keys) leaves the cache once the span passes
    about half the rows, and then costs up to 3x the sort of the keys (a SIMD sort of
    1-4 byte keys, no row index packed): measured on 1.2 M and 4.8 M rows, the crossover
    is near n / 2 on both.
    """
    return max(n // 2, 1 << 16)


_ROW_INDEX = np.arange(0, dtype=np.int64)


def row_index(n: int) -> np.ndarray:
    """0..n-1 as int64, a read-only view of a cached array: allocating it per check cost
    ~10 % of a row grouping on millions of rows."""
    global _ROW_INDEX
    if _ROW_INDEX.shape[0] < n:
        _ROW_INDEX = np.arange(max(n, 2 * _ROW_INDEX.shape[0]), dtype=np.int64)
        _ROW_INDEX.flags.writeable = False
    return _ROW_INDEX[:n]


def group_key(key: np.ndarray, span: int, counting_limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Group equal int64 keys in [0, span): (index of one row per group, group id per row).

    Group ids follow ascending key order. Key ranges up to `counting_limit` (default
    `counting_span`) use a counting pass (no sort); larger ones one sort
    (`_sort_with_order`). A roll-up passes a lower limit: its few thousand keys sort
    faster than a pass over a span of 65,536.
    """
    n = key.shape[0]
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    if span <= (counting_span(n) if counting_limit is None else counting_limit):
        keys_present, inverse = count_keys(key, span)
        # any member represents a group: all members share every column value
        first = np.empty(keys_present.shape[0], dtype=np.int64)
        first[inverse] = row_index(n)
        return first, inverse
    order, sorted_key = _sort_with_order(key, span)
    boundary = run_starts(sorted_key)
    group_of_sorted = np.cumsum(boundary, dtype=np.int64)
    group_of_sorted -= 1
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = group_of_sorted
    return order[boundary], inverse


def count_keys(key: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """Group keys in [0, span) by counting: (present keys ascending, group id per key).

    Marks present keys and numbers them in key order; `dense` is only read where
    written, so it needs no initialization and no running sum over the whole span.
    Linear in len(key) + span.
    """
    present = np.zeros(span, dtype=bool)
    for start in range(0, key.shape[0], BLOCK_ROWS):  # blocks: no full-size intp copy of a narrow key
        # an intp index: a narrow one goes through NumPy's casting iterator, 2x slower with the cast
        present[key[start:start + BLOCK_ROWS].astype(np.intp, copy=False)] = True
    keys_present = np.flatnonzero(present)
    # 4-byte group ids while they fit: the gather below is random access into a table
    # of the whole span, so its width decides how much of it stays in cache
    dense = np.empty(span, dtype=np.uint32 if keys_present.shape[0] <= 1 << 32 else np.int64)
    dense[keys_present] = row_index(keys_present.shape[0])
    return keys_present, gather(dense, key).astype(np.int64, copy=False)


def run_starts(sorted_key: np.ndarray) -> np.ndarray:
    """Mask of the positions where a run of equal values starts in a sorted, non-empty array."""
    starts = np.empty(sorted_key.shape[0], dtype=bool)
    starts[0] = True
    np.not_equal(sorted_key[1:], sorted_key[:-1], out=starts[1:])
    return starts


def _sort_with_order(key: np.ndarray, span: int) -> tuple[np.ndarray, np.ndarray]:
    """(a permutation sorting `key`, the sorted keys); any order among equal keys.

    Where key and row index fit into one int64 together, the index is packed into
    the low bits and the packed values are sorted with a plain (SIMD) sort: 5-7x
    faster than `argsort` on millions of rows, which made per-check time grow
    faster than the rows.
    """
    n = key.shape[0]
    key = key.astype(np.int64, copy=False)
    bits = max(1, (n - 1).bit_length())
    if span > 1 << (63 - bits):
        order = np.argsort(key)
        return order, key[order]
    packed = np.left_shift(key, bits)
    np.bitwise_or(packed, row_index(n), out=packed)
    packed.sort()
    order = np.bitwise_and(packed, (1 << bits) - 1)
    np.right_shift(packed, bits, out=packed)
    return order, packed


def level_fields(max_levels: list[int]) -> tuple[list[int] | None, int]:
    """Bit offset of each QI's field in a packed level vector, and the mask of the guard bits.

    Each field holds a level plus one guard bit above it. For packed vectors a (asked) and
    b (stored), every b_i <= a_i exactly when ((a | guards) - b) keeps every guard bit: a
    field's guard is borrowed from only where b_i > a_i, and no field borrows from the next.
    (None, 0) where the fields need more than 62 bits (the caller compares level by level).
    """
    offsets = []
    guard = 0
    bit = 0
    for top in max_levels:
        width = max(int(top), 1).bit_length() + 1
        offsets.append(bit)
        guard |= 1 << (bit + width - 1)
        bit += width
    if bit > 62:
        return None, 0
    return offsets, guard


def packed_levels(levels: tuple[int, ...], offsets: list[int]) -> int:
    """A level vector packed into the fields of `level_fields` (guard bits clear)."""
    packed = 0
    for level, offset in zip(levels, offsets):
        packed |= int(level) << offset
    return packed


