"""Exceptions shared by every layer.

All user-facing failures derive from `FedanonError` so the CLI can print one
clear line instead of a traceback, and tests can assert on the type.
"""

from __future__ import annotations

import re


INPUT_ERROR_LIMIT = 1000  # characters of one input error line (file, line, what, and clipped values)


class FedanonError(Exception):
    """Base class of every error fedanon reports to a user."""


class InputError(FedanonError):
    """Bad input data or configuration: names the file, line and value at fault.

    By construction one line of at most INPUT_ERROR_LIMIT characters, however much of a
    bad file a raise site quotes (a 20 MB row must not become a 20 MB error line).
    """

    def __init__(self, message: object = "", *rest: object) -> None:
        text = " ".join(str(message).split())
        if len(text) > INPUT_ERROR_LIMIT:
            text = text[:INPUT_ERROR_LIMIT - 24] + f"…(+{len(text) - INPUT_ERROR_LIMIT + 24} chars)"
        super().__init__(text, *rest)


class HierarchyError(InputError):
    """A generalization hierarchy is malformed, ragged or not monotone."""


class ProtocolError(FedanonError):
    """A secure protocol run failed (validation mismatch between parties, bad message)."""


class PeerError(FedanonError):
    """A peer is unreachable, untrusted, or aborted the run."""


# ----------------------------------------------------------------------------- two-level errors
#
# What a party tells *others* about a failure (abort reasons, Ping details, the coordinator's
# event stream) is built from a public part only; the full text, which may name a cell value,
# a file path or a key, stays in the owner's own log and terminal. An exception carries its
# public part in the `public` attribute (set with `with_public`); without one, only error kinds
# whose messages are composed from public facts by construction (peer/transport failures,
# protocol verdicts) are shared verbatim, and anything else is reduced to its kind.

_ABSOLUTE_PATH = re.compile(r"(?<![\w.~-])(?:/|[A-Za-z]:\\)[^\s'\"`,;()\[\]]+")
PUBLIC_LIMIT = 1000  # characters; a shared reason is one line, never a dump


def clip(text: str, limit: int = 60) -> str:
    """`text` for an error message: at most `limit` characters of it, then how much was left out."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}…(+{len(text) - limit} chars)"


def with_public(exc: BaseException, public: str) -> BaseException:
    """Attach the part of `exc`'s message that other parties may see."""
    exc.public = public  # type: ignore[attr-defined]
    return exc


def scrub(text: str) -> str:
    """One line, absolute paths replaced, at most PUBLIC_LIMIT characters."""
    line = " ".join(str(text).split())
    line = _ABSOLUTE_PATH.sub("<path>", line)
    return line if len(line) <= PUBLIC_LIMIT else line[: PUBLIC_LIMIT - 1] + "…"


def public_message(exc: BaseException) -> str:
    """The shareable description of `exc` (see the comment above)."""
    public = getattr(exc, "public", None)
    if isinstance(public, str):
        return scrub(public)
    if isinstance(exc, (PeerError, ProtocolError)) and not isinstance(exc, InputError):
        return scrub(str(exc))
    kind = "bad input data or configuration" if isinstance(exc, InputError) else f"internal error {type(exc).__name__}"
    return f"{kind} (details only in that party's own log)"
