"""Protocol C's data-sized waits: bounded by progress, not unbounded and not cut off by size.

A peer whose work stops (its role hangs on a message that never comes, while its daemon
still answers heartbeats) must stop the run at every party within about one per-step
limit, with an error naming the step and the peer; a peer whose work is merely slow --
longer than the per-step limit in total, but advancing -- must not be cut off. In-memory
transport and real gRPC over mutual TLS (daemons served in-process so that one party's
role can be made to hang).
"""

from __future__ import annotations

import time

import pytest

from fedanon.crypto.parallel import ChunkProgress
from fedanon.model.config import AnonymizationConfig
from fedanon.errors import FedanonError, ProtocolError
from fedanon.parties.config import Limits
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.protocols.c import protocol as protocol_c
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.kit.progress import is_progress
from protocol_cases import EX_ATTRS, EX_QIS, check_equivalent, load, settings_for, shares_for

from example_parties import example_primaries

LIMIT_S = 4.0
CONFIG = AnonymizationConfig(EX_QIS, k=2, metric="loss")


@pytest.fixture(scope="module")
def example():
    return load("example", EX_ATTRS)


def _hang(role) -> None:
    """Block the role on a message nobody sends: its work stops, its transport stays alive
    (a run-wide abort still wakes it, so the thread ends once the run is stopped)."""
    role.transport.receive(role.helper if hasattr(role, "helper") else role.key_holder, "never", timeout=None)


def _run(example, n: int = 3, timeout_s: float = 120):
    settings = settings_for("C", "horizontal", n, CONFIG, {"counters": "elgamal"})
    settings.receive_timeout_s = LIMIT_S
    started = time.monotonic()
    run = run_in_memory(settings, shares_for(example, "horizontal", n), timeout_s=timeout_s)
    return run, time.monotonic() - started


def _assert_stopped_naming(run, everyone, step: str, peer: str) -> None:
    assert sorted(run.errors) == sorted(everyone), run.errors
    for party, exc in run.errors.items():
        if party == peer:
            continue  # the hung party itself is woken by the abort
        assert isinstance(exc, ProtocolError), (party, exc)
        assert f"step {step!r}" in str(exc) and f"party {peer!r} made no progress" in str(exc), (party, str(exc))


def _hang_p2_before_its_share(monkeypatch) -> None:
    share = protocol_c._Primary._share

    def stalling_share(self, *args):
        if self.me == "p2":
            _hang(self)
        return share(self, *args)

    monkeypatch.setattr(protocol_c._Primary, "_share", stalling_share)


def test_a_primary_whose_encryption_stops_fails_the_run_within_the_limit(example, monkeypatch):
    _hang_p2_before_its_share(monkeypatch)
    run, elapsed = _run(example)
    _assert_stopped_naming(run, ["p1", "p2", "p3", "helper"], "encrypt", "p2")
    assert elapsed < 6 * LIMIT_S  # about one limit without progress, not the 120 s run timeout


def test_a_helper_whose_search_stops_fails_the_run_within_the_limit(example, monkeypatch):
    ask = protocol_c._Helper._ask
    calls = {"n": 0}

    def stalling_ask(self, request):
        calls["n"] += 1
        if calls["n"] == 3:
            _hang(self)
        return ask(self, request)

    monkeypatch.setattr(protocol_c._Helper, "_ask", stalling_ask)
    run, elapsed = _run(example)
    _assert_stopped_naming(run, ["p1", "p2", "p3", "helper"], "anonymize", "helper")
    assert elapsed < 6 * LIMIT_S


def test_slow_but_advancing_encryption_is_not_cut_off(example, monkeypatch):
    """Every primary takes ~1.5 limits to encrypt its counters, in chunks: the helper (and, through
    the helper's relay, the primaries waiting for the integration) see markers and keep waiting."""
    monkeypatch.setattr(protocol_c, "COUNTER_CHUNK", 1)
    encrypt = protocol_c.encrypt_in_chunks

    def slow_encrypt(key, bits, ticker):
        original = key.encrypt_counters

        def slow(real, workers=None, progress=None):
            def slow_chunk():  # each chunk of one counter takes its share of ~1.5 limits
                time.sleep(1.5 * LIMIT_S / max(len(bits), 1))
                progress.tick()

            return original(real, workers, ChunkProgress(slow_chunk, progress.items))

        key.encrypt_counters = slow  # this key object belongs to this party's run only
        try:
            return encrypt(key, bits, ticker)
        finally:
            del key.encrypt_counters

    monkeypatch.setattr(protocol_c, "encrypt_in_chunks", slow_encrypt)
    local = shares_for(example, "horizontal", 3)
    settings = settings_for("C", "horizontal", 3, CONFIG, {"counters": "elgamal"})
    settings.receive_timeout_s = LIMIT_S
    run = run_in_memory(settings, local, record=True, timeout_s=120)
    assert not run.errors, run.errors
    markers = [(sender, topic) for sender, topic, blob in run.transports["helper"].recorded if is_progress(blob)]
    assert {topic for _, topic in markers} == {"c/data"} and len(markers) >= 3
    relayed = [topic for _, topic, blob in run.transports["p1"].recorded if is_progress(blob)]
    assert relayed and set(relayed) == {"c/integrated"}
    check_equivalent("C", example, CONFIG, "horizontal", 3, options={"counters": "elgamal"})


def test_stalled_primary_over_grpc_daemons(tmp_path, monkeypatch):
    """The same over real gRPC with mutual TLS: the daemons' heartbeats keep answering (the
    process lives), only the role's work has stopped -- the progress rule catches it."""
    _hang_p2_before_its_share(monkeypatch)
    parties = example_primaries(tmp_path, names=("p1", "p2"), sensitive={"diagnosis": None})
    parties.append(SimulatedParty("helper", "helper"))
    started = time.monotonic()
    with SimulatedNetwork(parties, limits=Limits(receive_timeout_s=LIMIT_S), in_process=True) as net:
        with pytest.raises(FedanonError) as err:
            net.run("C", "horizontal", CONFIG, "p1", {"counters": "elgamal"})
    assert time.monotonic() - started < 60
    message = str(err.value)
    assert "step 'encrypt'" in message and "party 'p2' made no progress" in message, message
