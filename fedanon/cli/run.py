"""`fedanon run --config run.toml`: coordinate one run across running party daemons."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="start a run on running party daemons (coordinator)")
    parser.add_argument("--config", required=True, type=Path, help="run config (TOML)")
    parser.add_argument("--protocol", help="override run.protocol (e.g. check, B)")
    parser.add_argument("--output", type=Path, help="override run.output (result CSV)")
    parser.add_argument("--report", type=Path, help="override run.report (JSON report)")
    parser.add_argument("--run-id", help="override the generated run id")
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from fedanon.parties.config import load_run_config
    from fedanon.parties.coordinator import Coordinator, write_outputs
    from fedanon.parties.progress import PhaseProgress

    cfg = load_run_config(args.config)
    if args.protocol:
        cfg.protocol = args.protocol
    if args.output:
        cfg.output = args.output
    if args.report:
        cfg.report = args.report
    if args.run_id:
        cfg.run_id = args.run_id
    show = not args.no_progress
    with PhaseProgress([(p.name, p.role) for p in cfg.parties], enabled=show) as progress:
        outcome = Coordinator(cfg, on_event=progress.update).run()
    write_outputs(outcome, cfg.output, cfg.report)
    if show:
        print_phase_summary(outcome.report.get("party_reports", {}))
    rows = len(outcome.output_rows) if outcome.output_rows is not None else 0
    print(f"run {outcome.run_id} ({cfg.protocol.upper()}, {cfg.distribution}) finished in "
          f"{outcome.report['elapsed_s']:.2f} s; {rows} result rows"
          + (f" -> {cfg.output}" if cfg.output else "") + (f"; report -> {cfg.report}" if cfg.report else ""),
          file=sys.stderr)
    return 0


def print_phase_summary(party_reports: dict) -> None:
    """Seconds and payload kB sent/received per phase and party, from the daemons' own reports."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="time and bytes per phase and party (s / kB sent / kB received)")
    table.add_column("party")
    table.add_column("role")
    phases: list[str] = []
    for rep in party_reports.values():
        for phase in rep.get("traffic", {}).get("phase_seconds", {}):
            if phase not in phases:
                phases.append(phase)
    for phase in phases:
        table.add_column(phase, justify="right")
    for party, rep in party_reports.items():
        traffic = rep.get("traffic", {})
        secs, sent, recv = (traffic.get(k, {}) for k in ("phase_seconds", "bytes_sent_by_phase", "bytes_received_by_phase"))
        cells = [f"{secs.get(ph, 0.0):.3f} / {sent.get(ph, 0) / 1024:.1f} / {recv.get(ph, 0) / 1024:.1f}" for ph in phases]
        table.add_row(party, str(rep.get("role", "?")), *cells)
    Console(stderr=True).print(table)
