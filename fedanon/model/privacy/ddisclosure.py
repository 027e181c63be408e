"""δ-disclosure privacy (Brickell & Shmatikov, KDD 2008) of one sensitive attribute.

Protects against attribute disclosure by bounding how much seeing a person's class changes
what an attacker believes about the person's sensitive value: for every released class E and
every value s of the sensitive attribute that occurs in the table T,

    | ln( p(s | E) / p(s | T) ) |  ≤  δ

where p(s | E) is the share of rows in E holding s and p(s | T) the share in the whole table
(fixed before the search, as for t-closeness). A class that lacks a value of the table has
ratio 0 and fails for every δ, so every class must hold every value. We use "≤" (a class exactly
at the bound passes, up to floating-point rounding), the natural logarithm, and judge the
classes the search forms over all input rows.

Monotonicity: p(s | E₁ ∪ E₂) is a weighted mean of p(s | E₁) and p(s | E₂), so the union of two
passing classes passes: monotone without suppression. With suppression it is not (a class
that was suppressed can join a passing class and break it), like ℓ-diversity's entropy and
recursive variants.

What each party learns in the protocols: the checking party judges the model from per-class
histograms of the sensitive attribute, exactly as for ℓ-diversity and t-closeness (A: the
master on ciphertext codes; B: the helper on ciphertext codes; C: the key holder from
decrypted class histograms). The model needs nothing beyond those statistics, so it adds no
message and reveals nothing the ℓ-diversity checks do not.
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
class DeltaDisclosure(PrivacyModel):
    """δ-disclosure privacy of the sensitive attribute: `--delta-disclosure DELTA` (δ > 0)."""

    delta: float
    attribute: str

    key = "delta_disclosure"
    flag = "--delta-disclosure"
    metavar = "DELTA"
    help = "delta-disclosure privacy of the sensitive attribute: |ln(p(s|class)/p(s|table))| <= DELTA"
    uses_sensitive = True
    decomposes_over_shares = False   # the bound is relative to the whole table's distribution

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "DeltaDisclosure":
        attribute = ctx.require_sensitive()
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return cls(number(value, f"{cls.flag} {value!r}: delta"), attribute)
        entries = table_value(value, cls.key, ("delta",), ctx)
        if "delta" not in entries:
            raise InputError(f"{ctx.source}: [{cls.key}] needs delta")
        return cls(number(entries["delta"], f"[{cls.key}] delta"), attribute)

    def validate(self, config: Any) -> None:
        if not (math.isfinite(self.delta) and self.delta > 0):
            raise InputError(f"delta-disclosure privacy needs delta > 0, got {self.delta!r}")

    def criterion(self) -> "DeltaDisclosureCriterion":
        return DeltaDisclosureCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        counts = view.sensitive_counts[self.attribute]
        for value, share in sorted(view.overall[self.attribute].items()):
            if share <= 0:
                continue
            inside = counts.get(value, 0)
            if inside == 0:
                return f"sensitive value {value.decode('utf-8', 'replace')!r} of the table is missing " \
                       f"(not {self.delta:g}-disclosure private)"
            gap = abs(math.log((inside / view.size) / share))
            if gap > self.delta + EPS:
                return f"|ln(p/p_table)| = {gap:.6f} > delta={self.delta:g} for value " \
                       f"{value.decode('utf-8', 'replace')!r}"
        return None

    def describe(self) -> str:
        return f"{self.delta:g}-disclosure privacy of {self.attribute}"


class DeltaDisclosureCriterion(Criterion):
    """Per-class test on sensitive-code histograms, vectorized over all classes."""

    monotone = True
    monotone_with_suppression = False

    def __init__(self, model: DeltaDisclosure) -> None:
        self.model = model
        self.delta = float(model.delta)
        self.needs_histogram = model.attribute
        self._log_table: np.ndarray | None = None   # ln p(s | T) per code, -inf where absent
        self._present: np.ndarray | None = None     # codes that occur in the table

    def prepare(self, context: CriterionContext) -> None:
        total = np.asarray(context.histograms_total[self.model.attribute], dtype=np.float64)
        n = float(total.sum())
        if n <= 0:
            raise InputError(f"delta-disclosure privacy: no rows to judge {self.model.attribute!r} on")
        self._present = total > 0
        with np.errstate(divide="ignore"):
            self._log_table = np.log(total / n)
        # a class must hold every value of the table
        self.min_class_size = int(self._present.sum())

    bounds_suppression = True

    def suppression_bound(self, stats: ClassStats, codes: np.ndarray | None = None,
                          limit: float | None = None, levels: tuple[int, ...] | None = None) -> float:
        """A kept class holds value s in count(s) ∈ [b(s)·|E|, a(s)·|E|], a = p(s)·e^δ, b =
        p(s)·e^−δ. The excess count − a·|E| and the shortfall b·|E| − count are additive over
        unions of classes, so their positive parts summed over the classes can only fall under
        generalization, and the suppressed classes must carry all of them; a class carries at
        most (1 − a)·|E| of the excess and b·|E| of the shortfall. The larger quotient is a
        number of rows every release of this node and of its generalizations suppresses."""
        if self._log_table is None or self._present is None:
            raise RuntimeError("prepare() must run before the check")
        share = np.exp(self._log_table[self._present])
        above = share * math.exp(self.delta + 2 * EPS)
        below = share * math.exp(-self.delta - 2 * EPS)
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        hist = stats.histograms[self.model.attribute]
        if isinstance(hist, SparseHistogram):
            if hist.saturated is not None:
                return 0.0
            index = np.cumsum(self._present) - 1   # code -> position among the present values
            keep = self._present[hist.value]
            value = index[hist.value[keep]]
            count = np.asarray(hist.count, dtype=np.float64)[keep]
            size = sizes[hist.cls[keep]]
            excess = np.bincount(value, weights=np.maximum(count - above[value] * size, 0.0), minlength=share.shape[0])
            # Σ max(0, b|E| − count) = b·(rows) − Σ over the entries min(count, b|E|)
            held = np.bincount(value, weights=np.minimum(count, below[value] * size), minlength=share.shape[0])
            shortfall = below * float(sizes.sum()) - held
        else:
            counts = np.asarray(hist, dtype=np.float64)[:, self._present]
            excess = np.maximum(counts - sizes[:, None] * above[None, :], 0.0).sum(axis=0)
            shortfall = np.maximum(sizes[:, None] * below[None, :] - counts, 0.0).sum(axis=0)
        need = float(np.max(np.maximum(shortfall, 0.0) / below))
        capped = above < 1.0
        if capped.any():
            need = max(need, float(np.max(excess[capped] / (1.0 - above[capped]))))
        return need

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        if self._log_table is None or self._present is None:
            raise RuntimeError("prepare() must run before the check")
        hist = stats.histograms[self.model.attribute]
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        if isinstance(hist, SparseHistogram):
            cls, value, count = hist.cls, hist.value, hist.count
            gap = np.abs(np.log(count / sizes[cls]) - self._log_table[value])
            bad = np.zeros(sizes.shape[0], dtype=bool)
            bad[cls[gap > self.delta + EPS]] = True
            holds_all = hist.distinct() >= int(self._present.sum())
            return ~bad & holds_all
        counts = np.asarray(hist, dtype=np.float64)[:, self._present]
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = np.abs(np.log(counts / sizes[:, None]) - self._log_table[self._present][None, :])
        return np.all(gap <= self.delta + EPS, axis=1) & (sizes > 0)

    def describe(self) -> str:
        return self.model.describe()
