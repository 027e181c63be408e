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
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fedanon.engine.heuristic import DEFAULT_NODE_BUDGET, SearchLimits
from fedanon.engine.runconfig import RunSpec, add_privacy_arguments, run_from_args
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
def _check_columns(path: Path, header: list[str], names: list[str], what: str) -> None:
    for name in names:
        if name not in header:
            raise InputError(f"{path}, line 1: unknown column {name!r} ({what}); "
                             f"the table has columns: {', '.join(header)}")


def _check_values_in_hierarchies(path: Path, header: list[str], rows: list[list[str]],
                                 hierarchies: dict[str, Any], delimiter: str) -> None:
    """Name the first input cell (file, line, value) that has no row in its hierarchy."""
    from fedanon.engine.csvio import read_delimited

    for attr, h in hierarchies.items():
        known = {r[0].decode("utf-8", "backslashreplace") for r in h.rows}
        c = header.index(attr)
        for i, row in enumerate(rows):
            if row[c] not in known:
                # error path only: re-read to get the physical line (blank lines are skipped)
                line = read_delimited(path, delimiter)[i + 1][0]
                raise InputError(f"{path}, line {line}: value {row[c]!r} of column {attr!r} is missing "
                                 f"from its hierarchy {h.source or ''}".rstrip())


def match_subset(input_path: Path, header: list[str], rows: list[list[str]],
                 subset_path: Path, delimiter: str) -> np.ndarray:
    """Mark the research-subset rows of the input.

    The subset file has the input's header; its rows are matched to input rows
    as a multiset of full rows: a row that occurs m times in the subset must
    occur at least m times in the input, and the first m unmatched occurrences
    are marked. Why full rows: the subset must be unambiguous without an ID
    column, and duplicates are indistinguishable for every model anyway.
    """
    from fedanon.engine.csvio import read_delimited

    lines = read_delimited(subset_path, delimiter)
    if not lines:
        raise InputError(f"{subset_path}: research subset file is empty")
    head_line, sub_header = lines[0]
    if sub_header != header:
        raise InputError(f"{subset_path}, line {head_line}: header {delimiter.join(sub_header)!r} differs "
                         f"from the input header {delimiter.join(header)!r}")
    free: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for i in range(len(rows) - 1, -1, -1):
        free[tuple(rows[i])].append(i)
    mask = np.zeros(len(rows), dtype=bool)
    for number, cells in lines[1:]:
        if len(cells) != len(header):
            raise InputError(f"{subset_path}, line {number}: {len(cells)} values, expected {len(header)}")
        slots = free.get(tuple(cells))
        if not slots:
            raise InputError(f"{subset_path}, line {number}: row {delimiter.join(cells)!r} does not occur in "
                             f"{input_path} (or occurs there fewer times than in the subset)")
        mask[slots.pop()] = True
    if not mask.any():
        raise InputError(f"{subset_path}: research subset has no data rows")
    return mask


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
    from rich.console import Console
    from rich.table import Table

    t = Table(title="fedanon anonymize", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("input", str(spec.input))
    t.add_row("transformation", ", ".join(f"{a}={lvl}" for a, lvl in report["transformation"].items()))
    t.add_row("information loss", f"{report['information_loss']:.6g} ({report['metric']})")
    t.add_row("classes", str(report["classes"]))
    t.add_row("suppressed rows", str(report["suppressed_rows"]))
    if "loss_lower_bound" in report:
        t.add_row("optimum", "proven" if report["optimum_found"] else
                  f"not proven: loss lower bound {report['loss_lower_bound']:.6g}, gap {report['gap']:.2%}")
    t.add_row("checks / roll-ups", f"{report['checks']} / {report['rollups']} of {report.get('lattice_size', '?')} nodes")
    t.add_row("time", f"{report['elapsed_s']:.3f} s")
    t.add_row("output", f"{spec.output} ({written} rows)")
    if spec.report:
        t.add_row("report", str(spec.report))
    if report.get("html"):
        t.add_row("html report", report["html"])
    if "verified" in report:
        t.add_row("verifier", "OK" if report["verified"] else "VIOLATIONS")
    Console().print(t)


def _write(path: Path, action: Callable[[], Any]) -> None:
    """Run a file write; an unwritable path is a user error, not a traceback."""
    try:
        action()
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None


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


def run(args: argparse.Namespace) -> int:
    from fedanon.engine import anonymize
    from fedanon.engine.csvio import read_table_csv, write_table_csv
    from fedanon.engine.hierarchy import Hierarchy
    from fedanon.engine.table import EncodedTable

    spec = run_from_args(args)
    if spec.input is None:
        raise InputError("no input table: give INPUT.csv (or input = \"...\" in the run file)")
    if spec.output is None:
        raise InputError("no output file: give --output OUT.csv (or output = \"...\" in the run file)")
    config, hierarchy_paths, sensitive, subset_path = spec.privacy
    delim = spec.delimiter

    header, rows = read_table_csv(spec.input, delim)
    _check_columns(spec.input, header, config.quasi_identifiers, "quasi-identifier")
    if sensitive is not None:
        _check_columns(spec.input, header, [sensitive], "sensitive attribute")
    hierarchies = {attr: Hierarchy.read_csv(path, attr, delim) for attr, path in hierarchy_paths.items()}
    _check_values_in_hierarchies(spec.input, header, rows, hierarchies, delim)
    subset = match_subset(spec.input, header, rows, subset_path, delim) if subset_path is not None else None

    table = EncodedTable.from_rows(header, rows)
    progress, stop = _progress_factory(args.quiet)
    try:
        result = anonymize(table, hierarchies, config, research_subset=subset, progress=progress,
                           limits=search_limits(args))
    finally:
        stop()

    out_rows = [[v.decode("utf-8", "backslashreplace") for v in row] for row in result.output.decode_rows()]
    suppressed = np.asarray(result.suppressed, dtype=bool)
    keep = np.ones(len(out_rows), dtype=bool)
    if subset is not None:
        keep &= subset  # only the research subset is released (δ-presence)
    if spec.drop_suppressed:
        keep &= ~suppressed
    written = [row for row, k in zip(out_rows, keep) if k]
    _write(spec.output, lambda: write_table_csv(spec.output, header, written, delim))

    report = result.to_report()
    report.update({
        "input": str(spec.input), "output": str(spec.output), "rows_written": len(written),
        "config": config.to_dict(),
    })
    if subset is not None:
        # suppressed_rows counts population rows; this is what the release loses
        report["research_subset_rows"] = int(subset.sum())
        report["suppressed_subset_rows"] = int((suppressed & subset).sum())
    if args.verify:
        from fedanon.engine.verify import verify_anonymized

        problems = verify_anonymized(header, rows, header, out_rows, config, hierarchies,
                                     research_subset=subset, transformation=result.transformation,
                                     suppressed=suppressed, reported_suppressed_rows=result.suppressed_rows,
                                     reported_classes=result.classes)
        report["verified"] = not problems
        report["violations"] = problems[:20]
    if spec.report is not None or args.html is not None:
        from fedanon.report.analysis import extend_report

        extend_report(report, table, hierarchies, config, result, research_subset=subset, html_path=args.html)
    if spec.report is not None:
        text = json.dumps(report, indent=2) + "\n"
        _write(spec.report, lambda: Path(spec.report).write_text(text, encoding="utf-8"))  # type: ignore[arg-type]
    if not args.quiet:
        _summary(spec, report, len(written))
    if args.verify and not report["verified"]:
        print("fedanon anonymize: verifier found violations: " + "; ".join(report["violations"][:3]),
              file=sys.stderr)
        return 1
    return 0
