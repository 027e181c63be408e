"""Privacy criteria evaluated per equivalence class: the seam between search and models.

A criterion only sees additive class statistics (`ClassStats`), never rows or
values. That keeps every model runnable on ciphertext and lets the core compute
statistics for a coarser node by summing a finer node's (roll-up).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from fedanon.stats.classes import ClassStats

if TYPE_CHECKING:  # annotation only: the config sits above the criteria
    from fedanon.model.config import AnonymizationConfig


@dataclass
class CriterionContext:
    """Global facts a criterion may need (overall distributions, hierarchies)."""

    n_rows: int
    histograms_total: dict[str, np.ndarray] = field(default_factory=dict)
    sensitive_code_maps: dict[str, np.ndarray] = field(default_factory=dict)
    subset_total: int | None = None
    # per sensitive attribute, its values by code (plaintext only: a model that names values of
    # the attribute, e.g. LKC-privacy's sensitive set, finds their codes here)
    sensitive_values: dict[str, list[bytes]] = field(default_factory=dict)


class Criterion(ABC):
    """One privacy model, judged class by class.

    `monotone`: if every class of a node satisfies the criterion, every class of
    every generalization does too (no suppression involved).
    `monotone_with_suppression`: the stronger property that "at most s rows fail"
    is inherited by generalizations -- true for k-anonymity (§3.2.1), false for the
    distribution-based models, so it defaults to False (the safe choice).
    """

    needs_histogram: str | None = None
    needs_subset: bool = False
    monotone: bool = True
    monotone_with_suppression: bool = False
    # Every class this criterion accepts has at least this many rows. Read after
    # prepare(); the search uses "at most s rows in smaller classes" as a necessary,
    # suppression-monotone sub-criterion (Flash_2P phase 1) when the model itself
    # is not monotone with suppression. 1 = no such implication.
    min_class_size: int = 1
    # Every class with at least this many distinct values of `needs_histogram` is accepted,
    # and so is every union of such a class with other classes (0 = no such rule). The
    # statistics may then forget those classes' entries (classhist.py, "saturation").
    accepts_distinct_at_least: int = 0
    # Judged on the whole release rather than class by class (e.g. the average re-identification
    # risk, a ratio over all kept classes): `enforce` then names the classes to suppress, after
    # the class-by-class criteria have named theirs, and `classes_ok` is not consulted.
    release_level: bool = False
    # A release-level criterion that also reads the generalized QI codes of every class of the
    # node (LKC-privacy projects the classes onto subsets of the QIs): the judge hands them to
    # `enforce_classes`. Protocol C's key holder, who never sees class codes, judges it on random
    # labels of the codes the helper sends per node (protocols/c/projections.py).
    needs_codes: bool = False
    # Implements `suppression_bound`: a lower bound on the rows that every release of a node,
    # and of every generalization of it, must suppress for this criterion (a monotone necessary
    # condition, like the implied class size, that the search tags with where the criterion is
    # not monotone with suppression).
    bounds_suppression: bool = False

    def prepare(self, context: CriterionContext) -> None:
        """Receive global information once before the search starts."""

    def enforce(self, sizes: np.ndarray, failing: np.ndarray) -> np.ndarray:
        """For a release-level criterion: the classes to suppress so that the kept ones satisfy it.

        `failing` marks the classes the class-by-class criteria reject (they are suppressed in
        any case); the answer must contain them. It must depend on the multiset of classes only,
        never on their order (a key holder sees them permuted)."""
        return failing

    def enforce_classes(self, stats: ClassStats, codes: np.ndarray | None, failing: np.ndarray,
                        limit: int | None = None, levels: tuple[int, ...] | None = None) -> np.ndarray:
        """`enforce` with the node's whole class table: statistics and, where `needs_codes`, the
        generalized QI codes (classes x QIs). The default reads the sizes only. `limit`: the
        answer may stop short once the classes it names hold more than `limit` rows (the node
        then fails in any case); None asks for the exact set. `levels`: the node's levels, given
        only where a value's code at a level is the same at every node of the search (the
        grouper's codes, not Protocol C's fresh labels), so a criterion may key what it keeps
        between checks with them."""
        return self.enforce(stats.sizes, failing)

    def suppression_bound(self, stats: ClassStats, codes: np.ndarray | None = None,
                          limit: float | None = None, levels: tuple[int, ...] | None = None) -> float:
        """Rows that must be suppressed at this node and at each of its generalizations so that
        the kept classes satisfy the criterion; it may never increase under generalization (the
        search tags every specialization of a node whose bound exceeds the limit as failing).
        `codes`: the classes' generalized QI codes, for a criterion that `needs_codes`; `limit`:
        the answer may be any value above it once the bound is known to exceed it; `levels`: the
        node's levels, which a criterion may key what it keeps between checks with."""
        return 0.0

    @abstractmethod
    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        """Boolean array: which classes satisfy the criterion."""

    def describe(self) -> str:
        return type(self).__name__


class KAnonymity(Criterion):
    """Every class holds at least k rows."""

    monotone = True
    monotone_with_suppression = True

    def __init__(self, k: int) -> None:
        self.k = int(k)
        self.min_class_size = self.k

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        return stats.sizes >= self.k

    def describe(self) -> str:
        return f"{self.k}-anonymity"


def saturation_thresholds(criteria: list[Criterion]) -> dict[str, int]:
    """Per sensitive attribute: the distinct-value count at which its class statistics may
    forget a class -- only where every criterion reading that attribute accepts such
    classes and their unions (e.g. distinct-ℓ alone; not with t-closeness on it)."""
    by_attribute: dict[str, list[int]] = {}
    for c in criteria:
        if c.needs_histogram:
            by_attribute.setdefault(c.needs_histogram, []).append(c.accepts_distinct_at_least)
    return {a: max(ats) for a, ats in by_attribute.items() if min(ats) > 0}


def build_criteria(config: "AnonymizationConfig") -> list[Criterion]:
    """Instantiate the conjunction of models the config asks for: k-anonymity (when k > 1 or no
    other model is given) and every registered model in the config."""
    criteria: list[Criterion] = []
    if config.k > 1 or not config.models:
        criteria.append(KAnonymity(config.k))
    criteria.extend(model.criterion() for model in config.models)
    return criteria
