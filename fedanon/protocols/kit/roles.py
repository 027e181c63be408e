"""The shared base of every protocol role (A, B, C): what is not specific to one protocol.

* `PhaseTimer`: wall time per phase, with the transport attributing bytes to the phase.
* `DataHolder` / `HelperRole`: the state every data-holding / helper role starts from.
* Typed control messages (`Hello`, `Roster`, `Verdict`) as dataclasses framed with
  `send_control` / `receive_control`: a JSON "control" part plus binary parts. Unknown
  JSON keys are ignored and missing ones take the field default, so a message can grow.
* Run-wide failure: `stop_run` stops every party with one public message through the
  transport (`Transport.fail_run`), whatever the topology; `guarded` wraps a role so a
  local failure the others do not know of stops them too, with a public message only.
  `LocalFailure` keeps the public/private split of `validation.LocalProblem`: only
  `.public` ever leaves the party; `.private` (values, lines, paths) stays local.
* `role_report`: the report every role returns (protocol, role, party, phases).

See `fedanon.protocols.registry` for how a protocol plugs in.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, TypeVar

from fedanon.crypto.errors import CryptoError
from fedanon.errors import FedanonError, PeerError, ProtocolError, with_public
from fedanon.errors import public_message as shareable
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import RoleContext, RoleFunction, RoleOutcome
from fedanon.protocols.kit.transport import Transport
from fedanon.protocols.kit.validation import LocalProblem


# ----------------------------------------------------------------------------- phases


class PhaseTimer:
    """Wall time per phase, reported in `RoleOutcome.report["phases"]`."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        with self.transport.in_phase(name):
            try:
                yield
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    def report(self, phases: tuple[str, ...] | list[str]) -> dict[str, float]:
        return {p: round(self.seconds.get(p, 0.0), 6) for p in phases}


class DataHolder:
    """Common state of a data-holding role (context shortcuts, phase timer); needs local data."""

    def __init__(self, ctx: RoleContext) -> None:
        if ctx.local is None:
            raise ProtocolError(f"primary {ctx.me!r} has no local data")
        self.ctx = ctx
        self.me = ctx.me
        self.settings = ctx.settings
        self.local = ctx.local
        self.transport = ctx.transport
        self.timer = PhaseTimer(ctx.transport)


class HelperRole:
    """Common state of a helper role (B, C): holds no data, coordinates the primaries."""

    def __init__(self, ctx: RoleContext, protocol: str) -> None:
        self.ctx = ctx
        self.me = ctx.me
        self.settings = ctx.settings
        self.transport = ctx.transport
        self.primaries = ctx.settings.primaries
        self.timer = PhaseTimer(ctx.transport)
        if not self.primaries:
            raise ProtocolError(f"Protocol {protocol} needs at least one primary party")


def role_report(ctx: RoleContext, protocol: str, role: str, timer: PhaseTimer, phases: tuple[str, ...] | list[str],
                **extra: Any) -> dict[str, Any]:
    """The fields every role's report has, plus protocol-specific `extra`."""
    return {"protocol": protocol, "role": role, "party": ctx.me, "distribution": ctx.settings.distribution,
            **extra, "phases": timer.report(phases)}


# ----------------------------------------------------------------------------- control messages

M = TypeVar("M", bound="ControlMessage")


@dataclass
class ControlMessage:
    """Base of the typed control messages; serialized as one JSON object."""

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode("utf-8")

    @classmethod
    def from_json(cls: type[M], blob: bytes, what: str) -> M:
        try:
            data = json.loads(blob.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise ProtocolError(f"corrupt {what}: control part is not JSON") from None
        if not isinstance(data, dict):
            raise ProtocolError(f"corrupt {what}: control part is not a JSON object")
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        try:
            return cls(**{k: v for k, v in data.items() if k in names})
        except TypeError as exc:
            raise ProtocolError(f"corrupt {what}: {exc}") from None


@dataclass
class Verdict(ControlMessage):
    """Go on, or stop: the answer to every step a coordinating party decides on."""

    ok: bool = True
    error: str = ""
    kind: str = "validation"  # "validation", "integration", "engine", "no-solution", ...
    findings: list[dict[str, Any]] = field(default_factory=list)  # see protocol_b: ciphertexts to name
    report: dict[str, Any] = field(default_factory=dict)

    def raise_if_stopped(self, extra: str = "") -> None:
        """Turn a stop verdict into the same exception at this party (known to all)."""
        if self.ok:
            return
        public = self.error or "the run was stopped"
        exc = shared_error(f"{public}; {extra}" if extra else public, self.kind)
        # `extra` may name this party's own values (decrypted findings): it stays in `.private`
        exc.private = str(exc)  # type: ignore[attr-defined]
        raise with_public(exc, public)


@dataclass
class Hello(ControlMessage):
    """What a data holder announces before any data moves: schema facts, never values."""

    columns: list[str] = field(default_factory=list)
    tid_column: str | None = None
    rows: int = 0
    subset: bool = False
    hierarchies: list[str] = field(default_factory=list)
    heights: dict[str, int] = field(default_factory=dict)
    local_errors: list[str] = field(default_factory=list)  # LocalProblem.public only
    public_key: str = ""  # hex; a protocol's key-agreement key, if it has one
    public_key_signature: str = ""  # hex; binds public_key to the TLS certificate
    certificate: str = ""  # PEM of that certificate
    min_levels: dict[str, int] = field(default_factory=dict)  # pre-generalization (Protocol A)

    def summary(self) -> dict[str, Any]:
        """The schema facts as the dict `validation.check_schemas` reads."""
        return dataclasses.asdict(self)


@dataclass
class Roster(Verdict):
    """The coordinating party's answer to all hellos: the agreed schema and everyone's keys."""

    columns: list[str] = field(default_factory=list)  # integrated column order
    owners: dict[str, str] = field(default_factory=dict)  # column -> party (vertical)
    tid_column: str | None = None
    holders: dict[str, list[str]] = field(default_factory=dict)  # column -> parties (hybrid)
    public_keys: dict[str, str] = field(default_factory=dict)  # party -> hex
    bindings: dict[str, dict[str, str]] = field(default_factory=dict)  # party -> signature, certificate


def send_control(transport: Transport, to: str, topic: str, message: ControlMessage, **parts: bytes) -> None:
    transport.send(to, topic, codec.pack_message({"control": message.to_json(), **parts}))


def open_control(blob: bytes, cls: type[M], what: str) -> tuple[M, dict[str, bytes]]:
    parts = codec.unpack_message(blob, what)
    return cls.from_json(codec.require_part(parts, "control", what), what), parts


def receive_control(transport: Transport, sender: str, topic: str, cls: type[M], what: str
                    ) -> tuple[M, dict[str, bytes]]:
    return open_control(transport.receive(sender, topic), cls, what)


# ----------------------------------------------------------------------------- failures


class LocalFailure(ProtocolError):
    """A failure in one party's own data: the message is public, `.private` stays local.

    `str()` is the public text (it may reach peers, logs and the coordinator); the
    party's own terminal may show `.private` (values, line numbers, file names).
    """

    def __init__(self, problems: list[LocalProblem]) -> None:
        super().__init__("; ".join(p.public for p in problems))
        self.private = "; ".join(p.private for p in problems)


def shared_error(message: str, kind: str = "protocol") -> FedanonError:
    """The exception for a failure every party already knows about (no abort needed)."""
    from fedanon.engine.result import NoSolutionError

    exc: FedanonError = NoSolutionError(message) if kind == "no-solution" else ProtocolError(message)
    return mark_shared(exc)


def mark_shared(exc: FedanonError) -> FedanonError:
    exc.shared_with_all = True  # type: ignore[attr-defined]
    return exc


def is_shared(exc: BaseException) -> bool:
    return bool(getattr(exc, "shared_with_all", False))


def stop_run(ctx: RoleContext, message: str, kind: str = "protocol") -> FedanonError:
    """Stop the run at every party with one public message; returns the error to raise here.

    Use: `raise stop_run(ctx, "...")`. Works in any topology: the transport wakes every
    pending receive at every party, which raises the same error with the same message.
    """
    return ctx.transport.fail_run(message, kind)


def public_message(ctx: RoleContext, exc: BaseException) -> str:
    """What the others may learn about a local failure (never `.private`; see `errors.public_message`)."""
    return f"party {ctx.me!r} failed: {shareable(exc)}"


def abort_unless_shared(ctx: RoleContext, exc: BaseException) -> None:
    """A local failure the others do not know of: stop the run so nobody waits for us."""
    if is_shared(exc):
        return
    if isinstance(exc, PeerError) and not isinstance(exc, CryptoError):
        return  # a transport failure: the run is already aborted or a peer is gone
    try:  # the others raise PeerError "party X aborted the run: ..." (a crash, not a verdict)
        ctx.transport.abort(public_message(ctx, exc))
    except Exception:  # best effort; the original error is what matters
        pass


def guarded(role: RoleFunction) -> RoleFunction:
    """Wrap a role so that any local failure stops the run everywhere (then re-raises)."""

    @functools.wraps(role)
    def run(ctx: RoleContext) -> RoleOutcome:
        try:
            return role(ctx)
        except BaseException as exc:
            abort_unless_shared(ctx, exc)
            raise

    return run
