"""The equivalence classes of one lattice node and their additive statistics.

Two plain data types every layer above shares: what the grouper produces (`Classes`), what a
privacy model judges (`ClassStats`). They live below both so that neither the models nor the
grouper has to import the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedanon.stats.histograms import Histograms


@dataclass
class ClassStats:
    """Per-class statistics of one transformed table; every field is additive."""

    sizes: np.ndarray
    # attribute -> (classes x codes) counts; given as any mapping, kept as a `Histograms`, which
    # may hold a recipe that computes a dense matrix when a criterion first reads it
    histograms: Mapping[str, Any] = field(default_factory=dict)
    subset_sizes: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.histograms, Histograms):
            self.histograms = Histograms(self.histograms)


@dataclass
class Classes:
    """Equivalence classes of one node: generalized QI codes per class plus stats."""

    levels: tuple[int, ...]
    codes: np.ndarray  # int32 (n_classes, n_qis)
    stats: ClassStats
    row_class: np.ndarray | None = None  # class of each row, only when grouped from rows
    # when rolled up: the node it came from and, per class of that node, its class here --
    # so statistics the grouper does not hold (Protocol C's encrypted sums) roll up too
    rolled_from: tuple[int, ...] | None = None
    mapping: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.count = int(self.codes.shape[0])
        self.rollup_cost = self.count  # set for stored snapshots by Grouper.remember

