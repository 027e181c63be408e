"""Unknown keys in a user's configuration file, named with the closest known key.

Why: a misspelled key (`supression`, `insensitve`) that is silently ignored changes a
release without a word, and one passed on to a constructor surfaces as a Python
`__init__()` message. Every TOML reader checks its tables here instead.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Iterable

from fedanon.errors import InputError, clip


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest of `choices`, or '' when none is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_known_keys(source: str | Path, table: str, keys: Iterable[object], known: Iterable[str],
                     what: str = "key") -> None:
    """InputError naming file, table, the first unknown key (in file order) and a suggestion."""
    allowed = sorted(known)
    unknown = [str(k) for k in keys if k not in allowed]
    if not unknown:
        return
    key = unknown[0]
    where = f"[{table}]" if table else "top level"
    more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
    raise InputError(f"{source}: unknown {what} {clip(key)!r} in {where}{did_you_mean(key, allowed)}{more}; "
                     f"known {what}s: {', '.join(allowed)}")
