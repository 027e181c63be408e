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
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Mapping

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
                        limit: int | None = None) -> np.ndarray:
        """Suppress every class of a failing projection group, on the kept classes, until none fails.

        Each QI subset's grouping of the classes (and, for C, of their sensitive entries into
        (group, value) cells) is computed once; a round re-sums sizes and counts over the kept
        classes with `bincount`. K is checked on the subsets of exactly L QIs only: a group on
        fewer QIs is a union of groups on L of them, so it has at least K rows when they do."""
        if codes is None:
            raise ValueError("LKC-privacy is judged on the classes' QI codes")
        codes = np.asarray(codes, dtype=np.int64)
        kept = ~np.asarray(failing, dtype=bool)
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        if limit is not None and float(sizes[~kept].sum()) > limit:
            return ~kept   # the other criteria failed the node already
        n_qis = codes.shape[1] if codes.ndim == 2 else 0
        top = min(self.model.l, n_qis)
        entries = self._entries(stats.histograms[self.model.attribute]) if self.bounds_confidence else None
        subsets = [s for size in range(1 if self.bounds_confidence else top, top + 1)
                   for s in itertools.combinations(range(n_qis), size)]
        plans: list[tuple[np.ndarray, int, bool, tuple[np.ndarray, np.ndarray] | None]] = []
        while kept.any():
            weight = np.where(kept, sizes, 0.0)
            counts = None if entries is None else entries[2] * kept[entries[0]]
            bad = np.zeros(kept.shape[0], dtype=bool)
            for i, subset in enumerate(subsets):
                if i == len(plans):   # the first round groups each subset when it comes to it
                    plans.append(self._plan(codes, subset, subset_size_is_l=len(subset) == top, entries=entries))
                group, n_groups, check_k, cells = plans[i]
                group_size = np.bincount(group, weights=weight, minlength=n_groups)
                wrong = group_size < self.k if check_k else np.zeros(n_groups, dtype=bool)
                if cells is not None:
                    cell, cell_group = cells
                    largest = np.zeros(n_groups, dtype=np.float64)
                    np.maximum.at(largest, cell_group, np.bincount(cell, weights=counts, minlength=cell_group.size))
                    wrong |= largest > (self.c + EPS) * group_size
                bad |= wrong[group] & kept
                if limit is not None and bad.any() and float(sizes[~kept | bad].sum()) > limit:
                    return ~kept | bad   # the node fails whatever the other subsets and rounds add
            if not bad.any():
                break
            kept &= ~bad
        return ~kept

    @staticmethod
    def _plan(codes: np.ndarray, subset: tuple[int, ...], subset_size_is_l: bool,
              entries: tuple[np.ndarray, np.ndarray, np.ndarray, int] | None
              ) -> tuple[np.ndarray, int, bool, tuple[np.ndarray, np.ndarray] | None]:
        """One QI subset's projection groups of the classes (and their (group, value) cells)."""
        group, n_groups = _groups(codes[:, list(subset)])
        cells = None
        if entries is not None:
            cls, value, _, domain = entries
            cell, cell_keys = _compact(group[cls] * np.int64(domain) + value)
            cells = (cell, cell_keys // domain)
        return group, n_groups, subset_size_is_l, cells

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
            cls, value = np.nonzero(dense)
            count = dense[cls, value]
            cls, value, count = cls.astype(np.int64), value.astype(np.int64), np.asarray(count, dtype=np.int64)
        if self._chosen is not None:
            keep = self._chosen[value]
            cls, value, count = cls[keep], value[keep], count[keep]
        return cls, value, count.astype(np.float64), domain

    def describe(self) -> str:
        return self.model.describe()


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
