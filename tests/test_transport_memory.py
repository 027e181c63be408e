"""The in-memory transport: delivery by (sender, topic), byte accounting, abort."""

import threading

import pytest

from fedanon.errors import PeerError
from fedanon.protocols.kit.transport import InMemoryNetwork


def test_messages_are_matched_by_sender_and_topic_and_counted_per_phase():
    net = InMemoryNetwork(["p1", "p2"])
    a, b = net.transport("p1"), net.transport("p2")
    with a.in_phase("encrypt"):
        a.send("p2", "second", b"yy")
        a.send("p2", "first", b"xxx")
    with b.in_phase("encrypt"):
        assert b.receive("p1", "first") == b"xxx"
        assert b.receive("p1", "second") == b"yy"
    assert a.stats.bytes_sent_by_phase() == {"encrypt": 5}
    assert b.stats.received[("encrypt", "p1")] == 5
    assert b.stats.messages_received == 2


def test_timeout_names_the_missing_message():
    net = InMemoryNetwork(["p1", "p2"])
    with pytest.raises(PeerError, match="'hello' from 'p1'"):
        net.transport("p2").receive("p1", "hello", timeout=0.1)


def test_abort_wakes_a_waiting_peer():
    net = InMemoryNetwork(["p1", "p2"])
    errors: list[Exception] = []

    def wait() -> None:
        try:
            net.transport("p2").receive("p1", "never", timeout=10)
        except PeerError as exc:
            errors.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    net.transport("p1").abort("disk full")
    thread.join(5)
    assert errors and "disk full" in str(errors[0])


def test_unknown_party_is_rejected():
    net = InMemoryNetwork(["p1"])
    with pytest.raises(PeerError, match="unknown party 'p9'"):
        net.transport("p1").send("p9", "t", b"")
