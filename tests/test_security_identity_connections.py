"""The server proves its identity on every new connection, not once per gRPC channel.

A gRPC channel reconnects by itself and the daemons keep channels across runs. Before,
a channel's first identity proof counted for its whole life: when the address behind it
came to be served by an impostor (a run-CA certificate with CN `mallory` and SAN `p2`,
which TLS alone accepts as "p2"), the next message went to the impostor after a
reconnect. A TCP forwarder stands for "the same address, another server": real p2 first,
then the impostor.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from fedanon.errors import PeerError
from fedanon.parties.config import Limits
from fedanon.parties.wire.grpc_transport import GrpcTransport, PeerLinks
from fedanon.parties.wire.inbox import RunInbox
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.parties.pki.tls import ChannelPool
from tests.test_security_identity import Impostor, forge, serve_impostor


class Forwarder:
    """127.0.0.1:port -> `target`; `switch` points it elsewhere and cuts every open connection."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            host, _, port = self.target.rpartition(":")
            try:
                upstream = socket.create_connection((host, int(port)))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def switch(self, target: str) -> None:
        self.target = target
        with self.lock:
            for s in self.open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.open = []

    def close(self) -> None:
        self.listener.close()
        self.switch(self.target)


@pytest.fixture(scope="module")
def net():
    with SimulatedNetwork([SimulatedParty("p1", "primary"), SimulatedParty("p2", "primary")],
                          keep_ca_key=True) as network:
        yield network


def test_a_reconnect_to_an_impostor_delivers_nothing(net: SimulatedNetwork, tmp_path: Path) -> None:
    mallory = forge(net.cert_dir, tmp_path, "mallory", ["mallory", "p2"])
    rogue = Impostor("p2")
    server, rogue_address = serve_impostor(mallory, rogue)
    forward = Forwarder(net.address("p2"))
    pool = ChannelPool(net.tls("p1"), Limits())
    try:
        pool.verified("p2", forward.address, ["p1", "p2"])  # the real p2 proves itself on the first connection
        forward.switch(rogue_address)  # same address, another server; the old connection is cut
        # gRPC learns of the cut asynchronously; once it has (well within this), the old proof must not count.
        # A cut and a reconnect between a proof and the very next call is the remaining window (documented).
        time.sleep(1.0)
        transport = GrpcTransport("p1", "run-x", ["p1", "p2"], PeerLinks(pool, {"p2": forward.address}), RunInbox(),
                                  Limits())
        with pytest.raises(PeerError, match="'p2'"):
            transport.send("p2", "secret", b"cell values for p2 only")
        assert rogue.delivered == [], "a message reached the impostor over an unproved connection"
    finally:
        pool.close()
        forward.close()
        server.stop(0)
