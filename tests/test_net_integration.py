"""Integration tests over real gRPC + mutual TLS on loopback, one OS process per party daemon."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import pytest
import tomli_w

from fedanon.cli import main as cli_main
from fedanon.errors import FedanonError, PeerError
from fedanon.parties.pki import certs
from fedanon.parties.config import Limits, RunPartyEntry, TlsFiles, run_config_dict
from fedanon.parties.coordinator import Coordinator
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty, run_simulation
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc

PARTIES = [SimulatedParty("p1", "primary"), SimulatedParty("p2", "primary"), SimulatedParty("p3", "helper")]


@pytest.fixture(scope="module")
def net():
    with SimulatedNetwork(PARTIES, keep_ca_key=True) as network:  # tests below issue extra certificates
        yield network


def _log(net: SimulatedNetwork, name: str) -> str:
    return (net.dir / "logs" / f"{name}.log").read_text(errors="replace")


def _wait_for(predicate, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------- a normal run

def test_check_run_between_three_daemons(net: SimulatedNetwork) -> None:
    phases: list[tuple[str, str, str]] = []
    outcome = net.run("check", on_event=lambda party, phase, state, _t: phases.append((party, phase, state)))
    assert outcome.output_columns == ["party", "peer", "rtt_ms"]
    assert sorted(r[1] for r in outcome.output_rows or []) == ["p2", "p3"]
    reports = outcome.report["party_reports"]
    assert set(reports) == {"p1", "p2", "p3"}
    for name, rep in reports.items():
        others = {"p1", "p2", "p3"} - {name}
        assert set(rep["rtt_ms"]) == others and all(v > 0 for v in rep["rtt_ms"].values())
        traffic = rep["traffic"]
        # two 32-byte messages (nonce + echo) to and from each of two peers
        assert traffic["bytes_sent_by_phase"] == {"check": 4 * 32}
        assert traffic["bytes_received_by_phase"] == {"check": 4 * 32}
        assert traffic["wire_bytes_sent_by_phase"]["check"] > 4 * 32  # headers on the wire
    assert {(p, "check", s) for p in ("p1", "p2", "p3") for s in ("start", "end")} <= set(phases)


def test_cli_run_writes_result_and_report(net: SimulatedNetwork, tmp_path: Path, capsys) -> None:
    cfg = net.run_config("check")
    cfg.output, cfg.report = tmp_path / "result.csv", tmp_path / "report.json"
    run_toml = tmp_path / "run.toml"
    run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
    assert cli_main(["run", "--config", str(run_toml), "--no-progress"]) == 0
    lines = (tmp_path / "result.csv").read_text().splitlines()
    assert lines[0] == "party;peer;rtt_ms" and len(lines) == 3
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["protocol"] == "CHECK" and set(report["party_reports"]) == {"p1", "p2", "p3"}
    assert "finished" in capsys.readouterr().err


def test_run_simulation_one_call(tmp_path: Path) -> None:
    result = run_simulation([SimulatedParty("a", "primary"), SimulatedParty("b", "helper")], "check", "horizontal",
                            None, "a", output=tmp_path / "out.csv", report=tmp_path / "rep.json")
    assert result.output_rows is not None and [r[:2] for r in result.output_rows] == [["a", "b"]]
    assert (tmp_path / "out.csv").exists() and json.loads((tmp_path / "rep.json").read_text())["run_id"]


# ---------------------------------------------------------------------------- who may talk

def _ping(net: SimulatedNetwork, creds: grpc.ChannelCredentials, target: str = "p1") -> pb.PingReply:
    from fedanon.parties.pki.tls import channel_options

    with grpc.secure_channel(net.address(target), creds, options=channel_options(Limits(), target)) as ch:
        return pb_grpc.PartyStub(ch).Ping(pb.PingRequest(), timeout=5)


def _creds(tls: TlsFiles) -> grpc.ChannelCredentials:
    cert, key, ca = tls.read()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def test_client_without_certificate_is_refused(net: SimulatedNetwork) -> None:
    ca = (net.cert_dir / "ca.crt").read_bytes()
    with pytest.raises(grpc.RpcError) as err:
        _ping(net, grpc.ssl_channel_credentials(root_certificates=ca))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    # the control case: a listed coordinator gets through
    assert _ping(net, _creds(net.tls("coordinator"))).name == "p1"


def test_certificate_from_another_ca_is_refused(net: SimulatedNetwork, tmp_path: Path) -> None:
    certs.init_ca(tmp_path)
    certs.issue(tmp_path, "coordinator")  # the right name, but the wrong CA
    foreign = TlsFiles(cert=tmp_path / "coordinator.crt", key=tmp_path / "coordinator.key",
                       ca=net.cert_dir / "ca.crt")
    with pytest.raises(grpc.RpcError) as err:
        _ping(net, _creds(foreign))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    cfg = net.run_config("check")
    cfg.tls = foreign
    with pytest.raises(PeerError, match=r"party 'p\d'.*unreachable"):
        Coordinator(cfg).run()


def test_valid_certificate_not_on_allow_list_is_refused(net: SimulatedNetwork) -> None:
    certs.issue(net.cert_dir, "mallory", hosts=["127.0.0.1"])
    with pytest.raises(grpc.RpcError) as err:
        _ping(net, _creds(net.tls("mallory")))
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "'mallory'" in (err.value.details() or "") and "allow-list" in (err.value.details() or "")
    cfg = net.run_config("check", coordinator="mallory")
    with pytest.raises(PeerError, match=r"refused the call.*'mallory'.*allow-list"):
        Coordinator(cfg).run()
    assert "event=refused" in _log(net, "p1") and "caller=mallory" in _log(net, "p1")


def test_peer_may_not_act_as_coordinator_or_spoof_a_sender(net: SimulatedNetwork) -> None:
    from fedanon.parties.pki.tls import channel_options

    with grpc.secure_channel(net.address("p1"), _creds(net.tls("p2")), options=channel_options(Limits(), "p1")) as ch:
        stub = pb_grpc.PartyStub(ch)
        with pytest.raises(grpc.RpcError) as err:
            stub.Prepare(pb.RunRequest(run_id="x", protocol="CHECK"), timeout=5)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with pytest.raises(grpc.RpcError) as err:
            stub.Deliver(iter([pb.Chunk(run_id="x", sender="p3", topic="t", total_size=1, data=b"a")]), timeout=5)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED and "may not send as 'p3'" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:  # the one-chunk call checks the same
            stub.Post(pb.Chunk(run_id="x", sender="p3", topic="t", total_size=1, data=b"a"), timeout=5)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED and "may not send as 'p3'" in err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            stub.Post(pb.Chunk(run_id="x", sender="p2", topic="t", total_size=1, data=b"a"), timeout=5)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "does not know run 'x'" in err.value.details()


def test_unreachable_party_and_unknown_protocol_are_clear_errors(net: SimulatedNetwork, tmp_path: Path) -> None:
    from fedanon.parties.simulation import free_port

    cfg = net.run_config("check")
    cfg.parties.append(RunPartyEntry("p9", f"127.0.0.1:{free_port()}", "primary"))
    with pytest.raises(PeerError, match=r"party 'p9' at 127\.0\.0\.1:\d+ is unreachable"):
        Coordinator(cfg).run()
    with pytest.raises(PeerError, match=r"rejected the run.*unknown protocol 'NOPE'"):
        net.run("nope", config={"quasi_identifiers": ["age"], "k": 2})


# ---------------------------------------------------------------------------- large payloads

def _vm_mib(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no {field}")


def test_200mb_payload_streams_within_memory_bounds() -> None:
    mib = 200
    # a network of its own: the receiver's lifetime peak then belongs to this payload alone
    with SimulatedNetwork(PARTIES) as net:
        net.run("check")  # channels, TLS and the role code warmed up before the baseline is read
        baseline = _vm_mib(net.pid("p2"), "VmRSS")
        outcome = net.run("check", options={"bulk_mb": mib, "bulk_from": "p1", "bulk_to": "p2"})
        peak = _vm_mib(net.pid("p2"), "VmHWM")  # peak RSS of the receiving daemon over its whole life
    reports = outcome.report["party_reports"]
    assert reports["p2"]["bulk_bytes_received"] == mib << 20
    assert reports["p1"]["traffic"]["bytes_sent_by_phase"]["bulk"] == mib << 20
    # the sender verified the receiver's SHA-256 of the payload, so it arrived intact
    assert reports["p1"]["bulk_mib_per_s"] > 0
    assert abs(peak - reports["p2"]["peak_rss_mib"]) < 64
    # growth of 1x the payload plus buffers; a copy-per-chunk or join-and-copy design needs 2x or more
    assert peak - baseline < 1.75 * mib, \
        f"receiver grew {peak - baseline:.0f} MiB (baseline {baseline:.0f}, peak {peak:.0f}) for a {mib} MiB payload"


# ---------------------------------------------------------------------------- failures mid-run

def _write_run_toml(net: SimulatedNetwork, tmp_path: Path, **options) -> tuple[Path, Path, Path]:
    cfg = net.run_config("check", options=options)
    cfg.output, cfg.report = tmp_path / "result.csv", tmp_path / "report.json"
    path = tmp_path / "run.toml"
    path.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
    return path, cfg.output, cfg.report


def test_killing_a_daemon_mid_run_stops_everyone_then_a_new_run_works(tmp_path: Path) -> None:
    with SimulatedNetwork(PARTIES) as net:
        run_toml, output, report = _write_run_toml(net, tmp_path, hold_s=60, hold_parties=["p3"])
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        coordinator = subprocess.Popen([sys.executable, "-m", "fedanon", "run", "--config", str(run_toml), "--no-progress"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert _wait_for(lambda: "phase=hold state=start" in _log(net, "p3")), "run never reached the hold phase"
            t0 = time.monotonic()
            net.kill("p3")  # SIGKILL: no goodbye, no abort message
            out, err = coordinator.communicate(timeout=30)
        finally:
            if coordinator.poll() is None:
                coordinator.kill()
        elapsed = time.monotonic() - t0
        assert coordinator.returncode != 0
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("fedanon run: error:") and "'p3'" in lines[0], err
        assert "Traceback" not in err
        assert elapsed < 15
        assert not output.exists() and not report.exists()
        assert [p for p in tmp_path.iterdir() if p.suffix == ".tmp"] == []
        for survivor in ("p1", "p2"):
            assert _wait_for(lambda: "event=run_failed" in _log(net, survivor), 10), f"{survivor} kept running"
            failed = [ln for ln in _log(net, survivor).splitlines() if "event=run_failed" in ln]
            assert "p3" in failed[-1]
        net.restart("p3")
        ok = net.run("check")
        assert ok.output_rows is not None and len(ok.output_rows) == 2


def test_parties_detect_a_dead_peer_on_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the coordinator's abort, the waiting parties' heartbeat must still name the dead peer."""
    monkeypatch.setattr(Coordinator, "abort_all", lambda self, reason, skip=None: None)
    # nor may it hang up on them (a cancelled stream tells a party too): it waits for both reasons,
    # however slowly a loaded machine lets the heartbeat find the dead peer
    monkeypatch.setattr("fedanon.parties.coordinator.COLLECT_AFTER_ABORT_S", 120.0)
    with SimulatedNetwork(PARTIES) as net:
        holding = threading.Event()

        def on_event(party: str, phase: str, state: str, _t: float) -> None:
            if party == "p3" and phase == "hold" and state == "start":
                holding.set()

        threading.Thread(target=lambda: (holding.wait(20), net.kill("p3")), daemon=True).start()
        with pytest.raises(PeerError, match="p3") as raised:
            net.run("check", options={"hold_s": 60, "hold_parties": ["p3"]}, on_event=on_event)
        for survivor in ("p1", "p2"):
            assert _wait_for(lambda: "event=run_failed" in _log(net, survivor), 10)
            failed = [ln for ln in _log(net, survivor).splitlines() if "event=run_failed" in ln][-1]
            assert "party 'p3'" in failed and "unreachable" in failed, \
                f"coordinator: {raised.value}\n" + "\n".join(_log(net, p)[-1500:] for p in ("p1", "p2"))


def test_a_failing_party_aborts_the_run_everywhere(net: SimulatedNetwork) -> None:
    t0 = time.monotonic()
    with pytest.raises(PeerError, match=r"at party 'p2'.*diagnostic failure"):
        net.run("check", options={"hold_s": 60, "hold_parties": ["p1", "p3"], "fail_party": "p2"})
    assert time.monotonic() - t0 < 20  # not the 60 s hold, not a 300 s receive timeout
    ok = net.run("check")
    assert ok.output_rows is not None


def test_sigterm_shuts_a_daemon_down_gracefully_and_aborts_its_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # the coordinator stays silent, so the peers can only learn it from the stopping daemon itself
    monkeypatch.setattr(Coordinator, "abort_all", lambda self, reason, skip=None: None)
    with SimulatedNetwork(PARTIES) as net:
        holding = threading.Event()

        def on_event(party: str, phase: str, state: str, _t: float) -> None:
            if party == "p1" and phase == "hold" and state == "start":
                holding.set()

        def terminate() -> None:
            holding.wait(20)
            net.procs["p2"].send_signal(signal.SIGTERM)

        threading.Thread(target=terminate, daemon=True).start()
        with pytest.raises(FedanonError, match="p2"):
            net.run("check", options={"hold_s": 60}, on_event=on_event)
        assert net.procs["p2"].wait(15) == 0
        assert "event=stopped" in _log(net, "p2")
        # each peer's run fails with p2's own reason: from p2's Abort, or from a delivery p2 refused mid-send
        for peer in ("p1", "p3"):
            assert _wait_for(lambda: any("event=run_failed" in line and "p2: party is shutting down" in line
                                         for line in _log(net, peer).splitlines()), 30), _log(net, peer)[-3000:]


def test_two_runs_at_once_keep_their_messages_apart(net: SimulatedNetwork) -> None:
    results: dict[int, object] = {}

    def go(i: int) -> None:
        try:
            results[i] = net.run("check", options={"bulk_mb": 2, "bulk_from": "p2", "bulk_to": "p3"})
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results[i] = exc

    threads = [threading.Thread(target=go, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(not isinstance(r, Exception) for r in results.values()), results
    run_ids = {r.run_id for r in results.values()}  # type: ignore[attr-defined]
    assert len(run_ids) == 3
    for r in results.values():
        assert r.report["party_reports"]["p3"]["bulk_bytes_received"] == 2 << 20  # type: ignore[attr-defined]


def test_reusing_a_run_id_is_refused(net: SimulatedNetwork) -> None:
    cfg = net.run_config("check")
    cfg.run_id = "fixed-run-id-1"
    Coordinator(cfg).run()
    with pytest.raises(PeerError, match="already has run 'fixed-run-id-1'"):
        Coordinator(cfg).run()


def test_payload_above_the_limit_is_refused(tmp_path: Path) -> None:
    with SimulatedNetwork(PARTIES[:2], limits=Limits(max_payload_bytes=1 << 20)) as small:
        with pytest.raises(PeerError, match=r"above the limit of 1048576 bytes"):
            small.run("check", options={"bulk_mb": 2, "bulk_from": "p1", "bulk_to": "p2"})
        assert small.run("check", options={"bulk_mb": 0.5, "bulk_from": "p1", "bulk_to": "p2"}).output_rows


def test_coordinator_death_aborts_the_run_at_every_party(tmp_path: Path) -> None:
    with SimulatedNetwork(PARTIES) as net:
        run_toml, output, _report = _write_run_toml(net, tmp_path, hold_s=60)
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
        coordinator = subprocess.Popen([sys.executable, "-m", "fedanon", "run", "--config", str(run_toml), "--no-progress"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        try:
            assert _wait_for(lambda: all("phase=hold state=start" in _log(net, p) for p in ("p1", "p2", "p3")))
        finally:
            coordinator.kill()
            coordinator.wait(10)
        for party in ("p1", "p2", "p3"):
            assert _wait_for(lambda: "event=run_failed" in _log(net, party), 10), f"{party} kept running"
        assert "disconnected" in _log(net, "p1")
        assert not output.exists()
        assert net.run("check").output_rows is not None


def test_protocol_b_over_daemons_logs_no_cell_values(tmp_path: Path) -> None:
    """A real data run through `fedanon run` (with the live progress table): daemon logs carry metadata only."""
    pytest.importorskip("fedanon.protocols.b.protocol")
    example = Path(__file__).resolve().parent.parent / "fedanon" / "data" / "example"
    lines = (example / "example.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    shares = {"p1": rows[:4], "p2": rows[4:]}
    for name, part in shares.items():
        (tmp_path / f"{name}.csv").write_text("\n".join([header, *part]) + "\n")
    qis = {a: example / f"example_hierarchy_{a}.csv" for a in ("age", "sex", "zipcode")}
    parties = [SimulatedParty(name, "primary", csv_path=tmp_path / f"{name}.csv", qi_hierarchies=qis,
                              sensitive={"diagnosis": None}) for name in shares]
    parties.append(SimulatedParty("h", "helper"))
    with SimulatedNetwork(parties, log_level="debug") as net:
        cfg = net.run_config("B", config={"quasi_identifiers": ["age", "sex", "zipcode"], "k": 2,
                                          "suppression": 0.0, "metric": "nonuniform-entropy"})
        cfg.output, cfg.report = tmp_path / "out.csv", tmp_path / "report.json"
        run_toml = tmp_path / "run.toml"
        run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
        assert cli_main(["run", "--config", str(run_toml)]) == 0
        out = (tmp_path / "out.csv").read_text().splitlines()
        assert len(out) == 1 + len(rows)
        report = json.loads((tmp_path / "report.json").read_text())
        _assert_equals_verified_central(example, tmp_path / "out.csv", report, ["age", "sex", "zipcode"], k=2)
        helper = report["party_reports"]["h"]["traffic"]
        assert sum(helper["bytes_received_by_phase"].values()) > 0
        assert sum(helper["wire_bytes_received_by_phase"].values()) >= sum(helper["bytes_received_by_phase"].values())
        logs = "".join(_log(net, n) for n in ("p1", "p2", "h"))
        assert "event=delivered" in logs  # debug logging was on, so every message was logged
        # a message of one chunk travels as one unary Post, a longer one as a Deliver stream
        delivered = re.findall(r"event=delivered .*?bytes=(\d+) rpc=(\w+)", logs)
        assert delivered and {rpc for _, rpc in delivered} <= {"Post", "Deliver"}
        chunk = Limits().chunk_bytes
        assert all((rpc == "Post") == (int(n) <= chunk) for n, rpc in delivered), delivered
        assert any(rpc == "Post" for _, rpc in delivered)
        # the non-numeric cells (numbers could collide with byte counts): sex and diagnosis values
        words = {c for row in rows for c in row.split(";") if c.isalpha()}
        assert words == {"male", "female", "pneumonia", "gastritis"}
        for cell in words:
            assert not re.search(rf"\b{cell}\b", logs), f"cell value {cell!r} appears in a daemon log"


def _assert_equals_verified_central(example: Path, out_csv: Path, report: dict, qis: list[str], k: int) -> None:
    """The daemons' release equals the centralized result and passes the independent verifier."""
    from fedanon.model.config import AnonymizationConfig
    from fedanon.data.io.delimited import read_table_csv
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.protocols.sim.equivalence import centralized, differences

    columns, pooled = read_table_csv(example / "example.csv")
    hierarchies = {a: Hierarchy.read_csv(example / f"example_hierarchy_{a}.csv", a) for a in qis}
    central = centralized(columns, pooled, hierarchies, AnonymizationConfig(qis, k=k))
    out_columns, out_rows = read_table_csv(out_csv)
    transformation = next(r["transformation"] for r in report["party_reports"].values() if "transformation" in r)
    assert differences(central, transformation, out_columns, out_rows) == []


def test_simulation_retries_when_a_chosen_port_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import fedanon.parties.simulation as sim

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        busy = blocker.getsockname()[1]
        real, calls = sim.free_port, [0]

        def first_one_busy() -> int:
            calls[0] += 1
            return busy if calls[0] == 1 else real()

        monkeypatch.setattr(sim, "free_port", first_one_busy)
        with SimulatedNetwork(PARTIES[:2]) as net:
            assert busy not in net.ports.values()
            assert net.run("check").output_rows is not None


@pytest.mark.slow
def test_readme_three_institutions_script(tmp_path: Path) -> None:
    """The manual's by-hand setup (docs/deployment/by-hand.md), executed: certs, configs, serve, `fedanon run` (check and Protocol B)."""
    pytest.importorskip("fedanon.protocols.b.protocol")
    from fedanon.parties.simulation import free_port

    script = Path(__file__).resolve().parent.parent / "deploy" / "three-institutions.sh"
    env = dict(os.environ, PYTHON=sys.executable, FEDANON_PORTS=" ".join(str(free_port()) for _ in range(3)),
               PYTHONPATH=str(script.parent.parent))
    proc = subprocess.run(["bash", str(script), str(tmp_path / "w")], env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = (tmp_path / "w" / "result.csv").read_text().splitlines()
    assert len(lines) == 1 + 30162
    report = json.loads((tmp_path / "w" / "report.json").read_text())
    assert set(report["party_reports"]) == {"clinic-a", "clinic-b", "trust-center"}


def test_only_the_runs_own_coordinator_and_parties_may_start_or_abort_it(tmp_path: Path) -> None:
    from fedanon.parties.pki.tls import channel_options

    parties = [*PARTIES, SimulatedParty("outsider", "primary")]
    with SimulatedNetwork(parties, keep_ca_key=True) as net:
        certs.issue(net.cert_dir, "coordinator2")
        # p1 trusts coordinator2 too (a second steward), but it did not prepare this run
        import tomllib

        doc = tomllib.loads(net.config_paths["p1"].read_text())
        doc["party"]["coordinators"].append("coordinator2")
        net.config_paths["p1"].write_bytes(tomli_w.dumps(doc).encode())
        net.restart("p1")
        run = net.run_config("check", options={"hold_s": 30})
        run.parties = [p for p in run.parties if p.name != "outsider"]
        coordinator = Coordinator(run)
        coordinator.ping_all()
        coordinator.prepare_all(coordinator.request())

        def call(as_name: str, method: str, request) -> grpc.StatusCode:
            opts = channel_options(Limits(), "p1")
            with grpc.secure_channel(net.address("p1"), _creds(net.tls(as_name)), options=opts) as ch:
                try:
                    reply = getattr(pb_grpc.PartyStub(ch), method)(request, timeout=5)
                    if method == "Start":
                        next(iter(reply))
                    return grpc.StatusCode.OK
                except grpc.RpcError as exc:
                    return exc.code()

        assert "coordinator2" in net.config_paths["p1"].read_text()
        assert call("coordinator2", "Start", pb.StartRequest(run_id=coordinator.run_id)) == grpc.StatusCode.PERMISSION_DENIED
        abort = pb.AbortRequest(run_id=coordinator.run_id, origin="x", reason="r")
        assert call("outsider", "Abort", abort) == grpc.StatusCode.PERMISSION_DENIED
        assert call("coordinator2", "Abort", abort) == grpc.StatusCode.PERMISSION_DENIED
        assert call("p2", "Abort", abort) == grpc.StatusCode.OK  # a party of the run may abort it
        coordinator.close()
