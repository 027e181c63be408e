"""`fedanon anonymize`: optimal local anonymization of one CSV table.

The command is a thin shell around `fedanon.engine.anonymize`: it reads and
cross-checks the input files (so that every user mistake is reported as one
line naming file, line and value), shows progress, writes the anonymized CSV
and a JSON report, and can re-check its own output with the independent
verifier (`--verify`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fedanon.kit.atomicfile import write_text_atomic
from fedanon.engine.search.heuristic import DEFAULT_NODE_BUDGET, SearchLimits
from fedanon.engine.check.backends.base import DEFAULT_BACKEND, check_backend
from fedanon.engine.check.backends.processes import AUTO_MAX_WORKERS, AUTO_MIN_ROWS, resolve_workers
from fedanon.data.io.delimited import write_columns
from fedanon.cli.kit.aggregation import aggregate_engine_result, aggregated_values, loss_report
from fedanon.cli.kit.inputs import load_inputs
from fedanon.cli.kit.runconfig import RunSpec, add_privacy_arguments, run_from_args
from fedanon.data.io.registry import format_of
from fedanon.errors import InputError

SUPPRESSED = "*"
# Default bound of the heuristic search (lattices above the node budget). Why a default: a
# huge lattice (11 QIs: tens of millions of nodes) can keep the best-first search proving
# optimality for many minutes after it has found a good verified solution; an interactive
# command should answer within about a minute and say the optimum is not proven.
DEFAULT_TIME_LIMIT_S = 60.0
NO_TIME_LIMIT = ("none", "off", "inf", "unlimited")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "anonymize",
        help="anonymize one local CSV table optimally (Flash)",
        description="Find the globally optimal full-domain generalization (plus tuple suppression) "
                    "of INPUT.csv under the given privacy models and information-loss metric, "
                    "and write the anonymized table.",
    )
    p.add_argument("input", nargs="?", default=None, metavar="INPUT.csv",
                   help="table to anonymize (first line = header)")
    add_privacy_arguments(p)
    search = p.add_argument_group("search")
    search.add_argument("--node-budget", type=int, default=None, metavar="N",
                        help=f"exact Flash up to N lattice nodes, a heuristic search above "
                             f"(default {DEFAULT_NODE_BUDGET:,})")
    search.add_argument("--time-limit", default=None, metavar="S|none",
                        help="seconds the heuristic search (lattices above --node-budget) may take; it then "
                             "returns the best verified transformation found with optimum_found false, a loss "
                             "lower bound and the gap. 'none': run until the optimum is proven, however long "
                             f"(default {DEFAULT_TIME_LIMIT_S:g} s; lattices within the node budget are always "
                             "searched exactly)")
    search.add_argument("--workers", default="1", metavar="N|auto",
                        help="processes that group the rows of a check (row partitions in shared memory, "
                             "class tables summed; same result; only nodes with few classes go to the "
                             f"workers). auto: one per CPU, at most {AUTO_MAX_WORKERS}, from "
                             f"{AUTO_MIN_ROWS:,} rows on (default 1); with --backend dask: Dask workers")
    search.add_argument("--backend", default=DEFAULT_BACKEND, metavar="NAME",
                        help="where the rows of a check are grouped: processes (local processes over shared "
                             "memory) or dask (a Dask cluster: the one at --scheduler, else a local cluster of "
                             "--workers processes on loopback; needs fedanon[cluster]); same result "
                             f"(default {DEFAULT_BACKEND})")
    search.add_argument("--scheduler", default=None, metavar="ADDR",
                        help="address of a running Dask scheduler (tcp://host:8786) for --backend dask")
    out = p.add_argument_group("output")
    out.add_argument("--output", "-o", default=None, metavar="OUT.csv", help="anonymized table")
    out.add_argument("--report", default=None, metavar="REPORT.json", help="write a JSON report")
    out.add_argument("--html", default=None, metavar="REPORT.html",
                     help="write a self-contained HTML report (risk, utility, plots); needs fedanon[report]")
    out.add_argument("--drop-suppressed", action="store_true",
                     help="leave suppressed rows out instead of writing '*' in every QI")
    out.add_argument("--quiet", "-q", action="store_true", help="no progress bar, no summary")
    out.add_argument("--verify", action="store_true",
                     help="re-check the output with the independent row-level verifier")
    p.set_defaults(handler=run)


# --------------------------------------------------------------------------- inputs
def _progress_factory(quiet: bool) -> tuple[Callable[[int, int], None] | None, Callable[[], None]]:
    if quiet or not sys.stderr.isatty():
        return None, lambda: None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("searching lattice"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("nodes"), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True)
    task = progress.add_task("search", total=None)
    progress.start()

    def update(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total)

    return update, progress.stop


def _summary(spec: RunSpec, report: dict[str, Any], written: int) -> None:
    from fedanon.cli.kit.summary import print_summary, result_rows

    rows = [("input", str(spec.input)), *result_rows(report)]
    if spec.insensitive:
        rows.append(("insensitive", ", ".join(spec.insensitive) + " (unchanged)"))
    for name, figures in report.get("aggregation", {}).items():
        rows.append((f"aggregated {name}", f"class {figures['function']}, SSE/SST {figures['sse_sst']:.4g}"))
    if "loss_lower_bound" in report:
        limit = report.get("time_limit_s")
        rows.append(("optimum", "proven" if report["optimum_found"] else
                     f"not proven: loss lower bound {report['loss_lower_bound']:.6g}, gap {report['gap']:.2%} "
                     f"(search stopped by the {limit:g} s time limit; --time-limit S or none to search longer)"))
    rows.append(("checks / roll-ups",
                 f"{report['checks']} / {report['rollups']} of {report.get('lattice_size', '?')} nodes"))
    rows.append(("time", f"{report['elapsed_s']:.3f} s"))
    rows.append(("output", f"{spec.output} ({written} rows)"))
    if spec.report:
        rows.append(("report", str(spec.report)))
    if report.get("html"):
        rows.append(("html report", report["html"]))
    if "verified" in report:
        rows.append(("verifier", "OK" if report["verified"] else "VIOLATIONS"))
    print_summary("fedanon anonymize", rows)


def _write(path: Path, action: Callable[[], Any]) -> None:
    """Run a file write; an unwritable path is a user error, not a traceback."""
    try:
        action()
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None


def _write_in_background(path: Path, action: Callable[[], Any]) -> Callable[[], None]:
    """Start a file write on a second thread; returns the call that waits for it.

    Why: pyarrow's CSV writer runs without the GIL, so on millions of rows writing
    the output (~0.9 s at 4.8 M rows) overlaps the report's risk and utility
    figures on the other core instead of preceding them. The returned call
    re-raises what the write raised (an unwritable path as `InputError`, like
    `_write`); it must be called on every path out, so no write outlives the command.
    """
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fedanon-write")
    future = pool.submit(_write, path, action)

    def finish() -> None:
        try:
            future.result()
        finally:
            pool.shutdown(wait=True)

    return finish


# --------------------------------------------------------------------------- command
def search_limits(args: argparse.Namespace) -> SearchLimits:
    """--node-budget / --time-limit, checked (InputError: one line, exit code 2)."""
    budget = DEFAULT_NODE_BUDGET if args.node_budget is None else args.node_budget
    if budget < 0:
        raise InputError(f"--node-budget must be >= 0, got {budget}")
    return SearchLimits(node_budget=budget, time_limit=parse_time_limit(args.time_limit))


def parse_time_limit(text: str | float | None) -> float | None:
    """--time-limit: seconds, 'none' for no limit, not given for DEFAULT_TIME_LIMIT_S."""
    if text is None:
        return DEFAULT_TIME_LIMIT_S
    if isinstance(text, str) and text.strip().lower() in NO_TIME_LIMIT:
        return None
    try:
        limit = float(text)
    except ValueError:
        limit = math.nan
    if not (limit > 0 and math.isfinite(limit)):
        raise InputError(f"--time-limit must be a positive number of seconds or 'none', got {str(text)[:40]!r}")
    return limit


def read_on_workers(spec: RunSpec, backend: str) -> bool:
    """Whether the input is read by partition on the cluster's workers: Parquet (a file or a
    directory of files) with --backend dask. The output is then a directory of Parquet files."""
    return backend == "dask" and spec.input is not None and (
        Path(spec.input).is_dir() or format_of(spec.input) == "parquet")


def run_partitioned(args: argparse.Namespace, spec: RunSpec) -> int:
    """`anonymize` of a Parquet dataset read on the Dask workers: no row reaches this process.

    What needs every row in one place -- the research subset, the verifier, the HTML report's
    risk and utility figures, dropping suppressed rows -- is refused in one line."""
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.engine.partitioned import anonymize_partitioned

    config, hierarchy_paths, _sensitive, subset_path = spec.privacy
    refused = [flag for flag, given in (("delta-presence's research subset", subset_path is not None), ("--verify", args.verify),
                                        ("--aggregate", bool(spec.aggregate)),
                                        ("--html", args.html is not None), ("--drop-suppressed", spec.drop_suppressed))
               if given]
    if refused:
        raise InputError(f"{spec.input}: {', '.join(refused)} need(s) the whole table in one process; Parquet input "
                         "with --backend dask is read on the workers (use --backend processes)")
    if spec.output is None:
        raise InputError("no output directory: give --output OUT_DIR (one Parquet file per partition)")
    if Path(spec.output).exists() and not Path(spec.output).is_dir():
        raise InputError(f"--output {spec.output}: exists and is not a directory; Parquet input read on the "
                         "workers is written as one file per partition into a directory")
    if spec.report is not None and Path(spec.report).is_dir():
        raise InputError(f"--report {spec.report}: is a directory; give a file name")
    hierarchies = {attr: Hierarchy.read_csv(path, attr, spec.hierarchy_sep, spec.encoding)
                   for attr, path in hierarchy_paths.items()}
    progress, stop = _progress_factory(args.quiet)
    try:
        result = anonymize_partitioned(spec.input, hierarchies, config, spec.output,  # type: ignore[arg-type]
                                       columns=spec.declared_columns(), workers=resolve_workers(args.workers, 0),
                                       scheduler=args.scheduler, progress=progress)
    finally:
        stop()
    report = result.to_report()
    report.update({"input": str(spec.input), "output": str(spec.output), "rows_written": result.rows,
                   "config": config.to_dict(), "suppressed_rows_in_output": result.suppressed_rows})
    if spec.report is not None:
        _write(spec.report, lambda: write_text_atomic(spec.report, json.dumps(report, indent=2) + "\n"))  # type: ignore[arg-type]
    if not args.quiet:
        from fedanon.cli.kit.summary import print_summary, result_rows

        print_summary("fedanon anonymize", [("input", str(spec.input)), *result_rows(report),
                                            ("time", f"{result.elapsed_s:.3f} s"),
                                            ("output", f"{spec.output} ({len(result.output_files)} files, "
                                                       f"{result.rows} rows)")])
    return 0


def _refuse_search_flags(args: argparse.Namespace) -> None:
    """A --dp release scores only the transformations its draws reach, on one process: the
    exact search's limits and its row-grouping workers do not apply, so they are refused
    rather than silently ignored."""
    given = [flag for flag, on in (("--node-budget", args.node_budget is not None),
                                   ("--time-limit", args.time_limit is not None),
                                   ("--workers", str(args.workers).strip() != "1"),
                                   ("--backend", args.backend != DEFAULT_BACKEND),
                                   ("--scheduler", args.scheduler is not None)) if on]
    if given:
        raise InputError(f"{', '.join(given)} tune(s) the optimal search; a --dp release draws its transformation "
                         "in --dp-steps steps instead: leave out " + ", ".join(given))


def run(args: argparse.Namespace) -> int:
    from fedanon.engine import anonymize

    spec = run_from_args(args)
    if spec.privacy[0].model("dp") is not None:
        _refuse_search_flags(args)
    resolve_workers(args.workers, 0)  # a bad --workers, --backend or --scheduler fails before any work
    check_backend(args.backend)
    if args.scheduler is not None and args.backend != "dask":
        raise InputError(f"--scheduler {args.scheduler[:200]} needs --backend dask (got --backend {args.backend})")
    if read_on_workers(spec, args.backend):
        return run_partitioned(args, spec)
    config, _hierarchy_paths, sensitive, _subset_path = spec.privacy
    if config.model("dp") is not None and args.verify:
        raise InputError("--verify re-checks a deterministic optimum; a --dp release is a random draw "
                         "(its k and budget are in the report): leave out --verify")
    table, kept, removed, hierarchies, subset = load_inputs(spec)
    values = aggregated_values(table, spec.aggregate)  # a non-number fails here, before the search

    released = table.select(kept)
    encoded = released.encoded()
    progress, stop = _progress_factory(args.quiet)
    try:
        if config.model("dp") is not None:
            from fedanon.engine.safepub import release

            result = release(encoded, hierarchies, config, progress=progress)
        else:
            result = anonymize(encoded, hierarchies, config, research_subset=subset, progress=progress,
                               limits=search_limits(args), workers=resolve_workers(args.workers, encoded.n_rows),
                               backend=args.backend, scheduler=args.scheduler,
                               keep_prepared=spec.report is not None or args.html is not None)  # the report reuses it
    finally:
        stop()
    # the transformation is chosen: aggregated columns become their released class's aggregate
    # before anything is written, so no raw value of theirs reaches an output
    result, aggregated = aggregate_engine_result(result, config.quasi_identifiers, values, spec.aggregate, subset)

    suppressed = np.asarray(result.suppressed, dtype=bool)
    keep = np.ones(result.output.n_rows, dtype=bool)
    if subset is not None:
        keep &= subset  # only the research subset is released (δ-presence)
    if spec.drop_suppressed:
        keep &= ~suppressed
    out = result.output
    written = int(keep.sum())
    finish_output = _write_in_background(
        spec.output, lambda: write_columns(spec.output, out.columns,  # type: ignore[arg-type]
                                           [out.codes[:, c] for c in range(len(out.columns))],
                                           out.dictionaries, spec.delimiter, rows=np.flatnonzero(keep)))
    analysis = None
    try:
        report = result.to_report()
        report.update({
            "input": str(spec.input), "output": str(spec.output), "rows_written": written,
            "config": config.to_dict(),
            "columns": {"quasi_identifiers": list(config.quasi_identifiers),
                        "sensitive": list(config.sensitive_attributes),
                        "insensitive": list(spec.insensitive), "aggregated": dict(spec.aggregate),
                        "removed": removed},
            "removed_columns": removed,
            # what `fedanon risk --report` needs to tell suppressed all-'*' rows of the file from released ones
            "suppressed_rows_in_output": int((suppressed & keep).sum()),
        })
        if aggregated:
            report["aggregation"] = loss_report(aggregated)
        if subset is not None:
            # suppressed_rows counts population rows; this is what the release loses
            report["research_subset_rows"] = int(subset.sum())
            report["suppressed_subset_rows"] = int((suppressed & subset).sum())
        if args.verify:
            from fedanon.oracle.verify import verify_output_file

            finish_output()  # the verifier re-reads the file: the file is the result, not the rows in memory
            out_rows = [[v.decode("utf-8", "backslashreplace") for v in row] for row in out.decode_rows()]
            raw_rows = released.rows()
            problems = []
            if aggregated:
                from fedanon.oracle.aggregates import aggregate_violations

                # the aggregates recomputed from their definition on the file, in exact arithmetic
                problems = aggregate_violations(spec.output, spec.delimiter, kept, raw_rows, config.quasi_identifiers,
                                                spec.aggregate, written=keep.tolist(), suppressed=suppressed.tolist())
                for c in [kept.index(name) for name in aggregated]:
                    # the row-level verifier judges the rest of the release against the input
                    for raw, written_row in zip(raw_rows, out_rows):
                        raw[c] = written_row[c]
            problems += verify_output_file(spec.output, spec.delimiter, kept, raw_rows, config, hierarchies,
                                          written=keep.tolist(), unwritten_rows=out_rows,  # output is UTF-8
                                          research_subset=subset,
                                          transformation=result.transformation, suppressed=suppressed,
                                          reported_suppressed_rows=result.suppressed_rows,
                                          reported_classes=result.classes)
            report["verified"] = not problems
            report["violations"] = problems[:20]
        if spec.report is not None or args.html is not None:
            from fedanon.report.analysis import extend_report

            if result.released is None:
                analysis = extend_report(report, encoded, hierarchies, config, result, research_subset=subset)
            else:  # a sampled release: risk and utility of the released rows, judged as k-anonymity
                from fedanon.engine.safepub import sampled_view

                sample, kconfig = sampled_view(encoded, config, result)
                analysis = extend_report(report, sample, hierarchies, kconfig, result)
    finally:
        finish_output()  # every path out waits for the write (idempotent); no report of a failed release
    if analysis is not None and args.html is not None:
        _write(args.html, lambda: analysis.write_html(args.html))
        report["html"] = str(args.html)
    if spec.report is not None:
        text = json.dumps(report, indent=2) + "\n"
        _write(spec.report, lambda: write_text_atomic(spec.report, text))  # type: ignore[arg-type]
    if not args.quiet:
        _summary(spec, report, written)
    if args.verify and not report["verified"]:
        print("fedanon anonymize: verifier found violations: " + "; ".join(report["violations"][:3]),
              file=sys.stderr)
        return 1
    return 0
