"""What each DP release spends, written into its report.

Budgets compose by basic sequential composition: a release made of parts that spend
(ε₁, δ₁), (ε₂, δ₂), ... on the same rows spends (Σε, Σδ). Each entry names the mechanism and
what it was applied to, so a reader can check the sum and the calibration.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Spend:
    """One mechanism's share of the budget."""

    what: str            # what was released or decided, e.g. "transformation search, step 3"
    mechanism: str       # e.g. "exponential mechanism (OpenDP Gumbel noisy-max)"
    epsilon: float
    delta: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Ledger:
    """The spends of one release and their total under basic composition."""

    entries: list[Spend] = field(default_factory=list)

    def spend(self, what: str, mechanism: str, epsilon: float, delta: float = 0.0, **detail: Any) -> Spend:
        if not (epsilon >= 0 and math.isfinite(epsilon)) or not 0 <= delta < 1:
            raise ValueError(f"invalid spend ({epsilon!r}, {delta!r}) for {what}")
        entry = Spend(what, mechanism, float(epsilon), float(delta), dict(detail))
        self.entries.append(entry)
        return entry

    @property
    def epsilon(self) -> float:
        return math.fsum(e.epsilon for e in self.entries)

    @property
    def delta(self) -> float:
        return math.fsum(e.delta for e in self.entries)

    def to_dict(self) -> dict[str, Any]:
        return {"composition": "basic (sequential): epsilons and deltas add up",
                "epsilon_spent": self.epsilon, "delta_spent": self.delta,
                "entries": [asdict(e) for e in self.entries]}
