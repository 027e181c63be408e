"""The backend interface of the checking layer: where the rows of a check are grouped.

A backend attaches to one `Grouper` for the length of a search and groups the rows of the
nodes it `takes` (`RowPartitions`); every answer must equal `Grouper.group_rows` exactly,
so the search finds the same optimum whichever backend runs. A backend is one module in
this package whose attach function is decorated with `@register_backend(name)`: a context
manager `(grouper, workers, **options)` that yields the attached `RowPartitions` (or None
where it chose to leave the grouping to the grouper, e.g. one worker), and detaches and
frees its workers on exit. Commands and the Python API pick one by name (`backend_for`),
so a new backend changes nothing else. As for the reader registry, the modules are found
by scanning this package on first use, so an optional backend's third-party library is
imported only when that backend is asked for.
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager, TypeVar

from fedanon.engine.check.grouping import Grouper, RowPartitions
from fedanon.errors import InputError
from fedanon.kit.discovery import import_submodules

BACKENDS_PACKAGE = "fedanon.engine.check.backends"
DEFAULT_BACKEND = "processes"

#: (grouper, workers, **options) -> context manager yielding the attached partitions or None
Attach = Callable[..., ContextManager["RowPartitions | None"]]
_BACKENDS: dict[str, Attach] = {}
F = TypeVar("F", bound=Attach)


def register_backend(name: str) -> Callable[[F], F]:
    """Decorator: `attach(grouper, workers, **options)` is the backend called `name`."""
    def decorate(fn: F) -> F:
        _BACKENDS[name] = fn
        return fn
    return decorate


def _discover() -> None:
    import_submodules(BACKENDS_PACKAGE, frozenset({"base"}))


def backends() -> tuple[str, ...]:
    """Names of the registered backends, sorted."""
    _discover()
    return tuple(sorted(_BACKENDS))


def check_backend(name: str) -> str:
    """`name` if a backend of that name exists; InputError (one line) otherwise."""
    _discover()
    if name not in _BACKENDS:
        raise InputError(f"unknown backend {str(name)[:100]!r}; known: {', '.join(sorted(_BACKENDS))}")
    return name


def backend_for(name: str, grouper: Grouper, workers: int, **options: Any) -> ContextManager["RowPartitions | None"]:
    """The backend `name` attached to `grouper` with `workers` workers while the block runs."""
    return _BACKENDS[check_backend(name)](grouper, workers, **options)
