"""Import every module of a package once: how the registries find what registers itself.

Each registry (privacy models, metrics, readers, backends) sits below the modules that register
with it, so it must not import them by name; it asks for its package to be scanned instead, on
first use, in a stable order (module names sorted).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache


@lru_cache(maxsize=None)
def import_submodules(package: str, skip: frozenset[str] = frozenset()) -> None:
    """Import every module directly in `package` except those named in `skip` (once per call shape)."""
    path = importlib.import_module(package).__path__
    for info in sorted(pkgutil.iter_modules(path), key=lambda i: i.name):
        if info.name not in skip:
            importlib.import_module(f"{package}.{info.name}")
