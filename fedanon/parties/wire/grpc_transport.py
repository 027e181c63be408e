"""`Transport` over gRPC + mutual TLS: what protocol roles use inside a party daemon.

`send` streams the payload to the peer's `Deliver` RPC in bounded chunks (so a
200 MB table never becomes one gRPC message) and returns once the peer holds the
whole message in its run inbox. A payload of one chunk goes by the unary `Post`
instead: a client stream costs a thread per call in grpcio, ~1 ms, which the
hundreds of queries and answers of an interactive search (Protocol C's checks)
would pay each. `receive` waits on this party's own inbox and,
while waiting, pings the other parties of the run every heartbeat: a dead or
failed peer turns into a PeerError naming it within a few seconds instead of a
300 s timeout. `abort` tells every peer, so their waits fail promptly too.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import time
from collections import defaultdict
from typing import Callable, Iterator

import grpc

from fedanon.errors import PeerError, scrub
from fedanon.parties.config import Limits
from fedanon.parties.wire.inbox import RunInbox
from fedanon.parties.wire.liveness import SILENT, probe_tls, silent_message
from fedanon.parties.pki.tls import ChannelPool
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc
from fedanon.protocols.kit.transport import Transport

PhaseListener = Callable[[str, str], None]  # (phase, "start" | "end")

_MIN_THROUGHPUT = 2 << 20  # bytes/s assumed when sizing the deadline of one large message
_DOWN_MISSES = 2   # consecutive refused/dropped connections before a peer counts as dead
_HUNG_FRACTION = 0.9  # a ping that fails only after this share of its deadline was not answered: hung


def unresponsive(peer: str, waited_s: float, address: str | None = None) -> str:
    where = f" at {address}" if address else ""
    return (f"party {peer!r}{where} is unresponsive: no answer to a heartbeat within {waited_s:.1f} s "
            "(process stopped or hung, host overloaded, or the link to it is down; limits.heartbeat_s)")


def describe_rpc_error(peer: str, exc: grpc.RpcError, address: str | None = None, probe_s: float | None = None) -> str:
    """One clear line for a failed call to `peer`, keyed on the gRPC status.

    With `address` and `probe_s`, a handshake failure is checked before it is called one:
    a peer that accepts TCP but does not answer a TLS ClientHello within `probe_s` seconds
    is unresponsive (stopped or hung), not a certificate problem (`parties/liveness.py`).
    """
    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else "") or ""
    where = f" at {address}" if address else ""
    if code == grpc.StatusCode.UNAVAILABLE:
        lowered = details.lower()
        hint = "down, unreachable, or it rejected our certificate during the TLS handshake"
        if "tcp handshake" in lowered or "timed out" in lowered or "no route to host" in lowered:
            # gRPC's TCP connect step gave up: nothing answered (link down, host off, firewall drops).
            hint = "no TCP connection: link down, host off, or a firewall drops the port"
        elif "handshake" in lowered or "ssl" in lowered or "certificate" in lowered:
            if address and probe_s and probe_tls(address, probe_s) == SILENT:
                return silent_message(peer, probe_s, address)
            hint = "TLS handshake failed (certificate not signed by the run CA, or wrong name)"
        return f"party {peer!r}{where} is unreachable ({hint}): {details}"
    if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
        return f"party {peer!r}{where} refused the call: {details}"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"party {peer!r}{where} did not answer in time"
    if code == grpc.StatusCode.CANCELLED:
        return f"call to party {peer!r}{where} was cancelled: {details}"
    name = code.name if code is not None else "error"
    return f"party {peer!r}{where} failed ({name}): {details}"


class PeerLinks:
    """Stubs to the other parties of one run, with the address each party's own config trusts."""

    def __init__(self, pool: ChannelPool, addresses: dict[str, str]) -> None:
        self._pool = pool
        self.addresses = addresses

    def stub(self, name: str, verified: bool = False) -> pb_grpc.PartyStub:
        """A stub to `name`; with `verified`, only after the server proved its certificate CN is `name`."""
        try:
            address = self.addresses[name]
        except KeyError:
            raise PeerError(f"party {name!r} is not on this party's allow-list") from None
        if verified:
            return pb_grpc.PartyStub(self._pool.verified(name, address, list(self.addresses)))
        return pb_grpc.PartyStub(self._pool.get(name, address))

    def failed(self, name: str) -> None:
        if name in self.addresses:
            self._pool.drop(name, self.addresses[name])


class GrpcTransport(Transport):
    def __init__(
        self,
        me: str,
        run_id: str,
        parties: list[str],
        links: PeerLinks,
        inbox: RunInbox,
        limits: Limits,
        on_phase: PhaseListener | None = None,
        tls_identity: tuple[bytes, bytes, bytes] | None = None,
    ) -> None:
        super().__init__(me)
        # the daemon's own (cert, key, CA) PEMs: protocols bind their key-agreement keys to them
        self.tls_identity = tls_identity
        self.run_id = run_id
        self.others = [p for p in parties if p != me]
        self._links = links
        self._inbox = inbox
        self._limits = limits
        self._on_phase = on_phase
        self._aborted = False
        self._abort_lock = threading.Lock()
        self.wire_sent: dict[tuple[str, str], int] = defaultdict(int)
        self.phase_seconds: dict[str, float] = defaultdict(float)
        self._last_heartbeat = 0.0
        self._misses: dict[str, int] = defaultdict(int)

    # ------------------------------------------------------------------ phases
    @contextlib.contextmanager
    def in_phase(self, name: str) -> Iterator[None]:
        """As the base class, plus phase events for the coordinator's progress display."""
        if self._on_phase:
            self._on_phase(name, "start")
        t0 = time.perf_counter()
        try:
            with super().in_phase(name):
                yield
        finally:
            self.phase_seconds[name] += time.perf_counter() - t0
            if self._on_phase:
                self._on_phase(name, "end")

    # ------------------------------------------------------------------ sending
    def _chunks(self, topic: str, payload: bytes, counter: list[int]) -> Iterator[pb.Chunk]:
        view = memoryview(payload)
        step = self._limits.chunk_bytes
        total = len(payload)
        first = pb.Chunk(run_id=self.run_id, sender=self.me, topic=topic, total_size=total,
                         data=bytes(view[:step]))
        counter[0] += first.ByteSize()
        yield first
        for start in range(step, total, step):
            chunk = pb.Chunk(data=bytes(view[start:start + step]))
            counter[0] += chunk.ByteSize()
            yield chunk

    def _deliver(self, to: str, topic: str, payload: bytes) -> None:
        if to == self.me or to not in self.others:
            raise PeerError(f"{self.me}: cannot send to {to!r}: not another party of run {self.run_id}")
        if self._inbox.aborted:
            raise PeerError(self._inbox.aborted)
        if len(payload) > self._limits.max_payload_bytes:
            raise PeerError(
                f"{self.me}: message {topic!r} to {to!r} is {len(payload)} bytes, above the limit of "
                f"{self._limits.max_payload_bytes} bytes (limits.max_payload_mib)"
            )
        counter = [0]
        deadline = self._limits.rpc_timeout_s + len(payload) / _MIN_THROUGHPUT
        try:
            stub = self._links.stub(to, verified=True)
            chunks = self._chunks(topic, payload, counter)
            if len(payload) <= self._limits.chunk_bytes:  # one chunk: a unary call, no request-stream thread
                call = stub.Post.future(next(chunks), timeout=deadline)
            else:
                call = stub.Deliver.future(chunks, timeout=deadline)
            while True:  # while the message is on its way, make sure the receiver is not hung
                try:
                    call.result(timeout=self._limits.heartbeat_s)
                    break
                except grpc.FutureTimeoutError:
                    problem = self._ping(to)
                    if problem and "unresponsive" in problem:
                        call.cancel()
                        raise PeerError(f"{self.me}: sending {topic!r}: {problem}") from None
        except grpc.RpcError as exc:
            self._links.failed(to)
            if self._inbox.aborted:
                raise PeerError(self._inbox.aborted) from None
            raise PeerError(f"{self.me}: sending {topic!r}: " + describe_rpc_error(
                to, exc, self._links.addresses.get(to), self._limits.heartbeat_s)) from None
        self.wire_sent[(self.phase, to)] += counter[0]

    # ------------------------------------------------------------------ receiving
    def _await(self, sender: str, topic: str, timeout: float | None) -> bytes:
        if sender not in self.others:
            raise PeerError(f"{self.me}: cannot receive from {sender!r}: not another party of run {self.run_id}")
        start = time.monotonic()
        beat = self._limits.heartbeat_s
        while True:
            payload = self._inbox.take(sender, topic, beat)
            if payload is not None:
                return payload
            now = time.monotonic()
            if timeout is not None and now - start >= timeout:
                raise PeerError(f"{self.me}: no message {topic!r} from {sender!r} within {timeout:.0f} s")
            if now - self._last_heartbeat >= beat:
                self._last_heartbeat = now
                self.check_peers()

    def check_peers(self) -> None:
        """Ping every other party about this run; PeerError naming the first one that is gone or failed."""
        problems = [p for p in (self._ping(peer) for peer in self.others) if p]
        if problems:
            if self._inbox.aborted:
                raise PeerError(self._inbox.aborted)
            raise PeerError(f"{self.me}: " + problems[0])

    def _ping(self, peer: str) -> str:
        """'' if `peer` is alive and still in the run, else one line saying what is wrong with it."""
        return self._ping_all([peer])[0] if peer in self.others else ""

    def _ping_all(self, peers: list[str]) -> list[str]:
        # A ping not answered within one heartbeat means the peer is hung (SIGSTOP, deadlock, swapped out):
        # reported at once, so detection takes at most two heartbeats. The handshake of a stopped peer also
        # times out, which gRPC may report as a TLS failure: the elapsed time tells them apart.
        timeout = self._limits.heartbeat_s
        t0 = time.monotonic()
        futures = {peer: self._links.stub(peer).Ping.future(pb.PingRequest(run_id=self.run_id), timeout=timeout)
                   for peer in peers}
        out: list[str] = []
        for peer, fut in futures.items():
            try:
                reply = fut.result()
            except grpc.RpcError as exc:
                waited = time.monotonic() - t0
                hung = exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED or waited >= _HUNG_FRACTION * timeout
                self._misses[peer] += 1
                if hung or self._misses[peer] >= _DOWN_MISSES:
                    self._links.failed(peer)
                    address = self._links.addresses.get(peer)
                    out.append(unresponsive(peer, waited, address) if hung
                               else describe_rpc_error(peer, exc, address, self._limits.heartbeat_s))
                else:
                    out.append("")
                continue
            self._misses[peer] = 0
            if reply.run_state == "failed":
                out.append(f"party {peer!r} aborted the run: {scrub(reply.detail)}")
            elif reply.run_state == "unknown":
                out.append(f"party {peer!r} no longer knows run {self.run_id} (daemon restarted?)")
            else:
                out.append("")
        return out

    # ------------------------------------------------------------------ aborting
    def abort(self, reason: str) -> None:
        """Tell every other party that this run failed here (once; best effort, in parallel)."""
        with self._abort_lock:
            if self._aborted:
                return
            self._aborted = True
        request = pb.AbortRequest(run_id=self.run_id, origin=self.me, reason=reason)

        def tell(peer: str) -> None:
            try:
                self._links.stub(peer).Abort(request, timeout=3.0)
            except (grpc.RpcError, PeerError):
                self._links.failed(peer)

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self.others))) as pool:
            list(pool.map(tell, self.others))

    def report(self) -> dict[str, object]:
        """Traffic and timing of this party, merged into the role's report by the daemon."""
        out: dict[str, object] = dict(self.stats.as_dict())
        wire: dict[str, int] = defaultdict(int)
        for (phase, _peer), n in self.wire_sent.items():
            wire[phase] += n
        out["wire_bytes_sent_by_phase"] = dict(wire)
        out["wire_bytes_sent"] = {f"{ph}/{peer}": n for (ph, peer), n in sorted(self.wire_sent.items())}
        out["phase_seconds"] = {k: round(v, 6) for k, v in self.phase_seconds.items()}
        return out
