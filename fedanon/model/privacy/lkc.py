"""LKC-privacy (Mohammed, Fung, Hung & Lee, "Anonymizing healthcare data: a case study on the
blood transfusion service", KDD 2009) of one sensitive attribute.

The attacker is assumed to know at most L quasi-identifier values of a victim (any L of them,
not all). A release satisfies LKC-privacy when for every set Q of at most L quasi-identifiers
and every combination q of values of Q that occurs in the release (a *projection group*: the
released rows whose cells on Q are q)

    |T[q]| ≥ K                  and        |T[q] ∧ s| / |T[q]| ≤ C   for every s in S

where S is a set of sensitive values (`--lkc-values`; by default every value of the
attribute). L ≥ 1 and K ≥ 1 are integers, 0 < C ≤ 1 (C = 1: no confidence bound). L may not
exceed the number of quasi-identifiers. Suppressed rows are not released and belong to no
projection group. A group exactly at the bound C passes (1e-9 tolerance for floating-point
rounding). Empty Q (the whole table) is not judged, as in the paper.

Unlike the class-by-class models, a class's verdict depends on the other classes: a
projection group gathers every class that agrees on Q. The criterion is therefore judged on
the node's whole class table (`Criterion.needs_codes`, a release-level criterion): it groups
the kept classes' generalized QI codes on every Q, sums sizes and sensitive counts per group,
and suppresses every class of a failing group; suppressing classes shrinks other groups, so it
repeats until no group fails. The kept classes then satisfy the definition (the verifier
checks the released rows independently).

Monotonicity:

* Without suppression, monotone: under generalization every projection group is a union of
  projection groups of the finer node on the same Q; a union of groups of ≥ K rows has ≥ K
  rows, and a value's share in a union is a weighted mean of its shares in the parts.
* With suppression and C < 1, not monotone: a class suppressed at the finer node (all of one
  sensitive value) can join a passing group at the coarser node and push its confidence
  over C.
* With suppression and C = 1 (K alone), monotone: every coarser class holding a row the finer
  node keeps is itself kept (its projection groups contain the finer groups of those rows,
  whose rows are all in kept coarser classes by the same argument), so the coarser node
  suppresses only rows the finer one suppressed; the criterion says so.

What each party learns in the protocols: A and B judge the model from the class statistics
the checking party already holds (A: the master; B: the helper; both on ciphertext codes):
the classes' generalized QI codes, sizes and sensitive histograms. Projecting the classes
onto QI subsets is computed from those alone, so LKC-privacy adds no message and reveals
nothing k-anonymity with ℓ-diversity does not. A set of sensitive values (`--lkc-values`)
names plaintext values, which no checking party can match against ciphertext: every protocol
refuses it before data moves (judge every value instead). In Protocol C the key holder sees
class sizes in an order it cannot link to QI values, and the helper, who has the classes'
codes, never sees a size; so the helper sends with each check a random label per class and QI
(fresh per node and QI, `protocols/c/projections.py`) and the key holder judges the groups of
equal labels: it learns per tested node which classes share a generalized value on each QI,
never the value.
"""

from __future__ import annotations

import itertools
import math
import numbers
import operator
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from fedanon.errors import InputError
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value
from fedanon.stats.classes import ClassStats
from fedanon.stats.classhist import SparseHistogram

EPS = 1e-9
FIELDS = ("l", "k", "c", "values")


@register
@dataclass
class LKCPrivacy(PrivacyModel):
    """LKC-privacy of the sensitive attribute: `--lkc L:K[:C]` (C defaults to 1: no confidence
    bound), optionally `--lkc-values V1,V2` (the sensitive values C bounds; default all)."""

    l: int
    k: int
    c: float
    attribute: str
    values: list[str] | None = None   # the set S; None = every value of the attribute

    key = "lkc"
    flag = "--lkc"
    metavar = "L:K[:C]"
    help = ("LKC-privacy: for every set of at most L quasi-identifiers, every combination of their "
            "values in the release has at least K rows and a share of at most C of each sensitive value")
    uses_sensitive = True
    decomposes_over_shares = False   # projection groups span classes and shares
    options = {
        "values": ("--lkc-values", "V1,V2,...",
                   "the sensitive values --lkc's confidence bound C applies to (default: every value)"),
    }

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "LKCPrivacy":
        attribute = ctx.require_sensitive()
        where = f"{cls.flag} {value!r}" if ctx.source == "command line" else f"{ctx.source}: {cls.key}"
        if isinstance(value, str):
            parts = [p.strip() for p in value.split(":")]
            if len(parts) not in (2, 3) or not all(parts):
                raise InputError(f"{where}: expected L:K or L:K:C, e.g. 2:5:0.6")
            entries: dict[str, Any] = dict(zip(("l", "k", "c"), parts))
        elif isinstance(value, Mapping):
            entries = table_value(value, cls.key, FIELDS, ctx)
            missing = [f for f in ("l", "k") if f not in entries]
            if missing:
                raise InputError(f"{ctx.source}: [{cls.key}] needs {' and '.join(missing)}")
        else:
            raise InputError(f"{where}: expected \"L:K[:C]\" or a table with l, k and c")
        values = ctx.options.get("values", entries.get("values"))
        return cls(_integer(entries["l"], f"{where}: L"), _integer(entries["k"], f"{where}: K"),
                   number(entries.get("c", 1.0), f"{where}: C"), attribute, _value_list(values, where))

    def validate(self, config: Any) -> None:
        for name, v in (("L", self.l), ("K", self.k)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise InputError(f"LKC-privacy needs an integer {name} >= 1, got {v!r}")
        if not (isinstance(self.c, numbers.Real) and math.isfinite(self.c) and 0 < self.c <= 1):
            raise InputError(f"LKC-privacy needs 0 < C <= 1, got {self.c!r}")
        n_qis = len(config.quasi_identifiers)
        if self.l > n_qis:
            raise InputError(f"LKC-privacy: L={self.l} exceeds the {n_qis} quasi-identifier(s)")
        if self.values is not None:
            if not self.values or not all(isinstance(v, str) for v in self.values):
                raise InputError(f"LKC-privacy: the sensitive values must be a non-empty list of strings, "
                                 f"got {self.values!r}")
            twice = sorted({v for v in self.values if self.values.count(v) > 1})
            if twice:
                raise InputError(f"LKC-privacy: sensitive value(s) listed twice: {', '.join(twice)}")

    def distributed_problem(self) -> str | None:
        if self.values is not None:
            return ("LKC-privacy with a set of sensitive values (--lkc-values) cannot run in a protocol: "
                    "the checking party sees the sensitive column encrypted; bound every value instead")
        return None

    def criterion(self) -> "LKCCriterion":
        return LKCCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        return None   # judged on the released rows (`records_violation`), not class by class

    def records_violation(self, qis: list[str], records: list[tuple[tuple[bytes, ...], dict[str, bytes]]]
                          ) -> str | None:
        """Every projection of the released rows onto at most L QIs, counted with dicts."""
        chosen = None if self.values is None else {v.encode("utf-8") for v in self.values}
        for size in range(1, min(self.l, len(qis)) + 1):
            for subset in itertools.combinations(range(len(qis)), size):
                groups: dict[tuple[bytes, ...], Counter] = defaultdict(Counter)
                for cells, sensitive in records:
                    groups[tuple(cells[i] for i in subset)][sensitive[self.attribute]] += 1
                for projection, counts in sorted(groups.items()):
                    total = sum(counts.values())
                    label = ", ".join(f"{qis[i]}={v.decode('utf-8', 'replace')}" for i, v in zip(subset, projection))
                    if total < self.k:
                        return f"({label}) matches {total} released rows < K={self.k}"
                    for value, count in sorted(counts.items()):
                        if (chosen is None or value in chosen) and count / total > self.c + EPS:
                            return f"({label}) gives {value.decode('utf-8', 'replace')!r} with confidence " \
                                   f"{count / total:.6f} > C={self.c:g}"
        return None

    def describe(self) -> str:
        of = "every value" if self.values is None else "values " + ", ".join(self.values)
        return f"({self.l},{self.k},{self.c:g})-privacy (LKC) of {self.attribute} ({of})"


def _integer(text: Any, what: str) -> int:
    if isinstance(text, bool):
        raise InputError(f"{what}: {text!r} is not an integer")
    if isinstance(text, numbers.Integral):
        return int(text)
    try:
        return int(str(text).strip())
    except ValueError:
        raise InputError(f"{what}: {text!r} is not an integer") from None


def _value_list(values: Any, where: str) -> list[str] | None:
    """The sensitive value set from a flag's comma-separated text or a TOML list."""
    if values is None:
        return None
    if isinstance(values, str):
        return [v.strip() for v in values.split(",")]
    if isinstance(values, list) and all(isinstance(v, str) for v in values):
        return list(values)
    raise InputError(f"{where}: values must be a list of strings, e.g. [\"flu\", \"hiv\"]")


class LKCCriterion(Criterion):
    """Projection groups of the kept classes on every set of at most L QIs, vectorized with numpy."""

    release_level = True
    needs_codes = True
    monotone = True

    def __init__(self, model: LKCPrivacy) -> None:
        self.model = model
        self.k = int(model.k)
        self.c = float(model.c)
        self.bounds_confidence = self.c < 1.0 - EPS
        self.monotone_with_suppression = not self.bounds_confidence
        # read also without a confidence bound: the model declares the attribute sensitive, and the
        # report then wants each released row's class, which only a histogram-keeping grouping keeps
        self.needs_histogram = model.attribute
        self._chosen: np.ndarray | None = None   # codes of S (None: every code)
        self._node: _Node | None = None   # the class table of the last check and what was built on it
        # per (QI subset, its levels): the subset's projection of the whole table (`_Projection`),
        # a function of the table alone; one criterion judges one table
        self._projections: dict[tuple[tuple[int, ...], tuple[int, ...]], _Projection] = {}
        self._dense_cells = 0   # the keys the projections' flags hold in all (bounded by DENSE_TOTAL)
        self._subsets: dict[tuple[int, int], list] = {}   # `_picks` per (QIs, subset size)
        # per (QI subset, its levels, its radices): the verdict bits of the whole table's projection
        # (WRONG_K, WRONG_C, and KNOWN_C where C was judged), so a first round skips the subsets
        # known to pass; a function of the table alone, like `_projections`
        self._verdicts: dict[tuple[tuple[int, ...], Any, Any], int] = {}

    def prepare(self, context: CriterionContext) -> None:
        if not self.bounds_confidence or self.model.values is None:
            return
        dictionary = context.sensitive_values.get(self.model.attribute)
        if dictionary is None:
            raise InputError("LKC-privacy with a set of sensitive values needs the attribute's plaintext values")
        wanted = {v.encode("utf-8") for v in self.model.values}
        self._chosen = np.array([v in wanted for v in dictionary], dtype=bool)

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        return np.ones(stats.sizes.shape[0], dtype=bool)   # release-level: `enforce_classes` decides

    def enforce_classes(self, stats: ClassStats, codes: np.ndarray | None, failing: np.ndarray,
                        limit: int | None = None, levels: tuple[int, ...] | None = None) -> np.ndarray:
        """Suppress every class of a failing projection group, on the kept classes, until none fails.

        The QI subsets of one size are judged together: each class's projection key on every
        subset is one column of a (classes x subsets) key matrix, offset so that the subsets'
        groups never share an id, so one `bincount` sums the group sizes of all subsets (and,
        for C, one more the (group, value) cells); the keys are built once per check and a
        round re-sums over the kept classes. K is checked on the subsets of exactly L QIs only:
        a group on fewer QIs is a union of groups on L of them, so it has at least K rows when
        they do. The same holds for C (a value's share in a union is at most its largest share
        in the parts), so the smaller subsets are grouped only in a round where some group on L
        QIs fails -- then the rule suppresses the classes of their failing groups too.

        With the node's `levels` (codes at a level the same at every node) and no class failed
        by another criterion, the first round's groups are those of the whole table projected
        onto each subset at its levels, which many nodes share: the verdict per group is kept
        per (subset, levels) (`_Projection`, computed by the suppression bound), so that round
        only looks each class's key up (on class tables of at least WHOLE_TABLE_MIN_CLASSES
        classes whose L-subsets' projections are all kept)."""
        if codes is None:
            raise ValueError("LKC-privacy is judged on the classes' QI codes")
        codes = np.asarray(codes)   # as int64 once per node (`_Node`)
        kept = ~np.asarray(failing, dtype=bool)
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        if limit is not None and float(sizes[~kept].sum()) > limit:
            return ~kept   # the other criteria failed the node already
        n_qis = codes.shape[1] if codes.ndim == 2 else 0
        top = min(self.model.l, n_qis)
        if top == 0 or codes.shape[0] == 0:
            return ~kept
        node = self._node_of(stats, codes)
        for built in node.layers.values():
            built.reset()   # the sums of an earlier call on this node were over another kept set
        # this round's groups are the whole table's; on a small class table grouping costs less
        # than looking the keys up, counting the kept projections' upkeep
        whole = levels is not None and codes.shape[0] >= WHOLE_TABLE_MIN_CLASSES and bool(kept.all())

        first = levels is not None and bool(kept.all())   # this round's groups are the whole table's

        def failing_on(size: int, k: int | None, below: int | None) -> np.ndarray:
            if whole:
                assert levels is not None
                # the L-subsets' projections only where the bound kept them already (a check that
                # would compute them for one lookup costs more than grouping); the smaller
                # subsets' few projections are computed for later checks
                found = self._whole_table_failing(node, sizes, levels, size, k, below, build=size < top)
                if found is not None:
                    return found
            if first and not whole:   # (a large table's layer is built once for its later rounds)
                assert levels is not None
                return self._first_round_failing(node, sizes, levels, size, k, below)
            return self._layer(node, size).failing(kept, sizes, node.counts(), k, self.c, below)

        while kept.any():
            bad = failing_on(top, self.k, limit)
            for size in (range(1, top) if self.bounds_confidence and bad.any() else ()):
                if limit is not None and float(sizes[~kept | bad].sum()) > limit:
                    break
                bad |= failing_on(size, None, None)
            if not bad.any():
                break
            if limit is not None and float(sizes[~kept | bad].sum()) > limit:
                return ~kept | bad   # the node fails whatever the later rounds add
            kept &= ~bad
            whole = first = False
        return ~kept

    def _first_round_failing(self, node: "_Node", sizes: np.ndarray, levels: tuple[int, ...], size: int,
                             k: int | None, limit: int | None) -> np.ndarray:
        """`_Layer.failing` with every class kept, grouping only the subsets of `size` QIs not known
        to pass at their levels: with every class kept a subset's groups are the whole table's
        projection onto it, so its verdict is that of every earlier node at the same levels on
        it; a subset known to pass adds no class, so leaving it out changes nothing (the classes
        K fails alone are the same, and so are those C fails). The verdicts found are kept."""
        picks = self._picks(node.codes.shape[1], size)
        keys = [(subset, pick(levels), pick(node.radix_tuple)) for subset, pick in picks]
        need_k = k is not None
        todo = []
        for j, key in enumerate(keys):
            bits = self._verdicts.get(key)
            if (bits is None or (need_k and bits & WRONG_K)
                    or (self.bounds_confidence and (not bits & KNOWN_C or bits & WRONG_C))):
                todo.append(j)
        n = node.codes.shape[0]
        if not todo:
            return np.zeros(n, dtype=bool)
        layer = _Layer(node.codes, node.radices, size, None, only=[picks[j][0] for j in todo], sparse_ids=True)
        group_size = layer.group_sizes(sizes)
        small = group_size < self.k
        bits = (small & (group_size > 0)).astype(np.uint8)   # WRONG_K (a key no class has is no group)
        wrong = small if need_k else np.zeros(layer.n_groups, dtype=bool)
        if need_k and limit is not None:
            bad = wrong[layer.group].any(axis=1)
            if float(sizes[bad].sum()) > limit:
                self._keep_verdicts(keys, todo, layer, bits)
                return bad
        if self.bounds_confidence:
            layer.entries = node.entries()
            largest = layer.largest(node.counts())
            judged = np.full(layer.n_groups, KNOWN_C, dtype=np.uint8)
            if largest is not None:
                over = largest > (self.c + EPS) * group_size
                wrong = wrong | over
                judged |= np.where(over, WRONG_C, 0).astype(np.uint8)
            bits |= judged
        self._keep_verdicts(keys, todo, layer, bits)
        return wrong[layer.group].any(axis=1)

    def _keep_verdicts(self, keys: list, todo: list[int], layer: "_Layer", bits: np.ndarray) -> None:
        """Each grouped subset's verdict bits (the OR over its groups), kept per subset and levels."""
        if not bits.size:
            return
        per_subset = np.bitwise_or.reduceat(bits, layer.starts).tolist()
        for at, j in enumerate(todo):
            self._verdicts[keys[j]] = int(per_subset[at])

    def _whole_table_failing(self, node: "_Node", sizes: np.ndarray, levels: tuple[int, ...], size: int,
                             k: int | None, limit: int | None, build: bool = True) -> np.ndarray | None:
        """`_Layer.failing` with every class kept, from the kept projections' verdicts per group
        (with `build`, computed for the subsets no earlier node had at these levels); None where
        a subset's projection is not kept (without `build`) or its key space is too large to keep
        a verdict per key: the layer then sums as usual."""
        if not build and self._missing(node, levels, size):
            return None
        projections = self._projections_of(node, sizes, levels, size)
        if any(p.flags is None for p in projections):
            return None
        bad = np.zeros(node.codes.shape[0], dtype=bool)
        wanted = (WRONG_K if k is not None else 0) | (WRONG_C if self.bounds_confidence else 0)
        flagged = [j for j, p in enumerate(projections) if p.wrong & wanted]
        if not flagged:
            return bad   # no group of any subset fails: nothing to look up
        # per class, the OR of its groups' flags over the subsets: bit 1 K fails, bit 2 C does
        flat = np.concatenate([p.flags for p in projections])   # type: ignore[misc]
        found = np.bitwise_or.reduce(flat[node.dense_keys(size, flagged)], axis=0)
        if k is not None:
            bad = (found & WRONG_K).astype(bool)
            if limit is not None and float(sizes[bad].sum()) > limit:
                return bad
        if self.bounds_confidence:
            bad |= (found & WRONG_C).astype(bool)
        return bad

    def _projections_of(self, node: "_Node", sizes: np.ndarray, levels: tuple[int, ...], size: int,
                        beyond: float | None = None) -> list["_Projection"]:
        """The kept projections of every subset of `size` QIs at the node's levels (in
        `combinations` order); the missing ones are computed on this node's classes (all of
        them: the whole table). A kept one whose radices differ from the node's is recomputed.
        `beyond`: where a kept one's bound figure exceeds it, only the kept ones are returned
        (the bound is then known to exceed it; nothing is computed)."""
        picks = self._picks(node.codes.shape[1], size)
        keys = [(subset, pick(levels)) for subset, pick in picks]
        found = [self._projections.get(key) for key in keys]
        missing = [j for j, (p, (_, pick)) in enumerate(zip(found, picks))
                   if p is None or p.radices != pick(node.radix_tuple)]
        if missing and beyond is not None:
            known = [p for j, p in enumerate(found) if p is not None and j not in missing]
            if any(p.lost > beyond for p in known):
                return known
        if missing:
            subsets = [picks[j][0] for j in missing]
            entries = node.entries() if self.bounds_confidence else None
            layer = _Layer(node.codes, node.radices, size, entries, only=subsets)
            group_size = layer.group_sizes(sizes)
            largest = layer.largest(None if entries is None else entries[2])
            lost = layer.lost_per_subset(layer.lost_in(group_size, largest, self.k, self.c)).tolist()
            wrong = np.where(group_size < self.k, WRONG_K, 0).astype(np.uint8)
            if largest is not None:
                wrong |= np.where(largest > (self.c + EPS) * group_size, WRONG_C, 0).astype(np.uint8)
            # every missing subset's verdicts per key in one array (a view each), scattered at once
            spans = [math.prod(node.radix_tuple[i] for i in picks[j][0]) for j in missing]
            keep = (layer.dense is not None and max(spans) <= DENSE_SPAN
                    and self._dense_cells + sum(spans) <= DENSE_TOTAL)
            if keep:
                assert layer.dense is not None
                self._dense_cells += sum(spans)
                flat = np.zeros(sum(spans), dtype=np.uint8)
                flat[layer.dense] = wrong[layer.group]
            any_wrong = np.bitwise_or.reduceat(wrong, layer.starts).tolist() if wrong.size else [0] * len(missing)
            for at, j in enumerate(missing):
                offset = int(layer.offsets[at]) if layer.offsets is not None else 0
                flags = flat[offset:offset + spans[at]] if keep else None
                found[j] = self._projections[keys[j]] = _Projection(picks[j][1](node.radix_tuple), float(lost[at]),
                                                                    flags, int(any_wrong[at]))
        return found   # type: ignore[return-value]

    def _missing(self, node: "_Node", levels: tuple[int, ...], size: int) -> bool:
        """Whether some subset of `size` QIs has no kept projection at the node's levels."""
        for subset, pick in self._picks(node.codes.shape[1], size):
            p = self._projections.get((subset, pick(levels)))
            if p is None or p.radices != pick(node.radix_tuple):
                return True
        return False

    def _picks(self, n_qis: int, size: int) -> list[tuple[tuple[int, ...], Callable[[tuple[int, ...]], Any]]]:
        """Every subset of `size` of the QIs with a getter of its entries from a per-QI tuple."""
        if (n_qis, size) not in self._subsets:
            self._subsets[(n_qis, size)] = [(subset, operator.itemgetter(*subset))
                                            for subset in itertools.combinations(range(n_qis), size)]
        return self._subsets[(n_qis, size)]

    def _node_of(self, stats: ClassStats, codes: np.ndarray) -> "_Node":
        """The node's class table and what is built on it, kept for the last class table asked
        (the bound and the rule of one check share them)."""
        if self._node is None or self._node.stats is not stats:
            self._node = _Node(stats, codes, self)
        return self._node

    def _layer(self, node: "_Node", size: int) -> "_Layer":
        """The node's projection layer of one subset size, built on first use."""
        if size not in node.layers:
            node.layers[size] = _Layer(node.codes, node.radices, size, node.entries())
        return node.layers[size]

    bounds_suppression = True

    def suppression_bound(self, stats: ClassStats, codes: np.ndarray | None = None,
                          limit: float | None = None, levels: tuple[int, ...] | None = None) -> float:
        """On each set Q of L QIs, a projection group g of fewer than K rows loses all its rows,
        and one where value s exceeds its share, x = count(s) − C·|g| > 0, loses at least
        x / (1 − C) rows (a suppressed row lowers x by at most 1 − C). Per group that is
        subadditive over unions (a union of small groups is small or counted by x, and the
        positive part of x is subadditive), so the sum over the groups of Q, and its maximum
        over the Q, can only fall under generalization: rows every release of this node and of
        its generalizations suppresses.

        A subset's figure is one of the whole table projected onto its QIs at their levels
        (every class counts, suppressed or not), so with the node's `levels` it is kept per
        (subset, levels on it) and computed once per search: a check computes only the subsets
        whose levels no earlier node had, and none where a kept figure already exceeds `limit`."""
        if codes is None or stats.sizes.shape[0] == 0:
            return 0.0
        codes = np.asarray(codes)
        top = min(self.model.l, codes.shape[1] if codes.ndim == 2 else 0)
        if top == 0:
            return 0.0
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        node = self._node_of(stats, codes)
        if levels is None:
            return self._layer(node, top).lost_rows(sizes, node.counts(), self.k, self.c, limit)
        return max(p.lost for p in self._projections_of(node, sizes, tuple(levels), top, limit))

    def _entries(self, hist: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The histogram's non-zero (class, value, count) entries of values in S (counts as floats),
        and the number of values."""
        if isinstance(hist, SparseHistogram):
            if hist.saturated is not None:
                raise ValueError(f"{self.describe()} needs complete class statistics, got saturated ones")
            cls, value, count = (np.asarray(a, dtype=np.int64) for a in (hist.cls, hist.value, hist.count))
            domain = int(hist.domain)
        else:
            dense = np.asarray(hist)
            domain = int(dense.shape[1])
            # the non-zero cells found on a bool mask (nonzero() on numbers is several times slower)
            flat = dense.ravel()
            at = np.flatnonzero(flat != 0)
            cls, value = np.divmod(at.astype(np.int64), np.int64(max(domain, 1)))
            count = np.asarray(flat[at], dtype=np.int64)
        if self._chosen is not None:
            keep = self._chosen[value]
            cls, value, count = cls[keep], value[keep], count[keep]
        return cls, value, count.astype(np.float64), domain

    def describe(self) -> str:
        return self.model.describe()


#: the most keys one subset's kept verdicts may span, and all subsets' together (a byte each);
#: a subset with more is judged by summing its groups at every node, as without levels
DENSE_SPAN = 1 << 22
DENSE_TOTAL = 1 << 26
#: the fewest classes a check reads its first round from the kept projections for
WHOLE_TABLE_MIN_CLASSES = 1024
#: a projection group's verdict bits: fewer than K rows; a value's share above C
WRONG_K = 1
WRONG_C = 2
#: a kept verdict's bit: C was judged (WRONG_C is meaningful)
KNOWN_C = 4


@dataclass
class _Projection:
    """One QI subset at given levels, projected from the whole table (every class kept): per
    key of the subset's values (mixed radix over `radices`), its group's verdict bits
    (`flags`: WRONG_K, WRONG_C; None where the key space is too large to keep), their OR over
    the groups (`wrong`), and the suppression bound's figure (`lost`)."""

    radices: tuple[int, ...]
    lost: float
    flags: np.ndarray | None
    wrong: int   # the OR of every group's bits


class _Node:
    """One check's class table: codes as int64, radices, and, built on first use, the histogram
    entries (with C), the layers and the dense keys per subset size."""

    def __init__(self, stats: ClassStats, codes: np.ndarray, criterion: LKCCriterion) -> None:
        self.stats = stats
        raw = np.asarray(codes)
        # the codes QI by QI (rows): a maximum per row is several times faster than one per
        # column of the classes x QIs matrix; `dense_keys` reads the rows too
        self._by_qi = np.ascontiguousarray(raw.T)
        self.radices = self._by_qi.max(axis=1).astype(np.int64) + 1
        self.codes = raw.astype(np.int64, copy=False)
        self.radix_tuple = tuple(int(r) for r in self.radices)
        self.layers: dict[int, _Layer] = {}
        self._criterion = criterion
        self._entries: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None = None

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
        """The histogram entries C judges (None without C)."""
        if not self._criterion.bounds_confidence:
            return None
        if self._entries is None:
            self._entries = self._criterion._entries(self.stats.histograms[self._criterion.model.attribute])
        return self._entries

    def counts(self) -> np.ndarray | None:
        entries = self.entries()
        return None if entries is None else entries[2]

    def dense_keys(self, size: int, rows: list[int]) -> np.ndarray:
        """(rows x classes) keys of each class on the subsets of `size` QIs numbered `rows` (in
        `combinations` order), each subset's offset by the spans of all those before it (callers
        know the spans fit: every one is kept as a `_Projection`); only the subsets asked for
        are computed (a check looks up the subsets with a failing group only)."""
        subsets = np.array(list(itertools.combinations(range(self.codes.shape[1]), size)),
                           dtype=np.int64).reshape(-1, size)
        span = np.prod(self.radices[subsets], axis=1)
        offsets = np.concatenate(([0], np.cumsum(span)[:-1]))[rows]
        kind = np.int32 if int(span.sum()) < 2 ** 31 else np.int64
        if self._by_qi.dtype != kind:
            self._by_qi = self._by_qi.astype(kind)
        chosen = subsets[rows]
        key = self._by_qi[chosen[:, 0]]
        for p in range(1, size):
            key *= self.radices[chosen[:, p]].astype(kind)[:, None]
            key += self._by_qi[chosen[:, p]]
        key += offsets.astype(kind)[:, None]
        return key


def _dense_keys(codes: np.ndarray, radices: np.ndarray, subsets: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(classes x subsets) keys of the classes' values on each subset, mixed radix, each subset
    offset by the spans of those before it, and the offsets; None where the spans overflow int64."""
    spans = np.prod(radices[subsets].astype(np.float64), axis=1)
    if float(spans.sum()) >= 2.0 ** 62:
        return None
    span = np.prod(radices[subsets], axis=1)
    key = codes.take(subsets[:, 0], axis=1)   # a copy; `take` gathers columns faster than indexing
    for p in range(1, subsets.shape[1]):
        key *= radices[subsets[:, p]]
        key += codes.take(subsets[:, p], axis=1)
    offsets = np.concatenate(([0], np.cumsum(span)[:-1])).astype(np.int64)
    key += offsets
    return key, offsets


class _Layer:
    """The projection groups of a node's classes on every QI subset of one size, side by side.

    `group[c, j]`: the id of class c's group on subset j, ids unique over all subsets of the
    size; with C, the (group, value) cells of the histogram entries in the same way, sorted by
    group so that a group's largest cell is one `maximum.reduceat`."""

    def __init__(self, codes: np.ndarray, radices: np.ndarray, size: int,
                 entries: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None,
                 only: list[tuple[int, ...]] | None = None, sparse_ids: bool = False) -> None:
        """`only`: these subsets of the size instead of all of them. `sparse_ids`: where the key
        space is small, the keys themselves are the group ids (no compaction; a key no class has
        is a group of no rows, which the caller must leave out of per-subset verdicts)."""
        subsets = np.array(only if only is not None else list(itertools.combinations(range(codes.shape[1]), size)),
                           dtype=np.int64).reshape(-1, size)
        self.width = subsets.shape[0]
        dense = _dense_keys(codes, radices, subsets)
        # each class's key on every subset in one key space (None where it would overflow)
        self.dense, self.offsets = dense if dense is not None else (None, None)
        span = int(self.dense.max()) + 1 if self.dense is not None and sparse_ids and self.dense.size else 0
        if span and span < 8 * self.dense.size + 4096:
            # a subset's keys lie in [its offset, the next one's): the offsets start its runs
            self.group, self.n_groups, self.starts = self.dense, span, self.offsets
        elif self.dense is not None:
            group, present = _compact(self.dense.ravel())
            self.group, self.n_groups = group.reshape(self.dense.shape), int(present.shape[0])
            # a subset's keys lie in [its offset, the next one's), so its group ids are a run
            self.starts = np.searchsorted(present, self.offsets)
        else:   # too many value combinations for one key space: each subset on its own
            columns, offset, starts = [], 0, []
            for subset in subsets:
                g, n = _groups(codes[:, subset])
                columns.append(g + offset)
                starts.append(offset)
                offset += n
            self.group, self.n_groups = np.stack(columns, axis=1), offset
            self.starts = np.array(starts, dtype=np.int64)
        self.entries = entries
        # the sums over the kept classes of the last `failing` (see `_sync`), and that kept set
        self._kept: np.ndarray | None = None
        self._group_size = np.zeros(0)
        self._summed: np.ndarray | None = None
        self._cells: tuple[np.ndarray, int, np.ndarray | None, np.ndarray | None] | None = None

    def cells(self) -> tuple[np.ndarray, int, np.ndarray | None, np.ndarray | None]:
        """(cell of each (entry, subset), cells, the group of each run of cells and where the runs
        start); built when C is first judged (a node whose K check fails too many rows never
        needs them). Where every (group, value) pair fits a table no larger than a few times the
        cells, the cell is group x values + value itself (no runs: a reshape finds the largest)."""
        if self._cells is None:
            assert self.entries is not None
            cls, value, _, domain = self.entries
            keys = (self.group[cls] * np.int64(domain) + value[:, None]).ravel()
            if self.n_groups * domain <= 8 * keys.size + 4096:
                self._cells = (keys, self.n_groups * domain, None, None)
            else:
                cell, cell_keys = _compact(keys)
                cell_group = cell_keys // domain
                starts = np.flatnonzero(np.concatenate(([True], cell_group[1:] != cell_group[:-1])))
                self._cells = (cell, int(cell_keys.shape[0]), cell_group[starts], starts)
        return self._cells

    def group_sizes(self, sizes: np.ndarray) -> np.ndarray:
        """Rows per projection group (each class's size added to its group in every subset)."""
        return np.bincount(self.group.ravel(), weights=np.repeat(sizes, self.width), minlength=self.n_groups)

    def largest(self, counts: np.ndarray | None) -> np.ndarray | None:
        """Per group, its largest count of one sensitive value over all the classes (None
        without histogram entries)."""
        if counts is None or self.entries is None:
            return None
        cell, n_cells, cell_groups, starts = self.cells()
        if not n_cells:
            return None
        summed = np.bincount(cell, weights=np.repeat(counts, self.width), minlength=n_cells)
        if starts is None:
            return summed.reshape(self.n_groups, -1).max(axis=1)
        largest = np.zeros(self.n_groups, dtype=np.float64)
        largest[cell_groups] = np.maximum.reduceat(summed, starts)
        return largest

    def lost_in(self, group_size: np.ndarray, largest: np.ndarray | None, k: int, c: float) -> np.ndarray:
        """Per group of the given sizes and largest value counts: all its rows below `k`, else
        its largest sensitive count's excess over share `c` divided by 1 − c (at most the
        group's rows)."""
        lost = np.where(group_size < k, group_size, 0.0)
        if largest is not None and c < 1.0:
            excess = np.maximum(largest - (c + EPS) * group_size, 0.0) / (1.0 - c)
            lost = np.where(group_size < k, lost, np.minimum(excess, group_size))
        return lost

    def lost_rows(self, sizes: np.ndarray, counts: np.ndarray | None, k: int, c: float,
                  limit: float | None = None) -> float:
        """`LKCCriterion.suppression_bound` on this layer's subsets: per subset, the rows of its
        groups below `k` plus each other group's largest excess over share `c` divided by 1 − c;
        the largest subset's sum (the groups below `k` alone where they exceed `limit`)."""
        group_size = self.group_sizes(sizes)
        if limit is not None:
            small = self.lost_per_subset(np.where(group_size < k, group_size, 0.0))
            if small.size and float(small.max()) > limit:
                return float(small.max())
        per_subset = self.lost_per_subset(self.lost_in(group_size, self.largest(counts), k, c))
        return float(per_subset.max()) if per_subset.size else 0.0

    def lost_per_subset(self, lost: np.ndarray) -> np.ndarray:
        """Per-group figures summed per subset (each subset's groups are one run of ids, and
        every subset has a group where there are classes)."""
        if not self.n_groups:
            return np.zeros(self.width, dtype=np.float64)
        return np.add.reduceat(np.asarray(lost, dtype=np.float64), self.starts)

    def reset(self) -> None:
        """Forget the sums over the kept classes (a new call starts from its own kept set)."""
        self._kept, self._summed = None, None

    def _sync(self, kept: np.ndarray, sizes: np.ndarray, counts: np.ndarray | None, with_cells: bool) -> None:
        """Group sizes (and, `with_cells`, cell sums) over the kept classes: summed once, then
        the classes suppressed since are subtracted (a round suppresses few; the sums are of
        whole numbers, so subtracting is exact)."""
        if self._kept is None:
            self._group_size = np.bincount(self.group.ravel(), weights=np.repeat(np.where(kept, sizes, 0.0), self.width),
                                           minlength=self.n_groups)
        else:
            gone = np.flatnonzero(self._kept & ~kept)
            if gone.size:
                self._group_size -= np.bincount(self.group[gone].ravel(), weights=np.repeat(sizes[gone], self.width),
                                                minlength=self.n_groups)
                if self._summed is not None:
                    cell = self.cells()[0].reshape(-1, self.width)
                    assert self.entries is not None and counts is not None
                    lost = np.flatnonzero(~kept[self.entries[0]] & self._kept[self.entries[0]])
                    self._summed -= np.bincount(cell[lost].ravel(), weights=np.repeat(counts[lost], self.width),
                                                minlength=self.cells()[1])
        if with_cells and self._summed is None and counts is not None:
            assert self.entries is not None
            cell, n_cells, _, _ = self.cells()
            self._summed = np.bincount(cell, weights=np.repeat(counts * kept[self.entries[0]], self.width),
                                       minlength=n_cells)
        self._kept = kept.copy()

    def failing(self, kept: np.ndarray, sizes: np.ndarray, counts: np.ndarray | None,
                k: int | None, c: float, limit: int | None = None) -> np.ndarray:
        """The kept classes in some group with fewer than `k` rows (None: K not judged on this
        size) or, with `counts` (the histogram entries' counts), a value's share above `c`.
        With `limit`, the classes K fails alone are returned where they (with the classes not
        kept) hold more than `limit` rows (the node fails in any case)."""
        self._sync(kept, sizes, counts, with_cells=False)
        group_size = self._group_size
        # a group of no rows holds no kept class where every class has rows: where no other group
        # fails, no kept class does, and the gather over every (class, subset) is skipped (the
        # last round of every check; the rounds C alone fails)
        live = group_size > 0 if bool((sizes > 0).all()) else None
        if k is not None:
            wrong = group_size < k
            if limit is not None:
                if live is not None and not (wrong & live).any():
                    bad = np.zeros(kept.shape[0], dtype=bool)
                else:
                    bad = wrong[self.group].any(axis=1) & kept
                if float(sizes[~kept | bad].sum()) > limit:
                    return bad
        else:
            wrong = np.zeros(self.n_groups, dtype=bool)
        if counts is not None and self.entries is not None:
            _, n_cells, cell_groups, starts = self.cells()
            if n_cells:
                self._sync(kept, sizes, counts, with_cells=True)
                summed = self._summed
                assert summed is not None
                if starts is None:
                    largest = summed.reshape(self.n_groups, -1).max(axis=1)
                else:
                    largest = np.zeros(self.n_groups, dtype=np.float64)
                    largest[cell_groups] = np.maximum.reduceat(summed, starts)
                wrong |= largest > (c + EPS) * group_size
        if live is not None and not (wrong & live).any():
            return np.zeros(kept.shape[0], dtype=bool)
        return wrong[self.group].any(axis=1) & kept


def _groups(columns: np.ndarray) -> tuple[np.ndarray, int]:
    """Group id (0..n-1, in sorted order of the rows' values) of each row of a code matrix."""
    radices = columns.max(axis=0) + 1 if columns.shape[0] else np.ones(columns.shape[1], dtype=np.int64)
    if float(np.prod(radices.astype(np.float64))) < 2.0 ** 62:
        key = np.zeros(columns.shape[0], dtype=np.int64)
        for i, radix in enumerate(radices):
            key = key * np.int64(radix) + columns[:, i]
        group, values = _compact(key)
        return group, int(values.shape[0])
    values, group = np.unique(columns, axis=0, return_inverse=True)
    return group.reshape(-1), int(values.shape[0])


def _compact(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(id of each key among the distinct keys in sorted order, the distinct keys): by a table
    over the key range where that is small (no sort: a check asks this for every QI subset),
    else by `np.unique`."""
    if key.size and 0 <= int(key.min()) and int(key.max()) < 8 * key.size + 4096:
        present = np.zeros(int(key.max()) + 1, dtype=bool)
        present[key] = True
        values = np.flatnonzero(present)
        relabel = np.cumsum(present) - 1
        return relabel[key], values
    values, ids = np.unique(key, return_inverse=True)
    return ids.reshape(-1), values
