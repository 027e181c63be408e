"""p-sensitive k-anonymity (Truta & Vinay, "Privacy Protection: p-Sensitive k-Anonymity
Property", ICDE Workshops 2006) of one sensitive attribute.

A release is p-sensitive k-anonymous when it is k-anonymous (`--k`, judged as usual) and every
released class holds at least p distinct values of the sensitive attribute. The second half is
this model; combined with `--k K` the pair is the model of the paper. (As a class test it is the
same condition as distinct ℓ-diversity with ℓ = p; it is offered under its own name because
stewards and ARX users look for it by that name and its parameter is an integer count.)

Monotonicity, also with suppression: a class with at least p distinct values keeps them in any
union with other classes, so the union of two passing classes passes (monotone), and a class of
a generalization fails only if every class of the finer node merged into it fails -- the rows
that fail can only shrink under generalization, so "at most s rows fail" is inherited too
(`monotone_with_suppression`). For the same reason the statistics may forget classes that
already hold p distinct values (`accepts_distinct_at_least`), and every passing class has at
least p rows (`min_class_size`).

What each party learns in the protocols: the checking party judges the model from per-class
histograms of the sensitive attribute, exactly as for distinct ℓ-diversity (A: the master on
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


@register
@dataclass
class PSensitive(PrivacyModel):
    """p-sensitivity of the sensitive attribute: `--p-sensitive P` (an integer ≥ 1; k by `--k`)."""

    p: int
    attribute: str

    key = "p_sensitive"
    flag = "--p-sensitive"
    metavar = "P"
    help = "p-sensitive k-anonymity: every class holds at least P distinct sensitive values (k by --k)"
    uses_sensitive = True
    decomposes_over_shares = True   # judged on each class alone

    @classmethod
    def parse(cls, value: Any, ctx: ParseContext) -> "PSensitive":
        attribute = ctx.require_sensitive()
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return cls(_integer(value, f"{cls.flag} {value!r}: p"), attribute)
        entries = table_value(value, cls.key, ("p",), ctx)
        if "p" not in entries:
            raise InputError(f"{ctx.source}: [{cls.key}] needs p")
        return cls(_integer(entries["p"], f"[{cls.key}] p"), attribute)

    def validate(self, config: Any) -> None:
        if isinstance(self.p, bool) or not isinstance(self.p, int) or self.p < 1:
            raise InputError(f"p-sensitive k-anonymity needs an integer p >= 1, got {self.p!r}")

    def criterion(self) -> "PSensitiveCriterion":
        return PSensitiveCriterion(self)

    def violation(self, view: ClassView) -> str | None:
        distinct = sum(1 for count in view.sensitive_counts[self.attribute].values() if count > 0)
        if distinct < self.p:
            return f"{distinct} distinct sensitive values < p={self.p} (not {self.p}-sensitive)"
        return None

    def describe(self) -> str:
        return f"{self.p}-sensitivity of {self.attribute}"


def _integer(value: Any, what: str) -> int:
    x = number(value, what)
    if not math.isfinite(x) or x != int(x):
        raise InputError(f"{what}: {value!r} is not an integer")
    return int(x)


class PSensitiveCriterion(Criterion):
    """Per-class count of distinct sensitive codes, vectorized over all classes."""

    monotone = True
    monotone_with_suppression = True

    def __init__(self, model: PSensitive) -> None:
        self.model = model
        self.p = int(model.p)
        self.needs_histogram = model.attribute
        self.min_class_size = self.p
        self.accepts_distinct_at_least = self.p

    def prepare(self, context: CriterionContext) -> None:
        return None

    def classes_ok(self, stats: ClassStats) -> np.ndarray:
        hist = stats.histograms[self.model.attribute]
        if isinstance(hist, SparseHistogram):
            return hist.distinct() >= self.p
        return np.count_nonzero(np.asarray(hist), axis=1) >= self.p

    def describe(self) -> str:
        return self.model.describe()
