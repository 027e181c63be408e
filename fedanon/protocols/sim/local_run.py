"""Run every role of one protocol run in this process, one thread per party.

Uses the in-memory transport: no sockets, no TLS, but exactly the same role code and
the same byte accounting as a daemon run. This is what the big correctness matrix,
the leakage tests (every received payload is recorded) and the scale benchmark use.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from fedanon.engine.settings import EngineSettings
from fedanon.protocols.kit.api import LocalData, RoleContext, RoleOutcome, RunSettings
from fedanon.protocols.registry import PRIMARY, role_function
from fedanon.protocols.kit.transport import InMemoryNetwork, InMemoryTransport


@dataclass
class LocalRun:
    outcomes: dict[str, RoleOutcome] = field(default_factory=dict)
    errors: dict[str, BaseException] = field(default_factory=dict)
    transports: dict[str, InMemoryTransport] = field(default_factory=dict)
    elapsed_s: float = 0.0

    @property
    def recipient_outcome(self) -> RoleOutcome | None:
        for outcome in self.outcomes.values():
            if outcome.output is not None:
                return outcome
        return None


def run_in_memory(settings: RunSettings, local: dict[str, LocalData | None], *, record: bool = False,
                  timeout_s: float = 600.0,
                  setup: Callable[[dict[str, InMemoryTransport]], None] | None = None,
                  engine: EngineSettings | None = None) -> LocalRun:
    """Run all parties named in `settings.parties`; errors are collected per party, not raised.

    `setup` may adjust the transports before any role starts (tests use it to give parties
    TLS identity material or to put a tampering wrapper around the helper's transport).
    `engine`: every party's engine setting (a party config's [engine]); the default backend if None.
    """
    names = list(settings.parties)
    network = InMemoryNetwork(names)
    run = LocalRun()
    for name in names:
        transport = network.transport(name)
        if record:
            transport.recorded = []
        run.transports[name] = transport
    if setup is not None:
        setup(run.transports)

    def body(name: str) -> None:
        role = settings.parties[name]
        ctx = RoleContext(name, run.transports[name], settings, local.get(name) if role == PRIMARY else None,
                          engine or EngineSettings())
        try:
            outcome = role_function(settings.protocol, role)(ctx)
            outcome.report["traffic"] = run.transports[name].stats.as_dict()
            run.outcomes[name] = outcome
        except BaseException as exc:  # collected for the caller, which decides what to raise
            run.errors[name] = exc

    threads = [threading.Thread(target=body, args=(n,), name=f"party-{n}", daemon=True) for n in names]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
    run.elapsed_s = time.perf_counter() - start
    return run
