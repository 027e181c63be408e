"""`fedanon simulate`: split one table over N simulated institutions and run a secure protocol.

Why: to try a protocol on real data without setting up institutions. The input is
dealt over N primaries (horizontal: rows round-robin or in blocks; vertical: columns
round-robin plus a generated shared TID), each primary (and a helper, where the
protocol's registry spec asks for one) is started as a separate daemon on 127.0.0.1 with fresh certificates (real gRPC, real mutual TLS),
the run's decrypted result is written like `fedanon anonymize` writes its output,
and time and bytes per phase and party are reported. `simulate_table` is the
reusable core (also used by `fedanon demo` and `bench/protocol_b.py`).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.kit.atomicfile import write_text_atomic
from fedanon.errors import FedanonError, InputError, PeerError
from fedanon.parties.reaper import guarded_temp_dir, sigterm_safe
from fedanon.protocols.registry import HELPER, PRIMARY, protocol_spec

PHASES = ("encrypt", "integrate", "anonymize", "decrypt")  # default order of the report tables
HELPER_NAME = "helper"  # the simulated helper party's name


def register(subparsers: argparse._SubParsersAction) -> None:
    from fedanon.cli.kit.runconfig import add_privacy_arguments

    p = subparsers.add_parser(
        "simulate",
        help="split a table over N simulated parties and run a secure protocol on localhost",
        description="Deal INPUT.csv over N primary parties (horizontally by rows or vertically by columns "
                    "with a generated shared TID), start them and a helper as daemons on 127.0.0.1 with "
                    "fresh certificates (gRPC over mutual TLS), run the protocol and write the decrypted, "
                    "anonymized result like `fedanon anonymize`.",
    )
    p.add_argument("input", nargs="?", default=None, metavar="INPUT.csv",
                   help="the pooled table to split (first line = header; or input = \"...\" in --config)")
    sim = p.add_argument_group("simulation")
    from fedanon.protocols.registry import available_protocols

    sim.add_argument("--protocol", default="B", type=str.upper, choices=available_protocols(anonymizing=True),
                     help="secure protocol to run (default B: shared AES keys + helper)")
    sim.add_argument("--split", dest="distribution", default="horizontal", choices=["horizontal", "vertical"],
                     help="horizontal: parties hold disjoint rows; vertical: disjoint columns joined by a TID")
    sim.add_argument("--parties", type=int, default=3, metavar="N", help="number of primary parties (default 3)")
    sim.add_argument("--split-mode", default="round-robin", choices=["round-robin", "blocks"],
                     help="horizontal only: deal rows round-robin (default) or in contiguous blocks")
    sim.add_argument("--per-party-keys", action="store_true",
                     help="vertical only: every party keeps its own column keys and decrypts its own columns")
    from fedanon.crypto.commutative import CIPHER_HELP, cipher_names

    proto_a = p.add_argument_group("Protocol A (ring of the data holders, no helper)")
    proto_a.add_argument("--cipher", choices=cipher_names(), default=None, help=CIPHER_HELP)
    proto_a.add_argument("--min-level", action="append", default=[], metavar="NAME=L",
                         help="pre-generalize quasi-identifier NAME to hierarchy level L before encryption "
                              "(against frequency analysis by the master; the optimum is then over the "
                              "restricted lattice); repeatable")
    proto_a.add_argument("--verified", action="store_true",
                         help="every party re-anonymizes the encrypted integrated table and all compare result "
                              "digests before anything is decrypted (detects a cheating master; costs one "
                              "anonymization per party)")
    sim.add_argument("--recipient", default=None, metavar="NAME",
                     help="primary that receives the decrypted result (default p1)")
    sim.add_argument("--counters", default=None, choices=["paillier", "elgamal"],
                     help="Protocol C: counter cipher, 'paillier' (default; 3072-bit, the dissertation's scheme) "
                          "or 'elgamal' (exponential ElGamal on secp256k1, same security, much faster)")
    sim.add_argument("--pseudotuples", type=float, default=None, metavar="SHARE",
                     help="Protocol C: pseudotuples per primary as a share of its real rows (default 0.25)")
    sim.add_argument("--in-memory", action="store_true",
                     help="run all parties as threads in this process (no daemons, no TLS): quick checks only")
    add_privacy_arguments(p)
    out = p.add_argument_group("output")
    out.add_argument("--output", "-o", default=None, metavar="OUT.csv",
                     help="decrypted, anonymized table (or output = \"...\" in --config)")
    out.add_argument("--report", default=None, metavar="REPORT.json",
                     help="write the full JSON report (with risk of the pooled input and of the result, and utility)")
    out.add_argument("--html", default=None, metavar="REPORT.html",
                     help="also write a self-contained HTML page: summary, risk and utility tables, plots")
    out.add_argument("--quiet", "-q", action="store_true", help="no progress display, no summary table")
    out.add_argument("--baseline", action="store_true",
                     help="also compute the anonymize-then-integrate baseline (dissertation §4.3) on the same "
                          "shares and report the secure result's loss as a percentage of the baseline's")
    p.set_defaults(handler=sigterm_safe(run))  # SIGTERM cleans up daemons and temp files too


@dataclass
class Simulation:
    """The decrypted result of one simulated run plus its report (per-party phases and bytes)."""

    columns: list[str]
    rows: list[list[str]]
    report: dict[str, Any]
    elapsed_s: float
    party_reports: dict[str, dict[str, Any]] = field(default_factory=dict)


def primary_names(n: int) -> list[str]:
    return [f"p{i + 1}" for i in range(n)]


def _free_name(columns: list[str], wanted: str) -> str:
    while wanted in columns:
        wanted = "_" + wanted
    return wanted


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
) -> Simulation:
    """Split, run every party (daemons or threads), return the result in input column order."""
    from fedanon.protocols.sim.split import split_horizontal, split_vertical

    if parties < 1:
        raise InputError(f"--parties must be at least 1, got {parties}")
    names = primary_names(parties)
    recipient = recipient or names[0]
    if recipient not in names:
        raise InputError(f"--recipient {recipient!r} is not a primary; the primaries are {', '.join(names)}")
    if distribution == "horizontal":
        shares = split_horizontal(columns, rows, parties, split_mode, subset)  # type: ignore[arg-type]
    else:
        shares = split_vertical(columns, rows, parties, subset)
    options = dict(options or {})
    start = time.perf_counter()
    if transport == "memory":
        reports, out_columns, out_rows = _run_threads(shares, names, hierarchy_paths, config, distribution,
                                                      recipient, options, protocol)
        report: dict[str, Any] = {"protocol": protocol, "distribution": distribution, "party_reports": reports,
                                  "simulation": {"daemons": 0, "transport": "in-memory (threads, no TLS)"}}
    else:
        report, out_columns, out_rows = _run_daemons(shares, names, hierarchy_paths, config, distribution,
                                                     recipient, options, workdir, progress, protocol)
    elapsed = time.perf_counter() - start
    if out_rows is None or out_columns is None:
        raise PeerError("the run finished without a result at the recipient")
    order = [c for c in columns if c in out_columns]
    index = [out_columns.index(c) for c in order]
    result_rows = [[row[i] for i in index] for row in out_rows]
    report.update({"parties_primary": parties, "result_recipient": recipient, "elapsed_s": round(elapsed, 6),
                   "split_mode": split_mode if distribution == "horizontal" else "columns round-robin"})
    return Simulation(order, result_rows, report, elapsed, report.get("party_reports", {}))


def _run_threads(shares, names, hierarchy_paths, config, distribution, recipient, options, protocol):
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.protocols.kit.api import RunSettings
    from fedanon.protocols.sim.local_run import run_in_memory

    hierarchies = {a: Hierarchy.read_csv(p, a) for a, p in hierarchy_paths.items()}
    local = {name: share.local_data(hierarchies) for name, share in zip(names, shares)}
    roles = party_roles(names, protocol)
    options = dict(options)
    timeout = options.pop("receive_timeout_s", None)
    settings = RunSettings(f"sim-{int(time.time() * 1000)}", protocol, distribution, config, roles, recipient, options)
    if timeout is not None:
        settings.receive_timeout_s = float(timeout)
    run = run_in_memory(settings, local)
    if run.errors:
        own = [(p, e) for p, e in run.errors.items() if "aborted the run" not in str(e)]
        party, exc = (own or list(run.errors.items()))[0]
        if isinstance(exc, FedanonError):
            raise type(exc)(f"run failed at party {party!r}: {exc}")
        raise exc
    reports = {name: {"role": roles[name], **o.report} for name, o in run.outcomes.items()}
    out = run.outcomes[recipient]
    return reports, out.output_columns, out.output_rows


def _run_daemons(shares, names, hierarchy_paths, config, distribution, recipient, options, workdir, progress,
                 protocol):
    from fedanon.data.io.delimited import write_table_csv
    from fedanon.parties import reaper
    from fedanon.parties.simulation import SimulatedParty, run_simulation

    qis = set(config.quasi_identifiers)
    sensitive_names = set(config.sensitive_attributes)
    with reaper.guarded_temp_dir("fedanon-simulate-") as tmp:
        base = Path(workdir) if workdir is not None else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        parties: list[SimulatedParty] = []
        for name, share in zip(names, shares):
            cols = list(share.columns)
            data_rows = share.rows
            subset_col = None
            if share.research_subset is not None:
                subset_col = _free_name(cols, "research_subset")
                cols = cols + [subset_col]
                data_rows = [row + ["1" if f else "0"] for row, f in zip(share.rows, share.research_subset)]
            path = base / f"{name}.csv"
            write_table_csv(path, cols, data_rows)
            held = [c for c in share.columns if c != share.tid_column]
            parties.append(SimulatedParty(
                name=name, role=PRIMARY, csv_path=path,
                qi_hierarchies={c: hierarchy_paths[c] for c in held if c in qis},
                # the caller has already removed identifying columns; what is not a QI or a
                # sensitive attribute of a model is released unchanged (insensitive)
                sensitive={c: hierarchy_paths.get(c) for c in held if c in sensitive_names},
                insensitive=[c for c in held if c not in qis and c not in sensitive_names],
                tid_column=share.tid_column, subset_column=subset_col,
            ))
        if party_roles(names, protocol).get(HELPER_NAME) == HELPER:
            parties.append(SimulatedParty(name=HELPER_NAME, role=HELPER))
        result = run_simulation(parties, protocol, distribution, config, recipient, options,
                                workdir=(base / "daemons") if workdir is not None else None, progress=progress)
    return result.report, result.output_columns, result.output_rows


def protocol_a_options(args: argparse.Namespace, qis: list[str], hierarchies: dict[str, Any]) -> dict[str, Any]:
    """The run options of --cipher/--min-level/--verified (Protocol A only; one-line errors otherwise)."""
    used = [flag for flag, on in (("--cipher", args.cipher), ("--min-level", args.min_level),
                                  ("--verified", args.verified)) if on]
    if args.protocol != "A":
        if used:
            raise InputError(f"{', '.join(used)} applies only to --protocol A")
        return {}
    options: dict[str, Any] = {"cipher": args.cipher or "ec", "verified": bool(args.verified)}
    if args.cipher == "ph":
        options["receive_timeout_s"] = 6 * 3600.0  # a Pohlig-Hellman pass over a large table takes long
    levels: dict[str, int] = {}
    for item in args.min_level:
        name, _, level = item.partition("=")
        if not name or not level.strip().isdigit():
            raise InputError(f"--min-level {item[:200]!r}: expected NAME=LEVEL with a whole number, e.g. age=1")
        if name not in qis:
            raise InputError(f"--min-level {item[:200]!r}: {name!r} is not a quasi-identifier ({', '.join(qis)})")
        height = hierarchies[name].height
        if int(level) >= height:
            raise InputError(f"--min-level {item[:200]!r}: the hierarchy of {name!r} has levels 0..{height - 1}")
        levels[name] = int(level)
    if levels:
        options["min_levels"] = levels
    return options


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
        raise InputError(f"Protocol {spec.name} does not support metric {metric!r} (it would need the per-QI "
                         f"value distributions the protocol hides); choose one of {', '.join(spec.metrics)}")
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
    from fedanon.protocols.registry import available_protocols, protocol_spec

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
    None in) one report is taken from the next one that has it.
    """
    merged: dict[str, Any] = {}
    for rep in party_reports.values():
        if "transformation" not in rep:
            continue
        for key, value in rep.items():
            if merged.get(key) is None:
                merged[key] = value
    return merged


# --------------------------------------------------------------------------- command
def run(args: argparse.Namespace) -> int:
    from fedanon.cli.kit.inputs import load_inputs
    from fedanon.data.io.delimited import write_table_csv
    from fedanon.cli.kit.runconfig import run_from_args

    spec = run_from_args(args)  # flags over the TOML: input, output, report, roles, CSV format
    config, hierarchy_paths, _sensitive, _subset_path = spec.privacy
    table, kept, removed, hierarchies, subset = load_inputs(spec)
    if spec.hierarchy_sep != ";" or spec.encoding != "utf-8":
        # the simulated parties read ;-separated UTF-8 hierarchies: hand them normalized copies
        hierarchy_paths = {}
    if args.per_party_keys and args.distribution != "vertical":
        raise InputError("--per-party-keys applies only to --split vertical")
    options = {"per_party_keys": True} if args.per_party_keys else {}
    options.update(protocol_a_options(args, config.quasi_identifiers, hierarchies))
    options.update(protocol_options(args.protocol, config.metric, counters=args.counters,
                                    pseudotuples=args.pseudotuples))
    header = kept  # identifying columns are removed before the table is dealt to the parties
    rows = table.select(kept).rows()
    # the reaper removes the folder should this process be killed (SIGKILL skips the `with`)
    with guarded_temp_dir("fedanon-hier-") as hier_dir:
        if not hierarchy_paths:
            for attr, h in hierarchies.items():
                hierarchy_paths[attr] = Path(hier_dir) / f"{attr}.csv"
                h.write_csv(hierarchy_paths[attr])
        sim = simulate_table(header, rows, dict(hierarchy_paths), config, args.distribution, args.parties,
                             subset=subset, split_mode=args.split_mode, options=options, recipient=args.recipient,
                             transport="memory" if args.in_memory else "grpc", progress=not args.quiet,
                             protocol=args.protocol)
    write_table_csv(spec.output, sim.columns, sim.rows, spec.delimiter)
    summary = result_summary(sim.party_reports)
    phases = protocol_phases(args.protocol)
    report = {**sim.report, "input": str(spec.input), "output": str(spec.output), "rows_written": len(sim.rows),
              "config": config.to_dict(), "phase_table": phase_rows(sim.party_reports, phases),
              "transformation": summary.get("transformation"), "information_loss": summary.get("information_loss"),
              "metric": summary.get("metric"), "suppressed_rows": summary.get("suppressed_rows"),
              "classes": summary.get("classes"), "removed_columns": removed,
              "columns": {"quasi_identifiers": list(config.quasi_identifiers),
                          "sensitive": list(config.sensitive_attributes),
                          "insensitive": [c for c in kept if c not in config.quasi_identifiers
                                          and c not in config.sensitive_attributes],
                          "removed": removed},
              "pre_post_s": pre_post_seconds(sim.party_reports, sim.report.get("result_recipient", "p1"))}
    if (spec.report or args.html) and report.get("transformation"):
        from fedanon.report.analysis import analyze_protocol_result

        # the simulation holds the pooled input: input and output risk, utility (a real run cannot)
        analysis = analyze_protocol_result(table.select(kept).encoded(), hierarchies, config, report, sim.columns,
                                           sim.rows, research_subset=subset)
        report.update(analysis.to_dict())
        if args.html:
            analysis.write_html(args.html, f"fedanon simulate: Protocol {args.protocol}, {args.distribution}, "
                                           f"{args.parties} parties")
            report["html"] = str(args.html)
    baseline = None
    if args.baseline:
        from fedanon.protocols.sim.baseline import baseline_for_split

        baseline = baseline_for_split(header, rows, hierarchies, config, args.distribution, args.parties,
                                      split_mode=args.split_mode)
        report["baseline"] = baseline.to_report()
    if spec.report:
        text = json.dumps(report, indent=2, default=str) + "\n"
        try:
            write_text_atomic(spec.report, text)
        except OSError as exc:
            raise InputError(f"{spec.report}: cannot write ({exc.strerror or exc})") from None
    if baseline is not None:
        print(f"baseline ({args.distribution}, {args.parties} parties): {baseline.one_line()}")
    if not args.quiet:
        from rich.console import Console

        Console().print(
            f"[bold]Protocol {args.protocol}[/bold], {args.distribution}, {args.parties} primaries"
            f"{' + helper' if HELPER_NAME in party_roles(primary_names(args.parties), args.protocol) else ''} "
            f"({sim.report.get('simulation', {}).get('transport', '')}): "
            f"transformation {summary.get('transformation')}, information loss "
            f"{summary.get('information_loss', float('nan')):.6g} ({summary.get('metric')}), "
            f"{summary.get('suppressed_rows', 0)} suppressed, {len(sim.rows)} rows -> {spec.output}, "
            f"removed columns: {', '.join(removed) or 'none'}, "
            f"{sim.elapsed_s:.2f} s wall time (incl. start-up); protocol time at the recipient "
            f"{pre_post_seconds(sim.party_reports, sim.report.get('result_recipient', 'p1')):.3f} s "
            f"excluding the anonymize phase")
        print_phase_table(sim.party_reports, "time and bytes per phase and party", phases)
    return 0
