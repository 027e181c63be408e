"""Local simulation: every party as a separate daemon process on 127.0.0.1, real TLS, real gRPC.

`SimulatedNetwork` (a context manager) makes a fresh run CA and certificates in
a temporary directory, writes one party config per party (each trusting all the
others and the coordinator), starts `python3 -m fedanon party serve` per party
on free loopback ports, waits until each has written its ready file, and on exit
stops them (SIGTERM, then SIGKILL after a grace period) and deletes everything,
also when the run failed — and, through `parties/reaper.py`, also when this process
is killed. The CA private key is deleted as soon as the certificates exist. `run_simulation` is the one-call form used by
`fedanon simulate` / `fedanon demo` and the protocol tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import tomli_w


from fedanon.data.table import EncodedTable
from fedanon.engine.settings import EngineSettings
from fedanon.errors import InputError, PeerError
from fedanon.model.config import AnonymizationConfig
from fedanon.parties import reaper
from fedanon.parties.pki import certs
from fedanon.protocols.registry import PARTY_ROLES, PRIMARY
from fedanon.parties.config import (
    DataConfig, Limits, PartyConfig, RunConfig, RunPartyEntry, TlsFiles, load_party_config, party_config_dict,
)
from fedanon.parties.coordinator import Coordinator, RunOutcome, write_outputs
from fedanon.parties.daemon import PartyDaemon
from fedanon.parties.progress import PhaseProgress
from fedanon.protocols.kit.api import HoldsOutput

COORDINATOR = "coordinator"
_START_TIMEOUT_S = 60.0
_PORT_ATTEMPTS = 3


@dataclass
class SimulatedParty:
    name: str
    role: str  # a registry party role: PRIMARY or HELPER
    csv_path: Path | None = None
    qi_hierarchies: dict[str, Path] = field(default_factory=dict)
    sensitive: dict[str, Path | None] = field(default_factory=dict)
    tid_column: str | None = None
    subset_column: str | None = None
    delimiter: str = ";"
    insensitive: list[str] = field(default_factory=list)
    # command that starts `fedanon` for this party (default: this interpreter, `-m fedanon`);
    # tests put a deliberately misbehaving party behind a wrapper script this way
    launcher: tuple[str, ...] | None = None
    # the [engine] table of this party's config: where its engine groups rows if its role searches
    engine: EngineSettings = field(default_factory=EngineSettings)


@dataclass
class SimulationResult(HoldsOutput):
    output: EncodedTable | None
    report: dict[str, Any]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _privacy_dict(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, dict):
        return dict(config)
    return dict(config.to_dict())


class SimulatedNetwork:
    """A set of running party daemons plus the material a coordinator needs to talk to them."""

    def __init__(
        self,
        parties: list[SimulatedParty],
        workdir: Path | None = None,
        limits: Limits | None = None,
        log_level: str = "info",
        in_process: bool = False,
        keep_ca_key: bool = False,
    ) -> None:
        """`in_process=True` serves every party from a thread of this process (still real gRPC over
        mutual TLS on 127.0.0.1), so a test can look at what each party's transport received."""
        names = [p.name for p in parties]
        if len(set(names)) != len(names):
            raise InputError(f"party names must be unique: {names}")
        if COORDINATOR in names:
            raise InputError(f"{COORDINATOR!r} is reserved for the simulation's coordinator")
        for p in parties:
            certs.check_party_name(p.name)
            if p.role not in PARTY_ROLES:
                raise InputError(f"party {p.name!r}: role must be one of {', '.join(map(repr, PARTY_ROLES))}, "
                                 f"got {p.role!r}")
        self.parties = parties
        self.limits = limits or Limits()
        self.log_level = log_level
        self.keep_ca_key = keep_ca_key
        self._own_dir = workdir is None
        # keys, certificates and configs: an own folder is known to the reaper before it exists,
        # so it is removed even if this process is killed at once
        self.dir = reaper.new_guarded_temp_dir("fedanon-sim-") if workdir is None else Path(workdir)
        self.cert_dir = self.dir / "certs"
        self.ports: dict[str, int] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.in_process = in_process
        self.daemons: dict[str, Any] = {}  # in-process PartyDaemon per party
        self.config_paths: dict[str, Path] = {}

    # ------------------------------------------------------------------ setup
    def __enter__(self) -> "SimulatedNetwork":
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _setup(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "logs").mkdir(exist_ok=True)
        certs.init_ca(self.cert_dir, force=True)
        for p in self.parties:
            certs.issue(self.cert_dir, p.name, hosts=["127.0.0.1", "localhost"])
        certs.issue(self.cert_dir, COORDINATOR)
        if not self.keep_ca_key:  # nothing needs the CA key once every certificate exists
            (self.cert_dir / certs.CA_KEY).unlink()
        for attempt in range(_PORT_ATTEMPTS):
            # A free port can be taken by someone else before the daemon binds it; then start over.
            self.ports = {p.name: free_port() for p in self.parties}
            for p in self.parties:
                self.config_paths[p.name] = self._write_party_config(p)
            for p in self.parties:
                self._spawn(p.name)
            try:
                self.wait_ready([p.name for p in self.parties])
                return
            except PeerError as exc:
                if "cannot listen" not in str(exc) or attempt == _PORT_ATTEMPTS - 1:
                    raise
                self._stop_all()

    def tls(self, name: str) -> TlsFiles:
        return TlsFiles(cert=self.cert_dir / f"{name}.crt", key=self.cert_dir / f"{name}.key",
                        ca=self.cert_dir / certs.CA_CERT)

    def address(self, name: str) -> str:
        return f"127.0.0.1:{self.ports[name]}"

    def _write_party_config(self, p: SimulatedParty) -> Path:
        data = None
        if p.csv_path is not None:
            data = DataConfig(csv=Path(p.csv_path).resolve(), delimiter=p.delimiter,
                              quasi_identifiers={k: Path(v).resolve() for k, v in p.qi_hierarchies.items()},
                              sensitive={k: (Path(v).resolve() if v else None) for k, v in p.sensitive.items()},
                              tid_column=p.tid_column, subset_column=p.subset_column,
                              insensitive=list(p.insensitive))
        cfg = PartyConfig(
            name=p.name, listen=self.address(p.name), tls=self.tls(p.name),
            peers={o.name: self.address(o.name) for o in self.parties if o.name != p.name},
            coordinators=[COORDINATOR], data=data, limits=self.limits, engine=p.engine,
        )
        path = self.dir / f"{p.name}.toml"
        path.write_bytes(tomli_w.dumps(party_config_dict(cfg)).encode())
        return path

    def _ready_file(self, name: str) -> Path:
        return self.dir / f"{name}.ready"

    def _spawn(self, name: str) -> None:
        ready = self._ready_file(name)
        ready.unlink(missing_ok=True)
        if self.in_process:
            daemon = PartyDaemon(load_party_config(self.config_paths[name]))
            daemon.start()
            self.daemons[name] = daemon
            ready.write_text(str(daemon.port))
            return
        env = dict(os.environ)
        pkg_root = str(Path(__file__).resolve().parents[2])  # the folder that holds the fedanon package
        env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        log = open(self.dir / "logs" / f"{name}.log", "ab")
        launcher = next((p.launcher for p in self.parties if p.name == name), None) or (sys.executable, "-m", "fedanon")
        try:
            self.procs[name] = subprocess.Popen(
                [*launcher, "party", "serve", "--config", str(self.config_paths[name]),
                 "--ready-file", str(ready), "--log-level", self.log_level],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
            reaper.guard_pid(self.procs[name].pid)  # stopped even if this process is killed
        finally:
            log.close()

    def wait_ready(self, names: list[str], timeout: float = _START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        waiting = set(names)
        while waiting:
            for name in list(waiting):
                if self._ready_file(name).exists():
                    waiting.discard(name)
                elif name in self.procs and self.procs[name].poll() is not None:
                    raise PeerError(f"party daemon {name!r} exited during start-up: {self.log_tail(name)}")
            if waiting and time.monotonic() > deadline:
                raise PeerError(f"party daemons {sorted(waiting)} not ready after {timeout:.0f} s")
            if waiting:
                time.sleep(0.05)

    def log_tail(self, name: str, lines: int = 5) -> str:
        try:
            text = (self.dir / "logs" / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:])

    # ------------------------------------------------------------------ control
    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def restart(self, name: str) -> None:
        self.kill(name)
        self._spawn(name)
        self.wait_ready([name])

    def pid(self, name: str) -> int:
        return self.procs[name].pid

    def run_config(self, protocol: str, distribution: str = "horizontal", config: Any = None,
                   result_recipient: str | None = None, options: dict[str, Any] | None = None,
                   coordinator: str = COORDINATOR) -> RunConfig:
        recipient = result_recipient or next((p.name for p in self.parties if p.role == PRIMARY), self.parties[0].name)
        return RunConfig(
            coordinator=coordinator, tls=self.tls(coordinator), protocol=protocol, distribution=distribution,
            parties=[RunPartyEntry(p.name, self.address(p.name), p.role) for p in self.parties],
            result_recipient=recipient, privacy=_privacy_dict(config), options=dict(options or {}),
            output=None, report=None, limits=self.limits,
            anonymization=config if isinstance(config, AnonymizationConfig) else None,
        )

    def run(self, protocol: str, distribution: str = "horizontal", config: Any = None,
            result_recipient: str | None = None, options: dict[str, Any] | None = None,
            on_event: Callable[[str, str, str, float], None] | None = None) -> RunOutcome:
        cfg = self.run_config(protocol, distribution, config, result_recipient, options)
        return Coordinator(cfg, on_event=on_event).run()

    def close(self) -> None:
        self._stop_all()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            reaper.release_dir(self.dir)

    def _stop_all(self) -> None:
        for daemon in self.daemons.values():
            daemon.stop(grace=1.0)
        self.daemons = {}
        for name, proc in self.procs.items():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 8.0
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            reaper.release_pid(proc.pid)
        self.procs = {}


def run_simulation(
    parties: list[SimulatedParty],
    protocol: str,
    distribution: str,
    config: Any,
    result_recipient: str,
    options: dict[str, Any] | None = None,
    workdir: Path | None = None,
    progress: bool = False,
    output: Path | None = None,
    report: Path | None = None,
) -> SimulationResult:
    """Start all parties as daemons, run once, stop them; raises FedanonError on any failure (no partial files)."""
    with SimulatedNetwork(parties, workdir=workdir) as net:
        with PhaseProgress([(p.name, p.role) for p in parties], enabled=progress) as bar:
            outcome = net.run(protocol, distribution, config, result_recipient, options, on_event=bar.update)
    outcome.report["simulation"] = {"daemons": len(parties), "transport": "gRPC + mutual TLS on 127.0.0.1"}
    write_outputs(outcome, output, report)
    return SimulationResult(outcome.output, outcome.report)
