"""Per-run inbox of a party: delivered messages waiting for `receive`, plus the abort flag.

Messages may arrive before the local role asks for them (peers start at slightly
different times), so they wait here keyed by (sender, topic) in arrival order.
An abort wakes every waiter at once.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque

from fedanon.errors import PeerError


class RunInbox:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._messages: dict[tuple[str, str], deque[bytes]] = defaultdict(deque)
        self.aborted: str | None = None
        self.wire_received: dict[tuple[str, str], int] = defaultdict(int)

    def put(self, sender: str, topic: str, payload: bytes) -> None:
        with self._cond:
            self._messages[(sender, topic)].append(payload)
            self._cond.notify_all()

    def take(self, sender: str, topic: str, wait_s: float) -> bytes | None:
        """The next message for (sender, topic), waiting up to `wait_s`; PeerError once aborted."""
        with self._cond:
            self._cond.wait_for(lambda: self.aborted is not None or bool(self._messages.get((sender, topic))), wait_s)
            if self.aborted is not None:
                raise PeerError(self.aborted)
            box = self._messages.get((sender, topic))
            return box.popleft() if box else None

    def close(self) -> None:
        """Drop whatever is still queued (the run is over)."""
        with self._cond:
            self._messages.clear()

    def abort(self, reason: str) -> bool:
        """Mark the run as aborted (first reason wins); True if this call set it."""
        with self._cond:
            if self.aborted is not None:
                return False
            self.aborted = reason
            self._messages.clear()
            self._cond.notify_all()
            return True
