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
from pathlib import Path

from fedanon.cli.kit.protocolflags import add_protocol_flags, protocol_flag_options
from fedanon.cli.kit.statsmode import add_statistics_arguments, run_statistics, statistics_requested
from fedanon.engine.check.backends.base import DEFAULT_BACKEND, backends
from fedanon.engine.settings import EngineSettings
from fedanon.kit.atomicfile import write_text_atomic
from fedanon.errors import InputError
from fedanon.parties.reaper import guarded_temp_dir, sigterm_safe
from fedanon.consortium.simulation import (HELPER_NAME, party_roles, phase_rows, pre_post_seconds, primary_names,
                                          print_phase_table, protocol_options, protocol_phases, result_summary,
                                          simulate_table)



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
    from fedanon.protocols.registry import DEFAULT_PROTOCOL, available_protocols, protocol_spec

    sim.add_argument("--protocol", default=DEFAULT_PROTOCOL, type=str.upper,
                     choices=available_protocols(anonymizing=True),
                     help=f"secure protocol to run (default {DEFAULT_PROTOCOL}: {protocol_spec(DEFAULT_PROTOCOL).summary})")
    sim.add_argument("--split", dest="distribution", default="horizontal",
                     choices=["horizontal", "vertical", "hybrid"],
                     help="horizontal: parties hold disjoint rows; vertical: disjoint columns joined by a TID; "
                          "hybrid: columns and persons per party as --layout says")
    sim.add_argument("--layout", default=None, metavar="LAYOUT.toml",
                     help="hybrid only: which party holds which columns for which rows (manual: Protocols, Hybrid layouts)")
    sim.add_argument("--parties", type=int, default=3, metavar="N", help="number of primary parties (default 3)")
    sim.add_argument("--split-mode", default="round-robin", choices=["round-robin", "blocks"],
                     help="horizontal only: deal rows round-robin (default) or in contiguous blocks")
    sim.add_argument("--per-party-keys", action="store_true",
                     help="vertical only: every party keeps its own column keys and decrypts its own columns")
    sim.add_argument("--recipient", default=None, metavar="NAME",
                     help="primary that receives the decrypted result (default p1)")
    sim.add_argument("--in-memory", action="store_true",
                     help="run all parties as threads in this process (no daemons, no TLS): quick checks only")
    engine = p.add_argument_group("engine of the party that runs the search",
                                  "the [engine] table of the simulated parties' configs: where the party "
                                  "whose role runs the search groups rows (the same result on every backend)")
    engine.add_argument("--backend", default=DEFAULT_BACKEND, metavar="NAME",
                        help=f"{' or '.join(backends())} (default {DEFAULT_BACKEND}; dask: the Dask cluster at "
                             "--scheduler, else a local cluster of --workers processes on loopback)")
    engine.add_argument("--workers", default="1", metavar="N|auto",
                        help="processes that group rows (default 1); with --backend dask: Dask workers")
    engine.add_argument("--scheduler", default=None, metavar="ADDR",
                        help="address of a running Dask scheduler (tcp://host:8786) for --backend dask")
    add_protocol_flags(p)  # each protocol's own flags, from its registry spec
    add_privacy_arguments(p)
    add_statistics_arguments(p)
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


def run(args: argparse.Namespace) -> int:
    from fedanon.cli.kit.aggregation import aggregate_rows, aggregated_values, check_fixed_point, loss_report
    from fedanon.cli.kit.inputs import load_inputs
    from fedanon.data.io.delimited import write_encoded_csv
    from fedanon.data.table import EncodedTable
    from fedanon.cli.kit.runconfig import run_from_args
    from fedanon.protocols.registry import protocol_spec
    from fedanon.cli.kit.summary import dp_text, party_dp

    if statistics_requested(args):  # noisy counts of the dealt table instead of an anonymization
        return run_statistics(args)
    spec = run_from_args(args)  # flags over the TOML: input, output, report, roles, CSV format
    workers = args.workers.strip()
    engine = EngineSettings(args.backend, int(workers) if workers.isdigit() else workers,
                            args.scheduler).validate("fedanon simulate", "--")  # before any party starts
    config, hierarchy_paths, _sensitive, _subset_path = spec.privacy
    table, kept, removed, hierarchies, subset = load_inputs(spec)
    aggregated_values(table, spec.aggregate)  # a non-number fails here, before any party starts
    if spec.hierarchy_sep != ";" or spec.encoding != "utf-8":
        # the simulated parties read ;-separated UTF-8 hierarchies: hand them normalized copies
        hierarchy_paths = {}
    layout = None
    if (args.layout is not None) != (args.distribution == "hybrid"):
        raise InputError("--layout LAYOUT.toml goes with --split hybrid (and --split hybrid needs --layout)")
    if args.layout is not None:
        from fedanon.data.layout import parse_layout

        layout = parse_layout(args.layout)
        args.parties = len(layout.parties)  # the layout names the primaries
    if config.model("dp") is not None:
        from fedanon.protocols.registry import dp_refusal

        refusal = dp_refusal(args.protocol, args.distribution)
        if refusal:
            raise InputError(refusal)
        if args.baseline:
            raise InputError("--baseline compares optimal anonymizations; a --dp release is a random draw: "
                             "leave out --baseline")
    if args.per_party_keys and args.distribution != "vertical":
        raise InputError("--per-party-keys applies only to --split vertical")
    options = {"per_party_keys": True} if args.per_party_keys else {}
    options.update(protocol_flag_options(args, args.protocol, config.quasi_identifiers, hierarchies))
    options.update(protocol_options(args.protocol, config.metric))  # refuses a metric it cannot optimize
    # a protocol with a class-means route (C, horizontal) releases mean columns from encrypted class
    # sums: the recipient never sees those columns' raw values; every other aggregated column is
    # aggregated at the recipient
    route = protocol_spec(args.protocol).class_means
    means = [c for c, f in spec.aggregate.items() if f == "mean"] \
        if route is not None and args.distribution in route.splits and not config.needs_subset else []
    if means:
        check_fixed_point(table, means, route.encodable, route.limits)
        options[route.option] = means
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
                             protocol=args.protocol, layout=layout, engine=engine)
    summary = result_summary(sim.party_reports)
    released, aggregated = sim.table, {}
    at_recipient = {c: f for c, f in spec.aggregate.items() if c not in means}
    if at_recipient:  # the recipient aggregates after decryption (it has seen the raw values)
        out_rows, aggregated = aggregate_rows(sim.columns, sim.rows, config.quasi_identifiers,
                                              summary.get("suppressed_rows"), at_recipient)
        released = EncodedTable.from_rows(sim.columns, out_rows)
    write_encoded_csv(spec.output, released, spec.delimiter)
    phases = protocol_phases(args.protocol)
    report = {**sim.report, "input": str(spec.input), "output": str(spec.output), "rows_written": released.n_rows,
              "config": config.to_dict(), "phase_table": phase_rows(sim.party_reports, phases),
              "transformation": summary.get("transformation"), "information_loss": summary.get("information_loss"),
              "metric": summary.get("metric"), "suppressed_rows": summary.get("suppressed_rows"),
              **({"aggregation": {**loss_report(aggregated),
                                  **{c: {"function": "mean", "computed_by": "Protocol C: encrypted class sums"}
                                     for c in means}}} if spec.aggregate else {}),
              "classes": summary.get("classes"), "removed_columns": removed,
              "columns": {"quasi_identifiers": list(config.quasi_identifiers),
                          "sensitive": list(config.sensitive_attributes),
                          "insensitive": [c for c in kept if c not in config.quasi_identifiers
                                          and c not in config.sensitive_attributes and c not in spec.aggregate],
                          "aggregated": dict(spec.aggregate),
                          "removed": removed},
              "pre_post_s": pre_post_seconds(sim.party_reports, sim.report.get("result_recipient", "p1"))}
    dp = party_dp(sim.party_reports)
    if dp:  # at the top level, as `fedanon anonymize` reports it
        report["dp"] = dp
    if (spec.report or args.html) and report.get("transformation"):
        from fedanon.protocols.dp.release import check_config
        from fedanon.report.analysis import analyze_protocol_result

        # the simulation holds the pooled input: input and output risk, utility (a real run cannot);
        # a DP release is judged as k-anonymity with its derived k
        analysis = analyze_protocol_result(table.select(kept).encoded(), hierarchies, check_config(config), report,
                                           released, research_subset=subset)
        report.update(analysis.to_dict())
        if args.html:
            analysis.write_html(args.html, f"fedanon simulate: Protocol {args.protocol}, {args.distribution}, "
                                           f"{args.parties} parties")
            report["html"] = str(args.html)
    baseline = None
    if args.baseline:
        from fedanon.protocols.sim.baseline import baseline_for_split

        baseline = baseline_for_split(header, rows, hierarchies, config, args.distribution, args.parties,
                                      split_mode=args.split_mode, layout=layout)
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
            f"{summary.get('suppressed_rows', 0)} suppressed, {released.n_rows} rows -> {spec.output}, "
            f"removed columns: {', '.join(removed) or 'none'}, "
            f"{sim.elapsed_s:.2f} s wall time (incl. start-up); protocol time at the recipient "
            f"{pre_post_seconds(sim.party_reports, sim.report.get('result_recipient', 'p1')):.3f} s "
            f"excluding the anonymize phase")
        if dp:
            Console().print(f"differential privacy: {dp_text(dp)}")
        print_phase_table(sim.party_reports, "time and bytes per phase and party", phases)
    return 0
