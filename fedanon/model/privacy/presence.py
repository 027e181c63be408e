"""δ-presence (Nergiz, Atzori, Clifton 2007): bounds on inferred membership.

Setting: the input table is the *population* P (public world knowledge); a
boolean mask marks the *research subset* S ⊆ P, the rows that are actually
released. After generalization, an attacker who knows P and sees the
released S can infer for a person in class E that Pr(person ∈ S) =
|E ∩ S| / |E|. (δmin, δmax)-presence demands δmin ≤ that ratio ≤ δmax for every
released class.

Semantics with suppression and the other models (fedanon):
* classes are formed over the whole population (the input table); a class
  that contains research-subset rows must satisfy δmin ≤ δ ≤ δmax; a class
  without subset rows publishes nothing, so δ is not checked for it (as in ARX);
* k-anonymity, ℓ-diversity and t-closeness are judged on the same population
  classes, so k means "every published record matches at least k persons of
  the population" (the k-map reading natural when the attacker's background
  knowledge is the population table);
* a class failing any model is suppressed as a whole; the limit is
  floor(suppression × population rows), as for every other model;
* `fedanon anonymize` writes only the research-subset rows (the release).

Monotonicity: without suppression δ-presence is monotone (§3.2.4) as long as
δmin = 0. With δmin > 0, ignoring classes without subset rows breaks it (a
passing class 1/4 with δmin = 0.25 merged with an unreleased class 0/1 gives
1/5), so the criterion reports itself non-monotone then and the search falls
back to its exact, non-monotone mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.errors import InputError
from fedanon.model.registry import ClassView, ParseContext, PrivacyModel, number, register, table_value

EPS = 1e-9



@register
@dataclass
class DeltaPresence(PrivacyModel):
    """(δmin, δmax)-presence against the population table: `DMIN,DMAX:SUBSET.csv`.

    The research subset's file stays with the party that reads it (ParseContext.files):
    the config that travels holds the bounds only."""

    dmin: float
    dmax: float

    key = "delta_presence"
    flag = "--delta-presence"
    metavar = "DMIN,DMAX:SUBSET.csv"
    help = "delta-presence; SUBSET.csv holds the research-subset rows of the input"
    needs_subset = True

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "DeltaPresence":
        if isinstance(value, str):
            bounds, sep, path = value.partition(":")
            dmin, sep2, dmax = bounds.partition(",")
            if not sep or not sep2 or not path.strip():
                raise InputError(f"--delta-presence {value!r}: expected DMIN,DMAX:SUBSET.csv")
            what = f"--delta-presence {value!r}"
            ctx.files["subset"] = ctx.resolve(path.strip())
            return cls(number(dmin, what + ": dmin"), number(dmax, what + ": dmax"))
        entries = table_value(value, "delta_presence", ("dmin", "dmax", "subset"), ctx)
        if not {"dmin", "dmax", "subset"} <= set(entries):
            raise InputError(f"{ctx.source}: [delta_presence] needs dmin, dmax and subset")
        ctx.files["subset"] = ctx.resolve(str(entries["subset"]))
        return cls(number(entries["dmin"], "[delta_presence] dmin"), number(entries["dmax"], "[delta_presence] dmax"))

    def validate(self, config: Any) -> None:
        if not (0.0 <= self.dmin <= 1.0 and 0.0 <= self.dmax <= 1.0):
            raise InputError(f"delta-presence bounds must lie in [0, 1], got {self.dmin!r}, {self.dmax!r}")
        if self.dmin > self.dmax:
            raise InputError(f"delta-presence needs dmin <= dmax, got {self.dmin!r} > {self.dmax!r}")

    def criterion(self) -> "DeltaPresenceCriterion":
        return DeltaPresenceCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        if view.subset_rows == 0:
            return None  # a class without research-subset rows publishes nothing
        d = view.subset_rows / view.size
        if not (float(self.dmin) - EPS <= d <= float(self.dmax) + EPS):
            return f"delta {d:.6f} outside [{self.dmin:g}, {self.dmax:g}]"
        return None

    def describe(self) -> str:
        return f"({self.dmin:g},{self.dmax:g})-presence"


class DeltaPresenceCriterion(Criterion):
    """Per-class test δmin ≤ |E ∩ S| / |E| ≤ δmax on additive class counts."""

    needs_histogram = None
    needs_subset = True

    def __init__(self, model: DeltaPresence) -> None:
        if not 0.0 <= model.dmin <= model.dmax <= 1.0:
            raise InputError(f"delta-presence needs 0 <= dmin <= dmax <= 1, got {model.dmin}, {model.dmax}")
        self.model = model
        self.dmin = float(model.dmin)
        self.dmax = float(model.dmax)
        self.monotone = self.dmin <= 0.0
        self.monotone_with_suppression = False

    def prepare(self, context: CriterionContext) -> None:
        if context.subset_total is None:
            raise InputError("delta-presence needs a research subset (which rows of the input are released)")
        if context.subset_total == 0:
            raise InputError("delta-presence: the research subset is empty")

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        if stats.subset_sizes is None:
            raise InputError("delta-presence needs per-class research-subset counts")
        sizes = np.asarray(stats.sizes, dtype=np.float64)
        sub = np.asarray(stats.subset_sizes, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            delta = np.where(sizes > 0, sub / np.where(sizes > 0, sizes, 1.0), 0.0)
        within = (delta >= self.dmin - EPS) & (delta <= self.dmax + EPS)
        return within | (sub == 0)

    def describe(self) -> str:
        return f"({self.dmin:g},{self.dmax:g})-presence"

