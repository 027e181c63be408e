"""Certificate revocation (issue 13): a fingerprint deny-list, over real daemons and real mutual TLS.

Without the list a stolen certificate of a party that keeps its name stays valid until the
CA is rotated: every test here fails then — the daemon serves the revoked client, the
coordinator and a daemon's channel pool accept the revoked server, and check-config
accepts a list it cannot read.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import grpc
import pytest
import tomli_w

from fedanon.cli import main as cli_main
from fedanon.model.config import AnonymizationConfig
from fedanon.errors import PeerError
from fedanon.parties.pki import certs
from fedanon.parties.config import Limits, PartyConfig, TlsFiles, party_config_dict, run_config_dict
from fedanon.parties.coordinator import Coordinator
from fedanon.parties.daemon import PartyDaemon
from fedanon.parties.pki.revocation import fingerprint
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.parties.pki.tls import ChannelPool, channel_options
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc

from example_parties import EXAMPLE_QIS, example_primaries


def _parties(folder: Path) -> list[SimulatedParty]:
    return [*example_primaries(folder), SimulatedParty("p3", "helper")]


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    folder = tmp_path_factory.mktemp("revocation-net")
    with SimulatedNetwork(_parties(folder), keep_ca_key=True) as network:
        yield network


def second_certificate(net: SimulatedNetwork, folder: Path, name: str) -> TlsFiles:
    """Another certificate for `name` from the run CA (a copy of the CA in `folder`; net's own files stay)."""
    folder.mkdir(parents=True, exist_ok=True)
    for f in (certs.CA_CERT, certs.CA_KEY):
        shutil.copy(net.cert_dir / f, folder / f)
    certs.issue(folder, name, hosts=["127.0.0.1", "localhost"])
    return TlsFiles(cert=folder / f"{name}.crt", key=folder / f"{name}.key", ca=folder / certs.CA_CERT)


def deny(tmp_path: Path, *cert_paths: Path) -> Path:
    """A revocation list written by the CLI, as the CA operator would."""
    listing = tmp_path / "revoked.txt"
    for cert in cert_paths:
        assert cli_main(["certs", "revoke", str(cert), "--list", str(listing)]) == 0
    return listing


def use_list(net: SimulatedNetwork, names: list[str], listing: Path) -> None:
    """Put `[tls] revoked` into these parties' config files and restart their daemons (the list is read at start)."""
    for name in names:
        path = net.config_paths[name]
        data = tomllib.loads(path.read_text())
        data["tls"]["revoked"] = str(listing)
        path.write_text(tomli_w.dumps(data))
        net.restart(name)


def ping_as(address: str, tls: TlsFiles, target: str) -> pb.PingReply:
    cert, key, ca = tls.read()
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    with grpc.secure_channel(address, creds, options=channel_options(Limits(), target)) as ch:
        return pb_grpc.PartyStub(ch).Ping(pb.PingRequest(), timeout=10)


def with_list(tls: TlsFiles, listing: Path | None) -> TlsFiles:
    return TlsFiles(cert=tls.cert, key=tls.key, ca=tls.ca, revoked=listing)


# ---------------------------------------------------------------------------- daemon refuses a revoked client

def test_daemon_refuses_a_revoked_client_certificate(net: SimulatedNetwork, tmp_path: Path) -> None:
    stolen = second_certificate(net, tmp_path / "stolen", "p3")  # CN p3, signed by the run CA, allow-listed name
    assert ping_as(net.address("p1"), stolen, "p1").name == "p1"  # before revocation it is served
    use_list(net, ["p1"], deny(tmp_path, stolen.cert))
    with pytest.raises(grpc.RpcError) as err:
        ping_as(net.address("p1"), stolen, "p1")
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "'p1'" in err.value.details() and "revoked certificate" in err.value.details()
    assert ping_as(net.address("p1"), net.tls("p3"), "p1").name == "p1"  # p3's own certificate is still fine
    refused = [line for line in (net.dir / "logs" / "p1.log").read_text().splitlines()
               if "refused" in line and "revoked certificate" in line]
    assert refused and "p3" in refused[-1] and "127.0.0.1" in refused[-1]  # name and address logged


# ---------------------------------------------------------------------------- callers refuse a revoked server

def test_coordinator_and_channel_pool_refuse_a_revoked_server_certificate(net: SimulatedNetwork,
                                                                          tmp_path: Path) -> None:
    listing = deny(tmp_path, net.cert_dir / "p2.crt")
    cfg = net.run_config("CHECK")
    coordinator = Coordinator(cfg)
    try:
        assert set(coordinator.ping_all()) == {"p1", "p2", "p3"}  # control: without the list all are fine
    finally:
        coordinator.close()
    cfg.tls = with_list(cfg.tls, listing)
    coordinator = Coordinator(cfg)
    try:
        with pytest.raises(PeerError, match=r"revoked certificate for 'p2'"):
            coordinator.ping_all()
    finally:
        coordinator.close()
    pool = ChannelPool(with_list(net.tls("p1"), listing), Limits())  # what a daemon's peer links use
    try:
        with pytest.raises(PeerError, match=r"revoked certificate for 'p2'"):
            pool.verified("p2", net.address("p2"), ["p1", "p2", "p3"])
        pool.verified("p3", net.address("p3"), ["p1", "p2", "p3"])  # an unrevoked server passes
    finally:
        pool.close()


# ---------------------------------------------------------------------------- rotation + revocation end to end

def test_rotated_certificate_works_and_the_old_one_is_refused_both_ways(tmp_path: Path) -> None:
    with SimulatedNetwork(_parties(tmp_path), keep_ca_key=True) as net:
        old = tmp_path / "old"
        old.mkdir()
        for suffix in (".crt", ".key"):
            shutil.copy(net.cert_dir / f"p2{suffix}", old / f"p2{suffix}")
        old_tls = TlsFiles(cert=old / "p2.crt", key=old / "p2.key", ca=net.cert_dir / certs.CA_CERT)
        certs.issue(net.cert_dir, "p2", hosts=["127.0.0.1", "localhost"])  # rotation: new key, same name
        assert fingerprint((net.cert_dir / "p2.crt").read_bytes()) != fingerprint(old_tls.cert.read_bytes())
        listing = deny(tmp_path, old_tls.cert)
        text = listing.read_text()
        assert fingerprint(old_tls.cert.read_bytes()) in text and "# p2 " in text
        use_list(net, ["p1", "p2", "p3"], listing)  # p2 restarts with its new certificate

        cfg = net.run_config("B", config=AnonymizationConfig(list(EXAMPLE_QIS), k=2))
        cfg.tls = with_list(cfg.tls, listing)
        outcome = Coordinator(cfg).run()
        assert outcome.output_rows and outcome.report  # the consortium runs with p2's new certificate

        with pytest.raises(grpc.RpcError) as err:  # the old certificate as a client
            ping_as(net.address("p1"), old_tls, "p1")
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED and "revoked certificate" in err.value.details()

        # the old certificate as a server: a real daemon run by whoever holds the stolen key
        thief = PartyDaemon(PartyConfig(name="p2", listen="127.0.0.1:0", tls=old_tls, peers={"p1": net.address("p1")},
                                        coordinators=["coordinator"]))
        thief.start()
        try:
            rogue = f"127.0.0.1:{thief.port}"
            cfg = net.run_config("CHECK")
            cfg.tls = with_list(cfg.tls, listing)
            cfg.parties = [p if p.name != "p2" else type(p)(p.name, rogue, p.role) for p in cfg.parties]
            with pytest.raises(PeerError, match=r"revoked certificate for 'p2'"):
                Coordinator(cfg).run()
            pool = ChannelPool(with_list(net.tls("p1"), listing), Limits())
            try:
                with pytest.raises(PeerError, match="revoked certificate"):
                    pool.verified("p2", rogue, ["p1", "p2", "p3"])
            finally:
                pool.close()
        finally:
            thief.stop(grace=0.5)


# ---------------------------------------------------------------------------- check-config and the CLI

def _party_config(net: SimulatedNetwork, tmp_path: Path, listing: Path) -> Path:
    cfg = PartyConfig(name="p1", listen="127.0.0.1:0", tls=with_list(net.tls("p1"), listing),
                      peers={"p2": net.address("p2")}, coordinators=["coordinator"])
    path = tmp_path / "p1.toml"
    path.write_text(tomli_w.dumps(party_config_dict(cfg)))
    return path


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_check_config_validates_the_revocation_list(net: SimulatedNetwork, tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nowhere" / "revoked.txt"
    assert cli_main(["party", "check-config", "--config", str(_party_config(net, tmp_path, missing))]) == 2
    assert str(missing) in _one_error_line(capsys)

    bad = tmp_path / "bad.txt"
    good_fp = fingerprint((net.cert_dir / "p2.crt").read_bytes())
    bad.write_text(f"# comment\n{good_fp}\nnot-a-fingerprint   # typo\n")
    assert cli_main(["party", "check-config", "--config", str(_party_config(net, tmp_path, bad))]) == 2
    line = _one_error_line(capsys)
    assert f"{bad}:3" in line and "not-a-fingerprint" in line

    own = deny(tmp_path, net.cert_dir / "p1.crt")
    assert cli_main(["party", "check-config", "--config", str(_party_config(net, tmp_path, own))]) == 2
    assert "own certificate is on the revocation list" in _one_error_line(capsys)

    colons = tmp_path / "openssl-style.txt"  # as `openssl x509 -fingerprint -sha256` prints it
    colons.write_text(":".join(good_fp[i:i + 2] for i in range(0, 64, 2)).upper() + "\n")
    assert cli_main(["party", "check-config", "--config", str(_party_config(net, tmp_path, colons))]) == 0
    assert "revoked: ok (1 certificates" in capsys.readouterr().out


def test_run_config_list_is_checked_before_any_party_is_contacted(net: SimulatedNetwork, tmp_path: Path,
                                                                   capsys) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("abc\n")
    cfg = net.run_config("CHECK")
    cfg.tls = with_list(cfg.tls, bad)
    path = tmp_path / "run.toml"
    path.write_text(tomli_w.dumps(run_config_dict(cfg)))
    assert cli_main(["run", "--config", str(path), "--no-progress"]) == 2
    line = _one_error_line(capsys)
    assert f"{bad}:1" in line and "'abc'" in line


def test_certs_revoke_appends_once_and_rejects_what_is_not_a_certificate(net: SimulatedNetwork, tmp_path: Path,
                                                                        capsys) -> None:
    listing = deny(tmp_path, net.cert_dir / "p2.crt", net.cert_dir / "p2.crt")  # twice: one entry
    entries = [line for line in listing.read_text().splitlines() if line and not line.startswith("#")]
    assert entries == [fingerprint((net.cert_dir / "p2.crt").read_bytes())]
    assert "already" in capsys.readouterr().out
    assert cli_main(["certs", "revoke", str(net.cert_dir / "p2.key"), "--list", str(listing)]) == 2
    assert "not a PEM certificate" in _one_error_line(capsys)
