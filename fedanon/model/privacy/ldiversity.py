"""ℓ-diversity (Machanavajjhala et al.): distinct, entropy and recursive-(c,ℓ).

Protects against attribute disclosure: every equivalence class must contain at
least ℓ "well represented" values of the sensitive attribute. The check works
on the per-class histogram of sensitive codes the core supplies (ClassStats),
so it is vectorized over all classes at once and never looks at a value —
the same code runs on ciphertext dictionaries.

Monotonicity (§3.2.2): all three variants are monotone under generalization
without suppression; with a suppression limit only distinct-ℓ-diversity stays
monotone (Abbildung 3.2 gives counterexamples for entropy and recursive).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np

from fedanon.stats.classhist import SparseHistogram
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.errors import InputError
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value

# A class exactly at the bound (e.g. two equally frequent values for entropy-2)
# must pass despite floating-point rounding of the logarithms.
EPS = 1e-9



VARIANTS = ("distinct", "entropy", "recursive")


@register
@dataclass
class LDiversity(PrivacyModel):
    """ℓ-diversity of one sensitive attribute: `distinct:L`, `entropy:L` or `recursive:C,L`."""

    variant: Literal["distinct", "entropy", "recursive"]
    l: float
    attribute: str
    c: float | None = None

    key = "l_diversity"
    flag = "--l-diversity"
    metavar = "distinct:L|entropy:L|recursive:C,L"
    help = "l-diversity of the sensitive attribute"
    uses_sensitive = True
    decomposes_over_shares = True

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "LDiversity":
        attribute = ctx.require_sensitive()
        if isinstance(value, str):
            return cls.parse_text(value, attribute)
        entries = table_value(value, "l_diversity", ("variant", "l", "c"), ctx)
        if "variant" not in entries or "l" not in entries:
            raise InputError(f"{ctx.source}: [l_diversity] needs variant and l (and c for recursive)")
        c = entries.get("c")
        return cls(str(entries["variant"]), number(entries["l"], "[l_diversity] l"), attribute,  # type: ignore[arg-type]
                   number(c, "[l_diversity] c") if c is not None else None)

    @classmethod
    def parse_text(cls, text: str, attribute: str) -> "LDiversity":
        """`distinct:L`, `entropy:L` or `recursive:C,L`."""
        variant, sep, params = text.partition(":")
        variant = variant.strip().lower()
        if not sep:
            raise InputError(f"--l-diversity {text!r}: expected distinct:L, entropy:L or recursive:C,L")
        if variant in ("distinct", "entropy"):
            return cls(variant, number(params, f"--l-diversity {text!r}: l"), attribute)  # type: ignore[arg-type]
        if variant == "recursive":
            c, sep2, l_text = params.partition(",")
            if not sep2:
                raise InputError(f"--l-diversity {text!r}: recursive needs C,L (e.g. recursive:4,3)")
            l_value = number(l_text, f"--l-diversity {text!r}: l")
            if l_value != int(l_value):
                raise InputError(f"--l-diversity {text!r}: recursive (c,l)-diversity needs an integer l")
            return cls("recursive", l_value, attribute, number(c, f"--l-diversity {text!r}: c"))
        raise InputError(f"--l-diversity {text!r}: unknown variant {variant!r} (distinct, entropy, recursive)")

    def validate(self, config: Any) -> None:
        if self.variant not in VARIANTS:
            raise InputError(f"unknown l-diversity variant {self.variant!r} (distinct, entropy, recursive)")
        if not self.l >= 1:
            raise InputError(f"l-diversity needs l >= 1, got {self.l!r}")
        if self.variant == "recursive" and (self.c is None or not self.c > 0):
            raise InputError(f"recursive (c,l)-diversity needs c > 0, got {self.c!r}")

    def criterion(self) -> "LDiversityCriterion":
        return LDiversityCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        why = diversity_violation(view.sensitive_counts[self.attribute], self)
        return f"not l-diverse: {why}" if why else None

    def describe(self) -> str:
        if self.variant == "recursive":
            return f"recursive-({self.c:g},{self.l:g})-diversity of {self.attribute}"
        return f"{self.variant}-{self.l:g}-diversity of {self.attribute}"



class LDiversityCriterion(Criterion):
    """Per-class ℓ-diversity test on sensitive-code histograms."""

    monotone = True

    def __init__(self, model: LDiversity) -> None:
        if model.variant not in ("distinct", "entropy", "recursive"):
            raise InputError(f"unknown l-diversity variant {model.variant!r}")
        self.model = model
        self.variant = model.variant
        self.l = float(model.l)
        self.c = float(model.c) if model.c is not None else None
        if self.variant == "recursive":
            if self.c is None:
                raise InputError("recursive (c,l)-diversity needs c")
            if self.l != int(self.l):
                raise InputError(f"recursive (c,l)-diversity needs an integer l, got {self.l:g}")
        self.needs_histogram = model.attribute
        self.needs_subset = False
        # Only distinct-ℓ survives suppression (§3.2.2); the core may use this
        # to keep predictive tagging on for it.
        self.monotone_with_suppression = self.variant == "distinct"
        # a class with ≥ ℓ distinct values stays distinct-ℓ-diverse whatever joins it; entropy
        # and recursive-(c,ℓ) have no such rule (a skewed class joining can break either)
        if self.variant == "distinct":
            self.accepts_distinct_at_least = self.min_class_size

    # The minimal class size this model implies (every ℓ-diverse class has ≥ ℓ
    # rows for distinct/recursive; entropy-ℓ needs ≥ ceil(ℓ) distinct values).
    @property
    def min_class_size(self) -> int:
        return int(math.ceil(self.l - EPS))

    def prepare(self, context: CriterionContext) -> None:  # no global information needed
        return None

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        hist = stats.histograms[self.model.attribute]
        if isinstance(hist, SparseHistogram):
            return self._classes_ok_sparse(hist)
        hist = np.asarray(hist)
        if hist.ndim != 2:
            raise ValueError("histogram must be (classes x sensitive codes)")
        # distinct values per class as a matrix-vector product: counting along the short axis
        # of a (classes x values) matrix cost twice as much
        distinct = (hist != 0).astype(np.float64) @ np.ones(hist.shape[1])
        enough = distinct >= self.l - EPS
        if self.variant == "distinct":
            return enough
        # Every variant needs at least ceil(ℓ) distinct values, so only those
        # classes need the costlier test -- in fine nodes that is a small minority.
        ok = np.zeros(hist.shape[0], dtype=bool)
        if not enough.any():
            return ok
        candidates = hist[enough] if not enough.all() else hist
        if self.variant == "entropy":
            ok[enough] = self._entropy(candidates) >= math.log(self.l) - EPS
        else:
            ok[enough] = self._recursive(candidates)
        return ok

    def _classes_ok_sparse(self, hist: SparseHistogram) -> np.ndarray:
        """The same tests on (class, value, count) entries: work linear in the entries."""
        enough = hist.distinct() >= self.l - EPS
        if self.variant == "distinct":
            return enough
        if hist.saturated is not None:
            raise ValueError(f"{self.describe()} needs complete class statistics, got saturated ones")
        if not enough.any():
            return enough
        if self.variant == "recursive" and hist.domain < int(self.l):
            return np.zeros(hist.n_classes, dtype=bool)
        # only classes with ≥ ℓ distinct values can pass: in fine nodes most entries belong
        # to the others, so they are left out before logarithms, sums and sorts
        candidate = enough[hist.cls]
        cls, count = (hist.cls, hist.count) if candidate.all() else (hist.cls[candidate], hist.count[candidate])
        counts = count.astype(np.float64)
        sizes = np.bincount(cls, weights=counts, minlength=hist.n_classes)
        if self.variant == "entropy":
            # H = log s - (1/s) sum c log c
            safe = np.where(sizes == 0, 1.0, sizes)
            entropy = np.log(safe) - np.bincount(cls, weights=counts * np.log(counts), minlength=hist.n_classes) / safe
            return enough & (entropy >= math.log(self.l) - EPS)
        # the ℓ-1 largest counts of each class by rounds of a per-class maximum (`maximum.at`,
        # no sort): each round takes one entry holding its class's maximum out of the running
        # (ties: the next round finds the same count again). ℓ is small, so a few linear
        # passes; the packed sort of every entry they replace cost 2-2.5x as much.
        n = hist.n_classes
        rest = count.copy()
        best = np.zeros(n, dtype=np.int64)
        np.maximum.at(best, cls, rest)
        r1 = best
        top = np.zeros(n, dtype=np.int64)
        for round_ in range(int(self.l) - 1):
            top += best
            if round_ < int(self.l) - 2:
                holder = np.full(n, -1, dtype=np.int64)
                maxima = np.flatnonzero(rest == best[cls])
                holder[cls[maxima]] = maxima  # one entry per class (any of tied ones)
                rest[holder[holder >= 0]] = 0
                best = np.zeros(n, dtype=np.int64)
                np.maximum.at(best, cls, rest)
        return enough & (r1 < self.c * (sizes - top))  # type: ignore[operator]

    @staticmethod
    def _entropy(hist: np.ndarray) -> np.ndarray:
        ones = np.ones(hist.shape[1])
        sizes = hist.astype(np.float64) @ ones  # row sums as a product (see classes_ok)
        with np.errstate(divide="ignore", invalid="ignore"):
            p = hist / np.where(sizes == 0, 1.0, sizes)[:, None]
            terms = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
        return -(terms @ ones)

    def _recursive(self, hist: np.ndarray) -> np.ndarray:
        """r_1 < c · (r_ℓ + … + r_m), with the tail as total minus the ℓ−1 largest counts."""
        l_int = int(self.l)
        m = hist.shape[1]
        if m < l_int:
            return np.zeros(hist.shape[0], dtype=bool)
        top = np.partition(hist, m - (l_int - 1), axis=1)[:, m - (l_int - 1):] if l_int > 1 else hist.max(axis=1, keepdims=True)
        # sums and the maximum along the short axis as products and one pass per column (exact:
        # integer counts below 2^53 in float64)
        r1 = top[:, 0].astype(np.float64)
        for j in range(1, top.shape[1]):
            np.maximum(r1, top[:, j], out=r1)
        total = hist.astype(np.float64) @ np.ones(m)
        tail = total - top.astype(np.float64) @ np.ones(top.shape[1]) if l_int > 1 else total
        return r1 < self.c * tail  # type: ignore[operator]

    def describe(self) -> str:
        if self.variant == "recursive":
            return f"recursive-({self.c:g},{self.l:g})-diversity of {self.model.attribute}"
        return f"{self.variant}-{self.l:g}-diversity of {self.model.attribute}"


# ---- the verifier's independent reading of the definition (plain Python on raw counts)

def entropy_of(counts: Sequence[int]) -> float:
    total = sum(counts)
    h = 0.0
    for c in counts:
        if c:
            p = c / total
            h -= p * math.log(p)
    return h


def diversity_violation(counts: Counter, ldiv: LDiversity) -> str | None:
    variant = ldiv.variant
    l_value = float(ldiv.l)
    values = sorted(counts.values(), reverse=True)
    if variant == "distinct":
        if len(values) < l_value:
            return f"{len(values)} distinct sensitive values < l={l_value:g}"
    elif variant == "entropy":
        h = entropy_of(values)
        if h < math.log(l_value) - EPS:
            return f"entropy {h:.6f} < log(l)={math.log(l_value):.6f}"
    elif variant == "recursive":
        c = float(ldiv.c)
        l_int = int(l_value)
        tail = sum(values[l_int - 1:])
        if not values[0] < c * tail:
            return f"r1={values[0]} is not < c*(r_l+...+r_m)={c:g}*{tail}"
    else:
        return f"unknown l-diversity variant {variant!r}"
    return None
