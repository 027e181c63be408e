"""Exceptions shared by every layer.

All user-facing failures derive from `FedanonError` so the CLI can print one
clear line instead of a traceback, and tests can assert on the type.
"""

from __future__ import annotations


class FedanonError(Exception):
    """Base class of every error fedanon reports to a user."""


class InputError(FedanonError):
    """Bad input data or configuration: names the file, line and value at fault."""


class HierarchyError(InputError):
    """A generalization hierarchy is malformed, ragged or not monotone."""


class ProtocolError(FedanonError):
    """A secure protocol run failed (validation mismatch between parties, bad message)."""


class PeerError(FedanonError):
    """A peer is unreachable, untrusted, or aborted the run."""
