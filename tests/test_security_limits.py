"""Findings 3, 4 and the config part of 6 of issue 11: bounded daemons, hung peers, valid limits.

Real daemons on loopback (one process each, gRPC over mutual TLS). Each test failed before:
40 idle Deliver streams blocked every RPC thread, a stream announcing 4 GiB was admitted,
messages for a never-started run were kept forever, a Snappy block was expanded whatever
size it declared, malformed rosters came back as "internal error KeyError", a SIGSTOPped
peer took 10-53 s to notice and was called a TLS failure, and nonsense limits passed
`check-config`.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from datetime import datetime
from pathlib import Path

import grpc
import pytest
import snappy

from fedanon.cli import main as cli_main
from fedanon.errors import InputError, PeerError, ProtocolError
from fedanon.parties.config import Limits, PartyConfig, RunConfig, RunPartyEntry, load_party_config
from fedanon.parties.coordinator import Coordinator
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.parties.pki.tls import channel_options
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc

PARTIES = [SimulatedParty("p1", "primary"), SimulatedParty("p2", "primary"), SimulatedParty("p3", "helper")]
LIMITS = Limits(idle_stream_s=2.0, prepared_ttl_s=3.0, heartbeat_s=1.0, max_streams_per_peer=4)


@pytest.fixture(scope="module")
def net():
    with SimulatedNetwork(PARTIES, limits=LIMITS) as network:
        yield network


def _stub(net: SimulatedNetwork, caller: str, target: str) -> tuple[grpc.Channel, pb_grpc.PartyStub]:
    cert, key, ca = net.tls(caller).read()
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    ch = grpc.secure_channel(net.address(target), creds, options=channel_options(Limits(), target))
    return ch, pb_grpc.PartyStub(ch)


def _prepare(net: SimulatedNetwork, names: tuple[str, ...] = ("p1", "p2")) -> Coordinator:
    roles = {n: ("helper" if i == len(names) - 1 else "primary") for i, n in enumerate(names)}
    cfg = RunConfig(coordinator="coordinator", tls=net.tls("coordinator"), protocol="CHECK",
                    distribution="horizontal", parties=[RunPartyEntry(n, net.address(n), r) for n, r in roles.items()],
                    result_recipient=names[0], privacy={}, options={}, output=None, report=None, limits=LIMITS)
    coordinator = Coordinator(cfg)
    coordinator.prepare_all(coordinator.request())
    return coordinator


def _log(net: SimulatedNetwork, name: str) -> str:
    return (net.dir / "logs" / f"{name}.log").read_text(errors="replace")


def _log_with(net: SimulatedNetwork, name: str, text: str, within_s: float = 10.0) -> str:
    """The daemon's log once it holds `text` (or as it is after `within_s`): the daemon writes
    its line after the peer already sees the effect (a cut stream), so reading at once raced."""
    deadline = time.monotonic() + within_s
    log = _log(net, name)
    while text not in log and time.monotonic() < deadline:
        time.sleep(0.05)
        log = _log(net, name)
    return log


def _blocking(first: pb.Chunk | None, release: threading.Event):
    """A request stream that sends `first` (if any) and then stays open, silent, until released."""
    if first is not None:
        yield first
    release.wait(60)


# ---------------------------------------------------------------------------- streams and buffers

def test_idle_streams_are_capped_per_peer_and_cut_when_idle(net: SimulatedNetwork) -> None:
    release = threading.Event()
    ch, stub = _stub(net, "p2", "p1")
    try:
        calls = [stub.Deliver.future(_blocking(None, release), timeout=30) for _ in range(40)]
        errors = [c.exception(timeout=20) for c in calls]
        refused = [e for e in errors if e is not None and e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        cut = [e for e in errors if e is not None and e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) == 36 and "'p2'" in refused[0].details() and "max_streams_per_peer" in refused[0].details()
        assert len(cut) == 4  # the admitted four were cut after limits.idle_stream_s without data
        assert "cut a message stream from 'p2'" in _log_with(net, "p1", "cut a message stream from 'p2'")
    finally:
        release.set()
        ch.close()


def test_the_daemon_serves_others_while_a_peer_holds_all_its_streams() -> None:
    """p2 holds its four admitted streams open (idle limit 60 s here, so nothing is cut during
    the test) and tries 36 more; p3's ping must be answered while all four are still held.

    Before issue 11 the held streams took every RPC thread, so the ping waited for them. Here it
    gets 20 s and no clock bound: a loaded machine may be slow but not wrong, and a starved daemon
    could answer only after the streams end (60 s), which the ping's deadline and the check that
    all four are still open both catch.
    """
    patient = Limits(idle_stream_s=60.0, prepared_ttl_s=3.0, heartbeat_s=1.0, max_streams_per_peer=4)
    release = threading.Event()
    with SimulatedNetwork(PARTIES, limits=patient) as quiet_net:
        ch, stub = _stub(quiet_net, "p2", "p1")
        try:
            calls = [stub.Deliver.future(_blocking(None, release), timeout=90) for _ in range(40)]
            deadline = time.monotonic() + 20
            while sum(c.done() for c in calls) < 36 and time.monotonic() < deadline:
                time.sleep(0.05)  # the 36 beyond the limit are refused at once
            held = [c for c in calls if not c.done()]
            assert len(held) == 4
            ch3, stub3 = _stub(quiet_net, "p3", "p1")
            assert stub3.Ping(pb.PingRequest(), timeout=20).name == "p1"
            ch3.close()
            assert not any(c.done() for c in held), "the ping was answered only after p2's streams ended"
        finally:
            release.set()
            ch.close()


def test_a_stream_announcing_more_than_the_run_buffer_is_refused_before_buffering(net: SimulatedNetwork) -> None:
    coordinator = _prepare(net)
    release = threading.Event()
    ch, stub = _stub(net, "p2", "p1")
    try:
        first = pb.Chunk(run_id=coordinator.run_id, sender="p2", topic="huge", total_size=(4 << 30) - 1,
                         data=b"x" * 1024)
        call = stub.Deliver.future(_blocking(first, release), timeout=30)
        err = call.exception(timeout=10)  # refused while the sender still holds the stream open
        assert err is not None and err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "from 'p2'" in err.details() and "max_run_buffer_mib" in err.details()
    finally:
        release.set()
        ch.close()
        coordinator.abort_all("test over")
        coordinator.close()


def test_prepared_but_never_started_runs_expire(net: SimulatedNetwork) -> None:
    coordinator = _prepare(net)
    ch, stub = _stub(net, "p2", "p1")
    try:
        stub.Deliver(iter([pb.Chunk(run_id=coordinator.run_id, sender="p2", topic="early", total_size=3,
                                    data=b"abc")]), timeout=5)
        deadline = time.monotonic() + 10
        reply = stub.Ping(pb.PingRequest(run_id=coordinator.run_id), timeout=5)
        while reply.run_state == "prepared" and time.monotonic() < deadline:
            time.sleep(0.2)
            reply = stub.Ping(pb.PingRequest(run_id=coordinator.run_id), timeout=5)
        assert reply.run_state == "failed" and "expired" in reply.detail and "prepared_ttl_s" in reply.detail
        with pytest.raises(grpc.RpcError) as err:  # nothing more is kept for it
            stub.Deliver(iter([pb.Chunk(run_id=coordinator.run_id, sender="p2", topic="late", total_size=1,
                                        data=b"x")]), timeout=5)
        assert err.value.code() == grpc.StatusCode.ABORTED
    finally:
        ch.close()
        coordinator.close()


def test_malformed_rosters_are_refused_with_a_reason_not_an_internal_error(net: SimulatedNetwork) -> None:
    ch, stub = _stub(net, "coordinator", "p1")
    good = [pb.PartyRole(name="p1", role="primary"), pb.PartyRole(name="p2", role="helper")]
    cases = {
        "listed twice": pb.RunRequest(run_id="r1", protocol="CHECK", distribution="horizontal",
                                      parties=good + [pb.PartyRole(name="p1", role="helper")], result_recipient="p1"),
        "has role": pb.RunRequest(run_id="r2", protocol="CHECK", distribution="horizontal",
                                  parties=[good[0], pb.PartyRole(name="p2", role="boss")], result_recipient="p1"),
        "result recipient": pb.RunRequest(run_id="r3", protocol="CHECK", distribution="horizontal", parties=good,
                                          result_recipient="nobody"),
        "JSON objects": pb.RunRequest(run_id="r4", protocol="CHECK", distribution="horizontal", parties=good,
                                      result_recipient="p1", config_json="[1, 2]"),
        "invalid privacy config": pb.RunRequest(run_id="r5", protocol="B", distribution="horizontal", parties=good,
                                                result_recipient="p1", config_json='{"k": "many"}'),
        "run id": pb.RunRequest(run_id="", protocol="CHECK", distribution="horizontal", parties=good,
                                result_recipient="p1"),
    }
    try:
        for expected, request in cases.items():
            with pytest.raises(grpc.RpcError) as err:
                stub.Prepare(request, timeout=10)
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION, expected
            assert expected in err.value.details() and "internal error" not in err.value.details(), err.value.details()
        assert stub.Ping(pb.PingRequest(), timeout=5).name == "p1"  # still serving
    finally:
        ch.close()


def test_snappy_blocks_declaring_more_than_the_limit_are_refused_before_decompression() -> None:
    from fedanon.parties.wire.resultwire import decode_result
    from fedanon.protocols.kit import codec

    bomb = snappy.compress(b"\0" * (64 << 20))  # 3 MB on the wire, 64 MiB when expanded
    with codec.decompression_limit(8 << 20):
        with pytest.raises(ProtocolError, match="above the limit"):
            codec.decode_table(bomb, "table of p2")
        with pytest.raises(ProtocolError, match="above the limit"):
            decode_result(bomb)
    with pytest.raises(ProtocolError, match="no Snappy length header"):
        codec.checked_uncompress(b"\xff\xff\xff\xff\xff\xff", "message")
    assert len(codec.checked_uncompress(snappy.compress(b"ok" * 10), "message")) == 20  # control


# ---------------------------------------------------------------------------- hung peers

def _stamp(line: str) -> float:
    ts = re.search(r"ts=(\S+)Z", line).group(1)  # type: ignore[union-attr]
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%f").timestamp()


@pytest.mark.slow
def test_a_stopped_peer_is_reported_unresponsive_by_name_within_two_heartbeats(tmp_path: Path) -> None:
    heartbeat = 1.5
    with SimulatedNetwork(PARTIES, limits=Limits(heartbeat_s=heartbeat)) as net:
        holding = threading.Event()

        def on_event(party: str, phase: str, state: str, _t: float) -> None:
            if party == "p1" and phase == "hold" and state == "start":
                holding.set()

        stopped_at: list[float] = []

        def stop_p3() -> None:
            if holding.wait(30):
                time.sleep(0.3)
                stopped_at.append(time.time())
                net.kill("p3", signal.SIGSTOP)

        threading.Thread(target=stop_p3, daemon=True).start()
        try:
            with pytest.raises(PeerError) as err:
                net.run("check", options={"hold_s": 60, "hold_parties": ["p1", "p2"]}, on_event=on_event)
        finally:
            if net.procs["p3"].poll() is None:
                net.procs["p3"].send_signal(signal.SIGCONT)
        message = str(err.value)
        assert "'p3'" in message and "unresponsive" in message and "certificate" not in message, message
        failed = [line for line in _log(net, "p1").splitlines() if "event=run_failed" in line]
        assert failed and "unresponsive" in failed[0]
        detected_after = _stamp(failed[0]) - stopped_at[0]
        assert detected_after <= 2 * heartbeat + 1.0, f"p1 noticed the stopped p3 only after {detected_after:.1f} s"


# ---------------------------------------------------------------------------- limits in configs

@pytest.mark.parametrize("line, key", [
    ("max_payload_mib = 0", "max_payload_mib"), ("max_payload_mib = -1", "max_payload_mib"),
    ("rpc_timeout_s = nan", "rpc_timeout_s"), ("heartbeat_s = inf", "heartbeat_s"),
    ("idle_stream_s = -3.5", "idle_stream_s"), ("max_streams_per_peer = 0", "max_streams_per_peer"),
    ("prepared_ttl_s = 0", "prepared_ttl_s"), ("max_decompressed_mib = true", "max_decompressed_mib"),
    ("no_such_limit = 1", "no_such_limit"),
    # finite and positive, but implausible: a ping storm, a thread pool of millions
    ("heartbeat_s = 1e-9", "heartbeat_s"), ("max_streams_per_peer = 1000000", "max_streams_per_peer"),
    ("heartbeat_s = 7200", "heartbeat_s"), ("idle_stream_s = 0.01", "idle_stream_s"),
    ("rpc_timeout_s = 0.001", "rpc_timeout_s"), ("max_payload_mib = 10000000", "max_payload_mib"),
])
def test_check_config_rejects_nonsense_limits(tmp_path: Path, capsys, line: str, key: str) -> None:
    path = tmp_path / "party.toml"
    path.write_text('[party]\nname = "p1"\nlisten = "127.0.0.1:7001"\n'
                    '[tls]\ncert = "p1.crt"\nkey = "p1.key"\nca = "ca.crt"\n'
                    f"[limits]\n{line}\n")
    assert cli_main(["party", "check-config", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and key in err and "Traceback" not in err


def test_daemon_start_up_validates_limits_it_was_given(tmp_path: Path) -> None:
    from fedanon.parties.daemon import PartyDaemon
    from fedanon.parties.config import TlsFiles

    cfg = PartyConfig(name="p1", listen="127.0.0.1:0", tls=TlsFiles(tmp_path / "a", tmp_path / "b", tmp_path / "c"),
                      peers={}, coordinators=[], limits=Limits(heartbeat_s=float("inf")))
    with pytest.raises(InputError, match="heartbeat_s"):
        PartyDaemon(cfg)


def test_default_limits_load_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "party.toml"
    path.write_text('[party]\nname = "p1"\nlisten = "127.0.0.1:7001"\n'
                    '[tls]\ncert = "p1.crt"\nkey = "p1.key"\nca = "ca.crt"\n[limits]\nmax_run_buffer_mib = 64\n')
    limits = load_party_config(path).limits
    assert limits.max_run_buffer_bytes == 64 << 20 and limits.heartbeat_s == Limits().heartbeat_s
