"""Tell a peer that does not answer from a peer whose TLS handshake really failed.

Why: a stopped or hung daemon (SIGSTOP, deadlock, swapped out) still completes TCP
connects -- the kernel accepts them into its listen backlog -- but never answers the TLS
handshake. gRPC then ends the attempt with a handshake error ("Handshake read failed"),
the same words it uses when a certificate is rejected, so a frozen peer was reported as
a certificate problem. The probe here asks the question directly: open a TCP connection,
send a TLS ClientHello, and see whether anything answers within the time given. A peer
that answers (with a handshake, an alert or a close) took part in TLS: a failure with it
is a real TLS failure. A peer that stays silent is unresponsive.

The probe verifies nothing and sends no certificate: it only learns whether the other
side speaks; the real connection (mutual TLS pinned to the run CA) is gRPC's.
"""

from __future__ import annotations

import socket
import ssl
import time

SILENT = "silent"
ANSWERS = "answers"
NO_TCP = "no-tcp"


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def probe_tls(address: str, timeout: float) -> str:
    """`ANSWERS`, `SILENT` (accepts TCP, says nothing within `timeout`) or `NO_TCP` for `address` (host:port)."""
    deadline = time.monotonic() + timeout
    try:
        sock = socket.create_connection(_host_port(address), timeout=timeout)
    except (OSError, ValueError):
        return NO_TCP
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # a probe: whether it speaks, not who it is
    try:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        with context.wrap_socket(sock, do_handshake_on_connect=False) as tls:
            tls.do_handshake()
    except (socket.timeout, TimeoutError):
        return SILENT
    except (ssl.SSLError, OSError):
        return ANSWERS  # an alert or a close is an answer
    finally:
        sock.close()
    return ANSWERS


def silent_message(peer: str, waited_s: float, address: str | None = None) -> str:
    where = f" at {address}" if address else ""
    return (f"party {peer!r}{where} is unresponsive: it accepts connections but did not answer the TLS handshake "
            f"within {waited_s:.1f} s (process stopped or hung, host overloaded; limits.heartbeat_s)")
