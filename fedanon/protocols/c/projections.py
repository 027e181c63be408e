"""Protocol C's projection labels: what lets the key holder judge a model on the classes' QI codes.

LKC-privacy (`model/privacy/lkc.py`) groups a node's classes by their generalized values on
every set of at most L quasi-identifiers. The helper has the classes' codes but never a size;
the key holder has the sizes (and sensitive histograms) but no code. So with each check the
helper sends, per class in the check's permuted order and per QI, a *label* of the class's
generalized value: the value's code at the node's level mapped through a fresh random
permutation of that level's values, drawn anew for every node and QI. Two classes share a
label on a QI exactly when they share the generalized value, so every projection group the
criterion forms from labels is the one it forms from codes, and the key holder runs the
criterion unchanged (including its suppression rounds).

What the key holder learns from them, per tested node: for each QI, which of the (permuted)
classes share a generalized value -- with the sizes, the number of real rows per generalized
value of each QI and every projection group's size and sensitive counts -- never which value
a label stands for (a label is a random number, and the permutation is fresh per node).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fedanon.errors import ProtocolError
from fedanon.model.criterion import Criterion, CriterionContext
from fedanon.protocols.kit.cellcrypt import random_permutation
from fedanon.stats.classes import ClassStats


def projection_labels(codes: np.ndarray, domain_sizes: Sequence[int], order: np.ndarray) -> bytes:
    """The helper's labels: `codes` (classes x QIs, generalized codes at the node's levels) with
    every QI's values relabelled at random, rows in the check's `order` (position p holds class
    order[p]), as little-endian int32."""
    labels = np.empty(codes.shape, dtype="<i4")
    for i, size in enumerate(domain_sizes):
        labels[:, i] = random_permutation(int(size))[np.asarray(codes[:, i], dtype=np.int64)]
    return np.ascontiguousarray(labels[order]).tobytes()


def read_labels(blob: bytes, classes: int, qis: int) -> np.ndarray:
    """The key holder's side: the labels of `classes` classes on `qis` QIs, checked for shape."""
    if len(blob) != classes * qis * 4:
        raise ProtocolError("malformed projection labels in a check request")
    labels = np.frombuffer(blob, dtype="<i4").reshape(classes, qis).astype(np.int64)
    if (labels < 0).any():
        raise ProtocolError("malformed projection labels in a check request")
    return labels


class LabelledCriterion(Criterion):
    """A criterion that `needs_codes`, judged on the labels of the node in hand.

    The key holder's judge hands its criteria the class codes it has, which are no QI codes
    (the loss metric uses class indices there); this wrapper gives the inner criterion the
    labels the helper sent for the same node instead (`labels`, set before every judgement).
    """

    release_level = True
    needs_codes = False  # the judge's codes are not used; `labels` are

    def __init__(self, inner: Criterion) -> None:
        self.inner = inner
        self.needs_histogram = inner.needs_histogram
        self.needs_subset = inner.needs_subset
        self.monotone = inner.monotone
        self.monotone_with_suppression = inner.monotone_with_suppression
        self.labels: np.ndarray | None = None

    def prepare(self, context: CriterionContext) -> None:
        self.inner.prepare(context)
        self.min_class_size = self.inner.min_class_size
        self.accepts_distinct_at_least = self.inner.accepts_distinct_at_least

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        return self.inner.classes_ok(stats)

    def enforce_classes(self, stats: ClassStats, codes: np.ndarray | None, failing: np.ndarray,
                        limit: int | None = None, levels: tuple[int, ...] | None = None) -> np.ndarray:
        # `levels` is not handed on: the labels are drawn afresh per node, so nothing keyed by
        # levels may be kept between checks
        if self.labels is None or self.labels.shape[0] != stats.sizes.shape[0]:
            raise ProtocolError(f"{self.inner.describe()} needs the node's projection labels, which the helper "
                                "did not send")
        return self.inner.enforce_classes(stats, self.labels, failing, limit)

    def describe(self) -> str:
        return self.inner.describe()


def label_criteria(criteria: list[Criterion]) -> tuple[list[Criterion], list[LabelledCriterion]]:
    """The criteria with every one that `needs_codes` wrapped, and the wrappers (empty: no labels needed)."""
    wrapped = [LabelledCriterion(c) if c.needs_codes else c for c in criteria]
    return wrapped, [c for c in wrapped if isinstance(c, LabelledCriterion)]
