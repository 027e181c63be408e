"""Optional dependencies (the `report` extra), checked where a command reads its arguments.

Why a module of its own: the CLI checks for matplotlib before any work starts, and
importing the report package for that would cost every `fedanon anonymize` its
start-up time; the plotting code reuses the same message.
"""

from __future__ import annotations

from fedanon.errors import FedanonError

MISSING_MATPLOTLIB = "the HTML report needs matplotlib, which is not installed: pip install 'fedanon[report]'"


def require_matplotlib(option: str = "--html") -> None:
    """Raise one clear FedanonError now, not after the work, when plotting is impossible.

    Why: a missing report extra must cost the user one line, not a whole anonymization
    run that ends without its report.
    """
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise FedanonError(f"{option}: {MISSING_MATPLOTLIB}") from None
