"""Per-class sums of many Paillier ciphertexts over all cores (Protocol C's helper).

The helper multiplies the same ~38,000 row counters (768 bytes each) into per-class
products for every node it groups from the rows: ~38,000 multiplications mod n² per node,
the helper's main cost with Paillier. The work splits cleanly by class, but shipping the
ciphertexts to a worker per node would cost about as much as the work. So they are
written once into a shared-memory block; every pool worker parses it once (cached per
block name) and then receives only row numbers per node. Classes are dealt to workers in
contiguous ranges holding about equally many rows; results come back in class order.

Small batches (or one worker) run in the calling process, exactly as
`PaillierPublicKey.sum_by_class`. `close()` frees the block (the helper does it when the
run ends; the interpreter's resource tracker would otherwise unlink it at exit).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Iterator, Sequence

import numpy as np
from gmpy2 import mpz

from fedanon.crypto import parallel
from fedanon.crypto.paillier import PaillierPublicKey, class_products
from fedanon.kit.shm import SharedMemory, attached, create_block, release

#: Below this many rows per node the sums run in the calling process.
MIN_PARALLEL_ROWS = 4096
#: A one-element sum (`subset_sum`) of fewer entries runs in the calling process: below it the
#: pool round trip (~ a few ms) costs more than the multiplications (~10 µs each) it spreads.
MIN_PARALLEL_SUBSET = 1024

# worker side: parsed blocks by shared-memory name (a worker serves a few runs at most)
_parsed: "OrderedDict[str, list[mpz]]" = OrderedDict()
#: Parsed blocks a worker keeps: one run's row counters, the helper's bottom-node sums (twice
#: with delta-presence: research-subset counters) and its hubs' sums (a few at a time); more
#: would be parsed anew on use. A hub's ≈ 10,000 sums are ≈ 8 MB parsed.
_PARSED_BLOCKS = 12


def _rows_of(name: str, count: int, width: int) -> list[mpz]:
    rows = _parsed.get(name)
    if rows is None:
        with attached(name) as block:
            data = bytes(block.buf[: count * width])
        rows = [mpz(int.from_bytes(data[i: i + width], "big")) for i in range(0, len(data), width)]
        _parsed[name] = rows
        while len(_parsed) > _PARSED_BLOCKS:
            _parsed.popitem(last=False)
    return rows


def _class_products(block: tuple[str, int, int], nsquare: mpz,
                    tasks: Sequence[tuple[bytes, bytes, int]]) -> list[list[mpz]]:
    """Worker: for each task (row numbers, their class offsets, class count) the products."""
    rows = _rows_of(*block)
    out = []
    for row_bytes, id_bytes, n_classes in tasks:
        pairs = zip((rows[i] for i in np.frombuffer(row_bytes, dtype=np.int64).tolist()),
                    np.frombuffer(id_bytes, dtype=np.int64).tolist())
        out.append(class_products(pairs, n_classes, nsquare))
    return out


class SharedPaillierRows:
    """Row ciphertexts the helper sums per class, in the calling process and in pool workers."""

    def __init__(self, key: PaillierPublicKey, ciphertexts: list[mpz], workers: int | None = None,
                 min_rows: int | None = None) -> None:
        """`min_rows` (default `MIN_PARALLEL_ROWS`): fewer rows stay in this process only."""
        self.key = key
        self.rows = ciphertexts
        self.workers = parallel.resolve_workers(workers)
        self._block: SharedMemory | None = None
        if self.workers > 1 and len(ciphertexts) >= (MIN_PARALLEL_ROWS if min_rows is None else min_rows):
            data = key.ciphertexts_to_bytes(ciphertexts)
            try:
                self._block = create_block(len(data))
            except OSError:  # no /dev/shm (some sandboxes): stay in-process
                self._block = None
            else:
                self._block.buf[: len(data)] = data

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[mpz]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> mpz:
        return self.rows[i]

    def sum_by_class(self, class_ids: Sequence[int] | np.ndarray, n_classes: int) -> list[mpz]:
        """out[j] = Enc(sum of the counters of class j); an empty class gets Enc(0) = 1."""
        if self._block is None or len(self.rows) < MIN_PARALLEL_ROWS:
            return self.key.sum_by_class(self.rows, [int(j) for j in class_ids], n_classes)
        ids = np.asarray(class_ids, dtype=np.int64)
        if ids.shape != (len(self.rows),):
            raise ValueError(f"{len(self.rows)} ciphertexts but {ids.size} class ids")
        if ids.min() < 0 or ids.max() >= n_classes:
            raise ValueError(f"class ids must lie in [0, {n_classes})")
        order = np.argsort(ids, kind="stable")
        ends = np.cumsum(np.bincount(ids, minlength=n_classes))
        # contiguous class ranges with about equally many rows, at most one per worker
        cuts = np.searchsorted(ends, [len(ids) * k / self.workers for k in range(1, self.workers)])
        bounds = [0, *sorted(set(int(c) + 1 for c in cuts if c + 1 < n_classes)), n_classes]
        if len(bounds) == 2:  # one class range (e.g. the totals): nothing to split
            return self.key.sum_by_class(self.rows, ids.tolist(), n_classes)
        tasks = []
        for c0, c1 in zip(bounds, bounds[1:]):
            r0 = int(ends[c0 - 1]) if c0 else 0
            rows = order[r0: int(ends[c1 - 1])]
            tasks.append((rows.astype(np.int64).tobytes(), (ids[rows] - c0).astype(np.int64).tobytes(), c1 - c0))
        block = (self._block.name, len(self.rows), self.key.ciphertext_bytes)
        parts = parallel.map_batches(functools.partial(_class_products, block, self.key.nsquare), tasks,
                                     workers=self.workers, chunk_size=1, min_parallel=2)
        return [c for part in parts for c in part]

    def sums_by_groupings(self, groupings: Sequence[tuple[np.ndarray, int]]) -> list[list[mpz]]:
        """For each (class id per row, class count): the per-class sums, one grouping per pool
        task (the helper's suppression marginals: every class sum once per QI)."""
        checked = []
        for ids, n_classes in groupings:
            ids = np.asarray(ids, dtype=np.int64)
            if ids.shape != (len(self.rows),) or (ids.size and (ids.min() < 0 or ids.max() >= n_classes)):
                raise ValueError(f"a grouping needs one class id in [0, {n_classes}) per row ({len(self.rows)})")
            checked.append((ids, int(n_classes)))
        if self._block is None or len(checked) < 2:
            return [self.key.sum_by_class(self.rows, ids.tolist(), n) for ids, n in checked]
        every = np.arange(len(self.rows), dtype=np.int64).tobytes()
        tasks = [(every, ids.tobytes(), n) for ids, n in checked]
        block = (self._block.name, len(self.rows), self.key.ciphertext_bytes)
        return parallel.map_batches(functools.partial(_class_products, block, self.key.nsquare), tasks,
                                    workers=self.workers, chunk_size=1, min_parallel=2)

    def subset_sum(self, rows: Sequence[int] | np.ndarray) -> list[mpz]:
        """[Enc(sum of the entries at `rows`)]: over the pool workers in equal row ranges where
        there are many (the helper's screening sums over the bottom node's ~20,600 sums), each
        worker's partial product multiplied here; else in this process."""
        picked = np.asarray(rows, dtype=np.int64).ravel()
        if picked.size and (picked.min() < 0 or picked.max() >= len(self.rows)):
            raise ValueError(f"subset rows must lie in [0, {len(self.rows)})")
        if self._block is None or picked.size < MIN_PARALLEL_SUBSET:
            return class_products(((self.rows[i], 0) for i in picked.tolist()), 1, self.key.nsquare)
        zeros = np.zeros(-(-picked.size // self.workers), dtype=np.int64)
        tasks = [(part.tobytes(), zeros[: part.size].tobytes(), 1) for part in np.array_split(picked, self.workers)]
        block = (self._block.name, len(self.rows), self.key.ciphertext_bytes)
        parts = parallel.map_batches(functools.partial(_class_products, block, self.key.nsquare), tasks,
                                     workers=self.workers, chunk_size=1, min_parallel=2)
        return class_products(((part[0], 0) for part in parts), 1, self.key.nsquare)

    def close(self) -> None:
        if self._block is not None:
            release(self._block)
            self._block = None

