"""(α, k)-anonymity (Wong, Li, Fu & Wang, "(α, k)-Anonymity: An Enhanced k-Anonymity Model for
Privacy-Preserving Data Publishing", KDD 2006) of one sensitive attribute.

A release is (α, k)-anonymous when it is k-anonymous (`--k`, judged as usual) and in every
released class the share of every sensitive value is at most α:

    count(s, E) / |E|  ≤  α      for every class E and every value s.

This is the general form of the paper (every value is sensitive); its "simple" form names one
sensitive value, which a steward gets by recoding the attribute to that value versus the rest.
The second half is this model; with `--k K` the pair is the model of the paper. A class exactly
at the bound passes (1e-9 tolerance for floating-point rounding).

Monotonicity: a value's share in E₁ ∪ E₂ is a weighted mean of its shares in E₁ and E₂, so the
union of two passing classes passes: monotone without suppression. With suppression it is not (a
suppressed class dominated by one value can join a passing class and push that value over α), so
`monotone_with_suppression = False`. Every passing class has at least the smallest m for which m
rows can be spread over the table's D distinct values with at most ⌊α·m⌋ rows each, i.e.
min(D, m) · ⌊α·m⌋ ≥ m (`min_class_size`, which the search uses with suppression).

What each party learns in the protocols: the checking party judges the model from per-class
histograms of the sensitive attribute, exactly as for recursive ℓ-diversity (A: the master on
ciphertext codes; B: the helper on ciphertext codes; C: the key holder from decrypted class
histograms). It adds no message and reveals nothing the ℓ-diversity checks do not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedanon.errors import InputError
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value
from fedanon.stats.classes import ClassStats
from fedanon.stats.classhist import SparseHistogram

EPS = 1e-9


@register
@dataclass
class AlphaK(PrivacyModel):
    """(α, k)-anonymity of the sensitive attribute: `--alpha-k ALPHA` (0 < α ≤ 1; k by `--k`)."""

    alpha: float
    attribute: str

    key = "alpha_k"
    flag = "--alpha-k"
    metavar = "ALPHA"
    help = "(alpha,k)-anonymity: in every class each sensitive value's share is at most ALPHA (k by --k)"
    uses_sensitive = True
    decomposes_over_shares = True   # judged on each class alone

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "AlphaK":
        attribute = ctx.require_sensitive()
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return cls(number(value, f"{cls.flag} {value!r}: alpha"), attribute)
        entries = table_value(value, cls.key, ("alpha",), ctx)
        if "alpha" not in entries:
            raise InputError(f"{ctx.source}: [{cls.key}] needs alpha")
        return cls(number(entries["alpha"], f"[{cls.key}] alpha"), attribute)

    def validate(self, config: Any) -> None:
        if not (math.isfinite(self.alpha) and 0 < self.alpha <= 1):
            raise InputError(f"(alpha,k)-anonymity needs 0 < alpha <= 1, got {self.alpha!r}")

    def criterion(self) -> "AlphaKCriterion":
        return AlphaKCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        for value, count in sorted(view.sensitive_counts[self.attribute].items()):
            share = count / view.size
            if share > self.alpha + EPS:
                return f"sensitive value {value.decode('utf-8', 'replace')!r} has share {share:.6f} > " \
                       f"alpha={self.alpha:g}"
        return None

    def describe(self) -> str:
        return f"({self.alpha:g},k)-anonymity of {self.attribute}"


class AlphaKCriterion(Criterion):
    """Per-class test: the largest sensitive count ≤ α · class size."""

    monotone = True
    monotone_with_suppression = False

    def __init__(self, model: AlphaK) -> None:
        self.model = model
        self.alpha = float(model.alpha)
        self.needs_histogram = model.attribute

    def prepare(self, context: CriterionContext) -> None:
        total = np.asarray(context.histograms_total[self.model.attribute])
        self.min_class_size = self._smallest_feasible_size(int(np.count_nonzero(total)), int(total.sum()))

    def _smallest_feasible_size(self, domain: int, n_rows: int) -> int:
        """Smallest m with min(D, m) · ⌊α·m⌋ ≥ m: m rows over at most D values, ⌊α·m⌋ each. The
        floor uses the test's tolerance loosened, so the size is never above the true one."""
        for m in range(1, max(1, n_rows) + 1):
            if min(domain, m) * math.floor(self.alpha * m + 2 * EPS * m + 1e-9) >= m:
                return m
        return max(1, n_rows)

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        hist = stats.histograms[self.model.attribute]
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        if isinstance(hist, SparseHistogram):
            if hist.saturated is not None:
                raise ValueError(f"{self.describe()} needs complete class statistics, got saturated ones")
            largest = np.zeros(hist.n_classes, dtype=np.int64)
            np.maximum.at(largest, hist.cls, hist.count)
        else:
            largest = np.asarray(hist).max(axis=1) if np.asarray(hist).shape[1] else np.zeros(sizes.shape[0])
        return largest / np.where(sizes > 0, sizes, 1.0) <= self.alpha + EPS

    def describe(self) -> str:
        return self.model.describe()
