"""The party daemon: one gRPC server per institution (`fedanon party serve`).

Life of a run at a party: a coordinator on the allow-list calls `Prepare` (the
daemon checks that every party of the run is on its own allow-list, loads its
data, registers an inbox) on *all* parties before it calls `Start` on any, so a
message can never arrive for a run the receiver does not know. `Start` runs
the role in a worker thread and streams phase events, the result (only from
the result recipient) and the report back. Peers talk through `Deliver`
(a message as a stream of chunks), `Post` (a message of one chunk, in one unary
call: an interactive protocol's queries and answers, without a stream's set-up
per message), `Ping` (liveness, run state) and `Abort`.

Every RPC authenticates the caller by its certificate name: coordinators may
only call Ping/Prepare/Start/Abort, peers only Ping/Deliver/Post/Abort, and a
message must carry the sender name of the certificate that sent it.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import queue
import resource
import signal
import socket
import threading
import time
import traceback
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from fedanon.errors import FedanonError, InputError, PeerError, public_message, scrub, with_public
from fedanon.parties.wire.admission import Admission, Refusal, StreamWatch
from fedanon.parties.pki.certs import certificate_name, check_party_name
from fedanon.parties.config import PartyConfig, TlsFiles
from fedanon.parties.wire.grpc_transport import GrpcTransport, PeerLinks
from fedanon.parties.wire.inbox import RunInbox
from fedanon.parties.localdata import load_party_data
from fedanon.parties.logs import EventLog
from fedanon.parties.wire.resultwire import encode_result
from fedanon.parties.pki.identity import dns_names, foreign_names, sign_identity
from fedanon.parties.pki.revocation import fingerprint
from fedanon.parties.pki.tls import (
    ChannelPool, caller_alt_names, caller_certificate, caller_name, server_credentials, server_options,
)
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.kit.api import LocalData, RoleContext, RunSettings
from fedanon.protocols.kit.codec import decompression_limit
from fedanon.protocols.registry import PRIMARY, STATISTICS_OPTION, check_roles, protocol_spec, role_function

VERSION = "fedanon-party/1"
_MIN_RECEIVE_THROUGHPUT = 1 << 20  # bytes/s a sender must sustain: a message's deadline grows with its size
_KEEP_FINISHED = 64


def request_digest(request: pb.RunRequest) -> str:
    """Canonical digest of a run request, so the coordinator can see that all parties agree."""
    canonical = json.dumps(
        {
            "run_id": request.run_id, "protocol": request.protocol, "distribution": request.distribution,
            "parties": [[p.name, p.role] for p in request.parties],
            "result_recipient": request.result_recipient,
            "config": json.loads(request.config_json or "{}"), "options": json.loads(request.options_json or "{}"),
        },
        sort_keys=True, separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass
class RunState:
    settings: RunSettings
    inbox: RunInbox
    local: LocalData | None
    coordinator: str = ""     # the coordinator that prepared the run: only it may start it
    status: str = "prepared"  # prepared | running | done | failed
    detail: str = ""
    events: "queue.Queue[pb.RunEvent | None]" = field(default_factory=queue.Queue)
    transport: GrpcTransport | None = None
    started: float = 0.0
    prepared_at: float = field(default_factory=time.monotonic)


def peak_rss_mib() -> float:
    """Peak resident set size of this process (VmHWM), in MiB."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PartyService(pb_grpc.PartyServicer):
    def __init__(self, cfg: PartyConfig, log: EventLog) -> None:
        self.cfg = cfg
        self.log = log
        self.pool = ChannelPool(cfg.tls, cfg.limits)
        # read once at start-up (check_identity has validated it): protocols sign their keys with it
        self.tls_identity: tuple[bytes, bytes, bytes] = cfg.tls.read()
        self._runs: dict[str, RunState] = {}
        self._lock = threading.Lock()
        self._data_cache: tuple[Any, LocalData] | None = None
        self._cert_pem, self._key_pem, _ca = cfg.tls.read()
        self._revoked = cfg.tls.revoked_fingerprints()  # read once at start: restart to apply a new list
        limits = cfg.limits
        self.admission = Admission(cfg.name, limits.max_streams_per_peer, limits.max_run_buffer_bytes,
                                   limits.max_buffer_bytes)
        self._watches: set[StreamWatch] = set()
        self.stopping = False

    # ------------------------------------------------------------------ auth
    def _authorize(self, context: grpc.ServicerContext, rpc: str, *, peers: bool, coordinators: bool,
                   itself: bool = False) -> str:
        name = caller_name(context)
        allowed = (set(self.cfg.peers) if peers else set()) | (set(self.cfg.coordinators) if coordinators else set())
        if itself:  # `fedanon party health` pings with the party's own certificate
            allowed.add(self.cfg.name)
        if name is None or name not in allowed:
            self._refuse(context, rpc, name, f"party {self.cfg.name!r} refuses {rpc} from certificate name {name!r}: "
                                             "not on its allow-list")
        pem = caller_certificate(context)
        if self._revoked and (pem is None or fingerprint(pem) in self._revoked):
            self._refuse(context, rpc, name, f"party {self.cfg.name!r} refuses {rpc} from {name!r}: revoked certificate "
                                             "(its fingerprint is on the revocation list)")
        foreign = foreign_names(name, caller_alt_names(context), self._known_names())  # type: ignore[arg-type]
        if foreign:
            self._refuse(context, rpc, name, f"party {self.cfg.name!r} refuses {rpc} from {name!r}: its certificate "
                                             f"also names {foreign} (a certificate may name only its own party)")
        return name  # type: ignore[return-value]

    def _known_names(self) -> set[str]:
        return {self.cfg.name, *self.cfg.peers, *self.cfg.coordinators}

    def _refuse(self, context: grpc.ServicerContext, rpc: str, caller: str | None, message: str,
                code: grpc.StatusCode = grpc.StatusCode.PERMISSION_DENIED, run: str = "") -> None:
        """Log who was refused (name and network address) and end the call."""
        self.log("refused", level="warning", rpc=rpc, caller=caller or "<no certificate>", peer=context.peer(),
                 run=run, reason=message)
        context.abort(code, message)

    def _run(self, run_id: str, context: grpc.ServicerContext) -> RunState:
        with self._lock:
            state = self._runs.get(run_id)
        if state is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"party {self.cfg.name!r} does not know run {run_id!r}")
        return state  # type: ignore[return-value]

    # ------------------------------------------------------------------ RPCs
    def Ping(self, request: pb.PingRequest, context: grpc.ServicerContext) -> pb.PingReply:
        caller = self._authorize(context, "Ping", peers=True, coordinators=True, itself=True)
        reply = pb.PingReply(name=self.cfg.name, version=VERSION)
        if request.nonce:
            if len(request.nonce) > 64:
                self._refuse(context, "Ping", caller, "identity nonce longer than 64 bytes",
                             grpc.StatusCode.INVALID_ARGUMENT)
            reply.identity_certificate = self._cert_pem
            reply.identity_signature = sign_identity(self._key_pem, self.cfg.name, caller, request.nonce)
        if request.run_id:
            with self._lock:
                state = self._runs.get(request.run_id)
            if state is None:
                reply.run_state = "unknown"
            else:
                if caller != state.coordinator and caller not in state.settings.parties:
                    self._refuse(context, "Ping", caller, f"{caller!r} is neither a party nor the coordinator of "
                                                          f"run {request.run_id!r}", run=request.run_id)
                reply.run_state = "failed" if state.inbox.aborted and state.status != "done" else state.status
                reply.detail = state.detail or (state.inbox.aborted or "")
        return reply

    def Prepare(self, request: pb.RunRequest, context: grpc.ServicerContext) -> pb.PrepareReply:
        caller = self._authorize(context, "Prepare", peers=False, coordinators=True)
        if self.stopping:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"party {self.cfg.name!r} is shutting down")
        try:
            settings, local = self._settings(request)
        except Exception as exc:  # bad settings or data: the coordinator hears the public part, in one line
            private = str(exc) if isinstance(exc, FedanonError) else f"internal error {type(exc).__name__}: {exc}"
            self.log("prepare_failed", level="error", run=request.run_id[:80], coordinator=caller, error=private)
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, f"party {self.cfg.name!r}: {public_message(exc)}")
        with self._lock:
            if request.run_id in self._runs:
                context.abort(grpc.StatusCode.ALREADY_EXISTS, f"party {self.cfg.name!r} already has run {request.run_id!r}")
            run_id = request.run_id
            self._runs[run_id] = RunState(settings=settings, local=local, coordinator=caller,
                                          inbox=RunInbox(lambda n: self.admission.release(run_id, n)))
            self._forget_old_runs()
        self.log("prepared", run=request.run_id, coordinator=caller, protocol=settings.protocol,
                 role=settings.parties[self.cfg.name], parties=",".join(settings.parties))
        return pb.PrepareReply(name=self.cfg.name, request_digest=request_digest(request), has_data=local is not None)

    def Start(self, request: pb.StartRequest, context: grpc.ServicerContext) -> Iterator[pb.RunEvent]:
        caller = self._authorize(context, "Start", peers=False, coordinators=True)
        state = self._run(request.run_id, context)
        if caller != state.coordinator:
            self._refuse(context, "Start", caller, f"run {request.run_id!r} was prepared by {state.coordinator!r}, "
                                                   f"not {caller!r}", run=request.run_id)
        with self._lock:
            if state.status != "prepared":
                why = f": {state.detail}" if state.detail else ""  # public: names the party where it failed
                context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                              f"run {request.run_id!r} is already {state.status}{why}")
            state.status = "running"
        state.started = time.perf_counter()
        state.transport = GrpcTransport(
            self.cfg.name, request.run_id, list(state.settings.parties),
            PeerLinks(self.pool, self.cfg.peers), state.inbox, self.cfg.limits,
            on_phase=lambda phase, what: self._phase_event(state, phase, what),
            tls_identity=self.tls_identity,
        )

        def coordinator_gone() -> None:
            if state.status == "running":
                self._fail(state, f"coordinator {caller!r} disconnected from party {self.cfg.name!r}", propagate=True)

        context.add_callback(coordinator_gone)
        self.log("run_start", run=request.run_id, coordinator=caller)
        threading.Thread(target=self._execute, args=(state,), name=f"run-{request.run_id[:8]}", daemon=True).start()
        while True:
            event = state.events.get()
            if event is None:
                return
            yield event
            if event.WhichOneof("kind") == "error":
                return  # the role may still be unwinding; the coordinator needs nothing more from us

    def Deliver(self, request_iterator: Iterator[pb.Chunk], context: grpc.ServicerContext) -> pb.DeliverAck:
        return self._accept("Deliver", request_iterator, context)

    def Post(self, request: pb.Chunk, context: grpc.ServicerContext) -> pb.DeliverAck:
        # one chunk, one call: the same admission, limits and checks as a stream of one chunk
        return self._accept("Post", iter((request,)), context)

    def _accept(self, rpc: str, chunks: Iterator[pb.Chunk], context: grpc.ServicerContext) -> pb.DeliverAck:
        """One protocol message from a peer, into its run's inbox, with every check a message gets."""
        peer = self._authorize(context, rpc, peers=True, coordinators=False)
        try:
            ticket = self.admission.open_stream(peer, "")
        except Refusal as exc:
            self._refuse(context, rpc, peer, str(exc), grpc.StatusCode.RESOURCE_EXHAUSTED)
        watch = StreamWatch(peer, context, self.cfg.limits.idle_stream_s)
        with self._lock:
            self._watches.add(watch)
        kept = 0
        try:
            kept = self._receive(rpc, peer, ticket, chunks, watch, context)
        except Refusal as exc:
            self._refuse(context, rpc, peer, str(exc), grpc.StatusCode.RESOURCE_EXHAUSTED, run=ticket.run_id)
        except grpc.RpcError:
            if watch.reason is None:
                raise
        finally:
            with self._lock:
                self._watches.discard(watch)
            self.admission.close_stream(ticket, keep=kept > 0)
            if watch.reason is not None:  # cut by the janitor: say so, naming the peer
                self._refuse(context, rpc, peer, f"party {self.cfg.name!r} cut a message stream from "
                                                 f"{peer!r}: it {watch.reason}",
                             grpc.StatusCode.DEADLINE_EXCEEDED, run=ticket.run_id)
        return pb.DeliverAck(received=kept)

    def watch_streams(self) -> None:
        """Cut message streams that are idle or past their deadline (called by the daemon's janitor)."""
        now = time.monotonic()
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.check(now)

    def _receive(self, rpc: str, peer: str, ticket: Any, chunks: Iterator[pb.Chunk], watch: StreamWatch,
                 context: grpc.ServicerContext) -> int:
        """Read one message into its run's inbox within the limits; the number of bytes kept."""
        limits = self.cfg.limits
        first = next(chunks, None)
        if first is None or watch.reason is not None:
            if watch.reason is not None:
                return 0
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "empty message stream")
        watch.progress()
        if first.sender != peer:
            self._refuse(context, rpc, peer, f"certificate {peer!r} may not send as {first.sender[:64]!r}")
        state = self._run(first.run_id, context)
        ticket.run_id = first.run_id
        if peer not in state.settings.parties:
            self._refuse(context, rpc, peer, f"{peer!r} is not a party of run {first.run_id!r}", run=first.run_id)
        if state.inbox.aborted or state.status in ("done", "failed"):
            context.abort(grpc.StatusCode.ABORTED, f"party {self.cfg.name!r}: "
                                                   f"{state.inbox.aborted or f'run {first.run_id!r} is over'}")
        total = first.total_size
        if total > limits.max_payload_bytes:
            raise Refusal(f"party {self.cfg.name!r} refuses a {total}-byte message from {peer!r}: above "
                          f"limits.max_payload_mib = {limits.max_payload_bytes >> 20}")
        self.admission.reserve(ticket, total)  # before keeping any byte: a declared 4 GiB is refused here
        watch.deadline = time.monotonic() + limits.rpc_timeout_s + total / _MIN_RECEIVE_THROUGHPUT
        # BytesIO hands its buffer to getvalue() without a copy, so a payload costs ~1x its size here.
        buf = io.BytesIO()
        buf.write(first.data)
        wire = first.ByteSize()
        for chunk in chunks:
            watch.progress()
            if buf.tell() + len(chunk.data) > total:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"message {first.topic[:64]!r} longer than announced")
            buf.write(chunk.data)
            wire += chunk.ByteSize()
        if watch.reason is not None:
            return 0
        if buf.tell() != total:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"message {first.topic[:64]!r} truncated: {buf.tell()} of {total} bytes")
        payload = buf.getvalue()
        del buf
        state.inbox.wire_received[(state.transport.phase if state.transport else "setup", peer)] += wire
        if not state.inbox.put(peer, first.topic, payload):
            context.abort(grpc.StatusCode.ABORTED, f"party {self.cfg.name!r}: "
                                                   f"{state.inbox.aborted or f'run {first.run_id!r} is over'}")
        self.log("delivered", level="debug", run=first.run_id, sender=peer, topic=first.topic[:64], bytes=total,
                 rpc=rpc)
        return total

    def Abort(self, request: pb.AbortRequest, context: grpc.ServicerContext) -> pb.AbortReply:
        caller = self._authorize(context, "Abort", peers=True, coordinators=True)
        with self._lock:
            state = self._runs.get(request.run_id)
        if state is None:
            return pb.AbortReply(known=False)
        if caller != state.coordinator and caller not in state.settings.parties:
            self._refuse(context, "Abort", caller, f"{caller!r} is neither a party nor the coordinator of "
                                                   f"run {request.run_id!r}", run=request.run_id)
        who = "coordinator" if caller in self.cfg.coordinators and caller not in self.cfg.peers else "party"
        reason = f"{who} {caller!r} aborted the run: {scrub(request.reason)}"
        if state.status in ("prepared", "running"):
            self._fail(state, reason, propagate=False)
        return pb.AbortReply(known=True)

    # ------------------------------------------------------------------ run execution
    def _settings(self, request: pb.RunRequest) -> tuple[RunSettings, LocalData | None]:
        parties = check_roster(request)
        if self.cfg.name not in parties:
            raise _public(f"this party is not part of run {request.run_id[:80]!r}")
        for name in parties:
            if name != self.cfg.name and name not in self.cfg.peers:
                raise _public(f"party {name!r} of the run is not on this party's allow-list [peers]")
        try:
            config_dict = json.loads(request.config_json or "{}")
            options = json.loads(request.options_json or "{}")
        except (json.JSONDecodeError, RecursionError) as exc:
            raise _public(f"malformed run request: config or options is not JSON ({type(exc).__name__})") from None
        if not isinstance(config_dict, dict) or not isinstance(options, dict):
            raise _public("malformed run request: config and options must be JSON objects")

        try:
            spec = protocol_spec(request.protocol)
        except FedanonError as exc:
            raise _public(str(exc)) from None
        role_problems = check_roles(spec.name, parties)
        if role_problems:
            raise _public("; ".join(role_problems))
        config = None
        if not config_dict and spec.anonymizes and STATISTICS_OPTION not in options:  # a statistics run needs none
            raise _public(f"protocol {spec.name} needs an anonymization config, the run request has none")
        if config_dict:
            # the trust boundary of a party: the config arrives from the network and is checked
            # here, once per run; the run settings and the roles take it as validated
            try:
                config = AnonymizationConfig.from_dict(config_dict).validate()
            except FedanonError as exc:
                raise _public(f"invalid privacy config: {exc}") from None
            except (KeyError, ValueError, TypeError, AttributeError) as exc:
                raise _public(f"invalid privacy config ({type(exc).__name__}: {str(exc)[:120]})") from None
        receive_timeout = options.pop("receive_timeout_s", None)
        settings = RunSettings(
            run_id=request.run_id, protocol=request.protocol, distribution=request.distribution,  # type: ignore[arg-type]
            config=config, parties=parties, result_recipient=request.result_recipient,  # type: ignore[arg-type]
            options=options,
        )
        if receive_timeout is not None:
            if not isinstance(receive_timeout, (int, float)) or isinstance(receive_timeout, bool) \
                    or not receive_timeout > 0 or receive_timeout == float("inf"):
                raise _public("malformed run request: receive_timeout_s must be a positive number")
            settings.receive_timeout_s = float(receive_timeout)
        try:
            role_function(settings.protocol, parties[self.cfg.name])  # unknown protocol/role fails here, before Start
        except FedanonError as exc:
            raise _public(str(exc)) from None
        local = None
        if self.cfg.data is not None and parties[self.cfg.name] == PRIMARY and spec.anonymizes:
            local = self._local_data()
        return settings, local

    def _local_data(self) -> LocalData:
        data = self.cfg.data
        assert data is not None
        paths = [data.csv, *data.quasi_identifiers.values(), *(p for p in data.sensitive.values() if p)]
        try:
            stamp = tuple((str(p), os.stat(p).st_mtime_ns) for p in paths)
        except OSError as exc:
            raise InputError(f"cannot read data file {exc.filename}: {exc.strerror}") from None
        if self._data_cache is None or self._data_cache[0] != stamp:
            local, removed = load_party_data(data)
            # owner's own log only: identifying columns that never leave this daemon
            self.log("data_loaded", rows=len(local.rows), columns=",".join(local.columns),
                     removed_columns=",".join(removed) or "none")
            self._data_cache = (stamp, local)
        return self._data_cache[1]

    def _phase_event(self, state: RunState, phase: str, what: str) -> None:
        if what == "start" and (state.settings.options or {}).get("fault_injection") == f"{self.cfg.name}:{phase}":
            raise self._injected_fault(state, phase)
        elapsed = time.perf_counter() - state.started
        state.events.put(pb.RunEvent(phase=pb.PhaseEvent(party=self.cfg.name, phase=phase, state=what, elapsed_s=elapsed)))
        self.log("phase", run=state.settings.run_id, phase=phase, state=what, elapsed_s=elapsed)

    def _injected_fault(self, state: RunState, phase: str) -> InputError:
        """Run option `fault_injection = "PARTY:PHASE"`: fail here with a message as private as it gets
        (this party's file path and first data row), so tests can check that only its public part travels."""
        where = self.cfg.data.csv if self.cfg.data is not None else self.cfg.source
        row = ";".join(state.local.rows[0]) if state.local is not None and state.local.rows else ""
        return InputError(f"injected fault in phase {phase} at {self.cfg.name}: {where} row 1 = {row}")

    def _execute(self, state: RunState) -> None:

        settings = state.settings
        transport = state.transport
        assert transport is not None
        try:
            role = settings.parties[self.cfg.name]
            fn = role_function(settings.protocol, role)
            with decompression_limit(self.cfg.limits.max_decompressed_bytes):
                outcome = fn(RoleContext(me=self.cfg.name, transport=transport, settings=settings, local=state.local,
                                         engine=self.cfg.engine))
            report: dict[str, Any] = {"role": role, **(outcome.report or {})}
            if outcome.result is not None and hasattr(outcome.result, "to_report"):
                report.setdefault("result", outcome.result.to_report())
            report["traffic"] = transport.report()
            wire_in: dict[str, int] = {}
            for (phase, _peer), n in state.inbox.wire_received.items():
                wire_in[phase] = wire_in.get(phase, 0) + n
            report["traffic"]["wire_bytes_received_by_phase"] = wire_in
            report["elapsed_s"] = round(time.perf_counter() - state.started, 6)
            report["peak_rss_mib"] = round(peak_rss_mib(), 1)
            if self.cfg.name == settings.result_recipient and outcome.output is not None:
                blob = encode_result(outcome.output)
                step = self.cfg.limits.chunk_bytes
                for start in range(0, len(blob), step):
                    state.events.put(pb.RunEvent(result_chunk=blob[start:start + step]))
            with self._lock:
                if state.inbox.aborted:
                    raise PeerError(state.inbox.aborted)
                state.status = "done"
            state.inbox.close()  # late or unread messages of a finished run must not pin memory
            state.events.put(pb.RunEvent(report_json=json.dumps(report, default=_jsonable)))
            self.log("run_done", run=settings.run_id, elapsed_s=report["elapsed_s"])
        except Exception as exc:  # every failure must reach the coordinator and the peers - its public part
            if isinstance(exc, FedanonError):
                private = getattr(exc, "private", None) or str(exc)  # LocalFailure and stop verdicts keep more
            else:
                private = f"internal error {type(exc).__name__}: {exc}"
                self.log("internal_error", level="error", run=settings.run_id, trace=traceback.format_exc(limit=5))
            message = public_message(exc)
            if not message.startswith(f"{self.cfg.name}:"):
                message = f"{self.cfg.name}: {message}"
            # the full text, for this party's own operator only (logged even if a peer's abort got here first)
            self.log("role_failed", level="error", run=settings.run_id, detail=private)
            # a verdict every party already received (the role marks it) needs no abort broadcast, which
            # would also race the others' own, more detailed, reading of it
            self._fail(state, message, propagate=not getattr(exc, "shared_with_all", False))
        finally:
            state.inbox.close()  # whatever is still queued (an aborted run's messages) is released here
            state.events.put(None)

    def _fail(self, state: RunState, message: str, propagate: bool, private: str = "") -> None:
        """End a run here: `message` (public) goes to the coordinator, the peers and Ping; `private` only to our log."""
        with self._lock:
            if state.status in ("done", "failed"):
                return
            state.status = "failed"
            state.detail = message
            # queued before the role is woken: the role's worker ends the event stream (None) once it
            # unwinds, and the coordinator must have read this party's error before that end
            state.events.put(pb.RunEvent(error=message))
        state.inbox.abort(message)
        self.log("run_failed", level="error", run=state.settings.run_id, error=message,
                 **({"detail": private} if private and private != message else {}))
        if state.transport is None:
            state.inbox.close()  # never started: no role will read what was delivered for it
            state.events.put(None)  # never started: no worker will close the event stream
        if propagate and state.transport is not None:
            threading.Thread(target=state.transport.abort, args=(message,), daemon=True).start()

    def _forget_old_runs(self) -> None:
        finished = [rid for rid, s in self._runs.items() if s.status in ("done", "failed")]
        for rid in finished[:-_KEEP_FINISHED] if len(finished) > _KEEP_FINISHED else []:
            del self._runs[rid]

    def expire_prepared(self) -> None:
        ttl = self.cfg.limits.prepared_ttl_s
        now = time.monotonic()
        with self._lock:
            stale = [s for s in self._runs.values() if s.status == "prepared" and now - s.prepared_at > ttl]
        for state in stale:
            self.log("run_expired", level="warning", run=state.settings.run_id, coordinator=state.coordinator)
            self._fail(state, f"{self.cfg.name}: run expired: prepared but not started within {ttl:g} s "
                              "(limits.prepared_ttl_s)", propagate=False)
            state.inbox.close()

    def abort_all(self, reason: str) -> None:
        with self._lock:
            active = [s for s in self._runs.values() if s.status in ("prepared", "running")]
        for state in active:
            message = f"{self.cfg.name}: {reason}"
            self._fail(state, message, propagate=False)
            if state.transport is not None:
                state.transport.abort(message)  # synchronously: the process may exit right after


def _public(message: str) -> InputError:
    """An InputError whose whole text is public (built from run settings, never from data)."""
    return with_public(InputError(message), message)  # type: ignore[return-value]


def check_roster(request: pb.RunRequest) -> dict[str, str]:
    """The run's parties {name: role}, or InputError for a roster no protocol could run."""
    if not request.run_id or len(request.run_id) > 128 or not request.run_id.isprintable():
        raise _public("malformed run request: run id must be 1-128 printable characters")
    parties: dict[str, str] = {}
    for p in request.parties:
        try:
            check_party_name(p.name)
        except InputError:
            raise _public(f"malformed run request: invalid party name {p.name[:64]!r}") from None
        if p.name in parties:
            raise _public(f"malformed run request: party {p.name!r} listed twice")
        if not p.role.isidentifier() or len(p.role) > 32:  # which roles a protocol has: its spec says
            raise _public(f"malformed run request: party {p.name!r} has role {p.role[:32]!r}")
        parties[p.name] = p.role
    if len(parties) < 2:
        raise _public("malformed run request: a run needs at least two parties")
    if request.result_recipient not in parties:
        raise _public(f"malformed run request: result recipient {request.result_recipient[:64]!r} is not a party")
    if request.distribution not in ("horizontal", "vertical", "hybrid"):
        raise _public(f"malformed run request: distribution {request.distribution[:32]!r}")
    return parties


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    return str(value)


def check_identity(cfg: PartyConfig) -> None:
    """Fail at start-up, with a clear message, on TLS files that peers would reject later anyway."""
    check_tls_files(cfg.tls, cfg.name, "party")
    cert = x509.load_pem_x509_certificate(cfg.tls.read()[0])
    foreign = foreign_names(cfg.name, dns_names(cert), [*cfg.peers, *cfg.coordinators])
    if foreign:
        raise InputError(f"{cfg.tls.cert}: certificate of {cfg.name!r} also names {foreign}; a certificate may name "
                         "only its own party (re-issue it without those --host values)")


def _pem_kind(pem: bytes) -> str:
    """What a PEM file holds, by its first BEGIN line, for messages about mixed-up files."""
    for line in pem.decode("ascii", "replace").splitlines():
        if line.startswith("-----BEGIN "):
            label = line[len("-----BEGIN "):].rstrip("-").strip().lower()
            return "a private key" if "private key" in label else f"a {label}"
    return "no PEM data"


def check_tls_files(tls: TlsFiles, name: str, who: str) -> None:
    """Every check a peer's TLS handshake would make of our files, each with its own message.

    Files readable; the certificate is a certificate, the key a private key, the CA a
    CA certificate; the certificate names `name`, belongs to the key, and was signed
    by the CA. `who` is "party" or "coordinator" (for the messages).
    """
    cert_pem, key_pem, ca_pem = tls.read()
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        raise InputError(f"{tls.cert}: not a PEM certificate (the file holds {_pem_kind(cert_pem)}); "
                         f"tls.cert must be this {who}'s certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        raise InputError(f"{tls.key}: not an unencrypted PEM private key (the file holds {_pem_kind(key_pem)}); "
                         f"tls.key must be this {who}'s private key") from None
    try:
        ca = x509.load_pem_x509_certificate(ca_pem)
    except ValueError:
        raise InputError(f"{tls.ca}: not a PEM certificate (the file holds {_pem_kind(ca_pem)}); "
                         "tls.ca must be the run CA's certificate") from None
    try:
        is_ca = bool(ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise InputError(f"{tls.ca}: is not a CA certificate (it is the certificate of "
                         f"{certificate_name(ca_pem)!r}); tls.ca must be the run CA's ca.crt")
    cert_name = certificate_name(cert_pem)
    if cert_name != name:
        raise InputError(f"{tls.cert}: certificate is for {cert_name!r}, but this {who} is {name!r}")
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki):
        raise InputError(f"{tls.key}: private key does not belong to certificate {tls.cert}")
    try:
        cert.verify_directly_issued_by(ca)
    except Exception:  # noqa: BLE001 - any failure means the same thing to the user
        raise InputError(f"{tls.cert}: certificate is not signed by the run CA {tls.ca}") from None
    if fingerprint(cert) in tls.revoked_fingerprints():
        raise InputError(f"{tls.cert}: this {who}'s own certificate is on the revocation list {tls.revoked} "
                         "(install the re-issued certificate)")


def check_listen_address(cfg: PartyConfig) -> None:
    """The listen port is free and local (as `serve` needs it), checked with a plain socket."""
    host, _sep, port = cfg.listen.rpartition(":")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"party {cfg.name!r}: listen address {cfg.listen}: cannot resolve {host!r} ({exc.strerror})") from None
    family, kind, proto, _canon, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        try:
            probe.bind(address)
        except OSError as exc:
            raise InputError(f"party {cfg.name!r} cannot listen on {cfg.listen}: {exc.strerror}") from None


class PartyDaemon:
    """The gRPC server around `PartyService`, with start/stop and signal-driven shutdown."""

    def __init__(self, cfg: PartyConfig, log: EventLog | None = None, max_workers: int = 32) -> None:
        self.cfg = cfg
        self.log = log or EventLog(cfg.name)
        cfg.limits.validate(str(cfg.source or f"party {cfg.name!r}"))
        check_identity(cfg)
        self.service = PartyService(cfg, self.log)
        # every peer may hold its full quota of streams and a coordinator its calls, with room to spare for Pings
        callers = len(cfg.peers) + len(cfg.coordinators)
        workers = max(max_workers, cfg.limits.max_streams_per_peer * callers + 16)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rpc"),
                                  options=server_options(cfg.limits))
        pb_grpc.add_PartyServicer_to_server(self.service, self.server)
        try:
            self.port = self.server.add_secure_port(cfg.listen, server_credentials(cfg.tls))
        except RuntimeError:
            raise InputError(f"party {cfg.name!r} cannot listen on {cfg.listen}: address in use "
                             "or not an address of this machine") from None
        if self.port == 0:
            raise InputError(f"party {cfg.name!r} cannot listen on {cfg.listen} (address in use or not local)")
        self._stopped = threading.Event()

    def start(self) -> None:
        self.server.start()
        threading.Thread(target=self._janitor, name="janitor", daemon=True).start()
        self.log("serving", listen=self.cfg.listen, port=self.port, peers=",".join(self.cfg.peers),
                 coordinators=",".join(self.cfg.coordinators), has_data=self.cfg.data is not None)

    def _janitor(self) -> None:
        """Expire prepared runs nobody started (their buffered messages go with them); cut stalled streams."""
        while not self._stopped.wait(0.5):
            self.service.expire_prepared()
            self.service.watch_streams()

    def stop(self, grace: float = 3.0) -> None:
        if self._stopped.is_set():
            return
        self.service.stopping = True
        self.service.abort_all("party is shutting down")
        self.server.stop(grace).wait(grace + 1)
        self.service.pool.close()
        self._stopped.set()
        self.log("stopped")

    def serve_forever(self, ready_file: Path | None = None) -> None:
        """Serve until SIGTERM/SIGINT, then shut down gracefully (active runs are aborted at every peer)."""
        stop = threading.Event()

        def on_signal(signum: int, _frame: object) -> None:
            self.log("signal", signal=signal.Signals(signum).name)
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start()
        if ready_file is not None:
            tmp = ready_file.with_name(ready_file.name + ".tmp")
            tmp.write_text(str(self.port))
            os.replace(tmp, ready_file)
        while not stop.wait(0.5):
            pass
        self.stop()
