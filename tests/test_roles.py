"""The shared role base: run-wide failure in any topology, typed control messages, the registry spec."""

from __future__ import annotations

import threading
import time

import pytest

from fedanon.engine.result import NoSolutionError
from fedanon.errors import PeerError, ProtocolError
from fedanon.protocols.kit.api import RoleContext, RunSettings
from fedanon.protocols.registry import available_protocols, check_roles, protocol_spec, role_function
from fedanon.protocols.kit.roles import Hello, LocalFailure, Roster, Verdict, open_control, send_control
from fedanon.protocols.kit.transport import InMemoryNetwork, RunFailure
from fedanon.protocols.kit.validation import LocalProblem


def test_fail_run_wakes_every_party_of_a_ring_with_the_same_error() -> None:
    """Each party waits on its left neighbour for a different topic; one stops the run."""
    names = ["p1", "p2", "p3", "p4"]
    net = InMemoryNetwork(names)
    errors: dict[str, BaseException] = {}

    def wait(i: int) -> None:
        left = names[i - 1]
        try:
            net.transport(names[i]).receive(left, f"ring/{i}", timeout=30)
        except BaseException as exc:  # collected for the assertions
            errors[names[i]] = exc

    threads = [threading.Thread(target=wait, args=(i,)) for i in (1, 2, 3)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    start = time.monotonic()
    own = net.transport("p1").fail_run("no transformation satisfies 5-anonymity", "no-solution")
    for t in threads:
        t.join(10)
    assert time.monotonic() - start < 5
    assert isinstance(own, NoSolutionError)
    assert set(errors) == {"p2", "p3", "p4"}
    for exc in errors.values():
        assert isinstance(exc, NoSolutionError) and str(exc) == "no transformation satisfies 5-anonymity"
        assert getattr(exc, "shared_with_all", False)


def test_fail_run_also_stops_a_later_send_and_receive() -> None:
    net = InMemoryNetwork(["a", "b"])
    net.transport("a").fail_run("stopped by a", "integration")
    b = net.transport("b")
    with pytest.raises(ProtocolError, match="^stopped by a$"):
        b.receive("a", "anything", timeout=5)


def test_run_failure_survives_prefixes_and_rejects_garbage() -> None:
    failure = RunFailure("p2", 'a "quoted" message; with: colons', "engine")
    text = "coordinator 'c' aborted the run: party 'p2' aborted the run: " + failure.encode()
    assert RunFailure.find(text) == failure
    assert RunFailure.find("party 'p2' aborted the run: plain reason") is None
    assert RunFailure.find("[fedanon-run-failure]{not json") is None


def test_receive_timeout_comes_from_the_run_settings() -> None:
    net = InMemoryNetwork(["a", "b"])
    settings = RunSettings("r", "B", "horizontal", None, {"a": "primary", "b": "primary"}, "a",  # type: ignore[arg-type]
                           receive_timeout_s=0.3)
    ctx = RoleContext("b", net.transport("b"), settings, None)
    start = time.monotonic()
    with pytest.raises(PeerError, match="within 0 s|within 1 s"):
        ctx.transport.receive("a", "never")
    assert time.monotonic() - start < 3


def test_control_messages_round_trip_and_tolerate_new_fields() -> None:
    net = InMemoryNetwork(["a", "b"])
    roster = Roster(columns=["x", "y"], owners={"x": "a"}, public_keys={"a": "00ff"})
    send_control(net.transport("a"), "b", "t", roster, blob=b"\x00\x01")
    got, parts = open_control(net.transport("b").receive("a", "t", timeout=5), Roster, "roster")
    assert got == roster and parts["blob"] == b"\x00\x01"
    # an older reader (Verdict) ignores the roster's extra keys; a stop verdict raises the same error
    stop = Verdict(ok=False, error="schema mismatch", kind="no-solution")
    send_control(net.transport("a"), "b", "v", stop)
    verdict, _ = open_control(net.transport("b").receive("a", "v", timeout=5), Verdict, "verdict")
    with pytest.raises(NoSolutionError, match="schema mismatch; details"):
        verdict.raise_if_stopped("details")
    from fedanon.protocols.kit import codec

    with pytest.raises(ProtocolError, match="not JSON"):
        open_control(codec.pack_message({"control": b"\xff"}), Hello, "hello")


def test_local_failure_keeps_values_private() -> None:
    exc = LocalFailure([LocalProblem("party 'p1': 2 values missing", "party 'p1': values 'Berlin', 'Ulm' missing")])
    assert "Berlin" not in str(exc) and "Berlin" in exc.private


def test_registry_spec_replaces_protocol_names() -> None:
    assert "CHECK" not in available_protocols(anonymizing=True)
    assert "B" in available_protocols(anonymizing=True)
    assert protocol_spec("b").needs_helper and not protocol_spec("CHECK").anonymizes
    assert check_roles("B", {"p1": "primary", "p2": "primary"}) == [
        "protocol B needs exactly one helper party, the run names 0"]
    assert check_roles("B", {"p1": "primary", "h": "helper"}) == []
    assert check_roles("CHECK", {"p1": "primary", "p2": "primary"}) == []
    assert "referee" in check_roles("B", {"p1": "primary", "h": "helper", "x": "referee"})[0]
    with pytest.raises(ProtocolError, match="unknown protocol 'Z'"):
        role_function("Z", "primary")


def test_tid_tokens_of_any_width_join_like_16_byte_ones() -> None:
    """32-byte tokens (A's group elements) sort and join through the same integration code."""
    import os

    import numpy as np

    from fedanon.data.table import EncodedTable
    from fedanon.protocols.kit.cellcrypt import token_keys
    from fedanon.protocols.kit.integration import check_tids, join_on_tid

    width = 32
    tids = [os.urandom(width) for _ in range(50)]
    order_b = np.random.default_rng(1).permutation(50)
    a = token_keys(b"".join(tids), 50, "a", width)
    b = token_keys(b"".join(tids[i] for i in order_b), 50, "b", width)
    assert a.shape == (50, 4) and check_tids({"a": a, "b": b}) is None
    ta = EncodedTable(["x"], np.arange(50, dtype=np.int32).reshape(50, 1), [[b"%d" % i for i in range(50)]])
    tb = EncodedTable(["y"], np.arange(50, dtype=np.int32).reshape(50, 1), [[b"%d" % i for i in order_b]])
    joined, _ = join_on_tid({"a": ta, "b": tb}, {"a": a, "b": b})
    rows = joined.decode_rows()
    assert all(x == y for x, y in rows) and len(rows) == 50
    # a set that differs in the last 8 bytes only is caught
    changed = bytearray(tids[7])
    changed[-1] ^= 1
    c = token_keys(b"".join(tids[:7] + [bytes(changed)] + tids[8:]), 50, "c", width)
    assert check_tids({"a": a, "c": c}) is not None
    with pytest.raises(ProtocolError, match="multiple of 8"):
        token_keys(b"x" * 12, 1, "d", 12)
