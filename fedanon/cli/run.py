"""`fedanon run --config run.toml`: coordinate one run across running party daemons."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path



def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("run", help="start a run on running party daemons (coordinator)")
    parser.add_argument("--config", required=True, type=Path, help="run config (TOML)")
    parser.add_argument("--protocol", help="override run.protocol (e.g. check, B)")
    parser.add_argument("--output", "-o", type=Path, help="override run.output (result CSV)")
    parser.add_argument("--report", type=Path,
                        help="override run.report (JSON report); with --protocol check, where to write "
                             "the round-trip table (a check run never writes run.output/run.report)")
    parser.add_argument("--html", type=Path, default=None, metavar="REPORT.html",
                        help="also write a self-contained HTML page of the result: summary, output risk, "
                             "generalization per attribute, released value counts")
    parser.add_argument("--run-id", help="override the generated run id")
    parser.add_argument("--no-progress", action="store_true", help="no live progress display")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from fedanon.consortium.simulation import result_summary
    from fedanon.consortium.statistics import check_statistics_option, release_of, write_release
    from fedanon.errors import InputError
    from fedanon.cli.kit.summary import RESULT_KEYS, party_dp, print_summary, result_rows
    from fedanon.parties.config import load_run_config
    from fedanon.parties.coordinator import Coordinator, write_outputs
    from fedanon.parties.daemon import check_tls_files
    from fedanon.parties.progress import PhaseProgress
    from fedanon.protocols.registry import known_protocol

    cfg = load_run_config(args.config)
    # a bad [options] statistics fails here, before any party is contacted
    if check_statistics_option(cfg.options) is not None and args.html is not None:
        raise InputError("--html applies to anonymizing runs, not to a statistics release ([options] statistics)")
    if args.protocol:
        override = known_protocol(args.protocol)
        if override is not None and not override.anonymizes and cfg.protocol.upper() != override.name:
            # a diagnostic run (the connectivity check) of the real run's config must not replace
            # that run's result.csv / report.json: it writes only where --output / --report say
            cfg.output = cfg.report = None
        cfg.protocol = args.protocol
    if args.output:
        cfg.output = args.output
    if args.report:
        cfg.report = args.report
    if args.run_id:
        cfg.run_id = args.run_id
    # the checks a party would make of our certificate, before any party is contacted
    check_tls_files(cfg.tls, cfg.coordinator, "coordinator")
    show = not args.no_progress
    with PhaseProgress([(p.name, p.role) for p in cfg.parties], enabled=show) as progress:
        coordinator = Coordinator(cfg, on_event=progress.update)
        outcome = coordinator.run()
    release = release_of(outcome.report.get("party_reports", {}))
    if release is not None:  # a statistics run ([options] statistics): the JSON release, no table
        write_release(outcome, release, cfg.output, cfg.report)
        if show:
            print_phase_summary(outcome.report.get("party_reports", {}))
        print(f"run {outcome.run_id} ({cfg.protocol.upper()}, {cfg.distribution}) finished in "
              f"{outcome.report['elapsed_s']:.2f} s; statistics release"
              + (f" -> {cfg.output}" if cfg.output else "") + (f"; report -> {cfg.report}" if cfg.report else ""),
              file=sys.stderr)
        return 0
    summary = result_summary(outcome.report.get("party_reports", {}))
    for key in RESULT_KEYS:  # the result at the top level, as `fedanon anonymize` reports it
        if summary.get(key) is not None:
            outcome.report[key] = summary[key]
    if party_dp(outcome.report.get("party_reports", {})):
        outcome.report["dp"] = party_dp(outcome.report.get("party_reports", {}))
    analysis = None
    if outcome.output is not None and outcome.report.get("transformation") and coordinator.config is not None:
        from fedanon.protocols.dp.release import check_config
        from fedanon.report.analysis import analyze_protocol_output

        # computed here, where the result is; the pooled input exists nowhere, so its risk is "not available"
        try:
            # a DP release is judged as what it is: k-anonymity with the derived k
            analysis = analyze_protocol_output(check_config(coordinator.config), outcome.report, outcome.output)
        except Exception as exc:  # the run's result is worth more than its risk figures: write it regardless
            reason = f"{type(exc).__name__}: {str(exc)[:200]}"
            outcome.report["risk"] = {"input": None, "output": None, "unavailable": f"risk not computed ({reason})"}
            print(f"run {outcome.run_id}: result written without risk figures ({reason})", file=sys.stderr)
        else:
            outcome.report.update(analysis.to_dict())
            if args.html is not None:
                outcome.report["html"] = str(args.html)
    write_outputs(outcome, cfg.output, cfg.report)
    if args.html is not None:
        if analysis is None:
            print(f"no HTML report: run {outcome.run_id} has no anonymized result or no risk figures",
                  file=sys.stderr)
        else:
            analysis.write_html(str(args.html), f"fedanon run {outcome.run_id} ({cfg.protocol.upper()}, "
                                                f"{cfg.distribution})")
    if show:
        print_phase_summary(outcome.report.get("party_reports", {}))
    if result_rows(outcome.report):
        print_summary(f"fedanon run {outcome.run_id} ({cfg.protocol.upper()}, {cfg.distribution})",
                      result_rows(outcome.report))
    rows = outcome.output.n_rows if outcome.output is not None else 0
    print(f"run {outcome.run_id} ({cfg.protocol.upper()}, {cfg.distribution}) finished in "
          f"{outcome.report['elapsed_s']:.2f} s; {rows} result rows"
          + (f" -> {cfg.output}" if cfg.output else "") + (f"; report -> {cfg.report}" if cfg.report else ""),
          file=sys.stderr)
    return 0


def print_phase_summary(party_reports: dict) -> None:
    """Seconds and payload kB sent/received per phase and party, from the daemons' own reports.

    One row per party and phase, so the table stays within 80 columns however many
    phases a protocol has.
    """
    from rich.console import Console
    from rich.table import Table

    table = Table(title="time and bytes per phase and party")
    for name, justify in (("party", "left"), ("role", "left"), ("phase", "left"), ("s", "right"),
                          ("kB sent", "right"), ("kB recv", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for party, rep in party_reports.items():
        traffic = rep.get("traffic", {})
        secs, sent, recv = (traffic.get(k, {}) for k in ("phase_seconds", "bytes_sent_by_phase", "bytes_received_by_phase"))
        phases = list(dict.fromkeys([*secs, *sent, *recv]))
        for i, ph in enumerate(phases):
            table.add_row(party if i == 0 else "", str(rep.get("role", "?")) if i == 0 else "", ph,
                          f"{secs.get(ph, 0.0):.3f}", f"{sent.get(ph, 0) / 1024:.1f}", f"{recv.get(ph, 0) / 1024:.1f}",
                          end_section=i == len(phases) - 1)
    Console(stderr=True).print(table)
