"""A party's error event reaches its coordinator even when its role unwinds at once.

Regression: `_fail` (called by a peer's Abort) woke the role before queueing the
error event; the role's worker then ended the event stream (None) first and the
coordinator saw "closed the run stream without a report" instead of the reason.
The inbox below plays the role's worker at its fastest: waking it ends the stream
synchronously, so the old order fails this test every time.
"""

from __future__ import annotations

import threading

from fedanon.model.config import AnonymizationConfig
from fedanon.parties.daemon import PartyService, RunState
from fedanon.parties.wire.inbox import RunInbox
from fedanon.protocols.kit.api import RunSettings


class _InstantUnwind(RunInbox):
    """Aborting wakes the role, whose worker immediately ends the event stream."""

    def __init__(self) -> None:
        super().__init__()
        self.state: RunState | None = None

    def abort(self, reason: str) -> None:
        super().abort(reason)
        assert self.state is not None
        self.state.events.put(None)


def _service() -> PartyService:
    service = PartyService.__new__(PartyService)  # only what _fail touches: no TLS, no config files
    service._lock = threading.Lock()
    service.log = lambda *a, **k: None
    return service


def _drain(state: RunState) -> list[str]:
    kinds = []
    while not state.events.empty():
        event = state.events.get_nowait()
        kinds.append("end" if event is None else event.WhichOneof("kind"))
    return kinds


def test_error_event_is_queued_before_the_role_can_end_the_stream() -> None:
    settings = RunSettings(run_id="r1", protocol="B", distribution="horizontal",
                           config=AnonymizationConfig.from_dict({"quasi_identifiers": ["age"], "k": 2}),
                           parties={"p1": "primary", "p2": "primary", "helper": "helper"}, result_recipient="p1")
    inbox = _InstantUnwind()
    state = RunState(settings=settings, inbox=inbox, local=None, status="running")
    state.transport = object()  # started: the worker, not _fail, ends the stream
    inbox.state = state
    _service()._fail(state, "party 'p3' aborted the run: p3: party 'p2' is unreachable", propagate=False)
    kinds = _drain(state)
    assert kinds[:2] == ["error", "end"], kinds
