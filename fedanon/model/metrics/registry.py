"""The registry of information-loss metrics: each metric one class, registered by its name.

A new metric is one module in `fedanon.model.metrics` with a `Metric` subclass decorated by
`@register_metric`; the flags, TOML files, protocols and baselines read names and traits from
here. As for privacy models, the registry finds the metric modules by scanning its package
(it sits below them, so it must not import them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence, TypeVar

from fedanon.errors import InputError
from fedanon.kit.discovery import import_submodules

if TYPE_CHECKING:
    from fedanon.model.metrics.base import Metric, MetricContext

METRICS_PACKAGE = "fedanon.model.metrics"
_NOT_METRIC_MODULES = {"base", "registry"}
# the order the names are listed in help texts and errors (registered metrics not named here follow)
_LISTING_ORDER = ("height", "precision", "precision-star", "loss", "aecs", "discernibility",
                  "discernibility-star", "entropy", "nonuniform-entropy", "nonuniform-entropy-monotonic")

_REGISTRY: dict[str, "type[Metric]"] = {}
T = TypeVar("T")


def register_metric(cls: T) -> T:
    """Class decorator: make a metric known by its `name`."""
    name = cls.name  # type: ignore[attr-defined]
    if name in _REGISTRY and _REGISTRY[name] is not cls:
        raise RuntimeError(f"two metrics registered as {name!r}")
    _REGISTRY[name] = cls  # type: ignore[assignment]
    return cls


def metric_types() -> "dict[str, type[Metric]]":
    import_submodules(METRICS_PACKAGE, frozenset(_NOT_METRIC_MODULES))
    ordered = [n for n in _LISTING_ORDER if n in _REGISTRY] + sorted(set(_REGISTRY) - set(_LISTING_ORDER))
    return {n: _REGISTRY[n] for n in ordered}


def metric_names() -> tuple[str, ...]:
    return tuple(metric_types())


def metric_type(name: str) -> "type[Metric]":
    types = metric_types()
    if name not in types:
        raise InputError(f"unknown metric {name!r}; choose one of: {', '.join(types)}")
    return types[name]


def build_metric(name: str, ctx: "MetricContext", weights: "Sequence[float] | None" = None) -> "Metric":
    """The metric `name` over `ctx`; `weights`: one factor per QI (a metric with `uses_weights`)."""
    return metric_type(name)(ctx, weights) if weights is not None else metric_type(name)(ctx)


def __getattr__(name: str) -> object:
    """`METRICS`: every registered metric's name (computed on first use, after discovery)."""
    if name == "METRICS":
        return metric_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
