"""Simulated consortia: deal a pooled table to simulated parties and run a protocol on it.

The library under `fedanon simulate`, `fedanon demo`, `fedanon run`'s summaries and the protocol
benchmarks: every party as a thread over the in-memory transport, or as a daemon on loopback
with real TLS and gRPC (`fedanon.parties.simulation`). The commands only parse flags and print.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.engine.settings import EngineSettings
from fedanon.errors import FedanonError, InputError, PeerError
from fedanon.protocols.registry import HELPER, PRIMARY, protocol_spec
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.parties import reaper
from fedanon.consortium.daemons import share_party
from fedanon.parties.simulation import SimulatedParty, run_simulation
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.registry import available_protocols
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.hybrid import split_hybrid
from fedanon.protocols.sim.split import split_horizontal, split_vertical

PHASES = ("encrypt", "integrate", "anonymize", "decrypt")  # default order of the report tables
HELPER_NAME = "helper"  # the simulated helper party's name


@dataclass
class Simulation:
    """The decrypted result of one simulated run plus its report (per-party phases and bytes).

    `table` is the result as the recipient decrypted it (codes + UTF-8 dictionaries), its
    columns in input order; `rows` reads it row by row for callers that compare rows."""

    table: EncodedTable
    report: dict[str, Any]
    elapsed_s: float
    party_reports: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        return list(self.table.columns)

    @cached_property
    def rows(self) -> list[list[str]]:
        return self.table.text_rows()


def primary_names(n: int) -> list[str]:
    return [f"p{i + 1}" for i in range(n)]


def raise_first_error(errors: dict[str, BaseException]) -> None:
    """Raise the error of an in-memory run that explains it: a party's own failure rather than
    another party's notice that the run was aborted, named after the party where it happened."""
    if not errors:
        return
    own = [(p, e) for p, e in errors.items() if "aborted the run" not in str(e)]
    party, exc = (own or list(errors.items()))[0]
    if isinstance(exc, FedanonError):
        raise type(exc)(f"run failed at party {party!r}: {exc}")
    raise exc


def simulate_table(
    columns: list[str],
    rows: list[list[str]],
    hierarchy_paths: dict[str, Path],
    config: Any,
    distribution: str,
    parties: int,
    *,
    subset: np.ndarray | None = None,
    split_mode: str = "round-robin",
    options: dict[str, Any] | None = None,
    recipient: str | None = None,
    transport: str = "grpc",
    workdir: Path | None = None,
    progress: bool = False,
    protocol: str = "B",
    layout: Any = None,
    engine: EngineSettings | None = None,
) -> Simulation:
    """Split, run every party (daemons or threads), return the result in input column order.

    `engine`: where the party that runs the search (B's helper, A's master) groups rows, as its
    party config's [engine] says; every simulated party gets it, only a searching role uses it.
    """

    if parties < 1 and distribution != "hybrid":
        raise InputError(f"--parties must be at least 1, got {parties}")
    if distribution == "hybrid":  # the layout names the parties (`fedanon.data.layout`)
        if layout is None:
            raise InputError("--split hybrid needs --layout LAYOUT.toml")
        names = list(layout.names)
        parties = len(names)
    else:
        names = primary_names(parties)
    recipient = recipient or names[0]
    if recipient not in names:
        raise InputError(f"--recipient {recipient!r} is not a primary; the primaries are {', '.join(names)}")
    if distribution == "horizontal":
        shares = split_horizontal(columns, rows, parties, split_mode, subset)  # type: ignore[arg-type]
    elif distribution == "hybrid":
        shares = split_hybrid(columns, rows, layout)
    else:
        shares = split_vertical(columns, rows, parties, subset)
    options = dict(options or {})
    start = time.perf_counter()
    if transport == "memory":
        reports, output = _run_threads(shares, names, hierarchy_paths, config, distribution, recipient, options,
                                       protocol, engine)
        report: dict[str, Any] = {"protocol": protocol, "distribution": distribution, "party_reports": reports,
                                  "simulation": {"daemons": 0, "transport": "in-memory (threads, no TLS)"}}
    else:
        report, output = _run_daemons(shares, names, hierarchy_paths, config, distribution, recipient, options,
                                      workdir, progress, protocol, engine)
    elapsed = time.perf_counter() - start
    if output is None:
        raise PeerError("the run finished without a result at the recipient")
    result = output.select([c for c in columns if c in output.columns])
    report.update({"parties_primary": parties, "result_recipient": recipient, "elapsed_s": round(elapsed, 6),
                   "split_mode": split_mode if distribution == "horizontal" else
                   ("layout" if distribution == "hybrid" else "columns round-robin")})
    return Simulation(result, report, elapsed, report.get("party_reports", {}))


def _run_threads(shares, names, hierarchy_paths, config, distribution, recipient, options, protocol, engine=None):

    hierarchies = {a: Hierarchy.read_csv(p, a) for a, p in hierarchy_paths.items()}
    local = {name: share.local_data(hierarchies) for name, share in zip(names, shares)}
    roles = party_roles(names, protocol)
    options = dict(options)
    timeout = options.pop("receive_timeout_s", None)
    settings = RunSettings(f"sim-{int(time.time() * 1000)}", protocol, distribution, config, roles, recipient, options)
    if timeout is not None:
        settings.receive_timeout_s = float(timeout)
    run = run_in_memory(settings, local, engine=engine)
    raise_first_error(run.errors)
    reports = {name: {"role": roles[name], **o.report} for name, o in run.outcomes.items()}
    out = run.outcomes[recipient]
    return reports, out.output


def _run_daemons(shares, names, hierarchy_paths, config, distribution, recipient, options, workdir, progress,
                 protocol, engine=None):

    with reaper.guarded_temp_dir("fedanon-simulate-") as tmp:
        base = Path(workdir) if workdir is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        parties = [share_party(name, share, base / f"{name}.csv", hierarchy_paths, config, engine)
                   for name, share in zip(names, shares)]
        if party_roles(names, protocol).get(HELPER_NAME) == HELPER:
            parties.append(SimulatedParty(name=HELPER_NAME, role=HELPER, engine=engine or EngineSettings()))
        result = run_simulation(parties, protocol, distribution, config, recipient, options,
                                workdir=(base / "daemons") if workdir is not None else None, progress=progress)
    return result.report, result.output


def party_roles(primaries: list[str], protocol: str) -> dict[str, str]:
    """The simulated run's parties: the primaries, plus a helper if the protocol needs one."""
    roles = {name: PRIMARY for name in primaries}
    if protocol_spec(protocol).needs_helper:
        roles[HELPER_NAME] = HELPER
    return roles


def protocol_options(protocol: str, metric: str, **flags: Any) -> dict[str, Any]:
    """Protocol-specific run options from CLI flags (None = not given), checked against the
    protocol's registry spec: a flag the protocol does not read, or a metric it cannot
    optimize, is an input error before anything starts."""

    spec = protocol_spec(protocol)
    if spec.metrics is not None and metric not in spec.metrics:
        raise InputError(f"Protocol {spec.name} does not support metric {metric!r} (its registry entry lists "
                         f"the metrics it can optimize); choose one of {', '.join(spec.metrics)}")
    options = {}
    for name, value in flags.items():
        if value is None:
            continue
        if name not in spec.options:
            readers = available_protocols_with_option(name)
            raise InputError(f"--{name} applies only to Protocol {' or '.join(readers) or '?'}, "
                             f"not to Protocol {spec.name}")
        options[name] = value
    return options


def available_protocols_with_option(option: str) -> list[str]:

    return [p for p in available_protocols() if option in protocol_spec(p).options]


def protocol_phases(protocol: str) -> tuple[str, ...]:

    return protocol_spec(protocol).phases


# --------------------------------------------------------------------------- reporting
def _kb(n: int) -> str:
    return f"{n / 1024:.1f}"


def phase_rows(party_reports: dict[str, dict[str, Any]], phases: tuple[str, ...] = PHASES) -> list[dict[str, Any]]:
    """Flatten per-party reports into one row per (party, phase): seconds, bytes sent/received."""
    rows = []
    ordered = sorted(party_reports.items(), key=lambda item: (item[1].get("role") == HELPER, item[0]))
    for party, rep in ordered:
        traffic = rep.get("traffic", {})
        sent = traffic.get("bytes_sent_by_phase", {})
        received = traffic.get("bytes_received_by_phase", {})
        seconds = rep.get("phases", {})
        for phase in phases:
            rows.append({"party": party, "role": rep.get("role", "?"), "phase": phase,
                         "seconds": float(seconds.get(phase, 0.0)),
                         "bytes_sent": int(sent.get(phase, 0)), "bytes_received": int(received.get(phase, 0))})
    return rows


def print_phase_table(party_reports: dict[str, dict[str, Any]], title: str, phases: tuple[str, ...] = PHASES) -> None:
    """One row per party and phase (plus a total per party): narrow enough for 80 columns."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for name, justify in (("party", "left"), ("role", "left"), ("phase", "left"), ("s", "right"),
                          ("kB sent", "right"), ("kB recv", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    by_party: dict[str, list[dict[str, Any]]] = {}
    for row in phase_rows(party_reports, phases):
        by_party.setdefault(row["party"], []).append(row)
    for party, rows in by_party.items():
        for i, r in enumerate(rows):
            table.add_row(party if i == 0 else "", r["role"] if i == 0 else "", r["phase"], f"{r['seconds']:.3f}",
                          _kb(r["bytes_sent"]), _kb(r["bytes_received"]))
        table.add_row("", "", "[bold]total[/bold]", f"{sum(r['seconds'] for r in rows):.3f}",
                      _kb(sum(r["bytes_sent"] for r in rows)), _kb(sum(r["bytes_received"] for r in rows)),
                      end_section=True)
    Console().print(table)


def pre_post_seconds(party_reports: dict[str, dict[str, Any]], recipient: str) -> float:
    """Recipient's time for the whole run minus the anonymizing party's anonymize phase (§4.6.4's measure).

    The anonymizing party (B's helper, A's master) is the one with the longest anonymize phase.
    """
    phases = party_reports.get(recipient, {}).get("phases", {})
    engine = max((float(r.get("phases", {}).get("anonymize", 0.0)) for r in party_reports.values()), default=0.0)
    return float(sum(phases.values())) - engine


def result_summary(party_reports: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The result as the parties reported it, merged over every report that carries a transformation.

    No single party knows everything: the anonymizing party (B's helper, A's master) knows
    the transformation and loss, but in Protocol C only the key holder learns how many
    real rows were suppressed and how many classes were kept. A field missing from (or
    None in) one report is taken from the next one that has it, also inside a table (C's
    key holder adds the row counts to the `dp` entry the helper reports without them).
    """
    merged: dict[str, Any] = {}
    for rep in party_reports.values():
        if "transformation" in rep:
            merged = _fill(merged, rep)
    return merged


def _fill(first: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """`first`, with what it lacks (or holds as None) taken from `later`; neither is changed."""
    out = dict(first)
    for key, value in later.items():
        if out.get(key) is None:
            out[key] = value
        elif isinstance(out[key], dict) and isinstance(value, dict):
            out[key] = _fill(out[key], value)
    return out


# --------------------------------------------------------------------------- command
