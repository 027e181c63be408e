"""`fedanon demo`: the first command a new user runs.

With no arguments it takes the bundled ADULT data (30,162 rows, 8 quasi-identifiers),
deals it over 3 primaries, starts them (and a helper where a protocol needs one) as
daemons on 127.0.0.1 (real certificates, gRPC over mutual TLS), runs every anonymizing
protocol of the registry horizontally and vertically, and Protocol B on a bundled hybrid layout
(two clinics hold rows of some columns, a registry the other columns of all their patients;
docs/protocols/hybrid.md), prints a line as each party starts
and ends each phase, the chosen transformation, the information loss and time/bytes per
phase, and a summary table. It anonymizes the pooled plaintext centrally, in this process,
and confirms that each secure run produced exactly that result (same transformation, same
row multiset; a hybrid run, the central anonymization of the joined table); the exit status is
non-zero if not. That comparison is the whole point of the
protocols: the institutions get what a trusted third party would have produced.

The daemons of one split start once and serve every protocol of that split (their data files
are rewritten between runs): starting them per run cost more than the runs of A and B. The
splits run side by side, each with its own daemons: most of a run is one party waiting for
another, so one split alone leaves a core idle. The hybrid case runs Protocol B only (a few
seconds); `--full` runs the other protocols on it too (`--protocol` still picks among them).
Protocol C runs, by default, on a seeded 2,000-row sample of a larger data set (compared with
the centralized anonymization of that sample); `--full` runs it on every row as well. Each
run's released table and report are written to the output folder, whose paths end the output."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, Callable

import fedanon
from fedanon.data.layout import Layout, parse_layout
from fedanon.errors import InputError, PeerError
from fedanon.parties.reaper import sigterm_safe
from fedanon.protocols.registry import DEFAULT_PROTOCOL, available_protocols, protocol_spec

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

#: the bundled hybrid layout the demo runs on each data set (a data set without one has no hybrid
#: case); the hybrid table is the data set's columns that the layout's parties hold
HYBRID_LAYOUTS = {"adult": "layout-2-1.toml"}

#: the protocols the demo runs on the hybrid layout unless `--full`: the registry's default
#: protocol (B, a few seconds there; A and C cost much more)
HYBRID_DEFAULT_PROTOCOLS = (DEFAULT_PROTOCOL,)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help="run the secure protocols on bundled data over local daemons and check them against central anonymization",
        description="Split bundled data over N primaries (+ a helper where needed) on localhost (real TLS, real "
                    "gRPC), run each protocol horizontally and vertically and Protocol B on a bundled hybrid layout, "
                    "and confirm each result equals the centralized anonymization of the pooled (hybrid: the "
                    "joined) data.",
    )

    p.add_argument("--protocol", action="append", type=str.upper, choices=available_protocols(anonymizing=True),
                   default=None, help="run only this protocol (repeatable; default all)")
    p.add_argument("--dataset", default="adult", choices=sorted(DATASETS), help="bundled data set (default adult)")
    p.add_argument("--parties", type=int, default=3, metavar="N", help="number of primaries (default 3)")
    p.add_argument("--k", type=int, default=None, help="k-anonymity (default: 5 for adult, 2 for example)")
    p.add_argument("--split", action="append", choices=["horizontal", "vertical", "hybrid"], default=None,
                   help="run only this split (repeatable; default all three; hybrid: the data set's bundled "
                        "layout, whose parties replace --parties; Protocol B only unless --full)")
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
    """'Protocol C runs on a 2,000-row sample', from the registry, for the help text."""
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


@dataclasses.dataclass
class Case:
    """One split's table, settings and centralized references: the runs of a split compare with these.

    The hybrid case has a table of its own (the columns its layout's parties hold) and its
    reference is the central anonymization of the joined table, not of the pooled one."""

    split: str
    columns: list[str]
    rows: list[list[str]]
    paths: dict[str, Path]
    config: Any
    protocols: list[str]
    references: dict[str, tuple[list[list[str]], Any]]  # protocol -> (rows dealt, Central)
    central_all: Any  # the Central of all `rows` (the baseline compares with it)
    layout: Layout | None = None


def hybrid_table(dataset: str, columns: list[str], rows: list[list[str]]) -> tuple[Layout, list[str], list[list[str]]]:
    """The bundled layout of `dataset` and the table it deals: the columns its parties hold, in table order."""
    if dataset not in HYBRID_LAYOUTS:
        raise InputError(f"--split hybrid: the {dataset} data set has no bundled hybrid layout "
                         f"(data sets with one: {', '.join(sorted(HYBRID_LAYOUTS))})")
    layout = parse_layout(data_dir(dataset) / HYBRID_LAYOUTS[dataset])
    held = {c for party in layout.parties for c in party.columns}
    keep = [i for i, c in enumerate(columns) if c in held]
    return layout, [columns[i] for i in keep], [[row[i] for i in keep] for row in rows]


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
    from fedanon.protocols.sim.hybrid import centralized_joined

    console = Console()
    protocols = args.protocol or available_protocols(anonymizing=True)
    spec = DATASETS[args.dataset]
    folder = data_dir(args.dataset)
    if args.parties < 2:
        raise InputError(f"the demo needs at least 2 primaries, got --parties {args.parties}")
    splits = args.split or ["horizontal", "vertical"] + (["hybrid"] if args.dataset in HYBRID_LAYOUTS else [])
    all_columns, all_rows = read_table_csv(folder / f"{args.dataset}.csv")
    qis = list(spec["qis"])
    paths = {q: folder / f"{args.dataset}_hierarchy_{q}.csv" for q in qis}
    hierarchies = {q: Hierarchy.read_csv(p, q) for q, p in paths.items()}

    def settings(quasi_identifiers: list[str]) -> AnonymizationConfig:
        made = AnonymizationConfig(quasi_identifiers, k=spec["k"] if args.k is None else args.k,
                                   suppression=spec["suppression"], metric=args.metric or spec["metric"])
        made.validate()
        return made

    config = settings(qis)
    hybrid = hybrid_table(args.dataset, all_columns, all_rows) if "hybrid" in splits else None
    out_dir = output_folder(args.output_dir)
    console.print(f"[bold]fedanon demo[/bold]: {args.dataset} ({len(all_rows):,} rows, QIs {', '.join(qis)}), "
                  f"{config.k}-anonymity, {config.suppression:.0%} suppression, metric {config.metric}; "
                  f"protocols {', '.join(protocols)} over {args.parties} primaries "
                  + ("in memory" if args.in_memory else "as daemons on 127.0.0.1 (gRPC + mutual TLS)"))
    runnable = []
    for protocol in protocols:
        pspec = protocol_spec(protocol)
        if pspec.metrics is not None and config.metric not in pspec.metrics:
            console.print(f"skipped: Protocol {protocol} cannot optimize metric {config.metric!r} (its registry "
                          f"entry lists the metrics it can); try --metric {pspec.metrics[0]} or another of "
                          f"{', '.join(pspec.metrics[1:])}")
        else:
            runnable.append(protocol)

    cases: list[Case] = []
    pooled = [s for s in splits if s != "hybrid"]
    if pooled and runnable:
        # each reference once, before any run (every pooled split compares with it): a sampled protocol's is
        # its sample's
        everything = centralized(all_columns, all_rows, hierarchies, config)
        console.print(f"centralized reference (pooled plaintext, in-process): transformation "
                      f"{everything.result.transformation}, loss {everything.result.information_loss:.6g}, "
                      f"{everything.result.elapsed_s:.2f} s")
        references: dict[str, tuple[list[list[str]], Any]] = {}
        for protocol in runnable:
            pick = sample_rows(protocol, len(all_rows), args.full)
            if pick is None:
                references[protocol] = (all_rows, everything)
            else:
                sampled = [all_rows[i] for i in pick]
                references[protocol] = (sampled, centralized(all_columns, sampled, hierarchies, config))
        cases += [Case(split, all_columns, all_rows, paths, config, runnable, references, everything)
                  for split in pooled]
    if hybrid is not None:
        layout, h_columns, h_rows = hybrid
        h_qis = [q for q in qis if q in h_columns]
        h_config = settings(h_qis)
        h_hierarchies = {q: hierarchies[q] for q in h_qis}
        chosen = [p for p in runnable if args.full or p in HYBRID_DEFAULT_PROTOCOLS]
        left = [p for p in runnable if p not in chosen]
        if left and args.protocol:  # named, yet not run on this split: say why
            console.print(f"hybrid split: Protocol {' and '.join(left)} runs on the hybrid layout with --full")
        h_refs: dict[str, tuple[list[list[str]], Any]] = {}
        for protocol in chosen:
            pick = sample_rows(protocol, len(h_rows), args.full)
            dealt = h_rows if pick is None else [h_rows[i] for i in pick]
            h_refs[protocol] = (dealt, centralized_joined(h_columns, dealt, layout, h_hierarchies, h_config))
        if chosen:
            joined = next((central for dealt, central in h_refs.values() if dealt is h_rows), None) \
                or centralized_joined(h_columns, h_rows, layout, h_hierarchies, h_config)
            holders = "; ".join(f"{party.name}: {', '.join(party.columns)}" for party in layout.parties)
            console.print(f"centralized reference, hybrid layout {HYBRID_LAYOUTS[args.dataset]} ({holders}; QIs "
                          f"{', '.join(h_qis)}): the joined table's {len(layout.joined_rows(len(h_rows))):,} rows "
                          f"anonymized in-process, transformation {joined.result.transformation}, loss "
                          f"{joined.result.information_loss:.6g}, {joined.result.elapsed_s:.2f} s")
            cases.append(Case("hybrid", h_columns, h_rows, {q: paths[q] for q in h_qis}, h_config, chosen, h_refs,
                              joined, layout))
        else:
            console.print(f"skipped: the hybrid split runs Protocol {' or '.join(HYBRID_DEFAULT_PROTOCOLS)} "
                          "unless --full, and none of those runs here")

    lock = threading.Lock()  # one split's report block at a time on stdout
    records: dict[tuple[str, str], dict[str, Any]] = {}
    consortia: list[SplitConsortium] = []  # started daemons, for stop_all
    stopping = threading.Event()

    def one_run(case: Case, protocol: str, consortium: SplitConsortium | None) -> None:
        split, pspec = case.split, protocol_spec(protocol)
        options = {"counters": args.counters} if "counters" in pspec.options else {}
        rows, central = case.references[protocol]
        progress = PhaseLines(f"{protocol} {split:<10}", enabled=not args.quiet)
        if consortium is not None:
            sim = consortium.run(rows, protocol, options, on_event=progress)
        else:
            sim = simulate_table(case.columns, rows, case.paths, case.config, split, args.parties, options=options,
                                 transport="memory", progress=False, protocol=protocol, layout=case.layout)
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
        if case.layout is not None:
            records[(split, protocol)].update({"layout": HYBRID_LAYOUTS[args.dataset],
                                               "joined_rows": len(case.layout.joined_rows(len(rows)))})
        recipient = case.layout.names[0] if case.layout is not None else "p1"
        with lock:
            console.rule(f"Protocol {protocol} ({pspec.summary}), {split} split"
                         + (f" ({HYBRID_LAYOUTS[args.dataset]}: {', '.join(case.layout.names)})"
                            if case.layout is not None else "")
                         + ("" if rows is case.rows else f", a {len(rows):,}-row sample (all rows: --full)"))
            console.print(f"transformation: {summary.get('transformation')}")
            console.print(f"information loss: {summary.get('information_loss', float('nan')):.6g} "
                          f"({case.config.metric}), {summary.get('suppressed_rows', 0)} rows suppressed, "
                          f"{len(sim.rows):,} rows decrypted at {recipient}, {sim.elapsed_s:.2f} s")
            print_phase_table(sim.party_reports, f"time and bytes per phase (Protocol {protocol}, {split})",
                              protocol_phases(protocol))
            reference = "the joined table" if case.layout is not None else "the pooled data"
            if problems:
                console.print(f"[bold red]MISMATCH[/bold red] with the centralized anonymization of {reference}: "
                              f"{'; '.join(problems)}")
            else:
                console.print(f"[bold green]OK[/bold green]: identical to the centralized anonymization of "
                              f"{reference} (same transformation, same multiset of {len(sim.rows):,} rows)")

    def one_split(case: Case) -> None:
        with contextlib.ExitStack() as stack:
            consortium = None
            if not args.in_memory:  # one set of daemons serves every protocol of this split
                helper = any(protocol_spec(p).needs_helper for p in case.protocols)
                consortium = stack.enter_context(SplitConsortium(case.columns, case.split, args.parties, case.paths,
                                                                 case.config, helper=helper, seed_rows=case.rows,
                                                                 layout=case.layout))
                with lock:
                    if stopping.is_set():  # stopped while these daemons started: stop them, run nothing
                        raise PeerError("the demo was stopped")
                    consortia.append(consortium)
            for protocol in case.protocols:
                one_run(case, protocol, consortium)
        # the baseline depends on the split only (on all rows)
        baseline = baseline_for_split(case.columns, case.rows,
                                      {q: hierarchies[q] for q in case.config.quasi_identifiers}, case.config,
                                      case.split, args.parties, central=case.central_all.result, layout=case.layout)
        with lock:
            console.print(f"secure integration, {case.split} split: {baseline.one_line()}")

    def stop_all() -> None:
        with lock:
            stopping.set()
            started = list(consortia)
        for consortium in started:
            consortium.close()

    by_split = {case.split: case for case in cases}
    if cases:
        run_splits(lambda split: one_split(by_split[split]), [c.split for c in cases], concurrent=not args.in_memory,
                   stop=stop_all)
    summary_rows = [records[(c.split, p)] for c in cases for p in c.protocols if (c.split, p) in records]
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
