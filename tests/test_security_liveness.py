"""A primary that stops before any channel to it is up is named "unresponsive", not a TLS failure.

Real daemons on loopback (one process each, gRPC over mutual TLS). A SIGSTOPped daemon
still completes TCP connects (the kernel accepts them into its backlog) but never answers
the TLS handshake; gRPC reported that as a handshake failure, so the run's error told the
operator to chase a certificate problem that does not exist, after 17 s or more. The
contrast case: a peer that presents a certificate from another CA is still a TLS failure.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

import fedanon
from fedanon.data.io.delimited import read_table_csv, write_table_csv
from fedanon.errors import FedanonError, PeerError
from fedanon.parties.pki import certs
from fedanon.parties.config import Limits, TlsFiles
from fedanon.parties.coordinator import Coordinator
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

DATA = Path(fedanon.__file__).parent / "data" / "adult"
QIS = ["sex", "age", "race"]
HEARTBEAT = 1.5


def _parties(tmp_path: Path) -> list[SimulatedParty]:
    columns, rows = read_table_csv(DATA / "adult.csv")
    keep = QIS + ["salary-class"]
    idx = [columns.index(c) for c in keep]
    rows = [[row[j] for j in idx] for row in rows[:200]]
    parties = []
    for i, name in enumerate(["p1", "p2"]):
        path = tmp_path / f"{name}.csv"
        write_table_csv(path, keep, rows[i::2])
        parties.append(SimulatedParty(name, "primary", csv_path=path,
                                      qi_hierarchies={q: DATA / f"adult_hierarchy_{q}.csv" for q in QIS},
                                      insensitive=["salary-class"]))
    return parties + [SimulatedParty("helper", "helper")]


@pytest.mark.parametrize("protocol", ["B", "C"])
def test_a_primary_stopped_before_its_first_channel_is_unresponsive_within_two_heartbeats(tmp_path: Path,
                                                                                          protocol: str) -> None:
    options = {"counters": "elgamal"} if protocol == "C" else {}
    with SimulatedNetwork(_parties(tmp_path), limits=Limits(heartbeat_s=HEARTBEAT)) as net:
        net.procs["p2"].send_signal(signal.SIGSTOP)  # not net.kill: that waits for the exit
        started = time.monotonic()
        try:
            with pytest.raises(FedanonError) as err:
                net.run(protocol, config={"quasi_identifiers": QIS, "k": 2}, options=options)
        finally:
            net.procs["p2"].send_signal(signal.SIGCONT)
        elapsed = time.monotonic() - started
    message = str(err.value)
    assert "'p2'" in message and "unresponsive" in message, message
    assert "handshake failed" not in message and "certificate" not in message, message
    # two heartbeats, plus the coordinator's own start (its channels, the healthy parties' handshakes) on a loaded host
    assert elapsed <= 2 * HEARTBEAT + 3.0, f"reported after {elapsed:.1f} s: {message}"


def test_a_rejected_certificate_is_still_named_a_tls_failure(tmp_path: Path) -> None:
    """The contrast: the daemons answer the handshake and refuse a coordinator certificate from another CA."""
    with SimulatedNetwork([SimulatedParty("p1", "primary"), SimulatedParty("p2", "primary")],
                          limits=Limits(heartbeat_s=HEARTBEAT)) as net:
        certs.init_ca(tmp_path)
        certs.issue(tmp_path, "coordinator")  # the right name, the wrong CA
        cfg = net.run_config("check")
        cfg.tls = TlsFiles(tmp_path / "coordinator.crt", tmp_path / "coordinator.key", net.cert_dir / "ca.crt")
        with pytest.raises(PeerError) as err:
            Coordinator(cfg).run()
    message = str(err.value)
    assert "unreachable" in message and "certificate" in message and "unresponsive" not in message, message
