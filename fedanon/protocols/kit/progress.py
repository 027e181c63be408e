"""Waits on work that scales with the data: bounded by progress, not by size.

Some protocol steps take time proportional to the data -- Protocol C's Paillier counter
encryption takes minutes on a loaded machine, and a primary waiting for the end of the
helper's search waits for the whole search. A fixed per-step limit cuts such work off
(it did, under load); no limit lets a peer whose work stopped -- a deadlocked role, a
stuck loop, while its daemon still answers heartbeats -- hang the run for ever. A limit
derived from the data size needs a per-unit speed nobody knows on a shared machine.

The rule here instead: the party doing data-sized work sends a tiny progress marker on
the topic its peer waits on, from inside its work loop (after each chunk of real work,
at most every `interval` seconds), so a marker means the work advances -- not merely that
a process lives, which the transport's heartbeats already tell. The waiter accepts any
total time, but never a gap of more than the run's per-step limit
(`transport.receive_timeout_s`) without a marker or the message itself; then it stops
the run at every party with one public error naming the step, the peer and the topic.
A party that only relays (a star's centre waiting on one peer while others wait on it)
forwards the markers it receives. Whoever waits on such a relay waits twice the limit:
the relay needs up to one limit to notice that *its* peer stopped and to say so, and the
run's error must name the party that stopped, not the relay waiting on it.

Markers share the topic with the real message and are skipped by `receive_progressing`,
so every receive of such a topic must go through it.
"""

from __future__ import annotations

import math
import time
from typing import Callable, Iterable

from fedanon.errors import PeerError
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import RoleContext
from fedanon.protocols.kit.roles import stop_run

#: The marker (a message with one empty part named "progress": no data, no count).
PROGRESS = codec.pack_message({"progress": b""})
#: Markers are sent at most this often (and at least 4 per per-step limit).
MAX_INTERVAL_S = 10.0


def is_progress(payload: bytes) -> bool:
    return payload == PROGRESS


class ProgressTicker:
    """Tells `peers` (on `topic`) that this party's data-sized work advances; call `tick()` from the work loop."""

    def __init__(self, ctx: RoleContext, peers: Iterable[str], topic: str) -> None:
        self.transport = ctx.transport
        self.peers = list(peers)
        self.topic = topic
        limit = self.transport.receive_timeout_s
        self.interval = min(MAX_INTERVAL_S, (limit if limit is not None else math.inf) / 4)
        self._last = time.monotonic()
        self.sent = 0

    def tick(self) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            return
        self._last = now
        for peer in self.peers:
            self.transport.send(peer, self.topic, PROGRESS)
            self.sent += 1


def receive_progressing(ctx: RoleContext, sender: str, topic: str, step: str,
                        on_progress: Callable[[], None] | None = None, via_relay: bool = False) -> bytes:
    """The next real message from `sender` on `topic`, however long, as long as it progresses.

    Fails the run everywhere (`stop_run`) when neither the message nor a marker arrives
    within the per-step limit (twice that `via_relay`: `sender` itself waits on another
    party meanwhile); `on_progress` runs on every marker (e.g. to relay it).
    """
    transport = ctx.transport
    limit = transport.receive_timeout_s
    if limit is not None and via_relay:
        limit *= 2
    while True:
        started = time.monotonic()
        try:
            payload = transport.receive(sender, topic, timeout=limit)
        except PeerError:
            if limit is None or time.monotonic() - started < limit:
                raise  # not our timeout: a peer is gone or the run was aborted
            raise stop_run(ctx, f"step {step!r}: party {sender!r} made no progress for {limit:g} s "
                                f"(waiting for {topic!r})") from None
        if not is_progress(payload):
            return payload
        if on_progress is not None:
            on_progress()
