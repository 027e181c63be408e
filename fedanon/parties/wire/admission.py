"""Admission control of a party daemon: what one allow-listed peer may make it hold.

An allow-listed peer is trusted with a run's data, not with the daemon's memory and
threads: without bounds, forty idle `Deliver` streams exhaust the RPC thread pool, a
stream that announces 4 GiB is buffered until its sender closes it, and messages for a
prepared-but-never-started run stay forever. `Admission` bounds

* open message streams per peer (`limits.max_streams_per_peer`),
* bytes buffered per run and in total (`limits.max_run_buffer_mib`,
  `limits.max_buffer_mib`): a stream reserves its announced size before its first
  byte is kept; the reservation is released when the role takes the message, when the
  stream fails, or when the run ends.

A refusal is a `Refusal` naming the peer and the limit; the daemon turns it into a
RESOURCE_EXHAUSTED status and a log line and keeps serving everybody else.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from fedanon.errors import PeerError


class Refusal(PeerError):
    """A request a daemon will not serve because it would exceed one of its limits."""


@dataclass
class Ticket:
    """One admitted message stream: the peer, its run and the bytes reserved for it."""

    peer: str
    run_id: str
    reserved: int = 0


class Admission:
    def __init__(self, me: str, max_streams_per_peer: int, max_run_bytes: int, max_total_bytes: int) -> None:
        self.me = me
        self.max_streams_per_peer = max_streams_per_peer
        self.max_run_bytes = max_run_bytes
        self.max_total_bytes = max_total_bytes
        self._lock = threading.Lock()
        self._streams: dict[str, int] = defaultdict(int)
        self._run_bytes: dict[str, int] = defaultdict(int)
        self._total = 0

    # ------------------------------------------------------------------ streams
    def open_stream(self, peer: str, run_id: str) -> Ticket:
        with self._lock:
            if self._streams[peer] >= self.max_streams_per_peer:
                raise Refusal(f"party {self.me!r} refuses another message stream from {peer!r}: it already has "
                              f"{self._streams[peer]} open (limits.max_streams_per_peer = {self.max_streams_per_peer})")
            self._streams[peer] += 1
        return Ticket(peer, run_id)

    def reserve(self, ticket: Ticket, size: int) -> None:
        """Reserve `size` bytes for the stream's message before keeping any of it."""
        with self._lock:
            run_after = self._run_bytes[ticket.run_id] + size
            if run_after > self.max_run_bytes:
                raise Refusal(
                    f"party {self.me!r} refuses a {size}-byte message from {ticket.peer!r}: run {ticket.run_id!r} "
                    f"would buffer {run_after} bytes (limits.max_run_buffer_mib = {self.max_run_bytes >> 20})")
            if self._total + size > self.max_total_bytes:
                raise Refusal(
                    f"party {self.me!r} refuses a {size}-byte message from {ticket.peer!r}: it would buffer "
                    f"{self._total + size} bytes over all runs (limits.max_buffer_mib = {self.max_total_bytes >> 20})")
            self._run_bytes[ticket.run_id] = run_after
            self._total += size
            ticket.reserved += size

    def close_stream(self, ticket: Ticket, keep: bool) -> None:
        """The stream ended; `keep`: its message now waits in the run's inbox (released on `release`)."""
        with self._lock:
            self._streams[ticket.peer] -= 1
            if self._streams[ticket.peer] <= 0:
                del self._streams[ticket.peer]
        if not keep:
            self.release(ticket.run_id, ticket.reserved)
        ticket.reserved = 0

    # ------------------------------------------------------------------ buffered bytes
    def release(self, run_id: str, size: int) -> None:
        if size <= 0:
            return
        with self._lock:
            left = self._run_bytes.get(run_id, 0) - size
            freed = size if left >= 0 else size + left
            if left > 0:
                self._run_bytes[run_id] = left
            else:
                self._run_bytes.pop(run_id, None)
            self._total = max(0, self._total - freed)

    def buffered(self, run_id: str | None = None) -> int:
        with self._lock:
            return self._total if run_id is None else self._run_bytes.get(run_id, 0)

    def open_streams(self, peer: str) -> int:
        with self._lock:
            return self._streams.get(peer, 0)


@dataclass(eq=False)  # identity hashing: watches live in a set
class StreamWatch:
    """A message stream being received: the daemon's janitor cuts it when idle or past its deadline.

    A servicer thread blocked in `next(request_iterator)` cannot time out by itself; the
    janitor cancels the call instead (`check`), and the handler, woken by the cancellation,
    reads `reason` to log a refusal naming the peer.
    """

    peer: str
    context: Any
    idle_s: float
    last: float = field(default_factory=time.monotonic)
    deadline: float | None = None
    reason: str | None = None

    def progress(self) -> None:
        self.last = time.monotonic()

    def check(self, now: float) -> bool:
        """Cancel the call if it is idle or late; True if it was cut now."""
        if self.reason is not None:
            return False
        if now - self.last > self.idle_s:
            self.reason = f"sent no data for {self.idle_s:g} s (limits.idle_stream_s)"
        elif self.deadline is not None and now > self.deadline:
            self.reason = "did not finish its message within the deadline (limits.rpc_timeout_s + 1 s per MiB)"
        else:
            return False
        self.context.cancel()
        return True
