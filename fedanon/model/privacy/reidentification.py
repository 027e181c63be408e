"""Re-identification risk thresholds under the prosecutor model (as ARX's risk-based models).

The prosecutor knows that a person is in the release and their quasi-identifiers; a released
record in a class of |E| records is then re-identified with probability 1/|E|. Two bounds on
that risk over the released (not suppressed) records, both judged from class sizes alone:

* **highest prosecutor risk** ≤ τ: max over records of 1/|E| = 1 / (smallest class size) ≤ τ,
  i.e. every released class has at least ⌈1/τ⌉ records. Class by class; this is k-anonymity
  with k = ⌈1/τ⌉ (to a 1e-9 tolerance), offered under the name risk-based stewards use.
* **average prosecutor risk** ≤ τ: the mean over released records of 1/|E|, which is
  (number of released classes) / (number of released records), ≤ τ. This is a property of the
  whole release, not of one class: the criterion is *release-level* (`Criterion.release_level`)
  and names the classes to suppress itself. Rule: after the class-by-class models have named
  their classes, it suppresses every remaining class smaller than m, for the smallest m that
  brings the ratio to τ or below (suppressing a class smaller than the mean class size lowers
  the ratio). ARX suppresses a prefix of the classes sorted by size, found by binary search;
  taking whole sizes instead makes the answer independent of the classes' order, which
  Protocol C's key holder sees permuted, and differs from ARX only where ARX would split a
  group of equally sized classes.

Monotonicity. Highest risk is k-anonymity: monotone, also with suppression (a class of a
generalization fails only if all its parts fail, so the failing rows can only shrink). Average
risk without suppression: generalization merges classes, the number of records stays, so
classes/records can only fall (monotone). With suppression we have no proof that the size rule
is inherited by generalizations (merging small classes can create a class just above the
threshold that lowers the mean class size), so the criterion declares
`monotone_with_suppression = False` and the search checks instead of tagging.

What each party learns in the protocols: the checking party needs the class sizes, exactly as
for k-anonymity (A: the master; B: the helper; C: the key holder from decrypted class sizes in
permuted order). The models need no histogram and no further message; the average-risk rule
needs only the multiset of sizes, so it reveals nothing a k-anonymity check does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedanon.errors import InputError
from fedanon.model.criterion import Criterion
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value
from fedanon.stats.classes import ClassStats

EPS = 1e-9


def _threshold(cls: type[PrivacyModel], value: Any, ctx: ParseContext) -> float:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return number(value, f"{cls.flag} {value!r}: threshold")
    entries = table_value(value, cls.key, ("threshold",), ctx)
    if "threshold" not in entries:
        raise InputError(f"{ctx.source}: [{cls.key}] needs threshold")
    return number(entries["threshold"], f"[{cls.key}] threshold")


def _check_threshold(name: str, threshold: float) -> None:
    if not (math.isfinite(threshold) and 0 < threshold <= 1):
        raise InputError(f"{name} needs a threshold in (0, 1], got {threshold!r}")


@register
@dataclass
class HighestRisk(PrivacyModel):
    """Highest prosecutor re-identification risk ≤ τ: `--highest-risk TAU` (0 < τ ≤ 1)."""

    threshold: float

    key = "highest_risk"
    flag = "--highest-risk"
    metavar = "TAU"
    help = "highest prosecutor re-identification risk at most TAU: every class holds at least 1/TAU records"
    decomposes_over_shares = True

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "HighestRisk":
        return cls(_threshold(cls, value, ctx))

    def validate(self, config: Any) -> None:
        _check_threshold("the highest-risk threshold", self.threshold)

    def criterion(self) -> "HighestRiskCriterion":
        return HighestRiskCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        risk = 1.0 / view.size
        if risk > self.threshold + EPS:
            return f"prosecutor risk 1/{view.size} = {risk:.6f} > {self.threshold:g}"
        return None

    def describe(self) -> str:
        return f"highest prosecutor risk <= {self.threshold:g}"


class HighestRiskCriterion(Criterion):
    """Every class holds at least the smallest m with 1/m ≤ τ."""

    monotone = True
    monotone_with_suppression = True

    def __init__(self, model: HighestRisk) -> None:
        _check_threshold("the highest-risk threshold", model.threshold)
        self.model = model
        self.min_class_size = max(1, math.ceil(1.0 / (float(model.threshold) + EPS)))

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        return np.asarray(stats.sizes) >= self.min_class_size

    def describe(self) -> str:
        return self.model.describe()


@register
@dataclass
class AverageRisk(PrivacyModel):
    """Average prosecutor re-identification risk ≤ τ: `--average-risk TAU` (0 < τ ≤ 1)."""

    threshold: float

    key = "average_risk"
    flag = "--average-risk"
    metavar = "TAU"
    help = ("average prosecutor re-identification risk at most TAU: released classes / released records <= TAU "
            "(the smallest classes are suppressed until it holds)")
    decomposes_over_shares = False   # a ratio over the whole release

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "AverageRisk":
        return cls(_threshold(cls, value, ctx))

    def validate(self, config: Any) -> None:
        _check_threshold("the average-risk threshold", self.threshold)

    def criterion(self) -> "AverageRiskCriterion":
        return AverageRiskCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        return None   # no single class fails: see release_violation

    def release_violation(self, class_sizes: list[int], table_rows: int = 0) -> str | None:
        records = sum(class_sizes)
        if records == 0:
            return None
        risk = len(class_sizes) / records
        if risk > self.threshold + EPS:
            return f"average prosecutor risk {len(class_sizes)}/{records} = {risk:.6f} > {self.threshold:g}"
        return None

    def describe(self) -> str:
        return f"average prosecutor risk <= {self.threshold:g}"


class AverageRiskCriterion(Criterion):
    """Release-level: suppress the classes below the smallest size threshold that brings
    (kept classes) / (kept records) to τ or below."""

    monotone = True
    monotone_with_suppression = False
    release_level = True

    def __init__(self, model: AverageRisk) -> None:
        _check_threshold("the average-risk threshold", model.threshold)
        self.model = model
        self.threshold = float(model.threshold)

    bounds_suppression = True

    def suppression_bound(self, stats: ClassStats, codes: np.ndarray | None = None,
                          limit: float | None = None, levels: tuple[int, ...] | None = None) -> float:
        """Suppressing r rows removes at most r classes and keeps at most all rows, so a release
        with kept classes ≤ τ · kept rows suppresses at least (classes − τ · rows) rows; the
        classes can only become fewer under generalization, the rows stay."""
        sizes = np.asarray(stats.sizes)
        return float(np.count_nonzero(sizes > 0)) - (self.threshold + EPS) * float(sizes.sum())

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        return np.ones(np.asarray(stats.sizes).shape[0], dtype=bool)

    def enforce(self, sizes: np.ndarray, failing: np.ndarray) -> np.ndarray:
        sizes = np.asarray(sizes, dtype=np.int64)
        kept = ~failing & (sizes > 0)
        kept_sizes = sizes[kept]
        if kept_sizes.shape[0] == 0 or kept_sizes.shape[0] <= (self.threshold + EPS) * float(kept_sizes.sum()):
            return failing
        # candidate thresholds: the distinct kept sizes, ascending; keeping the classes of size
        # >= u[i] leaves suffix sums of class counts and of rows
        u, counts = np.unique(kept_sizes, return_counts=True)
        classes_left = np.cumsum(counts[::-1])[::-1].astype(np.float64)
        rows_left = np.cumsum((counts * u)[::-1])[::-1].astype(np.float64)
        ok = classes_left <= (self.threshold + EPS) * rows_left
        if not ok.any():
            return failing | kept   # nothing short of suppressing everything
        smallest_kept = u[int(np.argmax(ok))]
        return failing | (kept & (sizes < smallest_kept))

    def describe(self) -> str:
        return self.model.describe()
