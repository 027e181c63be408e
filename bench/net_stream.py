"""Network benchmark: a large payload between two party daemons (gRPC + mutual TLS, chunked)
against a plain TLS socket on the same loopback with the same certificates, measured in the same run.

    python3 bench/net_stream.py [--mib 200] [--repeat 2]

The ratio says how much the gRPC/protobuf chunking costs on top of raw TLS; the receiver's
peak RSS shows that a payload costs about 1x its size at the receiving daemon.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import ssl
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty  # noqa: E402


def mutual_tls_contexts(cert_dir: Path, server: str, client: str) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """Plain-socket TLS contexts with the run CA's certificates of `server` and `client` (the references)."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(cert_dir / "ca.crt"))
    server_ctx.load_cert_chain(cert_dir / f"{server}.crt", cert_dir / f"{server}.key")
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(cert_dir / "ca.crt"))
    client_ctx.load_cert_chain(cert_dir / f"{client}.crt", cert_dir / f"{client}.key")
    client_ctx.check_hostname = False
    return server_ctx, client_ctx


def raw_tls_seconds(cert_dir: Path, mib: int) -> float:
    """Send `mib` MiB over a mutually authenticated TLS socket and hash it at the receiver, like the daemon does."""
    server_ctx, client_ctx = mutual_tls_contexts(cert_dir, "b", "a")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    total = mib << 20
    digest: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            buf = bytearray()
            while len(buf) < total:
                data = tls.recv(1 << 20)
                if not data:
                    break
                buf += data
            digest.append(hashlib.sha256(buf).digest())
            tls.sendall(digest[0])

    thread = threading.Thread(target=serve)
    thread.start()
    block = os.urandom(1 << 20)
    payload = block * mib
    t0 = time.perf_counter()
    with client_ctx.wrap_socket(socket.create_connection(("127.0.0.1", port))) as tls:
        view = memoryview(payload)
        for start in range(0, total, 1 << 20):
            tls.sendall(view[start:start + (1 << 20)])
        answer = tls.recv(32)
    elapsed = time.perf_counter() - t0
    thread.join()
    listener.close()
    assert answer == hashlib.sha256(payload).digest()
    return elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None, help="also write the measured runs as JSON")
    args = ap.parse_args()
    runs = []
    table = Table(title=f"{args.mib} MiB payload, 127.0.0.1, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    for col in ("run", "gRPC+mTLS s", "MiB/s", "raw TLS s", "MiB/s", "gRPC / raw time", "receiver peak RSS MiB"):
        table.add_column(col, justify="right")
    with SimulatedNetwork([SimulatedParty("a", "primary"), SimulatedParty("b", "primary")]) as net:
        net.run("check")  # warm up channels
        for i in range(args.repeat):
            out = net.run("check", options={"bulk_mb": args.mib, "bulk_from": "a", "bulk_to": "b"})
            grpc_s = out.report["party_reports"]["a"]["bulk_seconds"]
            rss = out.report["party_reports"]["b"]["peak_rss_mib"]
            raw_s = raw_tls_seconds(net.cert_dir, args.mib)
            table.add_row(str(i + 1), f"{grpc_s:.2f}", f"{args.mib / grpc_s:.0f}", f"{raw_s:.2f}",
                          f"{args.mib / raw_s:.0f}", f"{grpc_s / raw_s:.2f}", f"{rss:.0f}")
            runs.append({"grpc_mtls_s": grpc_s, "raw_tls_s": raw_s, "receiver_peak_rss_mib": rss})
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps({
            "figure_kinds": "measured (gRPC run and the raw TLS reference, same run)", "mib": args.mib,
            "cores": os.cpu_count(), "python": sys.version.split()[0], "load_average": os.getloadavg(),
            "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
