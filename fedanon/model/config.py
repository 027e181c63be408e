"""What to anonymize for: privacy models, suppression limit and metric.

The config is plain data (JSON-able via to_dict/from_dict) because protocols ship
it to every party; validation is centralized here so every entry point (CLI, TOML,
protocols) rejects the same bad input with the same message.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from fedanon.errors import InputError

METRICS = (
    "height",
    "precision",
    "precision-star",
    "loss",
    "aecs",
    "discernibility",
    "discernibility-star",
    "entropy",
    "nonuniform-entropy",
    "nonuniform-entropy-monotonic",
)


@dataclass
class LDiversity:
    variant: Literal["distinct", "entropy", "recursive"]
    l: float
    attribute: str
    c: float | None = None


@dataclass
class TCloseness:
    t: float
    kind: Literal["equal", "hierarchical"]
    attribute: str


@dataclass
class DeltaPresence:
    dmin: float
    dmax: float


@dataclass
class AnonymizationConfig:
    quasi_identifiers: list[str]
    k: int = 1
    l_diversity: LDiversity | None = None
    t_closeness: TCloseness | None = None
    delta_presence: DeltaPresence | None = None
    suppression: float = 0.0
    metric: str = "nonuniform-entropy"

    def validate(self) -> None:
        """Raise InputError naming the offending setting and value."""
        qis = self.quasi_identifiers
        if not qis:
            raise InputError("no quasi-identifiers given (need at least one)")
        if len(set(qis)) != len(qis):
            raise InputError(f"quasi-identifiers listed twice: {qis}")
        if isinstance(self.k, bool) or not isinstance(self.k, numbers.Integral) or self.k < 1:
            raise InputError(f"k must be an integer >= 1, got {self.k!r}")
        s = self.suppression
        if not isinstance(s, numbers.Real) or isinstance(s, bool) or math.isnan(s) or not 0.0 <= s < 1.0:
            raise InputError(f"suppression must be a fraction in [0, 1), got {s!r}")
        if self.metric not in METRICS:
            raise InputError(f"unknown metric {self.metric!r}; choose one of: {', '.join(METRICS)}")
        ld = self.l_diversity
        if ld is not None:
            if ld.variant not in ("distinct", "entropy", "recursive"):
                raise InputError(f"unknown l-diversity variant {ld.variant!r} (distinct, entropy, recursive)")
            if not ld.l >= 1:
                raise InputError(f"l-diversity needs l >= 1, got {ld.l!r}")
            if ld.variant == "recursive" and (ld.c is None or not ld.c > 0):
                raise InputError(f"recursive (c,l)-diversity needs c > 0, got {ld.c!r}")
            if ld.attribute in qis:
                raise InputError(f"sensitive attribute {ld.attribute!r} is also a quasi-identifier")
        tc = self.t_closeness
        if tc is not None:
            if tc.kind not in ("equal", "hierarchical"):
                raise InputError(f"unknown t-closeness distance {tc.kind!r} (equal, hierarchical)")
            if not 0.0 <= tc.t <= 1.0:
                raise InputError(f"t-closeness needs t in [0, 1], got {tc.t!r}")
            if tc.attribute in qis:
                raise InputError(f"sensitive attribute {tc.attribute!r} is also a quasi-identifier")
        dp = self.delta_presence
        if dp is not None:
            if not (0.0 <= dp.dmin <= 1.0 and 0.0 <= dp.dmax <= 1.0):
                raise InputError(f"delta-presence bounds must lie in [0, 1], got {dp.dmin!r}, {dp.dmax!r}")
            if dp.dmin > dp.dmax:
                raise InputError(f"delta-presence needs dmin <= dmax, got {dp.dmin!r} > {dp.dmax!r}")

    @property
    def sensitive_attributes(self) -> list[str]:
        out: list[str] = []
        for model in (self.l_diversity, self.t_closeness):
            if model is not None and model.attribute not in out:
                out.append(model.attribute)
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AnonymizationConfig":
        d = dict(d)
        try:
            ld = d.pop("l_diversity", None)
            tc = d.pop("t_closeness", None)
            dp = d.pop("delta_presence", None)
            return cls(
                quasi_identifiers=list(d.pop("quasi_identifiers")),
                l_diversity=LDiversity(**ld) if ld is not None else None,
                t_closeness=TCloseness(**tc) if tc is not None else None,
                delta_presence=DeltaPresence(**dp) if dp is not None else None,
                **d,
            )
        except (KeyError, TypeError) as exc:
            raise InputError(f"malformed anonymization config: {exc}") from None
