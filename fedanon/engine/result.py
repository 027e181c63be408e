"""The outcome of one anonymization run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedanon.data.table import EncodedTable
from fedanon.errors import FedanonError


class NoSolutionError(FedanonError):
    """No transformation of the lattice satisfies the privacy model within the suppression limit."""


@dataclass
class AnonymizationResult:
    transformation: dict[str, int]
    output: EncodedTable
    suppressed: np.ndarray
    suppressed_rows: int
    information_loss: float
    metric: str
    classes: int
    checks: int
    rollups: int
    elapsed_s: float
    lattice_size: int
    optimum_found: bool  # the search that ran proves it optimal (SearchOutcome.optimum_found)
    algorithm: str = ""
    tagged: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    #: the prepared structure the search ran on (`anonymizer.Prepared`) and the optimum's classes
    #: with each row's class (`grouping.Classes`): a report reuses them instead of preparing and
    #: grouping millions of rows again. Not part of the report, not compared.
    prepared: Any = field(default=None, repr=False, compare=False)
    optimum_classes: Any = field(default=None, repr=False, compare=False)
    #: a sampled release (differential privacy): the input row of each output row, in input
    #: order; rows not listed are not part of the release. None: every input row is.
    released: np.ndarray | None = field(default=None, repr=False, compare=False)

    def to_report(self) -> dict[str, Any]:
        """JSON-able summary; keys are a stable contract for the CLI and protocols."""
        return {
            "transformation": dict(self.transformation),
            "suppressed_rows": int(self.suppressed_rows),
            "information_loss": float(self.information_loss),
            "metric": self.metric,
            "classes": int(self.classes),
            "checks": int(self.checks),
            "rollups": int(self.rollups),
            "elapsed_s": float(self.elapsed_s),
            "lattice_size": int(self.lattice_size),
            "optimum_found": bool(self.optimum_found),
            "rows": int(self.output.n_rows),
            "algorithm": self.algorithm,
            "tagged": int(self.tagged),
            **self.extra,
        }
