"""Mutual-TLS plumbing for gRPC: server credentials, client channels, peer identity.

Trust is pinned to the run CA alone (it is the only root handed to gRPC), so a
certificate from any other CA fails the handshake. Clients dial peers with the
peer's *party name* as TLS target name, so a daemon also proves to its caller
that it is the party the caller meant — by SAN, which is why `ChannelPool.verified`
additionally asks the server to prove its certificate CN (`parties/identity.py`).
Servers read the caller's certificate name from the auth context on every RPC and
compare it with an allow-list.
"""

from __future__ import annotations

import threading

import grpc

from fedanon.parties.pki.certs import certificate_name
from fedanon.parties.config import Limits, TlsFiles
from fedanon.parties.pki.identity import new_nonce, verify_identity
from fedanon.proto import fedanon_pb2 as pb
from fedanon.proto import fedanon_pb2_grpc as pb_grpc

_MSG_SLACK = 1 << 20  # protobuf framing around a full chunk


def channel_options(limits: Limits, target_name: str | None = None) -> list[tuple[str, object]]:
    size = limits.chunk_bytes + _MSG_SLACK
    opts: list[tuple[str, object]] = [
        ("grpc.max_send_message_length", size),
        ("grpc.max_receive_message_length", size),
        # A restarted peer must be reachable again quickly, not after minutes of backoff.
        ("grpc.initial_reconnect_backoff_ms", 200),
        ("grpc.min_reconnect_backoff_ms", 200),
        ("grpc.max_reconnect_backoff_ms", 1000),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
    ]
    if target_name:
        opts.append(("grpc.ssl_target_name_override", target_name))
    return opts


def server_options(limits: Limits) -> list[tuple[str, object]]:
    size = limits.chunk_bytes + _MSG_SLACK
    return [
        ("grpc.max_send_message_length", size),
        ("grpc.max_receive_message_length", size),
        ("grpc.keepalive_time_ms", 20_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.so_reuseport", 0),
    ]


def server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    cert, key, ca = tls.read()
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)


def client_credentials(tls: TlsFiles) -> grpc.ChannelCredentials:
    cert, key, ca = tls.read()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def open_channel(address: str, peer_name: str, creds: grpc.ChannelCredentials, limits: Limits) -> grpc.Channel:
    return grpc.secure_channel(address, creds, options=channel_options(limits, peer_name))


def caller_name(context: grpc.ServicerContext) -> str | None:
    """The CN of the authenticated client certificate (None without mutual TLS)."""
    auth = context.auth_context()
    if auth.get("transport_security_type") != [b"ssl"]:
        return None
    names = auth.get("x509_common_name") or []
    return names[0].decode("utf-8", "replace") if names else None


def caller_certificate(context: grpc.ServicerContext) -> bytes | None:
    """The PEM of the authenticated client certificate (None without mutual TLS)."""
    pem = context.auth_context().get("x509_pem_cert") or []
    return pem[0] if pem else None


def caller_alt_names(context: grpc.ServicerContext) -> list[str]:
    """The subject alternative names (DNS and IP) of the authenticated client certificate."""
    auth = context.auth_context()
    return [v.decode("utf-8", "replace") for v in auth.get("x509_subject_alternative_name") or []]


class ChannelPool:
    """One channel per peer, reused across runs; dropped after a failure so a restarted peer is redialled.

    A gRPC channel reconnects by itself (a peer restarted, a link came back, an idle
    connection was closed), and every new connection may reach another server. The
    identity proof therefore belongs to a *connection*: a connectivity watcher forgets a
    channel's proof as soon as its connection drops and counts its transitions to READY,
    and `verified` proves the server again unless the proof was made on the connection
    that is up now. (What remains: a connection that drops and comes back between a
    proof and the very next call; the TLS target name is still checked on it.)
    """

    def __init__(self, tls: TlsFiles, limits: Limits) -> None:
        self._creds = client_credentials(tls)
        cert, _key, self._ca = tls.read()
        self._revoked = tls.revoked_fingerprints()
        self.me = certificate_name(cert)
        self._limits = limits
        self._lock = threading.RLock()  # re-entrant: a connectivity callback may run on the subscribing thread
        self._channels: dict[tuple[str, str], grpc.Channel] = {}
        self._verified: dict[int, int] = {}  # id() of a channel -> its connection count when its server proved its CN
        self._connections: dict[int, int] = {}  # id() of a channel -> how often it became READY

    def get(self, name: str, address: str) -> grpc.Channel:
        with self._lock:
            key = (name, address)
            ch = self._channels.get(key)
            if ch is None:
                ch = self._channels[key] = open_channel(address, name, self._creds, self._limits)
                self._connections[id(ch)] = 0
                ch.subscribe(self._watcher(id(ch)), try_to_connect=False)
            return ch

    def _watcher(self, channel_id: int):  # type: ignore[no-untyped-def]
        def on_state(state: grpc.ChannelConnectivity) -> None:
            with self._lock:
                if channel_id not in self._connections:
                    return
                if state == grpc.ChannelConnectivity.READY:
                    self._connections[channel_id] += 1
                else:  # the connection is gone (or not yet up): whatever comes next must prove itself again
                    self._verified.pop(channel_id, None)
        return on_state

    def verified(self, name: str, address: str, known: list[str]) -> grpc.Channel:
        """The channel to `name`, after its server proved, on the current connection, that its certificate CN is `name`."""
        ch = self.get(name, address)
        with self._lock:
            if id(ch) in self._verified and self._verified[id(ch)] == self._connections.get(id(ch)):
                return ch  # proved on this very connection, which has not dropped since
        nonce = new_nonce()
        reply = pb_grpc.PartyStub(ch).Ping(pb.PingRequest(nonce=nonce),
                                           timeout=min(self._limits.rpc_timeout_s, max(5.0, 2 * self._limits.heartbeat_s)))
        try:
            verify_identity(reply.identity_certificate, reply.identity_signature, expected=name, caller=self.me,
                            nonce=nonce, ca_pem=self._ca, known=known, where=address, revoked=self._revoked)
        except Exception:
            self.drop(name, address)
            raise
        with self._lock:
            if self._channels.get((name, address)) is ch:
                # the count after the proof: a READY reported late makes the next call prove once more
                self._verified[id(ch)] = self._connections.get(id(ch), 0)
        return ch

    def drop(self, name: str, address: str) -> None:
        with self._lock:
            ch = self._channels.pop((name, address), None)
        if ch is not None:
            with self._lock:
                self._verified.pop(id(ch), None)
                self._connections.pop(id(ch), None)
            ch.close()

    def close(self) -> None:
        with self._lock:
            chans, self._channels = list(self._channels.values()), {}
        for ch in chans:
            ch.close()
