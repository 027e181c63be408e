"""Live progress as plain lines: one when a party starts a phase, one when it ends it.

Why lines and not a live table: the demo runs several protocols one after another, and its
output is read afterwards (or in a log, or a CI page) as much as watched; a line per event
stays readable in all of these. The events are the ones the coordinator already receives
(each daemon's phase start/end with its time since the run began): they name a party and a
phase, never a value, a path or a key.
"""

from __future__ import annotations

import sys
import threading
from typing import TextIO


class PhaseLines:
    """`on_event(party, phase, state, elapsed)` callbacks that print `  B horizontal  p2  encrypt  0.41 s`."""

    def __init__(self, label: str, *, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.label = label
        self.enabled = enabled
        self.stream = stream
        self._started: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def __call__(self, party: str, phase: str, state: str, elapsed: float) -> None:
        if not self.enabled:
            return
        with self._lock:
            key = (party, phase)
            if state == "start":
                self._started[key] = elapsed
                tail = "..."
            else:
                tail = f"{max(0.0, elapsed - self._started.pop(key, elapsed)):.2f} s"
            stream = self.stream or sys.stderr
            stream.write(f"  {self.label}  {party:<7} {phase:<10} {tail}\n")
            stream.flush()
