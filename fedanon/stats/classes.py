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
from fedanon.stats.keys import mixed_radix_digits


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


@dataclass(frozen=True)
class KeyDigits:
    """Class codes not decoded yet: the classes' exact mixed-radix keys (`keys.combined_key`)
    and the radices they were built with. Their digits are the codes."""

    keys: np.ndarray
    radices: list[int]

    def __len__(self) -> int:
        """The number of classes, as `len` of decoded codes gives it."""
        return int(self.keys.shape[0])

    def decode(self) -> np.ndarray:
        return mixed_radix_digits(self.keys, self.radices)


class Classes:
    """Equivalence classes of one node: generalized QI codes per class plus stats.

    `codes` may be given as `KeyDigits`, decoded when first read: a node judged on its sizes
    alone, too large to be kept as a snapshot, never needs its codes, and decoding them was
    about a fifth of such a check.
    """

    def __init__(self, levels: tuple[int, ...], codes: np.ndarray | KeyDigits, stats: ClassStats,
                 row_class: np.ndarray | None = None, rolled_from: tuple[int, ...] | None = None,
                 mapping: np.ndarray | None = None) -> None:
        self.levels = levels
        self._codes = codes
        self.stats = stats
        self.row_class = row_class  # class of each row, only when grouped from rows
        # when rolled up: the node it came from and, per class of that node, its class here --
        # so statistics the grouper does not hold (Protocol C's encrypted sums) roll up too
        self.rolled_from = rolled_from
        self.mapping = mapping
        self.count = len(codes)
        self.rollup_cost = self.count  # set for stored snapshots by Grouper.remember

    @property
    def codes(self) -> np.ndarray:
        """int32 (n_classes, n_qis): the generalized QI codes of each class."""
        if isinstance(self._codes, KeyDigits):
            self._codes = self._codes.decode()
        return self._codes

    @codes.setter
    def codes(self, codes: np.ndarray) -> None:
        self._codes = codes

    def snapshot(self) -> "Classes":
        """The classes without their row map or roll-up origin (codes still undecoded if they were)."""
        return Classes(self.levels, self._codes, self.stats)
