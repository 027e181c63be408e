"""What to anonymize for: quasi-identifiers, k, further privacy models, suppression, metric.

The config is plain data (JSON-able via to_dict/from_dict) because protocols ship it to every
party; validation is centralized here so every entry point (CLI, TOML, the Python API, a party
receiving a run request) rejects the same bad input with the same message. It runs once where a
config enters a process across a trust boundary: `validate()` marks the config, and the layers
inside (run settings, protocol roles, the engine) call `ensure_valid()`, which is a no-op on a
marked config that has not changed since. The models beyond k-anonymity are a list of registered
`PrivacyModel`s (fedanon.model.registry): the config names none of them.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable, Mapping

from fedanon.errors import InputError
from fedanon.model.metrics.registry import metric_names, metric_type
from fedanon.model.registry import PrivacyModel, model_type, model_types

DEFAULT_METRIC = "nonuniform-entropy"
# the settings beside the models, as they appear in the JSON and TOML forms
FIELDS = ("quasi_identifiers", "k", "suppression", "metric")


class AnonymizationConfig:
    """Quasi-identifiers, k, the models beyond k, the suppression limit and the metric.

    `config.<model key>` (e.g. `config.l_diversity`) is the first model registered under that
    key, or None; model keys are also accepted as keyword arguments, so existing callers that
    write `AnonymizationConfig(qis, l_diversity=LDiversity(...))` keep working.
    """

    def __init__(self, quasi_identifiers: Iterable[str], k: int = 1, suppression: float = 0.0,
                 metric: str = DEFAULT_METRIC, models: Iterable[PrivacyModel] = (),
                 weights: Mapping[str, float] | None = None, **by_key: PrivacyModel | None) -> None:
        self.quasi_identifiers = list(quasi_identifiers)
        self.k = k
        self.suppression = suppression
        self.metric = metric
        # attribute weights of the metric (ARX's), QI -> weight; QIs not named weigh 1; None = none
        self.weights: dict[str, float] | None = None if weights is None else dict(weights)
        self.models: list[PrivacyModel] = list(models)
        types = model_types()
        for key, model in by_key.items():
            if key not in types:
                raise TypeError(f"AnonymizationConfig() got an unexpected keyword argument {key!r}")
            if model is not None:
                self.models.append(model)
        # the settings as validate() last accepted them (None: never validated)
        self._accepted: dict[str, Any] | None = None

    def __getattr__(self, name: str) -> Any:
        # only reached for names that are not attributes: model keys read as "that model or None"
        if name.startswith("_") or name not in model_types():
            raise AttributeError(f"'AnonymizationConfig' object has no attribute {name!r}")
        return self.model(name)

    def model(self, key: str) -> PrivacyModel | None:
        return next((m for m in self.models if m.key == key), None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AnonymizationConfig) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        return (f"AnonymizationConfig(quasi_identifiers={self.quasi_identifiers!r}, k={self.k!r}, "
                f"suppression={self.suppression!r}, metric={self.metric!r}, models={self.models!r}"
                + (f", weights={self.weights!r})" if self.weights is not None else ")"))

    def validate(self) -> "AnonymizationConfig":
        """Raise InputError naming the offending setting and value; return the config, marked valid.

        Call it where a config enters from outside (flags, a TOML file, the Python API, a run
        request off the wire); the layers inside call `ensure_valid()` instead.
        """
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
        if self.metric not in metric_names():
            raise InputError(f"unknown metric {self.metric!r}; choose one of: {', '.join(metric_names())}")
        self._validate_weights()
        for model in self.models:
            if model.uses_sensitive and getattr(model, "attribute", None) in qis:
                raise InputError(f"sensitive attribute {model.attribute!r} is also a quasi-identifier")  # type: ignore[attr-defined]
            model.validate(self)
        self._accepted = self.to_dict()
        return self

    @property
    def validated(self) -> bool:
        """Whether `validate()` accepted this config as it is now: a setting changed since (the
        config and its models are mutable) clears it, so a stale mark never lets a bad value in."""
        accepted = self.__dict__.get("_accepted")  # absent on an object made without __init__
        if accepted is None:
            return False
        try:
            return bool(accepted == self.to_dict())
        except (TypeError, AttributeError, ValueError):  # a setting to_dict cannot read or compare
            return False

    def ensure_valid(self) -> "AnonymizationConfig":
        """The config, validated unless it already is: what an internal layer calls on a config
        handed to it, so one that entered through a boundary is not checked a second time, and
        one built directly in Python code still is."""
        return self if self.validated else self.validate()

    def _validate_weights(self) -> None:
        if self.weights is None:
            return
        if not isinstance(self.weights, dict):
            raise InputError(f"weights must map quasi-identifiers to numbers, got {self.weights!r}")
        unknown = sorted(str(q) for q in self.weights if q not in self.quasi_identifiers)
        if unknown:
            raise InputError(f"weight for {', '.join(unknown)}, which is not a quasi-identifier "
                             f"({', '.join(self.quasi_identifiers)})")
        for q, w in self.weights.items():
            if isinstance(w, bool) or not isinstance(w, numbers.Real) or not math.isfinite(w) or w < 0:
                raise InputError(f"weight of {q!r} must be a finite number >= 0, got {w!r}")
        if not any(self.weight_vector()):
            raise InputError("attribute weights are all 0: at least one quasi-identifier must weigh more")
        if not metric_type(self.metric).uses_weights:
            users = ", ".join(name for name in metric_names() if metric_type(name).uses_weights)
            raise InputError(f"metric {self.metric!r} cannot use attribute weights (its loss is not a sum over "
                             f"the quasi-identifiers); metrics that can: {users}")

    def weight_vector(self) -> list[float]:
        """The weight of each QI in QI order (1 where none is given)."""
        given = self.weights or {}
        return [float(given.get(q, 1.0)) for q in self.quasi_identifiers]

    def metric_weights(self) -> list[float] | None:
        """The weights a metric applies, scaled to average 1 (so equal weights are no weights), in
        QI order; None without weights."""
        if self.weights is None:
            return None
        raw = self.weight_vector()
        total = math.fsum(raw)
        return [w * len(raw) / total for w in raw]

    @property
    def sensitive_attributes(self) -> list[str]:
        out: list[str] = []
        for model in self.models:
            attribute = getattr(model, "attribute", None) if model.uses_sensitive else None
            if attribute is not None and attribute not in out:
                out.append(attribute)
        return out

    @property
    def needs_subset(self) -> bool:
        """Whether a model needs the research subset (which input rows are released)."""
        return any(m.needs_subset for m in self.models)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in FIELDS}
        out["quasi_identifiers"] = list(self.quasi_identifiers)
        out["models"] = [{"model": m.key, **m.to_dict()} for m in self.models]
        if self.weights is not None:
            out["weights"] = dict(self.weights)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AnonymizationConfig":
        d = dict(d)
        try:
            weights = d.pop("weights", None)
            models = []
            for entry in d.pop("models", None) or []:
                entry = dict(entry)
                models.append(model_type(str(entry.pop("model"))).from_dict(entry))
            for key in list(d):  # the older shape: one key per model
                if key not in FIELDS and key in model_types():
                    value = d.pop(key)
                    if value is not None:
                        models.append(model_type(key).from_dict(value))
            unknown = sorted(set(d) - set(FIELDS))
            if unknown:
                raise InputError(f"malformed anonymization config: unknown key(s) {', '.join(unknown)}")
            return cls(quasi_identifiers=list(d.pop("quasi_identifiers")), models=models, weights=weights, **d)
        except (KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"malformed anonymization config: {exc}") from None
