"""β-likeness (Cao & Karras, "Publishing Microdata with a Robust Privacy Guarantee", VLDB 2012)
of one sensitive attribute, basic and enhanced.

Protects against attribute disclosure by bounding the *relative gain* in an attacker's belief
about each sensitive value. With p(s | T) the share of value s in the whole table T and
p(s | E) its share in a released class E, the relative distance of s is

    D(s, E) = ( p(s | E) − p(s | T) ) / p(s | T)

and a class satisfies

* basic β-likeness when D(s, E) ≤ β for every value s, and
* enhanced β-likeness when D(s, E) ≤ min(β, −ln p(s | T)) for every value s (the cap
  −ln p keeps frequent values from being pushed to near certainty: for p ≥ e^{−β} the
  allowed gain shrinks with p).

Only gains count: a value that is rarer in the class than in the table (D < 0), or absent, is
fine. This is the reading of ARX's `BasicBLikeness` / `EnhancedBLikeness`; as there, the table
distribution is the one over all rows the model is evaluated on, fixed before the search, and a
class exactly at the bound passes (up to a 1e-9 tolerance for floating-point rounding).

Monotonicity: D(s, E) is an affine function of p(s | E), and p(s | E₁ ∪ E₂) is a weighted mean
of p(s | E₁) and p(s | E₂), so D(s, E₁ ∪ E₂) ≤ max(D(s, E₁), D(s, E₂)) for every s with the same
bound: the union of two passing classes passes, and β-likeness is monotone without suppression.
With suppression it is not (a suppressed class can join a passing class and push a value over
the bound), so the criterion declares `monotone_with_suppression = False`; instead it states
the smallest class size any passing class can have, which the search may use with suppression.

What each party learns in the protocols: the checking party judges the model from per-class
histograms of the sensitive attribute and the table-wide histogram, exactly as for δ-disclosure
and t-closeness (A: the master on ciphertext codes; B: the helper on ciphertext codes; C: the
key holder from decrypted class histograms). The model adds no message and reveals nothing the
t-closeness checks do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from fedanon.errors import InputError
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value
from fedanon.stats.classes import ClassStats
from fedanon.stats.classhist import SparseHistogram

EPS = 1e-9
VARIANTS = ("basic", "enhanced")


@register
@dataclass
class BetaLikeness(PrivacyModel):
    """β-likeness of the sensitive attribute: `--beta-likeness BETA[:basic|:enhanced]` (β > 0)."""

    beta: float
    variant: Literal["basic", "enhanced"]
    attribute: str

    key = "beta_likeness"
    flag = "--beta-likeness"
    metavar = "BETA[:enhanced]"
    help = ("beta-likeness of the sensitive attribute: (p(s|class) - p(s|table)) / p(s|table) <= BETA "
            "(enhanced: <= min(BETA, -ln p(s|table)))")
    uses_sensitive = True
    decomposes_over_shares = False   # the bound is relative to the whole table's distribution

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "BetaLikeness":
        attribute = ctx.require_sensitive()
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(float(value), "basic", attribute)
        if isinstance(value, str):
            beta, _sep, variant = value.partition(":")
            variant = variant.strip().lower() or "basic"
            if variant not in VARIANTS:
                raise InputError(f"{cls.flag} {value!r}: unknown variant {variant!r} (basic, enhanced)")
            return cls(number(beta, f"{cls.flag} {value!r}: beta"), variant, attribute)  # type: ignore[arg-type]
        entries = table_value(value, cls.key, ("beta", "variant"), ctx)
        if "beta" not in entries:
            raise InputError(f"{ctx.source}: [{cls.key}] needs beta (and optionally variant)")
        variant = str(entries.get("variant", "basic")).lower()
        if variant not in VARIANTS:
            raise InputError(f"{ctx.source}: [{cls.key}] variant {variant!r}: expected basic or enhanced")
        return cls(number(entries["beta"], f"[{cls.key}] beta"), variant, attribute)  # type: ignore[arg-type]

    def validate(self, config: Any) -> None:
        if self.variant not in VARIANTS:
            raise InputError(f"unknown beta-likeness variant {self.variant!r} (basic, enhanced)")
        if not (math.isfinite(self.beta) and self.beta > 0):
            raise InputError(f"beta-likeness needs beta > 0, got {self.beta!r}")

    def criterion(self) -> "BetaLikenessCriterion":
        return BetaLikenessCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        # straight from the definition: every value present in the class, its relative gain
        table = view.overall[self.attribute]
        for value, inside in sorted(view.sensitive_counts[self.attribute].items()):
            p_table = table.get(value, 0.0)
            label = value.decode("utf-8", "replace")
            if p_table <= 0:
                return f"sensitive value {label!r} is not in the table's distribution"
            gain = (inside / view.size - p_table) / p_table
            bound = self.beta if self.variant == "basic" else min(self.beta, -math.log(p_table))
            if gain > bound + EPS:
                return f"relative gain {gain:.6f} > {bound:.6f} for value {label!r} (not {self.describe()})"
        return None

    def describe(self) -> str:
        return f"{self.variant} {self.beta:g}-likeness of {self.attribute}"


class BetaLikenessCriterion(Criterion):
    """Per-class test on sensitive-code histograms: count(s) ≤ size · p(s) · (1 + bound(s))."""

    monotone = True
    monotone_with_suppression = False

    def __init__(self, model: BetaLikeness) -> None:
        if model.variant not in VARIANTS:
            raise InputError(f"unknown beta-likeness variant {model.variant!r}")
        self.model = model
        self.needs_histogram = model.attribute
        self._p: np.ndarray | None = None       # p(s | T) per code
        self._bound: np.ndarray | None = None   # the allowed gain per code
        # the suppression bound's constants per code: a(s) and 1 / (1 − a(s)) (0 where a ≥ 1)
        self._allowance = np.zeros(0)
        self._spread = np.zeros(0)

    def prepare(self, context: CriterionContext) -> None:
        total = np.asarray(context.histograms_total[self.model.attribute], dtype=np.float64)
        n = float(total.sum())
        if n <= 0:
            raise InputError(f"beta-likeness: no rows to judge {self.model.attribute!r} on")
        self._p = total / n
        beta = float(self.model.beta)
        if self.model.variant == "basic":
            self._bound = np.full(total.shape[0], beta)
        else:
            with np.errstate(divide="ignore"):
                self._bound = np.minimum(beta, -np.log(self._p))
        self.min_class_size = self._smallest_feasible_size(int(n))
        self._allowance = self._p * (1.0 + self._bound + 2 * EPS)
        self._spread = np.where(self._allowance < 1.0, 1.0 / np.maximum(1.0 - self._allowance, EPS), 0.0)

    def _smallest_feasible_size(self, n_rows: int) -> int:
        """Smallest m for which some m-row class passes: value s may take at most
        floor(m · p(s) · (1 + bound(s))) of the m rows, so an m-row class exists iff those caps
        sum to at least m. The caps use a slightly looser tolerance than the test, so the size
        is never above the true one (it is a necessary condition the search prunes with)."""
        assert self._p is not None and self._bound is not None
        allowance = self._p * (1.0 + self._bound + 2 * EPS)
        for m in range(1, max(1, n_rows) + 1):
            if np.floor(m * allowance + 1e-9).sum() >= m:
                return m
        return max(1, n_rows)

    bounds_suppression = True

    def suppression_bound(self, stats: ClassStats, codes: np.ndarray | None = None,
                          limit: float | None = None, levels: tuple[int, ...] | None = None) -> float:
        """Value s's excess in class E, x(s) = count(s) − a(s)·|E| with a(s) = p(s)·(1 + bound(s)),
        is additive over unions of classes, and a kept class has no positive excess. Per class,
        g(E) = max(Σ_s x(s)⁺, max_s x(s)⁺ / (1 − a(s))) is at most |E| and subadditive (a max of
        sums of positive parts), so Σ_E g(E) can only fall under generalization, and the
        suppressed classes must carry all of it: every release of this node or of a
        generalization suppresses at least that many rows. A class smaller than the smallest
        feasible size counts with all its rows (|E| ≥ g(E), and a union is either small too or
        counted by g, so the sum stays subadditive)."""
        if self._p is None or self._bound is None:
            raise RuntimeError("prepare() must run before the check")
        allowance, spread = self._allowance, self._spread
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        hist = stats.histograms[self.model.attribute]
        if isinstance(hist, SparseHistogram):
            if hist.saturated is not None:
                return 0.0
            excess = np.maximum(np.asarray(hist.count, dtype=np.float64) - allowance[hist.value] * sizes[hist.cls], 0.0)
            total = np.bincount(hist.cls, weights=excess, minlength=sizes.shape[0])
            single = np.zeros(sizes.shape[0], dtype=np.float64)
            np.maximum.at(single, hist.cls, excess * spread[hist.value])
        else:   # in place: one (classes x values) array for the whole computation
            excess = np.multiply.outer(sizes, -allowance)
            excess += np.asarray(hist)
            np.maximum(excess, 0.0, out=excess)
            total = excess.sum(axis=1)
            excess *= spread
            single = excess.max(axis=1) if excess.shape[1] else np.zeros(sizes.shape[0])
        carried = np.maximum(total, single)
        small = sizes < self.min_class_size
        return float(carried[~small].sum() + sizes[small].sum())

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        if self._p is None or self._bound is None:
            raise RuntimeError("prepare() must run before the check")
        hist = stats.histograms[self.model.attribute]
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        safe = np.where(sizes > 0, sizes, 1.0)
        if isinstance(hist, SparseHistogram):
            if hist.saturated is not None:
                raise ValueError(f"{self.describe()} needs complete class statistics, got saturated ones")
            p = self._p[hist.value]
            with np.errstate(divide="ignore", invalid="ignore"):
                gain = np.where(p > 0, (hist.count / safe[hist.cls] - p) / np.where(p > 0, p, 1.0), np.inf)
            bad = np.zeros(sizes.shape[0], dtype=bool)
            bad[hist.cls[gain > self._bound[hist.value] + EPS]] = True
            return ~bad
        counts = np.asarray(hist, dtype=np.float64)
        present = self._p > 0
        if present.all():   # one table: every value has a share (no column to pick out)
            gain = counts / safe[:, None]
            gain -= self._p
            gain /= self._p
            return np.all(gain <= self._bound + EPS, axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            gain = (counts[:, present] / safe[:, None] - self._p[present]) / self._p[present]
        ok = np.all(gain <= self._bound[present] + EPS, axis=1)
        ok &= ~np.any(counts[:, ~present] > 0, axis=1)   # a class holding a value the table lacks
        return ok

    def describe(self) -> str:
        return self.model.describe()
