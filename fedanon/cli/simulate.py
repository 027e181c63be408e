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
from typing import Any

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


def run(args: argparse.Namespace) -> int:
    from fedanon.cli.kit.inputs import load_inputs
    from fedanon.data.io.delimited import write_encoded_csv
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
    write_encoded_csv(spec.output, sim.table, spec.delimiter)
    summary = result_summary(sim.party_reports)
    phases = protocol_phases(args.protocol)
    report = {**sim.report, "input": str(spec.input), "output": str(spec.output), "rows_written": sim.table.n_rows,
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
        analysis = analyze_protocol_result(table.select(kept).encoded(), hierarchies, config, report, sim.table,
                                           research_subset=subset)
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
            f"{summary.get('suppressed_rows', 0)} suppressed, {sim.table.n_rows} rows -> {spec.output}, "
            f"removed columns: {', '.join(removed) or 'none'}, "
            f"{sim.elapsed_s:.2f} s wall time (incl. start-up); protocol time at the recipient "
            f"{pre_post_seconds(sim.party_reports, sim.report.get('result_recipient', 'p1')):.3f} s "
            f"excluding the anonymize phase")
        print_phase_table(sim.party_reports, "time and bytes per phase and party", phases)
    return 0
