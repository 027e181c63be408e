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

import numpy as np

from fedanon.model.config import DeltaPresence
from fedanon.stats.classes import ClassStats
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.errors import InputError

EPS = 1e-9


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


def build(model: DeltaPresence) -> DeltaPresenceCriterion:
    """Entry point used by `criteria.build_criteria` (imported lazily)."""
    return DeltaPresenceCriterion(model)
