"""`fedanon party health`: healthy only when the party's own daemon answers as itself over mutual TLS."""

from __future__ import annotations

import subprocess
import sys

import grpc
import pytest

from fedanon.parties.wire.grpc_transport import describe_rpc_error
from fedanon.parties.wire.health import local_address
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty


def _health(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedanon", "party", "health", *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def net():
    with SimulatedNetwork([SimulatedParty("p1", "primary"), SimulatedParty("p2", "helper")]) as network:
        yield network


def test_healthy_daemon_answers_as_itself(net: SimulatedNetwork) -> None:
    done = _health("--config", str(net.config_paths["p1"]))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"healthy: party 'p1' answers at {net.address('p1')}")
    assert _health("--config", str(net.config_paths["p1"]), "--quiet").stdout == ""


def test_other_daemon_at_the_address_is_unhealthy(net: SimulatedNetwork) -> None:
    # p1's config pointed at p2's daemon: p2's certificate does not prove the name p1.
    done = _health("--config", str(net.config_paths["p1"]), "--address", net.address("p2"), "--timeout", "3")
    assert done.returncode == 1
    assert "unhealthy: party 'p1'" in done.stderr and "Traceback" not in done.stderr


def test_stopped_daemon_is_unhealthy_and_bad_config_is_exit_2(net: SimulatedNetwork, tmp_path) -> None:
    net.kill("p2")
    done = _health("--config", str(net.config_paths["p2"]), "--timeout", "2")
    assert done.returncode == 1
    assert f"no answer from {net.address('p2')}" in done.stderr
    missing = _health("--config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2 and "nope.toml" in missing.stderr and "Traceback" not in missing.stderr


def test_wildcard_listen_is_dialled_on_loopback() -> None:
    assert local_address("0.0.0.0:50051") == "127.0.0.1:50051"
    assert local_address("[::]:50051") == "[::1]:50051"
    assert local_address("10.0.0.1:50061") == "10.0.0.1:50061"


class _Unavailable(grpc.RpcError):
    def __init__(self, details: str) -> None:
        self._details = details

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return self._details


def _rpc_error(details: str) -> grpc.RpcError:
    return _Unavailable(details)


def test_tcp_timeout_is_not_reported_as_a_certificate_problem() -> None:
    # What gRPC says when a peer's link is down (seen in the namespace cut test).
    cut = describe_rpc_error("p2", _rpc_error("failed to connect to all addresses; last error: UNKNOWN: "
                                              "ipv4:10.213.0.2:50051: tcp handshaker shutdown"))
    assert "no TCP connection" in cut and "certificate" not in cut
    tls = describe_rpc_error("p2", _rpc_error("failed to connect to all addresses; last error: UNKNOWN: "
                                              "Ssl handshake failed: CERTIFICATE_VERIFY_FAILED"))
    assert "TLS handshake failed" in tls
