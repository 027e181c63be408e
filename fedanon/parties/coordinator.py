"""The coordinator: reach every daemon, prepare and start a run, follow it, collect the result.

Sequence: Ping all (reachable? the party it claims to be?), Prepare all (each
party checks the run against its own allow-list and loads its data; all must
return the same request digest), then Start all and follow the event streams.
The first failure anywhere (a stream that breaks because a daemon died, an
error event, a wrong digest) aborts the run at every party and raises one
PeerError/ProtocolError naming the party; output files are written only after
the whole run succeeded, and atomically.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import grpc

from fedanon.kit.atomicfile import write_text_atomic
from fedanon.data.io.delimited import write_encoded_csv
from fedanon.data.table import EncodedTable
from fedanon.errors import FedanonError, InputError, PeerError, ProtocolError
from fedanon.model.config import AnonymizationConfig
from fedanon.parties.config import Limits, RunConfig, RunPartyEntry, TlsFiles
from fedanon.parties.daemon import request_digest
from fedanon.parties.pki.certs import certificate_name
from fedanon.parties.wire.grpc_transport import describe_rpc_error, unresponsive
from fedanon.parties.pki.identity import new_nonce, verify_identity
from fedanon.parties.wire.resultwire import decode_result
from fedanon.protocols.kit.api import HoldsOutput
from fedanon.parties.pki.tls import client_credentials, open_channel
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc
from fedanon.protocols.registry import STATISTICS_OPTION, check_roles, known_protocol

_ABORT_GRACE_S = 1.0  # after the first failure, before the coordinator aborts the others
_HUNG_SHARE = 0.9  # a ping that fails only after this share of its deadline went unanswered: hung, not refused
COLLECT_AFTER_ABORT_S = 5.0  # after its abort, how long it still collects the others' reasons (+ 2 heartbeats)
EventCallback = Callable[[str, str, str, float], None]  # party, phase, "start"/"end", elapsed


@dataclass
class RunOutcome(HoldsOutput):
    """A finished run: the result as the recipient sent it (None if the protocol has none) and the report."""

    run_id: str
    output: EncodedTable | None
    report: dict[str, Any] = field(default_factory=dict)


def _check_roles(protocol: str, roles: dict[str, str], source: Path | None = None) -> None:
    """The run's parties fit the protocol (helper or not), as its registry spec says."""
    if known_protocol(protocol) is None:
        return
    problems = check_roles(protocol, roles)
    if problems:
        where = f"{source}: " if source else ""
        raise InputError(f"{where}[parties]: " + "; ".join(problems))


def _check_config(protocol: str, privacy: dict[str, Any], source: Path | None = None,
                  parsed: AnonymizationConfig | None = None) -> AnonymizationConfig | None:
    """The run's privacy config, parsed and validated once: the coordinator is where it enters
    from the user (a run file, or a `RunConfig` built in Python), so a bad one fails here, before
    any party is contacted. `parsed` is the config a caller already holds (then not parsed again,
    and validated only if it was not yet)."""
    spec = known_protocol(protocol)  # an unknown name is left to the daemons, which name it
    if not privacy and parsed is None:
        if spec is None or spec.anonymizes:
            where = f"{source}: " if source else ""
            raise InputError(f"{where}protocol {protocol.upper()} needs a [privacy] section "
                             "(quasi_identifiers, k, suppression, metric, ...)")
        return None
    if parsed is not None:
        return parsed.ensure_valid()
    try:
        return AnonymizationConfig.from_dict(dict(privacy)).validate()
    except FedanonError:
        raise
    except (TypeError, ValueError, KeyError) as exc:
        raise InputError(f"{source or 'run config'}: invalid [privacy] section: {exc}") from None


class Coordinator:
    def __init__(self, cfg: RunConfig, on_event: EventCallback | None = None, log: Callable[..., None] | None = None) -> None:
        self.cfg = cfg
        self.on_event = on_event
        self.log = log or (lambda *a, **k: None)
        self.run_id = cfg.run_id or uuid.uuid4().hex
        self.config: AnonymizationConfig | None = None  # the run's privacy config, once run() validated it
        self._creds = client_credentials(cfg.tls)
        self._revoked = cfg.tls.revoked_fingerprints()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, pb_grpc.PartyStub] = {}
        for p in cfg.parties:
            ch = open_channel(p.address, p.name, self._creds, cfg.limits)
            self._channels[p.name] = ch
            self._stubs[p.name] = pb_grpc.PartyStub(ch)

    def close(self) -> None:
        for ch in self._channels.values():
            ch.close()

    def _entry(self, name: str) -> RunPartyEntry:
        return next(p for p in self.cfg.parties if p.name == name)

    def _fail_rpc(self, name: str, exc: grpc.RpcError, what: str) -> PeerError:
        return PeerError(f"{what}: " + describe_rpc_error(name, exc, self._entry(name).address,
                                                          self.cfg.limits.heartbeat_s))

    # ------------------------------------------------------------------ steps
    def ping_all(self) -> dict[str, float]:
        """Round-trip time per party; PeerError for the first party that is down, untrusted, or someone else."""
        # a party that does not answer is named unresponsive within two heartbeats
        timeout = min(10.0, self.cfg.limits.rpc_timeout_s, 2 * self.cfg.limits.heartbeat_s)
        nonces = {p.name: new_nonce() for p in self.cfg.parties}
        futs = {p.name: (time.perf_counter(),
                         self._stubs[p.name].Ping.future(pb.PingRequest(nonce=nonces[p.name]), timeout=timeout))
                for p in self.cfg.parties}
        cert_pem, _key, ca_pem = self.cfg.tls.read()
        me = certificate_name(cert_pem)  # what the daemons see as the caller
        known = [p.name for p in self.cfg.parties] + [self.cfg.coordinator]
        rtt = {}
        for name, (t0, fut) in futs.items():
            try:
                reply = fut.result()
            except grpc.RpcError as exc:
                waited = time.perf_counter() - t0
                if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED or waited >= _HUNG_SHARE * timeout:
                    raise PeerError("cannot reach the run's parties: "
                                    + unresponsive(name, waited, self._entry(name).address)) from None
                raise self._fail_rpc(name, exc, "cannot reach the run's parties") from None
            rtt[name] = time.perf_counter() - t0
            verify_identity(reply.identity_certificate, reply.identity_signature, expected=name,
                            caller=me, nonce=nonces[name], ca_pem=ca_pem, known=known,
                            where=self._entry(name).address, revoked=self._revoked)
        return rtt

    def request(self) -> pb.RunRequest:
        return pb.RunRequest(
            run_id=self.run_id, protocol=self.cfg.protocol.upper(), distribution=self.cfg.distribution,
            parties=[pb.PartyRole(name=p.name, role=p.role, address=p.address) for p in self.cfg.parties],
            result_recipient=self.cfg.result_recipient,
            config_json=json.dumps(self.cfg.privacy, sort_keys=True),
            # the run's receive timeout travels with the options; each daemon moves it into RunSettings
            options_json=json.dumps({"receive_timeout_s": self.cfg.limits.receive_timeout_s, **self.cfg.options},
                                    sort_keys=True),
        )

    def prepare_all(self, request: pb.RunRequest) -> None:

        expected = request_digest(request)
        futs = {p.name: self._stubs[p.name].Prepare.future(request, timeout=self.cfg.limits.rpc_timeout_s * 4)
                for p in self.cfg.parties}
        problems: list[FedanonError] = []
        for name, fut in futs.items():
            try:
                reply = fut.result()
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                    problems.append(PeerError(f"party {name!r} rejected the run: {exc.details()}"))
                else:
                    problems.append(self._fail_rpc(name, exc, "preparing the run"))
                continue
            if reply.request_digest != expected:
                problems.append(ProtocolError(f"party {name!r} disagrees about run {self.run_id} (settings digest differs)"))
        if problems:
            self.abort_all("preparation failed")
            raise problems[0]

    def abort_all(self, reason: str, skip: set[str] | None = None) -> None:
        req = pb.AbortRequest(run_id=self.run_id, origin=self.cfg.coordinator, reason=reason)
        futs = [self._stubs[p.name].Abort.future(req, timeout=3.0) for p in self.cfg.parties if p.name not in (skip or set())]
        for fut in futs:
            try:
                fut.result()
            except grpc.RpcError:
                pass

    def start_all(self) -> RunOutcome:
        events: "queue.Queue[tuple[str, str, Any]]" = queue.Queue()
        calls: dict[str, Any] = {}

        def follow(name: str) -> None:
            try:
                call = self._stubs[name].Start(pb.StartRequest(run_id=self.run_id))
                calls[name] = call
                for ev in call:
                    kind = ev.WhichOneof("kind")
                    events.put((name, kind, getattr(ev, kind)))
                    if kind in ("report_json", "error"):
                        return
                events.put((name, "error", f"party {name!r} closed the run stream without a report"))
            except grpc.RpcError as exc:
                if exc.code() == grpc.StatusCode.CANCELLED and stop.is_set():
                    return
                if exc.code() == grpc.StatusCode.UNAVAILABLE:
                    message = (f"lost contact with party {name!r} at {self._entry(name).address} mid-run "
                               f"(daemon died or connection dropped): {exc.details()}")
                else:
                    message = describe_rpc_error(name, exc, self._entry(name).address)
                events.put((name, "lost", message))

        stop = threading.Event()
        threads = [threading.Thread(target=follow, args=(p.name,), daemon=True) for p in self.cfg.parties]
        for t in threads:
            t.start()
        reports: dict[str, Any] = {}
        result_parts: list[bytes] = []
        errors: list[tuple[str, str]] = []
        pending = {p.name for p in self.cfg.parties}
        while pending:
            name, kind, value = events.get()
            if kind == "phase":
                if self.on_event:
                    self.on_event(value.party, value.phase, value.state, value.elapsed_s)
            elif kind == "result_chunk":
                if name != self.cfg.result_recipient:
                    errors.append((name, f"party {name!r} sent a result but is not the result recipient"))
                    break
                result_parts.append(value)
            elif kind == "report_json":
                reports[name] = json.loads(value)
                pending.discard(name)
            else:  # error or lost stream
                errors.append((name, value))
                pending.discard(name)
                break
        if errors:
            first_party, first = errors[0]
            self.log("run_failed", run=self.run_id, party=first_party, error=first)
            # A verdict the parties share reaches each of them on its own: give them a moment to fail with
            # their own (locally more detailed) reason before the coordinator's abort overtakes it; then
            # abort, and keep collecting the others' reasons (a waiting party names a dead peer within
            # 2 heartbeats) -- two phases, each until its own deadline or until every party has answered
            _collect_failures(events, pending, errors, time.monotonic() + _ABORT_GRACE_S)
            self.abort_all(f"party {first_party!r} failed: {first}")
            _collect_failures(events, pending, errors,
                              time.monotonic() + COLLECT_AFTER_ABORT_S + 2 * self.cfg.limits.heartbeat_s)
            stop.set()
            for call in calls.values():
                call.cancel()
            raise PeerError(_root_cause(errors))
        output = decode_result(b"".join(result_parts)) if result_parts else None
        return RunOutcome(self.run_id, output, {"parties": reports})

    def run(self) -> RunOutcome:
        # a statistics run (`[options] statistics`) counts the parties' tables and needs no privacy config
        counting = STATISTICS_OPTION in (self.cfg.options or {}) and not self.cfg.privacy \
            and self.cfg.anonymization is None
        self.config = None if counting else _check_config(self.cfg.protocol, self.cfg.privacy, self.cfg.source,
                                                          self.cfg.anonymization)
        _check_roles(self.cfg.protocol, {p.name: p.role for p in self.cfg.parties}, self.cfg.source)
        t0 = time.perf_counter()
        try:
            rtt = self.ping_all()
            request = self.request()
            self.prepare_all(request)
            outcome = self.start_all()
        finally:
            self.close()
        outcome.report = {
            "run_id": self.run_id,
            "protocol": self.cfg.protocol.upper(),
            "distribution": self.cfg.distribution,
            "result_recipient": self.cfg.result_recipient,
            "parties": {p.name: {"role": p.role, "address": p.address} for p in self.cfg.parties},
            "coordinator": {"name": self.cfg.coordinator, "ping_ms": {k: round(v * 1000, 3) for k, v in rtt.items()}},
            "elapsed_s": round(time.perf_counter() - t0, 6),
            "privacy": self.cfg.privacy,
            "options": self.cfg.options,
            "party_reports": outcome.report["parties"],
            "output_rows": outcome.output.n_rows if outcome.output is not None else None,
        }
        return outcome


def _collect_failures(events: "queue.Queue[tuple[str, str, Any]]", pending: set[str],
                      errors: list[tuple[str, str]], until: float) -> None:
    """Take the parties' final events until `until` or until none is pending; errors are kept in order."""
    while pending:
        left = until - time.monotonic()
        if left <= 0:
            return
        try:
            name, kind, value = events.get(timeout=left)
        except queue.Empty:
            return
        if kind in ("error", "lost"):
            errors.append((name, value))
            pending.discard(name)
        elif kind == "report_json":
            pending.discard(name)


def _root_cause(errors: list[tuple[str, str]]) -> str:
    """Prefer a party's own failure over the echoes of it ('... aborted the run', 'unreachable')."""
    def rank(item: tuple[str, str]) -> int:
        msg = item[1]
        if "aborted the run" in msg:
            return 2
        if "lost contact" in msg:
            return 0
        if "is unreachable" in msg or "no longer knows run" in msg:
            return 1
        return 0
    party, msg = min(errors, key=rank)
    return f"run failed at party {party!r}: {msg}"


def write_outputs(outcome: RunOutcome, output: Path | None, report: Path | None, delimiter: str = ";") -> None:
    """Write the result CSV and the JSON report atomically (temp file + rename): never a partial
    file. Missing folders are made."""
    for path in (output, report):
        if path is not None:
            Path(path).resolve().parent.mkdir(parents=True, exist_ok=True)
    if output is not None:
        if outcome.output is None:
            raise ProtocolError("the run produced no result table at the result recipient")
        # the same writer as a local run, from the codes and dictionaries as they arrived: a cell
        # holding the delimiter, a quote or a newline is quoted, so every released row parses back
        write_encoded_csv(output, outcome.output, delimiter)
    if report is not None:
        write_text_atomic(report, json.dumps(outcome.report, indent=2, sort_keys=True, default=str) + "\n")


def run_coordinator(cfg: RunConfig, on_event: EventCallback | None = None) -> RunOutcome:
    coordinator = Coordinator(cfg, on_event=on_event)
    return coordinator.run()


__all__ = ["Coordinator", "RunOutcome", "run_coordinator", "write_outputs", "Limits", "TlsFiles"]
