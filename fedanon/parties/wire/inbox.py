"""Per-run inbox of a party: delivered messages waiting for `receive`, plus the abort flag.

Messages may arrive before the local role asks for them (peers start at slightly
different times), so they wait here keyed by (sender, topic) in arrival order.
An abort wakes every waiter at once.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from typing import Callable

from fedanon.errors import PeerError


class RunInbox:
    """`on_release(n)` is told whenever n buffered bytes leave the inbox (taken, dropped, aborted)."""

    def __init__(self, on_release: Callable[[int], None] | None = None) -> None:
        self._on_release = on_release
        self._cond = threading.Condition()
        self._messages: dict[tuple[str, str], deque[bytes]] = defaultdict(deque)
        self.aborted: str | None = None
        self.closed = False
        self.wire_received: dict[tuple[str, str], int] = defaultdict(int)

    def put(self, sender: str, topic: str, payload: bytes) -> bool:
        """Queue a message; False (nothing kept) once the run is aborted or closed."""
        with self._cond:
            if self.aborted is not None or self.closed:
                return False
            self._messages[(sender, topic)].append(payload)
            self._cond.notify_all()
            return True

    def take(self, sender: str, topic: str, wait_s: float) -> bytes | None:
        """The next message for (sender, topic), waiting up to `wait_s`; PeerError once aborted.

        A message that arrived before the abort is still handed out: it may be the verdict
        that lets this party say *why* the run failed in its own, more detailed words.
        """
        with self._cond:
            self._cond.wait_for(lambda: self.aborted is not None or bool(self._messages.get((sender, topic))), wait_s)
            box = self._messages.get((sender, topic))
            if not box and self.aborted is not None:
                raise PeerError(self.aborted)
            payload = box.popleft() if box else None
        if payload is not None and self._on_release is not None:
            self._on_release(len(payload))
        return payload

    def _drop_all(self) -> None:
        """Forget every queued message (caller holds the lock) and release their bytes."""
        held = sum(len(m) for box in self._messages.values() for m in box)
        self._messages.clear()
        if held and self._on_release is not None:
            self._on_release(held)

    def close(self) -> None:
        """Drop whatever is still queued (the run is over)."""
        with self._cond:
            self.closed = True
            self._drop_all()

    def abort(self, reason: str) -> bool:
        """Mark the run as aborted (first reason wins; nothing is accepted after it); True if this call set it.

        Queued messages stay until `close` (the daemon closes the inbox when the run's role ends).
        """
        with self._cond:
            if self.aborted is not None:
                return False
            self.aborted = reason
            self._cond.notify_all()
            return True
