"""The one door to libsecp256k1's C functions, through coincurve's cffi binding.

Why not coincurve's public API: it multiplies one point at a time through Python objects, and
Protocol A's and C's batch operations (thousands of scalar multiplications and additions per
message) need the C calls directly. coincurve ships the compiled library and its cffi handles
only as `coincurve._libsecp256k1`; this module is the single place that reaches for them, so a
change in coincurve breaks here, with a clear message, and nowhere else.
"""

from __future__ import annotations

try:
    from coincurve import _libsecp256k1 as binding
    from coincurve.context import GLOBAL_CONTEXT
except ImportError as exc:  # pragma: no cover - depends on the installed coincurve
    raise ImportError(f"fedanon needs coincurve's libsecp256k1 binding (coincurve>=20): {exc}") from None

ffi = binding.ffi
lib = binding.lib
# the library's context object: what every libsecp256k1 call takes first
CONTEXT = GLOBAL_CONTEXT.ctx
