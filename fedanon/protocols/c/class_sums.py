"""The helper's encrypted per-class sums in Protocol C: summed from the rows once, then rolled up.

For every node the search tests, the helper needs, per equivalence class, the homomorphic
sum of the row counters (per (class, sensitive code) cell where a model needs histograms;
the research-subset counters for delta-presence). Summing from the rows costs one
multiplication mod n² per row (Paillier, 3072 bits: ~10 µs); rolling up from the sums of a
finer node costs one per class of that node. So `NodeSums` keeps the sums of recent nodes
and takes each new node from the cached finer node with the fewest classes.

A node with no finer node cached (the first node of a path of the search, on ADULT ~25 of
140 checks at k = 5) would roll up from the bottom node: one multiplication per distinct QI
combination (~20,600 on padded ADULT), ~95 % of all roll-up multiplications. Two measures:

* the bottom's sums -- and each hub's -- are shared with the crypto pool
  (`CounterPublicKey.share_sums`, up to `SHARE_LIMIT` sums per name), so the roll-ups and
  screening sums from them run over all cores;
* *hubs*: such a node first rolls the bottom up to a hub below it -- the node itself with
  all but one or two of its generalized attributes back at level 0, the one with the
  fewest classes, if it has at most `HUB_SHARE` of the bottom's -- and then itself from
  the hub; the hub is cached, and later path heads generalizing it roll up from it. The
  hub costs the helper one extra roll-up of its own classes; counted from the helper's
  own (plaintext, pseudotuple-padded) codes, it decides nothing the key holder sees.
  Measured on ADULT (roll-up multiplications per search): k = 2 738 k -> 362 k, k = 5
  583 k -> 322 k, k = 100 176 k -> 123 k.

Screening sums (`selected_sum`, one encrypted number per check) are formed the cheapest of
four ways, all giving the very same ciphertext (the product of the picked entries): directly,
as the complement, or -- where the scheme subtracts (Paillier: one inversion mod n²) -- as an
earlier screening sum over the same source at a node below, or the source's total below k,
minus the entries no longer picked. On ADULT (k = 5, 5 %) that cut the multiplications of
the screening sums by about a sixth.

Nothing here reaches another party: the checker sends what `node` returns, permuted.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict

import numpy as np

from fedanon.crypto.counters import CounterPublicKey
from fedanon.engine.anonymizer import Structure
from fedanon.stats.classes import Classes

#: One node's sums: name ("sizes", "hist/<attribute>", "subset") -> (encrypted sums, and per
#: sum the helper-side number of rows summed into it, pseudotuples included: a bound).
Sums = dict[str, tuple[object, np.ndarray]]

# How many nodes' encrypted sums are kept for roll-up, and how many class sums in all
# (Paillier: 768 bytes each, so at most ~120 MB).
CACHE_NODES = 256
CACHE_CLASSES = 150_000
#: A hub must have at most this share of the bottom node's classes to be worth its roll-up.
HUB_SHARE = 0.6
#: Hubs keep one or two of the node's generalized attributes (more: coarser, reused less;
#: measured on ADULT k = 2/5/100, pairs save the most).
HUB_ATTRIBUTES = 2
#: Mixed-radix keys of class codes must stay below this (int64); above it no roll-up is tried.
_KEY_LIMIT = 2.0 ** 62
#: The bottom node's sums go to the crypto pool only up to this many per name: shared, they
#: cost a shared-memory copy plus one parsed copy per pool worker (Paillier: ≈ 768 bytes
#: each, so ≈ 0.3 GB apiece here). ADULT's bottom: ~20,600 sizes, or ~290,000 cells of a
#: 14-value sensitive histogram; beyond the limit they roll up in the helper's process.
SHARE_LIMIT = 400_000
#: Sources whose encrypted total below the screening threshold is kept: one ciphertext each, but
#: each entry keeps its sums object alive (a hub: ~10,000 sums, ≈ 8 MB with Paillier), hence few.
SMALL_TOTALS = 4
#: Screening sums kept to start later ones from (`NodeSums._via_earlier`): one ciphertext and
#: one mask over the source's entries each, over at most `SCREEN_SOURCES` sources.
SCREEN_RECORDS = 64
SCREEN_SOURCES = 4


class NodeSums:
    """Encrypted per-class sums of nodes, cheapest source first; `close` frees shared sums."""

    def __init__(self, structure: Structure, key: CounterPublicKey, real: object,
                 subset: object | None, attributes: list[str]) -> None:
        self.structure = structure
        self.grouper = structure.grouper
        self.key = key
        self.real = real
        self.subset = subset
        self.attributes = attributes
        self._sums: "OrderedDict[tuple[int, ...], Sums]" = OrderedDict()
        self._codes: dict[tuple[int, ...], np.ndarray] = {}  # class codes of each node in `_sums`
        self._cached_classes = 0
        self.row_sums = 0  # nodes summed from the rows (the rest: rolled up from a finer node's sums)
        self.hubs = 0
        self._bottom: tuple[tuple[int, ...], np.ndarray, Sums] | None = None
        self._hub_counts: dict[tuple[int, ...], int | None] = {}
        # screening: per (source sums object's id, size threshold) uses so far and, once worth it,
        # (the sums object, mask of its entries below the threshold, their encrypted total)
        self._screen_uses: dict[tuple[int, int], int] = {}
        self._small_totals: "OrderedDict[tuple[int, int], tuple[object, np.ndarray, object]]" = OrderedDict()
        self._screens: list[tuple[object, tuple[int, ...], int, np.ndarray, object]] = []
        # screening sums by difference only where the scheme subtracts cheaply (Paillier)
        self._subtracts = type(key).difference is not CounterPublicKey.difference

    # -- from the rows ---------------------------------------------------------------------
    def cells(self, row_class: np.ndarray, n_classes: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per sensitive attribute: (cell id per row, helper-side rows per cell)."""
        out = {}
        for attr in self.attributes:
            d = self.grouper.sensitive_sizes[attr]
            ids = row_class * d + self.grouper.sensitive_codes[attr]
            out[attr] = (ids, np.bincount(ids, minlength=n_classes * d))
        return out

    def from_rows(self, row_class: np.ndarray, n_classes: int) -> Sums:
        """Encrypted sums from the row counters (one multiplication per row and sum)."""
        out: Sums = {}
        sizes = np.bincount(row_class, minlength=n_classes)
        ids = row_class.tolist()
        if not self.attributes:
            out["sizes"] = (self.key.sum_by_class(self.real, ids, n_classes), sizes)
        for attr, (cell_ids, bounds) in self.cells(row_class, n_classes).items():
            out[f"hist/{attr}"] = (self.key.sum_by_class(self.real, cell_ids.tolist(), len(bounds)), bounds)
        if self.subset is not None:
            out["subset"] = (self.key.sum_by_class(self.subset, ids, n_classes), sizes)
        return out

    # -- roll-up ---------------------------------------------------------------------------
    def rolled(self, mapping: np.ndarray, n_classes: int, base: Sums) -> Sums:
        """Sums of a coarser node from a finer node's sums: `mapping[j]` is the coarse class of
        fine class j. The upper bounds roll up alongside."""
        mapping = np.asarray(mapping, dtype=np.int64)
        out: Sums = {}
        for name, (sums, bounds) in base.items():
            if name.startswith("hist/"):
                d = self.grouper.sensitive_sizes[name.split("/", 1)[1]]
                ids = (mapping[:, None] * d + np.arange(d, dtype=np.int64)).ravel()
                size = n_classes * d
            else:
                ids, size = mapping, n_classes
            out[name] = (self.key.sum_by_class(sums, ids.tolist(), size),
                         np.bincount(ids, weights=bounds, minlength=size).astype(np.int64))
        return out

    def _keys_at(self, source: tuple[int, ...], codes: np.ndarray, levels: tuple[int, ...]
                 ) -> tuple[np.ndarray, list[int]] | None:
        """Mixed-radix keys of `source`'s classes (`codes`) generalized to `levels` (>= source),
        and the domain sizes there; None if such keys would not fit int64."""
        sizes = [self.grouper.level_sizes[i][hi] for i, hi in enumerate(levels)]
        if float(np.prod(np.asarray(sizes, dtype=np.float64))) >= _KEY_LIMIT:
            return None
        lifted = tuple(self.grouper.level_map(i, lo, hi)[codes[:, i]].astype(np.int64)
                       for i, (lo, hi) in enumerate(zip(source, levels)))
        return np.ravel_multi_index(lifted, sizes), sizes

    def _mapping(self, source: tuple[int, ...], codes: np.ndarray, classes: Classes) -> np.ndarray | None:
        """For each class (`codes`) of the finer node `source`: its class in `classes` (None: no match)."""
        lift = self._keys_at(source, codes, classes.levels)
        if lift is None:
            return None
        want, sizes = lift
        keys = np.ravel_multi_index(tuple(np.asarray(classes.codes, dtype=np.int64).T), sizes)
        order = np.argsort(keys)
        at = np.minimum(np.searchsorted(keys, want, sorter=order), len(keys) - 1)
        found = order[at]
        if not np.array_equal(keys[found], want):
            return None
        return found

    def _finest_cached_below(self, levels: tuple[int, ...]) -> tuple[int, ...] | None:
        """The cached node with the fewest classes that `levels` generalizes (levels <= componentwise)."""
        best, best_count = None, None
        for node, codes in self._codes.items():
            if node != levels and all(a <= b for a, b in zip(node, levels)):
                if best_count is None or codes.shape[0] < best_count:
                    best, best_count = node, codes.shape[0]
        return best

    # -- the bottom node and hubs --------------------------------------------------------------
    def bottom(self) -> tuple[tuple[int, ...], np.ndarray, Sums]:
        """The bottom node's classes and sums (one per distinct QI combination: on ADULT ~20,600
        with pseudotuples, against 37,700 rows), summed from the rows once and kept for good;
        shared with the crypto pool, as every path head without a cached finer node rolls up
        from here."""
        if self._bottom is None:
            bottom = tuple(0 for _ in self.structure.code_maps)
            grouped = self.grouper.group_rows(bottom, keep_rows=True)
            sums = self.from_rows(np.asarray(grouped.row_class, dtype=np.int64), grouped.count)
            self.row_sums += 1
            shared = {name: (self.key.share_sums(s, workers=None) if len(bounds) <= SHARE_LIMIT else s, bounds)
                      for name, (s, bounds) in sums.items()}
            self._bottom = (bottom, np.asarray(grouped.codes), shared)
        return self._bottom

    def leaf_marginals(self, leaves: list[int]) -> list[object]:
        """Per QI: encrypted real rows per leaf code (`leaves[i]` codes, an empty leaf the
        trivial zero), from the bottom's sums instead of every row counter. The QIs are halved
        recursively, each half's classes summed from its parent grouping, down to one QI: on
        ADULT ~50,000 multiplications against one per row and QI (~300,000). The products are
        those of the same row counters, so every sum is the ciphertext the rows give."""
        _, codes, sums = self.bottom()
        real = self._real_per_class(codes.shape[0], sums)
        out: list[object] = [None] * len(leaves)
        self._split(real, np.asarray(codes, dtype=np.int64), list(range(len(leaves))), leaves, out)
        return out

    def _real_per_class(self, n_classes: int, sums: Sums) -> object:
        """The bottom's encrypted real rows per class (with sensitive attributes its sums are
        per cell: one attribute's cells summed over their values)."""
        if "sizes" in sums:
            return sums["sizes"][0]
        name = next(n for n in sums if n.startswith("hist/"))
        d = self.grouper.sensitive_sizes[name.split("/", 1)[1]]
        return self.key.sum_by_class(sums[name][0], np.repeat(np.arange(n_classes, dtype=np.int64), d).tolist(),
                                     n_classes)

    def _split(self, sums: object, codes: np.ndarray, qis: list[int], leaves: list[int], out: list[object]) -> None:
        """`sums` per class of `codes` (one column per QI of `qis`): fill `out` for those QIs."""
        if len(qis) == 1:
            out[qis[0]] = self.key.sum_by_class(sums, codes[:, 0].tolist(), leaves[qis[0]])
            return
        half = len(qis) // 2
        for cols in (list(range(half)), list(range(half, len(qis)))):
            part, mapping = np.unique(codes[:, cols], axis=0, return_inverse=True)
            grouped = self.key.sum_by_class(sums, np.asarray(mapping, dtype=np.int64).ravel().tolist(), part.shape[0])
            self._split(grouped, part, [qis[c] for c in cols], leaves, out)

    def bottom_total(self) -> Sums:
        """The totals (one class holding every row) rolled up from the bottom's sums."""
        _, codes, sums = self.bottom()
        return self.rolled(np.zeros(codes.shape[0], dtype=np.int64), 1, sums)

    def _hub_count(self, hub: tuple[int, ...], bottom: tuple[int, ...], bottom_codes: np.ndarray) -> int | None:
        """Classes of the candidate hub (from the bottom's codes; None: keys would not fit)."""
        if hub not in self._hub_counts:
            lift = self._keys_at(bottom, bottom_codes, hub)
            self._hub_counts[hub] = None if lift is None else int(np.unique(lift[0]).size)
        return self._hub_counts[hub]

    def _hub_below(self, levels: tuple[int, ...], bottom: tuple[int, ...], bottom_codes: np.ndarray
                   ) -> tuple[int, ...] | None:
        """The hub for a node with no finer node cached: see the module docstring."""
        generalized = [i for i, level in enumerate(levels) if level]
        best, best_count = None, HUB_SHARE * bottom_codes.shape[0]
        for r in range(1, HUB_ATTRIBUTES + 1):
            for keep in itertools.combinations(generalized, r):
                hub = tuple(level if i in keep else 0 for i, level in enumerate(levels))
                if hub == levels or hub in self._sums:
                    continue
                count = self._hub_count(hub, bottom, bottom_codes)
                if count is not None and count <= best_count:
                    best, best_count = hub, count
        return best

    def _hub(self, levels: tuple[int, ...]) -> tuple[tuple[int, ...], np.ndarray, Sums] | None:
        """A hub below `levels` rolled up from the bottom and cached (None: no hub worth it)."""
        bottom, codes, base = self.bottom()
        hub = self._hub_below(levels, bottom, codes)
        if hub is None:
            return None
        bottom_keys, sizes = self._keys_at(bottom, codes, hub)  # type: ignore[misc]  # fits: _hub_count counted it
        keys, mapping = np.unique(bottom_keys, return_inverse=True)
        hub_codes = np.stack(np.unravel_index(keys, sizes), axis=1).astype(np.int32)
        # shared with the pool as the bottom's are: the path heads above and their screening
        # sums roll up from a hub many times (ADULT, k = 5, 5 %: 20-60 screening sums per hub)
        hub_sums = {name: (self.key.share_sums(values, workers=None) if len(bounds) <= SHARE_LIMIT else values,
                           bounds)
                    for name, (values, bounds) in self.rolled(mapping.ravel(), len(keys), base).items()}
        self.hubs += 1
        if not self._remember(hub, hub_codes, hub_sums):
            self._unload(hub_sums)  # usable for this node in this process, not kept
        return hub, hub_codes, hub_sums

    def _via_hub(self, levels: tuple[int, ...], classes: Classes) -> Sums | None:
        made = self._hub(levels)
        if made is None:
            return None
        hub, hub_codes, hub_sums = made
        mapping = self._mapping(hub, hub_codes, classes)
        return None if mapping is None else self.rolled(mapping, classes.count, hub_sums)

    # -- the cache -------------------------------------------------------------------------------
    def _remember(self, levels: tuple[int, ...], codes: np.ndarray, sums: Sums) -> bool:
        """Cache a node's sums (False: not cached -- already there, or too many classes)."""
        if levels in self._sums or codes.shape[0] > CACHE_CLASSES // 4:
            return False
        self._sums[levels] = sums
        self._codes[levels] = np.asarray(codes)
        self._cached_classes += codes.shape[0]
        while len(self._sums) > CACHE_NODES or self._cached_classes > CACHE_CLASSES:
            old, dropped = self._sums.popitem(last=False)
            self._cached_classes -= self._codes.pop(old).shape[0]
            self._unload(dropped)
        return True

    def _unload(self, sums: Sums) -> None:
        """Free what a node's sums hold beyond memory (a hub's shared block); they stay usable
        in this process (a screening record may still refer to them)."""
        for values, _ in sums.values():
            self.key.unload(values)

    def node(self, classes: Classes, rolled: bool) -> Sums:
        """Encrypted sums of the node `classes` (from the grouper; `rolled`: it rolled them up
        from `classes.rolled_from`): from that finer node's sums if cached, else from the cached
        node with the fewest classes below it, else via a hub or from the bottom, else (rarely)
        from the rows."""
        levels = tuple(int(x) for x in classes.levels)
        base = self._sums.get(classes.rolled_from) if classes.rolled_from is not None else None
        sums = None
        if rolled and base is not None and classes.mapping is not None:
            sums = self.rolled(classes.mapping, classes.count, base)
        else:
            source = self._finest_cached_below(levels)
            if source is not None:
                mapping = self._mapping(source, self._codes[source], classes)
                sums = None if mapping is None else self.rolled(mapping, classes.count, self._sums[source])
            elif any(levels):  # no finer node cached: via a hub, else from the bottom node's sums
                sums = self._via_hub(levels, classes)
                if sums is None:
                    bottom, codes, base = self.bottom()
                    mapping = self._mapping(bottom, codes, classes)
                    sums = None if mapping is None else self.rolled(mapping, classes.count, base)
        if sums is None:
            row_class = classes.row_class
            if row_class is None:  # a stored snapshot without our sums: group the rows once more
                row_class = self.grouper.group_rows(levels, keep_rows=True).row_class
            sums = self.from_rows(np.asarray(row_class, dtype=np.int64), classes.count)
            self.row_sums += 1
        self._remember(levels, np.asarray(classes.codes), sums)
        return sums

    def _small_total(self, values: object, small: np.ndarray, threshold: int) -> object | None:
        """The encrypted total of `values`' entries in `small` (entries of classes below
        `threshold`), kept while `values` is: from its second screening on (the first might be
        its only one)."""
        key = (id(values), threshold)
        cached = self._small_totals.get(key)
        if cached is not None and cached[0] is values:
            self._small_totals.move_to_end(key)
            return cached[2]
        uses = self._screen_uses[key] = self._screen_uses.get(key, 0) + 1
        if uses < 2:
            return None
        total = self.key.subset_sum(values, np.flatnonzero(small))
        self._small_totals[key] = (values, small, total)
        while len(self._small_totals) > SMALL_TOTALS:
            self._small_totals.popitem(last=False)
        return total

    def selected_sum(self, classes: Classes, selected: np.ndarray,
                     threshold: int | None = None) -> tuple[object, int, bool]:
        """One encrypted sum over the node's `selected` classes, without the node's own sums.

        Summed from the finest cached node below (else the bottom node's sums) through the
        class mapping: one pass over part of that node's
        sums, against one roll-up per class of this node plus packing for its full sums. Where
        the selected classes cover more than half of that node's, the others are summed
        instead (`complement`): every class's rows together are all rows, so the key holder,
        who knows the number of real rows, subtracts.

        With `threshold` (the selected classes are exactly those of helper-side size below it),
        every entry picked lies in a class below it too (a source class holds part of its node
        class's rows), so the sum is also the source's total below the threshold (cached per
        source) minus the entries there that are not picked: near the source (few merges) far
        fewer multiplications than either side, and the same ciphertext as the direct sum.

        Returns (the total as a one-element sums object, the helper-side bound of it, complement).
        """
        levels = tuple(int(x) for x in classes.levels)
        source = classes.rolled_from if classes.rolled_from in self._sums and classes.mapping is not None else None
        mapping = None if source is None else np.asarray(classes.mapping, dtype=np.int64)
        if source is None:
            source = self._finest_cached_below(levels)
            if source is not None:
                mapping = self._mapping(source, self._codes[source], classes)
        sums = None if mapping is None else self._sums[source]
        # no hub here: most screened nodes are never sent in full, and one pass over the bottom's
        # sums costs less than rolling a hub up (measured on ADULT, k = 5, 5 %: 550 screenings)
        if mapping is None:
            bottom, codes, sums = self.bottom()
            mapping = self._mapping(bottom, codes, classes)
        if mapping is None:  # keys too wide for a mapping: the node's own sums, as for a full check
            sums, mapping = self.node(classes, False), np.arange(classes.count, dtype=np.int64)
        name = "sizes" if "sizes" in sums else next(n for n in sums if n.startswith("hist/"))
        values, bounds = sums[name]
        pick = np.asarray(selected, dtype=bool)[mapping]
        if name.startswith("hist/"):
            pick = np.repeat(pick, self.grouper.sensitive_sizes[name.split("/", 1)[1]])
        bounds = np.asarray(bounds, dtype=np.int64)
        picked = int(np.count_nonzero(pick))
        if not self._subtracts:
            threshold = None
        if threshold is not None and min(picked, pick.size - picked) > 0:
            via = self._via_earlier(values, levels, threshold, pick, picked)
            if via is None:
                via = self._via_small_total(name, values, bounds, pick, picked, threshold)
            if via is not None:
                self._record(values, levels, threshold, pick, via)
                return via, int(bounds[pick].sum()), False
        complement = 2 * picked > pick.size
        if threshold is not None and not complement:
            total = self.key.subset_sum(values, np.flatnonzero(pick))
            self._record(values, levels, threshold, pick, total)
            return total, int(bounds[pick].sum()), False
        if complement:
            pick = ~pick
        total = self.key.subset_sum(values, np.flatnonzero(pick))
        return total, int(bounds[pick].sum()), complement

    def _via_earlier(self, values: object, levels: tuple[int, ...], threshold: int, pick: np.ndarray,
                     picked: int) -> object | None:
        """The picked entries' sum from an earlier screening sum over the same source at a node
        M below this one: M's small classes hold every small class's rows of this node (a
        class only grows as the node coarsens), so the sum is M's minus the entries M picked
        and this node does not -- few where M is this node's neighbour on a search path."""
        best, best_cost = None, min(picked, pick.size - picked)
        for rec_values, rec_levels, rec_threshold, rec_pick, rec_total in self._screens:
            if rec_values is not values or rec_threshold != threshold or \
                    not all(a <= b for a, b in zip(rec_levels, levels)):
                continue
            rest = rec_pick & ~pick
            cost = int(np.count_nonzero(rest))
            if cost < best_cost and not (pick & ~rec_pick).any():
                best, best_cost = (rec_total, rest), cost
        if best is None:
            return None
        return self.key.difference(best[0], self.key.subset_sum(values, np.flatnonzero(best[1])))

    def _record(self, values: object, levels: tuple[int, ...], threshold: int, pick: np.ndarray,
                total: object) -> None:
        """Keep a screening sum (not a complement) for `_via_earlier`: at most `SCREEN_RECORDS`,
        over at most `SCREEN_SOURCES` sums objects (each record keeps its source alive)."""
        self._screens.append((values, levels, threshold, pick, total))
        if len(self._screens) > SCREEN_RECORDS:
            self._screens.pop(0)
        sources: list[object] = []
        for rec in reversed(self._screens):
            if not any(rec[0] is v for v in sources):
                sources.append(rec[0])
        if len(sources) > SCREEN_SOURCES:
            keep = sources[:SCREEN_SOURCES]
            self._screens = [rec for rec in self._screens if any(rec[0] is v for v in keep)]

    def _via_small_total(self, name: str, values: object, bounds: np.ndarray, pick: np.ndarray,
                         picked: int, threshold: int) -> object | None:
        """The picked entries' sum as (total below the threshold) − (entries there not picked),
        where that is cheaper than the direct sum or its complement; None otherwise."""
        class_sizes = bounds
        if name.startswith("hist/"):
            d = self.grouper.sensitive_sizes[name.split("/", 1)[1]]
            class_sizes = np.repeat(bounds.reshape(-1, d).sum(axis=1), d)
        small = class_sizes < threshold
        rest = small & ~pick
        if (pick & ~small).any() or int(np.count_nonzero(rest)) >= min(picked, pick.size - picked):
            return None
        total = self._small_total(values, small, threshold)
        if total is None:
            return None
        return self.key.difference(total, self.key.subset_sum(values, np.flatnonzero(rest)))

    def close(self) -> None:
        """Free what is shared beyond memory (the bottom node's sums); idempotent."""
        self._screens.clear()
        self._small_totals.clear()
        for sums in self._sums.values():
            self._unload(sums)
        if self._bottom is not None:
            for sums, _ in self._bottom[2].values():
                self.key.unload(sums)
            self._bottom = None
