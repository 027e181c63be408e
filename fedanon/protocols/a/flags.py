"""Protocol A's command-line flags: the commutative cipher, pre-generalization, verified mode.

They are declared here, on the protocol, so that `fedanon simulate` offers them (and refuses them
for another protocol) from the registry spec, and every party reads the options they set
(`cipher`, `min_levels`, `verified`) the same way a run file's `[options]` gives them.
"""

from __future__ import annotations

from typing import Any

from fedanon.crypto.commutative import CIPHER_HELP, cipher_names
from fedanon.errors import InputError
from fedanon.protocols.kit.api import FlagContext, OptionFlag

# a Pohlig-Hellman pass over a large table takes hours, not the default minutes
PH_RECEIVE_TIMEOUT_S = 6 * 3600.0


def _cipher(value: str | None, _ctx: FlagContext) -> dict[str, Any]:
    options: dict[str, Any] = {"cipher": value or "ec"}
    if value == "ph":
        options["receive_timeout_s"] = PH_RECEIVE_TIMEOUT_S
    return options


def _min_levels(items: list[str], ctx: FlagContext) -> dict[str, Any]:
    """NAME=LEVEL items, checked against the run's QIs and hierarchies (one-line errors)."""
    levels: dict[str, int] = {}
    for item in items:
        name, _, level = item.partition("=")
        if not name or not level.strip().isdigit():
            raise InputError(f"--min-level {item[:200]!r}: expected NAME=LEVEL with a whole number, e.g. age=1")
        if name not in ctx.quasi_identifiers:
            raise InputError(f"--min-level {item[:200]!r}: {name!r} is not a quasi-identifier "
                             f"({', '.join(ctx.quasi_identifiers)})")
        height = ctx.hierarchies[name].height
        if int(level) >= height:
            raise InputError(f"--min-level {item[:200]!r}: the hierarchy of {name!r} has levels 0..{height - 1}")
        levels[name] = int(level)
    return {"min_levels": levels} if levels else {}


def _verified(value: bool, _ctx: FlagContext) -> dict[str, Any]:
    return {"verified": bool(value)}


FLAGS = (
    OptionFlag("--cipher", "cipher", CIPHER_HELP, choices=tuple(cipher_names()), convert=_cipher),
    OptionFlag("--min-level", "min_levels",
               "pre-generalize quasi-identifier NAME to hierarchy level L before encryption (against "
               "frequency analysis by the master; the optimum is then over the restricted lattice); repeatable",
               kind="repeat", metavar="NAME=L", convert=_min_levels),
    OptionFlag("--verified", "verified",
               "every party re-anonymizes the encrypted integrated table and all compare result digests "
               "before anything is decrypted (detects a cheating master; costs one anonymization per party)",
               kind="switch", convert=_verified),
)
