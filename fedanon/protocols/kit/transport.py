"""The transport interface the protocols talk through, and an in-memory implementation.

Protocols are role state machines that only ever call `send`/`receive` on a
`Transport`; they never import gRPC. The gRPC implementation lives in
`fedanon.parties`, the in-memory one here serves unit tests and the
single-process simulation. Both count bytes per phase and per peer so reports
can say what each party sent and received.

Run-wide failure is a transport matter, independent of a protocol's topology:
`fail_run(message, kind)` tells every party at once (over the transport's abort
channel) and wakes every pending `receive` everywhere, which then raises the same
error with the same public message at every party -- in a star, a ring or anything
else, without knowing which topic each party is waiting on.
"""

from __future__ import annotations

import abc
import contextlib
import json
import queue
import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterator

from fedanon.errors import FedanonError, PeerError, ProtocolError

DEFAULT_TIMEOUT_S = 300.0

#: `receive(timeout=RUN_LIMIT)` waits as long as the run's limits allow (`receive_timeout_s`).
RUN_LIMIT = -1.0

_FAILURE_MARK = "[fedanon-run-failure]"


@dataclass(frozen=True)
class RunFailure:
    """Why a run stopped, as every party learns it: a *public* message and its kind.

    The message travels to every party, so it must never contain a cell value, a file
    path or a key (build it from `LocalProblem.public`, never `.private`). `kind` picks
    the exception every party raises: "no-solution" -> `NoSolutionError`, anything
    else -> `ProtocolError`.
    """

    origin: str
    message: str
    kind: str = "protocol"

    def encode(self) -> str:
        """The abort reason that carries this failure (survives prefixes added on the way)."""
        return _FAILURE_MARK + json.dumps({"origin": self.origin, "message": self.message, "kind": self.kind})

    @classmethod
    def find(cls, text: str) -> "RunFailure | None":
        """The failure encoded somewhere in an abort reason, or None for a plain abort."""
        at = text.find(_FAILURE_MARK)
        if at < 0:
            return None
        try:
            data, _end = json.JSONDecoder().raw_decode(text, at + len(_FAILURE_MARK))
            return cls(str(data["origin"]), str(data["message"]), str(data.get("kind", "protocol")))
        except (ValueError, KeyError, TypeError):
            return None

    def error(self) -> FedanonError:
        """The exception every party raises for this failure (marked as known to all)."""
        exc: FedanonError
        if self.kind == "no-solution":
            from fedanon.engine.result import NoSolutionError  # lazy: keeps the transport light

            exc = NoSolutionError(self.message)
        else:
            exc = ProtocolError(self.message)
        exc.shared_with_all = True  # type: ignore[attr-defined]
        exc.run_failure = self  # type: ignore[attr-defined]
        return exc


@dataclass
class TrafficStats:
    """Bytes and messages per (phase, peer, direction); the basis of every report."""

    sent: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    received: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    messages_sent: int = 0
    messages_received: int = 0

    def record_sent(self, phase: str, peer: str, size: int) -> None:
        self.sent[(phase, peer)] += size
        self.messages_sent += 1

    def record_received(self, phase: str, peer: str, size: int) -> None:
        self.received[(phase, peer)] += size
        self.messages_received += 1

    def bytes_sent_by_phase(self) -> dict[str, int]:
        totals: dict[str, int] = defaultdict(int)
        for (phase, _peer), size in self.sent.items():
            totals[phase] += size
        return dict(totals)

    def bytes_received_by_phase(self) -> dict[str, int]:
        totals: dict[str, int] = defaultdict(int)
        for (phase, _peer), size in self.received.items():
            totals[phase] += size
        return dict(totals)

    def as_dict(self) -> dict[str, object]:
        return {
            "bytes_sent": {f"{ph}/{peer}": n for (ph, peer), n in sorted(self.sent.items())},
            "bytes_received": {f"{ph}/{peer}": n for (ph, peer), n in sorted(self.received.items())},
            "bytes_sent_by_phase": self.bytes_sent_by_phase(),
            "bytes_received_by_phase": self.bytes_received_by_phase(),
            "messages_sent": self.messages_sent,
            "messages_received": self.messages_received,
        }


class Transport(abc.ABC):
    """Typed point-to-point messaging between named parties of one run.

    A message is addressed by (sender, topic). Topics are chosen by the protocol
    (e.g. "b/encrypted-table"); a receiver blocks until the message with that
    sender and topic arrives, so message order between different topics does not
    matter. Payloads are opaque bytes: serialization is the protocol's job.
    """

    #: Whether a protocol must bind its own keys to this party's TLS identity before
    #: trusting keys relayed by another party. True for every network transport; only
    #: the single-process in-memory transport (no network, so nobody in the middle) is
    #: exempt. A protocol that finds this True but no `tls_identity` fails closed.
    requires_key_binding: bool = True

    def __init__(self, me: str) -> None:
        self.me = me
        self.stats = TrafficStats()
        # (certificate PEM, private key PEM, CA certificate PEM) of this party's TLS
        # identity, for protocols that bind their own keys to it; None when unknown.
        self.tls_identity: tuple[bytes, bytes, bytes] | None = None
        self._phase = "setup"
        # How long `receive` waits by default; the role context sets it from the run's limits.
        self.receive_timeout_s: float | None = DEFAULT_TIMEOUT_S
        # Every payload this party received, kept only when a test asks for it:
        # the privacy tests scan it for other parties' raw values.
        self.recorded: list[tuple[str, str, bytes]] | None = None

    @property
    def phase(self) -> str:
        return self._phase

    @contextlib.contextmanager
    def in_phase(self, name: str) -> Iterator[None]:
        """Attribute all traffic inside the block to phase `name`."""
        previous, self._phase = self._phase, name
        try:
            yield
        finally:
            self._phase = previous

    def send(self, to: str, topic: str, payload: bytes) -> None:
        try:
            self._deliver(to, topic, payload)
        except PeerError as exc:  # a run failed elsewhere: raise its error, as `receive` does
            failure = RunFailure.find(str(exc))
            if failure is None:
                raise
            raise failure.error() from None
        self.stats.record_sent(self._phase, to, len(payload))

    def receive(self, sender: str, topic: str, timeout: float | None = RUN_LIMIT) -> bytes:
        """The next payload from `sender` on `topic`.

        `timeout`: seconds, None = forever, RUN_LIMIT (default) = `receive_timeout_s`.
        A run failed with `fail_run` anywhere raises that failure's error here.
        """
        if timeout == RUN_LIMIT:
            timeout = self.receive_timeout_s
        try:
            payload = self._await(sender, topic, timeout)
        except PeerError as exc:
            failure = RunFailure.find(str(exc))
            if failure is None:
                raise
            raise failure.error() from None
        self.stats.record_received(self._phase, sender, len(payload))
        if self.recorded is not None:
            self.recorded.append((sender, topic, payload))
        return payload

    @abc.abstractmethod
    def _deliver(self, to: str, topic: str, payload: bytes) -> None:
        """Hand the payload to party `to` (raise PeerError if it cannot be reached)."""

    @abc.abstractmethod
    def _await(self, sender: str, topic: str, timeout: float | None) -> bytes:
        """Block until (sender, topic) arrives; raise PeerError on timeout or abort."""

    def abort(self, reason: str) -> None:
        """Tell every reachable peer that this run failed; default: nothing to tell."""

    def fail_run(self, message: str, kind: str = "protocol") -> FedanonError:
        """Stop the run at every party with one public `message`; returns the error to raise here.

        Every other party's pending or future `receive` raises the same error (see
        `RunFailure`). Best effort towards unreachable peers, which fail on their own.
        """
        failure = RunFailure(self.me, message, kind)
        try:
            self.abort(failure.encode())
        except Exception:  # telling the others is best effort; our own error is what matters
            pass
        return failure.error()


class _Mailbox:
    """Per-party inbox keyed by (sender, topic); also carries an abort signal."""

    def __init__(self) -> None:
        self._queues: dict[tuple[str, str], queue.Queue[bytes]] = defaultdict(queue.Queue)
        self._lock = threading.Lock()
        self.aborted: str | None = None

    def box(self, sender: str, topic: str) -> "queue.Queue[bytes]":
        with self._lock:
            return self._queues[(sender, topic)]


class InMemoryNetwork:
    """All parties of one run inside one process, each with its own `InMemoryTransport`."""

    def __init__(self, parties: list[str]) -> None:
        self._mailboxes = {name: _Mailbox() for name in parties}

    def transport(self, me: str) -> "InMemoryTransport":
        if me not in self._mailboxes:
            raise PeerError(f"party {me!r} is not part of this run")
        return InMemoryTransport(me, self)

    def mailbox(self, name: str) -> _Mailbox:
        try:
            return self._mailboxes[name]
        except KeyError:
            raise PeerError(f"unknown party {name!r}: not part of this run") from None

    def abort_all(self, origin: str, reason: str) -> None:
        for name, box in self._mailboxes.items():
            if name != origin and box.aborted is None:
                box.aborted = f"party {origin!r} aborted the run: {reason}"


class InMemoryTransport(Transport):
    """Transport over in-process queues; payloads are copied as bytes like on a wire."""

    _POLL_S = 0.05
    requires_key_binding = False  # one process, no network: nothing can sit in the middle

    def __init__(self, me: str, network: InMemoryNetwork) -> None:
        super().__init__(me)
        self._network = network

    def _deliver(self, to: str, topic: str, payload: bytes) -> None:
        self._network.mailbox(to).box(self.me, topic).put(bytes(payload))

    def _await(self, sender: str, topic: str, timeout: float | None) -> bytes:
        mailbox = self._network.mailbox(self.me)
        box = mailbox.box(sender, topic)
        waited = 0.0
        while True:
            if mailbox.aborted:
                raise PeerError(mailbox.aborted)
            try:
                return box.get(timeout=self._POLL_S)
            except queue.Empty:
                waited += self._POLL_S
                if timeout is not None and waited >= timeout:
                    raise PeerError(
                        f"{self.me}: no message {topic!r} from {sender!r} within {timeout:.0f} s"
                    ) from None

    def abort(self, reason: str) -> None:
        self._network.abort_all(self.me, reason)
