"""Network benchmark: what a consortium of daemons costs before and around the data.

    python3 bench/net_basics.py [--repeat 3] [--json OUT.json]

Three party daemons on 127.0.0.1 (separate processes, gRPC over mutual TLS, fresh
certificates), measured per repetition:
* start-up: certificates issued, every daemon started and serving (ready files written);
* a `check` run: the coordinator pings, prepares and starts the connectivity protocol
  (every ordered pair of parties exchanges a message: 6 channels, both directions);
* failure detection: one party is killed (SIGKILL) while the others wait in a `hold`
  phase; seconds from the kill until the coordinator's run fails naming it.
Reference measured in the same run: one TLS handshake plus a round trip on a plain
socket with the same certificates (what the `check` run cannot go below, per channel).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from fedanon.errors import FedanonError  # noqa: E402
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty  # noqa: E402
from net_stream import mutual_tls_contexts  # noqa: E402

PARTIES = [SimulatedParty("p1", "primary"), SimulatedParty("p2", "primary"), SimulatedParty("p3", "primary")]


def tls_round_trip_seconds(cert_dir: Path) -> float:
    """One mutually authenticated TLS handshake and a 1-byte echo on loopback (the per-channel floor)."""
    server_ctx, client_ctx = mutual_tls_contexts(cert_dir, "p2", "p1")
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            tls.sendall(tls.recv(1))

    thread = threading.Thread(target=serve)
    thread.start()
    t0 = time.perf_counter()
    with client_ctx.wrap_socket(socket.create_connection(listener.getsockname())) as tls:
        tls.sendall(b"x")
        assert tls.recv(1) == b"x"
    elapsed = time.perf_counter() - t0
    thread.join()
    listener.close()
    return elapsed


def detection_seconds(net: SimulatedNetwork, victim: str) -> float:
    """Kill `victim` while every party holds; seconds until the coordinator's run fails naming it."""
    holding = threading.Event()
    killed: list[float] = []

    def on_event(party: str, phase: str, state: str, _t: float) -> None:
        if party == victim and phase == "hold" and state == "start":
            holding.set()

    def kill() -> None:
        holding.wait(30)
        killed.append(time.perf_counter())
        net.kill(victim)

    threading.Thread(target=kill, daemon=True).start()
    try:
        net.run("check", options={"hold_s": 60}, on_event=on_event)
    except FedanonError as exc:
        if victim not in str(exc):
            raise RuntimeError(f"the run failed without naming {victim!r}: {exc}") from None
        return time.perf_counter() - killed[0]
    raise RuntimeError(f"the run succeeded although {victim!r} was killed")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="also write the measured runs as JSON")
    args = ap.parse_args()
    runs = []
    table = Table(title=f"3 party daemons, 127.0.0.1, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    for col in ("run", "start-up s", "check run s", "TLS handshake+echo s (ref.)", "check / ref.",
                "kill detected after s"):
        table.add_column(col, justify="right")
    for i in range(args.repeat):
        t0 = time.perf_counter()
        with SimulatedNetwork(PARTIES) as net:
            startup = time.perf_counter() - t0
            t1 = time.perf_counter()
            net.run("check")
            check = time.perf_counter() - t1
            reference = tls_round_trip_seconds(net.cert_dir)
            detected = detection_seconds(net, "p3")
        table.add_row(str(i + 1), f"{startup:.2f}", f"{check:.3f}", f"{reference:.4f}", f"{check / reference:.0f}x",
                      f"{detected:.2f}")
        runs.append({"startup_s": startup, "check_run_s": check, "tls_round_trip_s": reference,
                     "kill_detected_s": detected})
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps({
            "figure_kinds": "measured (daemon start-up, check run, kill detection; TLS reference in the same run)",
            "parties": len(PARTIES), "cores": os.cpu_count(), "python": sys.version.split()[0],
            "load_average": os.getloadavg(), "runs": runs}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
