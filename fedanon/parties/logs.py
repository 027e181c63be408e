"""Structured key=value logs for daemons and coordinators.

Only metadata is ever logged (run ids, party names, topics, byte counts, phase
names, error texts): call sites pass no payloads, and values are length-capped
so a stray cell value could not flood a log even by mistake.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, TextIO

_LOCK = threading.Lock()
_MAX_VALUE = 300


def _fmt(value: Any) -> str:
    text = f"{value:.3f}" if isinstance(value, float) else str(value)
    if len(text) > _MAX_VALUE:
        text = text[:_MAX_VALUE] + "…"
    if not text or any(c in text for c in ' ="\n\t'):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


class EventLog:
    def __init__(self, party: str, stream: TextIO | None = None, level: str = "info") -> None:
        self.party = party
        self.stream = stream or sys.stderr
        self.debug_enabled = level == "debug"

    def __call__(self, event: str, level: str = "info", **fields: Any) -> None:
        if level == "debug" and not self.debug_enabled:
            return
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + f".{int(time.time() * 1000) % 1000:03d}Z"
        parts = [f"ts={ts}", f"level={level}", f"party={_fmt(self.party)}", f"event={_fmt(event)}"]
        parts += [f"{k}={_fmt(v)}" for k, v in fields.items() if v is not None]
        line = " ".join(parts) + "\n"
        with _LOCK:
            try:
                self.stream.write(line)
                self.stream.flush()
            except (OSError, ValueError):
                pass
