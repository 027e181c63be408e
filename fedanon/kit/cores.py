"""How many cores this process may use: shared by the crypto pools and the engine.

Why a module of its own: the engine may not import the crypto layer (nor the other way
round), yet both size their workers by the same count, and the affinity mask (a
container's or `taskset`'s limit), not the machine's core count, is what they may use.
"""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may run on (respects CPU affinity / container limits)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)
