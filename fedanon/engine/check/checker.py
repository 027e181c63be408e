"""The checker seam: the search asks "is node X anonymous, and what is its loss?".

`Checker` is everything the Flash search knows about data. `LocalChecker` answers
from plaintext (or ciphertext -- it cannot tell) class statistics; Protocol C
supplies a checker whose class counts are Paillier-encrypted and decrypted by a key
holder, without any change to the search.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from fedanon.stats.classes import ClassStats

from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.stats.classes import Classes
from fedanon.engine.check.grouping import Grouper
from fedanon.model.metrics.base import Metric

#: judge where the rows are also a node whose class table the grouper would keep as a snapshot
#: (it is then not kept: later checks group rows instead of rolling up). Off: such tables are
#: brought here whole, so the snapshots are those of grouping here; a test turns it on to judge
#: every node of a search on the workers.
JUDGE_KEPT_TABLES_ELSEWHERE = False


@dataclass
class NodeEvaluation:
    """What a check of one node yields."""

    anonymous: bool  # satisfies the models with at most the allowed suppression
    anonymous_strict: bool  # satisfies them with no suppression at all
    # rows of failing classes -- where `implied_k_ok` is False only those of the classes below
    # the implied size (a lower bound: the models themselves were not asked); a lower bound too
    # where a release-level criterion stopped once more rows than the limit failed
    suppressed_rows: int
    classes: int  # classes that are kept (not suppressed); an upper bound where implied_k_ok is False
    loss: float
    bound: float  # monotone lower bound on the loss of this node and its generalizations
    # rows in classes smaller than the size every model implies stay within the limit
    # (a monotone necessary condition for `anonymous`, also with suppression)
    implied_k_ok: bool = True


@dataclass
class ClassSums:
    """What a judge needs to know of a set of whole classes, as counts: over disjoint sets of
    classes (the key ranges of a shuffle, one per worker) they add up to the node's."""

    classes: int = 0
    below: int = 0  # classes below the implied size
    small: int = 0  # rows in those classes
    failing: int = 0  # classes a criterion rejects
    failing_rows: int = 0  # rows in those classes

    def __add__(self, other: "ClassSums") -> "ClassSums":
        return ClassSums(self.classes + other.classes, self.below + other.below, self.small + other.small,
                         self.failing + other.failing, self.failing_rows + other.failing_rows)


def implied_class_size(criteria: list[Criterion]) -> int:
    """The size every kept class must reach under `criteria` (1: none implied). Some criteria
    know theirs only once prepared with the data: t-closeness, δ-disclosure, β-likeness and
    (α, k) count 1 before that, an estimated k-map its k (the derived size is at most k)."""
    return max([c.min_class_size for c in criteria] + [1])


def failing_by_class(criteria: list[Criterion], stats: ClassStats) -> np.ndarray:
    """Classes some class-by-class criterion rejects (no release-level criterion among `criteria`)."""
    failing = np.zeros(stats.sizes.shape[0], dtype=bool)
    for c in criteria:
        failing |= ~np.asarray(c.classes_ok(stats), dtype=bool)
    return failing


def class_sums(stats: ClassStats, criteria: list[Criterion], implied_k: int) -> ClassSums:
    """`ClassSums` of one set of whole classes: run where the classes are (a worker's key ranges)."""
    sizes = stats.sizes
    below = sizes < implied_k if implied_k > 1 else np.zeros(sizes.shape[0], dtype=bool)
    failing = failing_by_class(criteria, stats)
    return ClassSums(int(sizes.shape[0]), int(np.count_nonzero(below)), int(np.dot(sizes, below)),
                     int(np.count_nonzero(failing)), int(np.dot(sizes, failing)))


class SplitClasses(Protocol):
    """A node's classes held where they were grouped, in disjoint parts, with their summed counts."""

    sums: ClassSums

    def whole(self) -> Classes:
        """Every class, brought here (as `Grouper.group_rows` returns them)."""

    def failing(self) -> Classes:
        """Only the classes the criteria reject, in canonical order."""

    def release(self) -> None:
        """Free the classes where they are held."""


@runtime_checkable
class ClassSplitting(Protocol):
    """Row partitions that can keep a node's classes where they grouped them and sum counts there."""

    def splits(self, levels: tuple[int, ...]) -> bool:
        """Whether the classes of `levels` end up in disjoint parts held elsewhere (a shuffle)."""

    def split(self, levels: tuple[int, ...], criteria: list[Criterion], implied_k: int) -> SplitClasses:
        """Group `levels` and leave its classes where they are, with their `class_sums` added."""


class Checker(ABC):
    """Everything the search (flash.py) uses -- and nothing else.

    A checker is told a node's levels and answers with a `NodeEvaluation`; how it
    gets there (plaintext counts, ciphertext dictionaries, or encrypted counts judged
    by another party) is its own business. The attributes are fixed before the search
    starts; `checks` and `rollups` are read for the report afterwards.
    """

    #: "anonymous" (with suppression) is inherited by generalizations
    anonymity_monotone: bool
    #: "anonymous without suppression" is inherited by generalizations
    strict_monotone: bool
    #: loss never decreases under generalization among anonymous nodes
    metric_monotone: bool
    #: rows that may be suppressed
    suppression_limit: int
    #: class size every criterion implies (1 = none); "at most `suppression_limit` rows in
    #: smaller classes" is then a monotone necessary condition the search can tag with
    implied_k: int = 1
    #: some criterion bounds the rows it must suppress (`Criterion.suppression_bound`); "at most
    #: `suppression_limit` rows by every bound" is then part of the monotone necessary condition
    implied_bound: bool = False
    #: nodes evaluated so far
    checks: int = 0
    #: of those, grouped by roll-up from a more specific node
    rollups: int = 0

    @abstractmethod
    def evaluate(self, levels: tuple[int, ...]) -> NodeEvaluation:
        """Transform, group and check one node."""

    def static_bounds(self, levels: np.ndarray) -> np.ndarray | None:
        """Cheap monotone lower bounds of the loss for many nodes at once, if available."""
        return None

    def static_loss(self, levels: tuple[int, ...]) -> float | None:
        """Exact loss of a node known to need no suppression, if computable without grouping."""
        return None


class ClassJudge:
    """Criteria + suppression limit + metric: judges one node from its class statistics.

    Separate from grouping so that a party which never sees rows (Protocol C's key
    holder, who only gets decrypted class counts in permuted order) judges a node with
    exactly the code the local checker uses.
    """

    def __init__(
        self,
        criteria: list[Criterion],
        metric: Metric,
        suppression: float,
        context: CriterionContext,
    ) -> None:
        self.criteria = criteria
        self.metric = metric
        self.suppression_limit = int(math.floor(suppression * context.n_rows + 1e-9))
        for c in criteria:
            c.prepare(context)
        all_monotone = all(c.monotone for c in criteria)
        self.strict_monotone = all_monotone
        if self.suppression_limit == 0:
            self.anonymity_monotone = all_monotone
        else:
            self.anonymity_monotone = all(c.monotone and c.monotone_with_suppression for c in criteria)
        self.metric_monotone = metric.monotone(self.suppression_limit > 0)
        self.implied_k = implied_class_size(criteria)
        # where anonymity itself is monotone the search tags with it, and a bound would only
        # repeat part of the check
        self.bounding = [] if self.anonymity_monotone else [c for c in criteria if c.bounds_suppression]
        self.implied_bound = bool(self.bounding)
        # the class codes are decoded from the keys only where a criterion reads them
        self.reads_codes = any(c.needs_codes for c in criteria)
        # a bound is a float sum: it proves a failure only above the limit by more than rounding
        self._bound_slack = 1e-6 * max(1.0, float(context.n_rows))
        # a node can be judged from `ClassSums` and its failing classes alone: every criterion
        # judges class by class on sizes, the loss reads only the suppressed classes and the
        # bound only the levels
        self.judges_sums = (all(not c.release_level and not c.needs_histogram and not c.needs_subset
                                for c in criteria)
                            and metric.loss_reads_suppressed_only
                            and type(metric).class_bound is Metric.class_bound
                            and not self.bounding)

    def failing_classes(self, stats: ClassStats, codes: np.ndarray | None = None,
                        limit: int | None = None, levels: tuple[int, ...] | None = None) -> np.ndarray:
        """Which classes fail some criterion (they are suppressed in the output): those a
        class-by-class criterion rejects, then those the release-level criteria add. `codes`:
        the classes' generalized QI codes, for a criterion that `needs_codes`. Several
        release-level criteria are asked in turn until none adds a class (each only adds, so
        this ends), so that the kept classes satisfy all of them together. `limit`: a
        release-level criterion may stop once more rows than that fail (a judge only needs to
        know the node fails); the exact set, as the output needs it, without. `levels`: the
        node's, where `codes` are the grouper's (see `Criterion.enforce_classes`)."""
        if len(self.criteria) == 1 and not self.criteria[0].release_level:
            return ~np.asarray(self.criteria[0].classes_ok(stats), dtype=bool)
        failing = np.zeros(stats.sizes.shape[0], dtype=bool)
        for c in self.criteria:
            if not c.release_level:
                failing |= ~np.asarray(c.classes_ok(stats), dtype=bool)
        release = [c for c in self.criteria if c.release_level]
        while release:
            before = int(failing.sum())
            for c in release:
                if c.needs_codes and codes is None:
                    raise ValueError(f"{c.describe()} is judged on the classes' QI codes, which this checker lacks")
                failing = np.asarray(c.enforce_classes(stats, codes, failing, limit, levels), dtype=bool)
            if len(release) == 1 or int(failing.sum()) == before:
                break
        return failing

    def judge(self, levels: tuple[int, ...], classes: Classes) -> NodeEvaluation:
        sizes = classes.stats.sizes
        below = None
        small = 0
        if self.implied_k > 1:
            below = sizes < self.implied_k
            small = int(np.dot(sizes, below))  # rows in classes below the implied size (one call, no gather)
        needed = float(small)
        codes = classes.codes if self.reads_codes else None
        if small <= self.suppression_limit:
            for c in self.bounding:
                needed = max(needed, c.suppression_bound(classes.stats, codes,
                                                         self.suppression_limit + self._bound_slack, levels))
                if needed > self.suppression_limit + self._bound_slack:
                    break
        if small > self.suppression_limit or needed > self.suppression_limit + self._bound_slack:
            # every model rejects the classes below the implied size, and they alone hold more
            # rows than may be suppressed (or a model's own bound on the rows it must suppress
            # exceeds the limit): not anonymous whatever the models say about the others, so
            # they are not asked (ℓ/t on a large sensitive domain: most of a check)
            if below is None:
                below = np.zeros(sizes.shape[0], dtype=bool)
            small = max(small, min(int(math.ceil(needed - self._bound_slack)), int(sizes.sum())))
            return NodeEvaluation(
                implied_k_ok=False, anonymous=False, anonymous_strict=False, suppressed_rows=small,
                classes=classes.count - int(np.count_nonzero(below)), loss=math.inf,
                bound=self.metric.class_bound(levels, classes),
            )
        failing = self.failing_classes(classes.stats, codes, self.suppression_limit, levels)
        suppressed = int(classes.stats.sizes[failing].sum()) if failing.any() else 0
        anonymous = suppressed <= self.suppression_limit
        loss = self.metric.loss(levels, classes, failing) if anonymous else math.inf
        return NodeEvaluation(
            implied_k_ok=True,
            anonymous=anonymous,
            anonymous_strict=suppressed == 0,
            suppressed_rows=suppressed,
            classes=classes.count - int(failing.sum()),
            loss=loss,
            bound=self.metric.class_bound(levels, classes),
        )

    def judge_sums(self, levels: tuple[int, ...], sums: ClassSums, failing: "SplitClasses") -> NodeEvaluation:
        """`judge` from the node's `ClassSums`, asking for its failing classes only where the loss
        needs them (`judges_sums` must hold): the same evaluation, field by field."""
        empty = Classes(levels, np.zeros((0, len(levels)), dtype=np.int32),
                        ClassStats(np.zeros(0, dtype=np.int64), {}, None))
        bound = self.metric.class_bound(levels, empty)  # reads the levels only (`judges_sums`)
        if sums.small > self.suppression_limit:  # as in `judge`: the implied size alone fails the node
            return NodeEvaluation(implied_k_ok=False, anonymous=False, anonymous_strict=False,
                                  suppressed_rows=sums.small, classes=sums.classes - sums.below,
                                  loss=math.inf, bound=bound)
        anonymous = sums.failing_rows <= self.suppression_limit
        loss = math.inf
        if anonymous:
            table = failing.failing() if sums.failing else empty
            loss = self.metric.loss(levels, table, np.ones(table.count, dtype=bool))
        return NodeEvaluation(implied_k_ok=True, anonymous=anonymous, anonymous_strict=sums.failing_rows == 0,
                              suppressed_rows=sums.failing_rows, classes=sums.classes - sums.failing,
                              loss=loss, bound=bound)


class LocalChecker(Checker):
    """Checks nodes against in-memory class statistics."""

    def __init__(
        self,
        grouper: Grouper,
        criteria: list[Criterion],
        metric: Metric,
        suppression: float,
        context: CriterionContext,
    ) -> None:
        self.grouper = grouper
        self.class_judge = ClassJudge(criteria, metric, suppression, context)
        self.criteria = criteria
        self.metric = metric
        self.suppression_limit = self.class_judge.suppression_limit
        self.strict_monotone = self.class_judge.strict_monotone
        self.anonymity_monotone = self.class_judge.anonymity_monotone
        self.metric_monotone = self.class_judge.metric_monotone
        self.implied_k = self.class_judge.implied_k
        self.implied_bound = self.class_judge.implied_bound
        self.checks = 0

    @property
    def rollups(self) -> int:  # type: ignore[override]
        return self.grouper.rollups

    def failing_classes(self, stats: ClassStats, codes: np.ndarray | None = None) -> np.ndarray:
        return self.class_judge.failing_classes(stats, codes)

    def judge(self, levels: tuple[int, ...], classes: Classes) -> NodeEvaluation:
        return self.class_judge.judge(levels, classes)

    def evaluate(self, levels: tuple[int, ...]) -> NodeEvaluation:
        self.checks += 1
        levels = tuple(levels)
        where = self.grouper.row_partitions
        if (where is not None and self.class_judge.judges_sums and isinstance(where, ClassSplitting)
                and where.splits(levels) and self.grouper.groups_rows_at(levels)):
            return self._judge_where_grouped(where, tuple(int(x) for x in levels))
        classes, _ = self.grouper.classes(levels)
        return self.judge(levels, classes)

    def _judge_where_grouped(self, where: ClassSplitting, levels: tuple[int, ...]) -> NodeEvaluation:
        """Judge a node whose classes stay in parts where they were grouped (a cluster's workers):
        only their summed counts, and at an anonymous node its failing classes, come here, so
        this process never holds a class table larger than one it would keep as a snapshot."""
        split = where.split(levels, self.criteria, self.implied_k)
        try:
            if self.grouper.keeps(split.sums.classes) and not JUDGE_KEPT_TABLES_ELSEWHERE:
                classes = split.whole()
                self.grouper.grouped_elsewhere(classes)
                return self.judge(levels, classes)
            self.grouper.passed_over(levels, split.sums.classes)
            return self.class_judge.judge_sums(levels, split.sums, split)
        finally:
            split.release()

    def static_bounds(self, levels: np.ndarray) -> np.ndarray | None:
        return self.metric.static_bound(levels)

    def static_loss(self, levels: tuple[int, ...]) -> float | None:
        return self.metric.static_loss(levels)
