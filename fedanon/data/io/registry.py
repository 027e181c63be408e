"""The registry of table readers: which module reads a file, chosen by its suffix or by name.

A new input format is one module in `fedanon.data.io` that decorates its reader with
`@register_reader(name, suffixes)`; every command, the party daemons and the Python API read
through `read_table`, so nothing else changes. Readers return the one columnar table type
(`ColumnarTable`: per-column codes in the narrowest unsigned type plus per-column dictionaries),
so the rest of the pipeline never sees which format a table came from. As for the model
registry, the reader modules are found by scanning this package on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

from fedanon.errors import InputError
from fedanon.kit.discovery import import_submodules

if TYPE_CHECKING:
    from fedanon.data.io.columnar import ColumnarTable

IO_PACKAGE = "fedanon.data.io"
DEFAULT_FORMAT = "csv"

Reader = Callable[..., "ColumnarTable"]
_READERS: dict[str, Reader] = {}
_SUFFIXES: dict[str, str] = {}
F = TypeVar("F", bound=Reader)


def register_reader(name: str, suffixes: tuple[str, ...]) -> Callable[[F], F]:
    """Decorator: `fn(path, delimiter, encoding) -> ColumnarTable` reads format `name`."""
    def decorate(fn: F) -> F:
        _READERS[name] = fn
        for suffix in suffixes:
            _SUFFIXES[suffix.lower()] = name
        return fn
    return decorate


def _discover() -> None:
    import_submodules(IO_PACKAGE, frozenset({"registry"}))


def formats() -> tuple[str, ...]:
    _discover()
    return tuple(sorted(_READERS))


def format_of(path: str | Path, name: str | None = None) -> str:
    """The format to read `path` with: `name` when given, else by suffix, else CSV."""
    _discover()
    if name is not None:
        if name not in _READERS:
            raise InputError(f"unknown input format {name!r}; known: {', '.join(sorted(_READERS))}")
        return name
    path = Path(path)
    suffix = path.suffix.lower() if path.suffix else ""
    return _SUFFIXES.get(suffix, DEFAULT_FORMAT)


def read_table(path: str | Path, delimiter: str = ";", encoding: str = "utf-8",
               format: str | None = None) -> "ColumnarTable":
    """Read a table with the reader its format names (delimiter/encoding matter to text formats)."""
    return _READERS[format_of(path, format)](Path(path), delimiter, encoding)
