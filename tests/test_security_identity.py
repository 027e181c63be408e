"""Finding 1 of issue 11: the certificate CN is the party name, for servers as well as clients.

Every test here failed before the identity rule: an impostor certificate (CN `mallory`,
SAN `DNS:p2`, signed by the run CA) was accepted as server "p2" by the coordinator and by
a daemon's transport, `certs issue` produced such a certificate without a word, a caller
whose certificate named another party was served, and any allow-listed peer could read
any run's state with `Ping(run_id)`.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fedanon.cli import main as cli_main
from fedanon.errors import InputError, PeerError
from fedanon.parties.pki import certs
from fedanon.parties.config import Limits, RunConfig, RunPartyEntry, TlsFiles
from fedanon.parties.coordinator import Coordinator
from fedanon.parties.wire.grpc_transport import GrpcTransport, PeerLinks
from fedanon.parties.wire.inbox import RunInbox
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty, free_port
from fedanon.parties.pki.tls import ChannelPool, channel_options
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc

PARTIES = [SimulatedParty("p1", "primary"), SimulatedParty("p2", "primary"), SimulatedParty("p3", "helper")]


@pytest.fixture(scope="module")
def net():
    with SimulatedNetwork(PARTIES, keep_ca_key=True) as network:
        yield network


def forge(cert_dir: Path, out: Path, cn: str, dns: list[str]) -> TlsFiles:
    """A certificate signed by the run CA, built without `certs.issue` (as a careless CA operator might)."""
    ca_cert = x509.load_pem_x509_certificate((cert_dir / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((cert_dir / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=1)).not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256()))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{cn}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (out / f"{cn}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    return TlsFiles(cert=out / f"{cn}.crt", key=out / f"{cn}.key", ca=cert_dir / "ca.crt")


class Impostor(pb_grpc.PartyServicer):
    """A rogue server that claims to be `claimed`; optionally relays identity pings to the real party."""

    def __init__(self, claimed: str, relay: pb_grpc.PartyStub | None = None) -> None:
        self.claimed = claimed
        self.relay = relay
        self.delivered: list[bytes] = []

    def Ping(self, request, context):
        if self.relay is not None:
            return self.relay.Ping(request, timeout=5)
        return pb.PingReply(name=self.claimed, version="fedanon-party/1")

    def Deliver(self, request_iterator, context):
        n = 0
        for chunk in request_iterator:
            self.delivered.append(chunk.data)
            n += len(chunk.data)
        return pb.DeliverAck(received=n)

    def Post(self, request, context):
        self.delivered.append(request.data)
        return pb.DeliverAck(received=len(request.data))


def serve_impostor(tls: TlsFiles, servicer: Impostor) -> tuple[grpc.Server, str]:
    cert, key, ca = tls.read()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_PartyServicer_to_server(servicer, server)
    port = free_port()
    server.add_secure_port(f"127.0.0.1:{port}",
                           grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True))
    server.start()
    return server, f"127.0.0.1:{port}"


def _run_config(net: SimulatedNetwork, addresses: dict[str, str], roles: dict[str, str]) -> RunConfig:
    return RunConfig(coordinator="coordinator", tls=net.tls("coordinator"), protocol="CHECK",
                     distribution="horizontal", parties=[RunPartyEntry(n, addresses[n], roles[n]) for n in roles],
                     result_recipient=next(iter(roles)), privacy={}, options={}, output=None, report=None)


# ---------------------------------------------------------------------------- certs issue

def test_certs_issue_refuses_another_partys_name_as_host(tmp_path: Path, capsys) -> None:
    certs.init_ca(tmp_path)
    certs.issue(tmp_path, "clinic-b", hosts=["10.0.0.2"])
    assert cli_main(["certs", "issue", "mallory", "--dir", str(tmp_path), "--host", "clinic-b"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "clinic-b" in err and "another party" in err
    assert not (tmp_path / "mallory.crt").exists()


def test_certs_issue_refuses_non_hosts_and_names_already_claimed(tmp_path: Path) -> None:
    certs.init_ca(tmp_path)
    for bad in ["https://evil.example", "*.example.org", "a b", "-x.org", "x" * 300]:
        with pytest.raises(InputError, match="neither an IP address nor a host name"):
            certs.issue(tmp_path, "p1", hosts=[bad])
    certs.issue(tmp_path, "p1", hosts=["db.example.org", "::1", "127.0.0.1"])  # these are fine
    forge(tmp_path, tmp_path, "mallory", ["mallory", "p9"])  # someone else's certificate already claims p9
    with pytest.raises(InputError, match="already names 'p9'"):
        certs.issue(tmp_path, "p9")


# ---------------------------------------------------------------------------- servers verified by CN

def test_coordinator_refuses_server_whose_cn_is_not_the_name_dialled(net: SimulatedNetwork, tmp_path: Path) -> None:
    mallory = forge(net.cert_dir, tmp_path, "mallory", ["mallory", "p2"])
    rogue = Impostor("p2")
    server, address = serve_impostor(mallory, rogue)
    try:
        cfg = _run_config(net, {"p1": net.address("p1"), "p2": address}, {"p1": "primary", "p2": "helper"})
        with pytest.raises(PeerError, match="did not prove that it is party 'p2'"):
            Coordinator(cfg).run()
    finally:
        server.stop(0)


def test_coordinator_rejects_identity_relayed_from_the_real_party(net: SimulatedNetwork, tmp_path: Path) -> None:
    """The helper p3 serves a certificate with SAN p2 and relays the nonce to the real p2 with its own
    certificate: p2 signs that it answers *p3*, which the coordinator refuses."""
    rogue_tls = forge(net.cert_dir, tmp_path, "mallory", ["mallory", "p2"])
    cert, key, ca = net.tls("p3").read()
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    relay_channel = grpc.secure_channel(net.address("p2"), creds, options=channel_options(Limits(), "p2"))
    rogue = Impostor("p2", relay=pb_grpc.PartyStub(relay_channel))
    server, address = serve_impostor(rogue_tls, rogue)
    try:
        cfg = _run_config(net, {"p1": net.address("p1"), "p2": address}, {"p1": "primary", "p2": "helper"})
        with pytest.raises(PeerError, match="could not prove that it holds the key of 'p2'"):
            Coordinator(cfg).run()
    finally:
        server.stop(0)
        relay_channel.close()


def test_daemon_transport_delivers_nothing_to_an_impostor(net: SimulatedNetwork, tmp_path: Path) -> None:
    mallory = forge(net.cert_dir, tmp_path, "mallory", ["mallory", "p2"])
    rogue = Impostor("p2")
    server, address = serve_impostor(mallory, rogue)
    pool = ChannelPool(net.tls("p1"), Limits())
    try:
        transport = GrpcTransport("p1", "run-x", ["p1", "p2"], PeerLinks(pool, {"p2": address}), RunInbox(), Limits())
        with pytest.raises(PeerError, match="'p2'"):
            transport.send("p2", "secret", b"cell values for p2 only")
        assert rogue.delivered == []
        # control: the real p2 proves its identity, so verification itself is not what fails
        good = GrpcTransport("p1", "run-y", ["p1", "p2"], PeerLinks(pool, {"p2": net.address("p2")}), RunInbox(),
                             Limits())
        with pytest.raises(PeerError, match="does not know run"):  # reached p2 itself, which has no such run
            good.send("p2", "t", b"x")
    finally:
        pool.close()
        server.stop(0)


# ---------------------------------------------------------------------------- callers

def _ping_as(net: SimulatedNetwork, tls: TlsFiles, target: str, run_id: str = "") -> pb.PingReply:
    cert, key, ca = tls.read()
    creds = grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)
    with grpc.secure_channel(net.address(target), creds, options=channel_options(Limits(), target)) as ch:
        return pb_grpc.PartyStub(ch).Ping(pb.PingRequest(run_id=run_id), timeout=5)


def test_caller_whose_certificate_names_another_party_is_refused(net: SimulatedNetwork, tmp_path: Path) -> None:
    two_faced = forge(net.cert_dir, tmp_path, "p3", ["p3", "p2"])  # a peer's CN, plus another peer's name
    with pytest.raises(grpc.RpcError) as err:
        _ping_as(net, two_faced, "p1")
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED and "also names ['p2']" in err.value.details()
    assert _ping_as(net, net.tls("p3"), "p1").name == "p1"  # control: p3's own certificate is fine


def test_ping_of_a_run_answers_only_its_parties(net: SimulatedNetwork) -> None:
    cfg = _run_config(net, {n: net.address(n) for n in ("p1", "p2")}, {"p1": "primary", "p2": "helper"})
    coordinator = Coordinator(cfg)
    try:
        coordinator.prepare_all(coordinator.request())
        assert _ping_as(net, net.tls("p2"), "p1", coordinator.run_id).run_state == "prepared"
        with pytest.raises(grpc.RpcError) as err:
            _ping_as(net, net.tls("p3"), "p1", coordinator.run_id)  # allow-listed, but not in this run
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert _ping_as(net, net.tls("p3"), "p1", "no-such-run").run_state == "unknown"
        log = (net.dir / "logs" / "p1.log").read_text()
        refusal = [line for line in log.splitlines() if "refused" in line and coordinator.run_id in line]
        assert refusal and "p3" in refusal[-1] and "127.0.0.1" in refusal[-1]  # caller name and address
    finally:
        coordinator.abort_all("test over")
        coordinator.close()


def test_daemon_refuses_to_start_with_a_certificate_naming_a_peer(net: SimulatedNetwork, tmp_path: Path) -> None:
    from fedanon.parties.config import PartyConfig
    from fedanon.parties.daemon import check_identity

    tls = forge(net.cert_dir, tmp_path, "p1", ["p1", "p2"])
    cfg = PartyConfig(name="p1", listen="127.0.0.1:0", tls=tls, peers={"p2": "127.0.0.1:1"}, coordinators=[])
    with pytest.raises(InputError, match="may name only its own party"):
        check_identity(cfg)
