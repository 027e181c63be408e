"""`fedanon party health`: is this party's own daemon serving, with its own identity?

Why: container healthchecks and service monitors need a yes/no that proves more than an
open port. The check dials the daemon's listen address over mutual TLS with the party's
own certificate, expecting the server to prove the party name (the TLS target name), and
calls `Ping`; the daemon answers its own name. So a healthy answer means: the process
serves, its certificate and key load, the run CA verifies them, and the name matches.
Only metadata is involved (no run, no data).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from fedanon.parties.config import PartyConfig
from fedanon.parties.pki.tls import client_credentials, open_channel
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]", "": "127.0.0.1"}


@dataclass
class Health:
    healthy: bool
    address: str
    detail: str          # one line: why not, or the daemon's version
    rtt_ms: float = 0.0


def local_address(listen: str) -> str:
    """The address to dial for a daemon listening on `listen` (wildcard hosts become loopback)."""
    host, _, port = listen.rpartition(":")
    return f"{_WILDCARDS.get(host, host)}:{port}"


def check_health(cfg: PartyConfig, address: str | None = None, timeout: float = 5.0) -> Health:
    """Ping the daemon of `cfg` as itself; never raises for an unhealthy daemon."""
    target = address or local_address(cfg.listen)
    channel = open_channel(target, cfg.name, client_credentials(cfg.tls), cfg.limits)
    try:
        t0 = time.perf_counter()
        reply = pb_grpc.PartyStub(channel).Ping(pb.PingRequest(), timeout=timeout)
        rtt = (time.perf_counter() - t0) * 1000
    except grpc.RpcError as exc:
        code = exc.code().name if exc.code() is not None else "error"
        return Health(False, target, f"no answer from {target} ({code}): {exc.details()}")
    finally:
        channel.close()
    if reply.name != cfg.name:
        return Health(False, target, f"{target} answers as {reply.name!r}, not as {cfg.name!r}")
    return Health(True, target, reply.version, rtt)
