"""`fedanon demo`: the first command a new user runs.

With no arguments it takes the bundled ADULT data (30,162 rows, 8 quasi-identifiers),
deals it over 3 primaries, starts them (and a helper where a protocol needs one) as
daemons on 127.0.0.1 (real certificates, gRPC over mutual TLS), runs every anonymizing
protocol of the registry horizontally and vertically, prints a line as each party starts
and ends each phase, the chosen transformation, the information loss and time/bytes per
phase, and a summary table. It anonymizes the pooled plaintext centrally, in this process,
and confirms that each secure run produced exactly that result (same transformation, same
row multiset); the exit status is non-zero if not. That comparison is the whole point of the
protocols: the institutions get what a trusted third party would have produced.

The daemons of one split start once and serve every protocol of that split (their data files
are rewritten between runs): starting them per run cost more than the runs of A and B. The two
splits run side by side, each with its own daemons: most of a run is one party waiting for
another, so one split alone leaves a core idle.
Protocol C runs, by default, on a seeded 3,000-row sample of a larger data set (compared with
the centralized anonymization of that sample); `--full` runs it on every row as well. Each
run's released table and report are written to the output folder, whose paths end the output."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

import fedanon
from fedanon.errors import InputError, PeerError
from fedanon.parties.reaper import sigterm_safe
from fedanon.protocols.registry import available_protocols, protocol_spec

#: the seed of the sample a protocol with `demo_sample_rows` (registry) runs on; `--full` runs
#: every protocol on every row
SAMPLE_SEED = 7

DATASETS: dict[str, dict[str, Any]] = {
    "adult": {
        "qis": ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"],
        "k": 5, "suppression": 0.02, "metric": "loss",
    },
    "example": {"qis": ["age", "sex", "zipcode"], "k": 2, "suppression": 0.0, "metric": "nonuniform-entropy"},
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the secure protocols on bundled data over local daemons and check them against central anonymization",
        description="Split bundled data over N primaries (+ a helper where needed) on localhost (real TLS, real "
                    "gRPC), run each protocol horizontally and vertically, and confirm each result equals the "
                    "centralized anonymization of the pooled data.",
    )

    p.add_argument("--protocol", action="append", type=str.upper, choices=available_protocols(anonymizing=True),
                   default=None, help="run only this protocol (repeatable; default all)")
    p.add_argument("--dataset", default="adult", choices=sorted(DATASETS), help="bundled data set (default adult)")
    p.add_argument("--parties", type=int, default=3, metavar="N", help="number of primaries (default 3)")
    p.add_argument("--k", type=int, default=None, help="k-anonymity (default: 5 for adult, 2 for example)")
    p.add_argument("--split", action="append", choices=["horizontal", "vertical"], default=None,
                   help="run only this split (repeatable; default both)")
    p.add_argument("--in-memory", action="store_true",
                   help="threads instead of daemons (no TLS, no progress lines): quick check")
    p.add_argument("--metric", default=None, help="information-loss metric (default: loss for adult, "
                   "nonuniform-entropy for example); a protocol that cannot optimize it is skipped, with the reason")
    p.add_argument("--counters", default="elgamal", choices=["paillier", "elgamal"],
                   help="Protocol C's counter cipher in the demo (default elgamal, for speed; paillier is "
                        "Protocol C's own default, 3072-bit)")
    p.add_argument("--full", action="store_true",
                   help=f"every protocol on every row (by default {sampled_text()} of a larger data set, "
                        "which keeps the demo to about a minute)")
    p.add_argument("--output-dir", "-o", type=Path, default=None, metavar="DIR",
                   help="where to write each run's released table (PROTOCOL-SPLIT.csv), its report "
                        "(PROTOCOL-SPLIT.json) and summary.json (default: a new folder fedanon-demo, or "
                        "fedanon-demo-2, -3, ... if taken, under the current one)")
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no live progress lines (one per party and phase, on stderr); results and the summary "
                        "still print")
    p.set_defaults(handler=sigterm_safe(run))  # SIGTERM cleans up daemons and temp files too


def sample_rows(protocol: str, n_rows: int, full: bool) -> list[int] | None:
    """Which rows a protocol's run takes (None: all): a seeded sample of the registry's
    `demo_sample_rows` where the protocol has one, unless `full`."""
    size = protocol_spec(protocol).demo_sample_rows
    if full or size is None or n_rows <= size:
        return None
    import numpy as np

    return sorted(np.random.default_rng(SAMPLE_SEED).choice(n_rows, size=size, replace=False).tolist())


def sampled_text() -> str:
    """'Protocol C runs on a 3,000-row sample', from the registry, for the help text."""
    sampled = [protocol_spec(p) for p in available_protocols(anonymizing=True)
               if protocol_spec(p).demo_sample_rows is not None]
    return " and ".join(f"Protocol {s.name} runs on a {s.demo_sample_rows:,}-row sample" for s in sampled) \
        or "no protocol runs on a sample"


def data_dir(dataset: str) -> Path:
    return Path(fedanon.__file__).parent / "data" / dataset


def output_folder(wanted: Path | None) -> Path:
    """`--output-dir`, or a fresh `fedanon-demo[-N]` folder under the current one (never an old one)."""
    if wanted is not None:
        wanted.mkdir(parents=True, exist_ok=True)
        return wanted
    for n in range(1, 10_000):
        folder = Path("fedanon-demo" if n == 1 else f"fedanon-demo-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise InputError("no free fedanon-demo-N folder in the current folder; name one with --output-dir")


def run(args: argparse.Namespace) -> int:
    import contextlib
    import json
    import threading

    from rich.console import Console
    from rich.table import Table

    from fedanon.consortium.daemons import SplitConsortium
    from fedanon.consortium.phaselines import PhaseLines
    from fedanon.consortium.simulation import print_phase_table, protocol_phases, result_summary, simulate_table
    from fedanon.protocols.registry import available_protocols, protocol_spec
    from fedanon.model.config import AnonymizationConfig
    from fedanon.data.io.delimited import read_table_csv, write_table_csv
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.kit.atomicfile import write_text_atomic
    from fedanon.protocols.sim.baseline import baseline_for_split
    from fedanon.protocols.sim.equivalence import centralized, differences

    console = Console()
    protocols = args.protocol or available_protocols(anonymizing=True)
    spec = DATASETS[args.dataset]
    folder = data_dir(args.dataset)
    if args.parties < 2:
        raise InputError(f"the demo needs at least 2 primaries, got --parties {args.parties}")
    all_columns, all_rows = read_table_csv(folder / f"{args.dataset}.csv")
    qis = list(spec["qis"])
    paths = {q: folder / f"{args.dataset}_hierarchy_{q}.csv" for q in qis}
    hierarchies = {q: Hierarchy.read_csv(p, q) for q, p in paths.items()}
    config = AnonymizationConfig(qis, k=spec["k"] if args.k is None else args.k, suppression=spec["suppression"],
                                 metric=args.metric or spec["metric"])
    config.validate()
    out_dir = output_folder(args.output_dir)
    splits = args.split or ["horizontal", "vertical"]
    console.print(f"[bold]fedanon demo[/bold]: {args.dataset} ({len(all_rows):,} rows, QIs {', '.join(qis)}), "
                  f"{config.k}-anonymity, {config.suppression:.0%} suppression, metric {config.metric}; "
                  f"protocols {', '.join(protocols)} over {args.parties} primaries "
                  + ("in memory" if args.in_memory else "as daemons on 127.0.0.1 (gRPC + mutual TLS)"))
    everything = (all_rows, centralized(all_columns, all_rows, hierarchies, config))
    console.print(f"centralized reference (pooled plaintext, in-process): transformation "
                  f"{everything[1].result.transformation}, loss {everything[1].result.information_loss:.6g}, "
                  f"{everything[1].result.elapsed_s:.2f} s")
    runnable = []
    for protocol in protocols:
        spec = protocol_spec(protocol)
        if spec.metrics is not None and config.metric not in spec.metrics:
            console.print(f"skipped: Protocol {protocol} cannot optimize metric {config.metric!r} (its registry "
                          f"entry lists the metrics it can); try --metric {spec.metrics[0]} or another of "
                          f"{', '.join(spec.metrics[1:])}")
        else:
            runnable.append(protocol)
    # each reference once, before any run (both splits compare with it): a sampled protocol's is its sample's
    references: dict[str, tuple[list[list[str]], Any]] = {}
    for protocol in runnable:
        pick = sample_rows(protocol, len(all_rows), args.full)
        if pick is None:
            references[protocol] = everything
        else:
            sampled = [all_rows[i] for i in pick]
            references[protocol] = (sampled, centralized(all_columns, sampled, hierarchies, config))

    lock = threading.Lock()  # one split's report block at a time on stdout
    records: dict[tuple[str, str], dict[str, Any]] = {}
    consortia: list[SplitConsortium] = []  # started daemons, for stop_all
    stopping = threading.Event()

    def one_run(split: str, protocol: str, consortium: SplitConsortium | None) -> None:
        spec = protocol_spec(protocol)
        options = {"counters": args.counters} if "counters" in spec.options else {}
        rows, central = references[protocol]
        progress = PhaseLines(f"{protocol} {split:<10}", enabled=not args.quiet)
        if consortium is not None:
            sim = consortium.run(rows, protocol, options, on_event=progress)
        else:
            sim = simulate_table(all_columns, rows, paths, config, split, args.parties, options=options,
                                 transport="memory", progress=False, protocol=protocol)
        summary = result_summary(sim.party_reports)
        problems = differences(central, summary.get("transformation"), sim.columns, sim.rows)
        sent = max((sum(r.get("traffic", {}).get("bytes_sent_by_phase", {}).values())
                    for r in sim.party_reports.values()), default=0)
        released, report = out_dir / f"{protocol}-{split}.csv", out_dir / f"{protocol}-{split}.json"
        write_table_csv(released, sim.columns, sim.rows)
        write_text_atomic(report, json.dumps(sim.report, indent=2, sort_keys=True, default=str) + "\n")
        records[(split, protocol)] = {
            "protocol": protocol, "split": split, "rows": len(rows), "equal_to_centralized": not problems,
            "problems": problems, "seconds": round(sim.elapsed_s, 3), "max_bytes_sent_by_one_party": sent,
            "released": str(released), "report": str(report)}
        with lock:
            console.rule(f"Protocol {protocol} ({spec.summary}), {split} split"
                         + ("" if rows is all_rows else f", a {len(rows):,}-row sample (all rows: --full)"))
            console.print(f"transformation: {summary.get('transformation')}")
            console.print(f"information loss: {summary.get('information_loss', float('nan')):.6g} "
                          f"({config.metric}), {summary.get('suppressed_rows', 0)} rows suppressed, "
                          f"{len(sim.rows):,} rows decrypted at p1, {sim.elapsed_s:.2f} s")
            print_phase_table(sim.party_reports, f"time and bytes per phase (Protocol {protocol}, {split})",
                              protocol_phases(protocol))
            if problems:
                console.print(f"[bold red]MISMATCH[/bold red] with the centralized anonymization: "
                              f"{'; '.join(problems)}")
            else:
                console.print("[bold green]OK[/bold green]: identical to the centralized anonymization "
                              f"(same transformation, same multiset of {len(sim.rows):,} rows)")

    def one_split(split: str) -> None:
        with contextlib.ExitStack() as stack:
            consortium = None
            if not args.in_memory:  # one set of daemons serves every protocol of this split
                helper = any(protocol_spec(p).needs_helper for p in runnable)
                consortium = stack.enter_context(SplitConsortium(all_columns, split, args.parties, paths, config,
                                                                 helper=helper, seed_rows=all_rows))
                with lock:
                    if stopping.is_set():  # stopped while these daemons started: stop them, run nothing
                        raise PeerError("the demo was stopped")
                    consortia.append(consortium)
            for protocol in runnable:
                one_run(split, protocol, consortium)
        # the baseline depends on the split only (on all rows)
        baseline = baseline_for_split(all_columns, all_rows, hierarchies, config, split, args.parties,
                                      central=everything[1].result)
        with lock:
            console.print(f"secure integration, {split} split: {baseline.one_line()}")

    def stop_all() -> None:
        with lock:
            stopping.set()
            started = list(consortia)
        for consortium in started:
            consortium.close()

    if runnable:
        run_splits(one_split, splits, concurrent=not args.in_memory, stop=stop_all)
    summary_rows = [records[(split, p)] for split in splits for p in runnable if (split, p) in records]
    written = [Path(r[key]) for r in summary_rows for key in ("released", "report")]
    summary_path = out_dir / "summary.json"
    write_text_atomic(summary_path, json.dumps({"dataset": args.dataset, "runs": summary_rows}, indent=2) + "\n")
    written.append(summary_path)
    table = Table(title="summary" + ("" if args.in_memory else " (daemons started once per split)"))
    for name, justify in (("protocol", "left"), ("split", "left"), ("rows", "right"), ("vs centralized", "left"),
                          ("s", "right"), ("max kB sent", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in summary_rows:
        table.add_row(r["protocol"], r["split"], f"{r['rows']:,}", "equal" if r["equal_to_centralized"] else
                      "MISMATCH", f"{r['seconds']:.2f}", f"{r['max_bytes_sent_by_one_party'] / 1e3:,.1f}")
    console.print(table)
    # plain prints: a path must stay on one line to be copied, whatever the terminal's width
    print(f"wrote {len(written)} files (released tables PROTOCOL-SPLIT.csv, run reports PROTOCOL-SPLIT.json, "
          "summary.json):")
    for path in written:
        print(f"  {path}")
    return 0 if all(r["equal_to_centralized"] for r in summary_rows) else 1


def run_splits(work: Callable[[str], None], splits: list[str], concurrent: bool, stop: Callable[[], None]) -> None:
    """Each split's runs, the splits side by side when `concurrent`.

    Why side by side: a run is mostly one party waiting for another (Protocol C's helper and key
    holder take turns for every checked node), so one split leaves a core idle; the other split's
    daemons use it. If either split fails, or Ctrl-C / SIGTERM reaches the main thread, `stop`
    stops every split's daemons before the error goes on: the process must not exit while a
    worker thread still holds running daemons.
    """
    import queue
    import threading

    if not concurrent or len(splits) < 2:
        for split in splits:
            work(split)
        return
    finished: "queue.Queue[BaseException | None]" = queue.Queue()

    def guarded(split: str) -> None:
        try:
            work(split)
        except BaseException as exc:  # handed to the main thread, which raises the first at once
            finished.put(exc)
        else:
            finished.put(None)

    threads = [threading.Thread(target=guarded, args=(s,), name=f"demo-{s}", daemon=True) for s in splits]
    for t in threads:
        t.start()
    try:
        for _ in threads:
            error = finished.get()
            if error is not None:
                raise error
    except BaseException:
        stop()
        for t in threads:  # their runs fail at once now that the daemons are gone
            t.join(timeout=30)
        raise
