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
from typing import Any, Callable, NamedTuple

import numpy as np

from fedanon.kit.atomicfile import write_text_atomic
from fedanon.engine.search.heuristic import DEFAULT_NODE_BUDGET, SearchLimits
from fedanon.engine.check.backends.base import DEFAULT_BACKEND, check_backend
from fedanon.engine.check.backends.processes import AUTO_MAX_WORKERS, AUTO_MIN_ROWS, resolve_workers
from fedanon.data.io.delimited import ColumnarTable, same_file, write_columns
from fedanon.data.io.registry import format_of, read_table
from fedanon.cli.runconfig import RunSpec, add_privacy_arguments, run_from_args
from fedanon.errors import InputError

SUPPRESSED = "*"


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
    search.add_argument("--time-limit", type=float, default=None, metavar="S",
                        help="seconds the heuristic search may take; it then returns the best verified "
                             "transformation found with optimum_found false, a loss lower bound and the gap "
                             "(default: run until the optimum is proven)")
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
MAX_LISTED = 20  # missing hierarchy values named one by one; the rest are counted


def column_roles(table: ColumnarTable, spec: RunSpec) -> tuple[list[str], list[str]]:
    """(kept columns in input order, removed identifying columns).

    As in ARX, every column has a role; a column given none (not a QI, the
    sensitive attribute or declared insensitive) is identifying and never reaches
    an output. Declared columns must exist.
    """
    config, _paths, sensitive, _subset = spec.privacy
    for name in config.quasi_identifiers:
        _check_columns(table, name, "quasi-identifier")
    if sensitive is not None:
        _check_columns(table, sensitive, "sensitive attribute")
    for name in spec.insensitive:
        _check_columns(table, name, "insensitive")
    declared = set(spec.declared_columns())
    kept = [c for c in table.columns if c in declared]
    removed = [c for c in table.columns if c not in declared]
    return kept, removed


def _check_columns(table: ColumnarTable, name: str, what: str) -> None:
    if name not in table.columns:
        raise InputError(f"{table.source}, line 1: unknown column {name!r} ({what}); "
                         f"the table has columns: {', '.join(table.columns)}")


def check_values_in_hierarchies(table: ColumnarTable, hierarchies: dict[str, Any]) -> None:
    """Report every input cell missing from its hierarchy in one message.

    The first MAX_LISTED cells are named with their line, the rest counted, so a
    steward fixes all of them in one pass instead of one per run.
    """
    missing_rows: list[tuple[int, str, str]] = []  # (data row, column, value)
    total = 0
    for attr, h in hierarchies.items():
        if attr not in table.columns:
            continue
        c = table.index(attr)
        dictionary = table.dictionaries[c]
        missing = h.missing_codes([v.encode("utf-8") for v in dictionary])
        if not missing:
            continue
        rows = np.flatnonzero(np.isin(table.codes[c], np.asarray(missing, dtype=table.codes[c].dtype)))
        total += int(rows.size)
        missing_rows.extend((int(r), attr, dictionary[int(table.codes[c][r])]) for r in rows[:MAX_LISTED])
    if not total:
        return
    missing_rows.sort()
    shown = missing_rows[:MAX_LISTED]
    lines = table.line_numbers([r for r, _a, _v in shown])
    sources = {a: h.source for a, h in hierarchies.items()}
    parts = [f"line {ln}: {attr} {value[:200]!r}" for ln, (_r, attr, value) in zip(lines, shown)]
    more = f"; and {total - len(shown)} more" if total > len(shown) else ""
    where = ", ".join(sorted({f"{a} -> {sources[a]}" for _r, a, _v in missing_rows}))
    raise InputError(f"{table.source}: {total} value(s) missing from their hierarchies ({where}): "
                     + "; ".join(parts) + more)


def match_subset(table: ColumnarTable, subset_path: Path) -> np.ndarray:
    """Mark the research-subset rows of the input.

    The subset file has the input's header; its rows are matched to input rows
    as a multiset of full rows: a row that occurs m times in the subset must
    occur at least m times in the input, and the first m occurrences are
    marked. Why full rows: the subset must be unambiguous without an ID column,
    and duplicates are indistinguishable for every model anyway. Works on codes
    (np.unique over rows), not on per-row Python tuples.
    """
    subset = read_table(subset_path, table.delimiter, table.encoding)
    if subset.columns != table.columns:
        raise InputError(f"{subset_path}, line 1: header {table.delimiter.join(subset.columns)[:200]!r} differs "
                         f"from the input header {table.delimiter.join(table.columns)[:200]!r}")
    n, m = table.n_rows, subset.n_rows
    mapped = np.empty((m, len(table.columns)), dtype=np.int64)
    inputs = np.empty((n, len(table.columns)), dtype=np.int64)
    for c, (codes, dictionary) in enumerate(zip(subset.codes, subset.dictionaries)):
        index = {v: i for i, v in enumerate(table.dictionaries[c])}
        lookup = np.array([index.get(v, -1) for v in dictionary], dtype=np.int64)
        mapped[:, c] = lookup[codes]
        inputs[:, c] = table.codes[c]
    groups = np.unique(np.vstack([inputs, mapped]), axis=0, return_inverse=True)[1].reshape(-1)
    g_in, g_sub = groups[:n], groups[n:]
    have = np.bincount(g_in, minlength=int(groups.max()) + 1)
    need = np.bincount(g_sub, minlength=have.size)
    absent = (mapped < 0).any(axis=1) | (_rank_in_group(g_sub) >= have[g_sub])
    if absent.any():
        row = int(np.flatnonzero(absent)[0])
        line = subset.line_numbers([row])[0]
        text = table.delimiter.join(subset.dictionaries[c][int(subset.codes[c][row])] for c in range(len(table.columns)))
        raise InputError(f"{subset_path}, line {line}: row {text[:200]!r} does not occur in {table.source} "
                         f"(or occurs there fewer times than in the subset)")
    mask = _rank_in_group(g_in) < need[g_in]  # the first `need` occurrences of each row
    return mask


def _rank_in_group(groups: np.ndarray) -> np.ndarray:
    """For each element, how many earlier elements share its group (0 for the first)."""
    order = np.argsort(groups, kind="stable")
    ordered = groups[order]
    rank = np.empty(groups.size, dtype=np.int64)
    rank[order] = np.arange(groups.size) - np.searchsorted(ordered, ordered, side="left")
    return rank


# --------------------------------------------------------------------------- progress
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
    from fedanon.cli.summary import print_summary, result_rows

    rows = [("input", str(spec.input)), *result_rows(report)]
    if spec.insensitive:
        rows.append(("insensitive", ", ".join(spec.insensitive) + " (unchanged)"))
    if "loss_lower_bound" in report:
        rows.append(("optimum", "proven" if report["optimum_found"] else
                     f"not proven: loss lower bound {report['loss_lower_bound']:.6g}, gap {report['gap']:.2%}"))
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
    limit = args.time_limit
    if limit is not None and not (limit > 0 and math.isfinite(limit)):
        raise InputError(f"--time-limit must be a positive number of seconds, got {limit}")
    return SearchLimits(node_budget=budget, time_limit=limit)


def check_output_paths(spec: RunSpec) -> None:
    """The output and the report may never replace the input (or each other)."""
    inputs = [p for p in (spec.input, spec.privacy.subset_path, *spec.privacy.hierarchy_paths.values()) if p]
    for label, path in (("--output", spec.output), ("--report", spec.report)):
        if path is None:
            continue
        if Path(path).is_dir():
            raise InputError(f"{label} {path}: is a directory; give a file name")
        for source in inputs:
            if same_file(path, source):
                raise InputError(f"{label} {path} is an input file ({source}); refusing to overwrite it")
    if spec.output is not None and spec.report is not None and same_file(spec.output, spec.report):
        raise InputError(f"--output and --report name the same file {spec.output}")


class Inputs(NamedTuple):
    table: ColumnarTable
    kept: list[str]            # columns with a role, in input order
    removed: list[str]         # identifying columns (no role): never written
    hierarchies: dict[str, Any]
    subset: np.ndarray | None  # δ-presence research-subset mask


def load_inputs(spec: RunSpec) -> Inputs:
    """Read and cross-check everything an anonymizing command gets (anonymize, simulate).

    Input and output named and distinct, table read, roles resolved, hierarchies
    read and covering every value, research subset matched -- each failure one
    InputError naming file and line, before any work starts.
    """
    from fedanon.data.hierarchy import Hierarchy

    if spec.input is None:
        raise InputError("no input table: give INPUT.csv (or input = \"...\" in the run file)")
    if spec.output is None:
        raise InputError("no output file: give --output OUT.csv (or output = \"...\" in the run file)")
    check_output_paths(spec)
    _config, hierarchy_paths, _sensitive, subset_path = spec.privacy
    table = read_table(spec.input, spec.delimiter, spec.encoding)
    kept, removed = column_roles(table, spec)
    hierarchies = {attr: Hierarchy.read_csv(path, attr, spec.hierarchy_sep, spec.encoding)
                   for attr, path in hierarchy_paths.items()}
    check_values_in_hierarchies(table, hierarchies)
    subset = match_subset(table, subset_path) if subset_path is not None else None
    return Inputs(table, kept, removed, hierarchies, subset)


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
        from fedanon.cli.summary import print_summary, result_rows

        print_summary("fedanon anonymize", [("input", str(spec.input)), *result_rows(report),
                                            ("time", f"{result.elapsed_s:.3f} s"),
                                            ("output", f"{spec.output} ({len(result.output_files)} files, "
                                                       f"{result.rows} rows)")])
    return 0


def run(args: argparse.Namespace) -> int:
    from fedanon.engine import anonymize

    spec = run_from_args(args)
    resolve_workers(args.workers, 0)  # a bad --workers, --backend or --scheduler fails before any work
    check_backend(args.backend)
    if args.scheduler is not None and args.backend != "dask":
        raise InputError(f"--scheduler {args.scheduler[:200]} needs --backend dask (got --backend {args.backend})")
    if read_on_workers(spec, args.backend):
        return run_partitioned(args, spec)
    config, _hierarchy_paths, sensitive, _subset_path = spec.privacy
    table, kept, removed, hierarchies, subset = load_inputs(spec)

    released = table.select(kept)
    encoded = released.encoded()
    progress, stop = _progress_factory(args.quiet)
    try:
        result = anonymize(encoded, hierarchies, config, research_subset=subset, progress=progress,
                           limits=search_limits(args), workers=resolve_workers(args.workers, encoded.n_rows),
                           backend=args.backend, scheduler=args.scheduler,
                           keep_prepared=spec.report is not None or args.html is not None)  # the report reuses it
    finally:
        stop()

    suppressed = np.asarray(result.suppressed, dtype=bool)
    keep = np.ones(table.n_rows, dtype=bool)
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
                        "sensitive": [sensitive] if sensitive else [],
                        "insensitive": list(spec.insensitive), "removed": removed},
            "removed_columns": removed,
            # what `fedanon risk --report` needs to tell suppressed all-'*' rows of the file from released ones
            "suppressed_rows_in_output": int((suppressed & keep).sum()),
        })
        if subset is not None:
            # suppressed_rows counts population rows; this is what the release loses
            report["research_subset_rows"] = int(subset.sum())
            report["suppressed_subset_rows"] = int((suppressed & subset).sum())
        if args.verify:
            from fedanon.oracle.verify import verify_output_file

            finish_output()  # the verifier re-reads the file: the file is the result, not the rows in memory
            out_rows = [[v.decode("utf-8", "backslashreplace") for v in row] for row in out.decode_rows()]
            problems = verify_output_file(spec.output, spec.delimiter, kept, released.rows(), config, hierarchies,
                                          written=keep.tolist(), unwritten_rows=out_rows,  # output is UTF-8
                                          research_subset=subset,
                                          transformation=result.transformation, suppressed=suppressed,
                                          reported_suppressed_rows=result.suppressed_rows,
                                          reported_classes=result.classes)
            report["verified"] = not problems
            report["violations"] = problems[:20]
        if spec.report is not None or args.html is not None:
            from fedanon.report.analysis import extend_report

            analysis = extend_report(report, encoded, hierarchies, config, result, research_subset=subset)
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
