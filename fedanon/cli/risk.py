"""`fedanon risk`: re-identification risk of a table and the privacy models it satisfies.

Works on any table -- a raw input before anonymizing, or a released output.
Suppressed rows: a written output marks them with '*' in every QI; since a
transformation to '*' levels releases such rows legitimately, the count in the
anonymization report (`--report R.json` or `--suppressed-rows N`) decides how
many of them were suppressed; without it all-'*' rows count as suppressed.
Definitions and the exact rule: `fedanon.report.risk`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fedanon.kit.atomicfile import write_text_atomic
from fedanon.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "risk", help="re-identification risk of a table and the k/l/t it satisfies",
        description="Prosecutor, journalist and marketer re-identification risk, sample uniques, the "
                    "equivalence-class size distribution, and the largest k, l per variant and smallest t "
                    "the table satisfies.")
    p.add_argument("input", metavar="INPUT.csv",
                   help="table to assess (CSV, first line = header; Parquet or Arrow/Feather by the file's suffix)")
    p.add_argument("--qi", action="append", required=True, metavar="NAME[,NAME...]",
                   help="quasi-identifier(s) (repeat or comma-separate; NAME=HIERARCHY.csv is accepted too)")
    p.add_argument("--sensitive", action="append", default=[], metavar="NAME[=HIERARCHY.csv]",
                   help="sensitive attribute to report l and t for (a hierarchy adds hierarchical t)")
    p.add_argument("--population", metavar="POP.csv", default=None,
                   help="population table (any input format) with the same QI columns, for journalist and "
                        "marketer risk; raw values are generalized to the table's levels for QIs given as NAME=HIERARCHY.csv "
                        "(default: the table itself is the population)")
    supp = p.add_mutually_exclusive_group()
    supp.add_argument("--report", default=None, metavar="REPORT.json",
                      help="the JSON report of the run that wrote INPUT.csv (fedanon anonymize/simulate/run): "
                           "its suppressed_rows says how many all-'*' rows were suppressed; the rest were "
                           "generalized to '*' and are released (default: every all-'*' row is suppressed)")
    supp.add_argument("--suppressed-rows", type=int, default=None, metavar="N",
                      help="as --report, with the count given directly (0: no row was suppressed)")
    p.add_argument("--threshold", type=float, default=None, metavar="R",
                   help="records whose risk exceeds R are 'at risk' (default 0.2)")
    p.add_argument("--delimiter", default=";", metavar="CHAR", help="field delimiter (default ';'; \\t for a tab)")
    p.add_argument("--hierarchy-delimiter", default=None, metavar="CHAR",
                   help="field delimiter of the hierarchy files (default: --delimiter)")
    p.add_argument("--encoding", default="utf-8", metavar="NAME",
                   help="text encoding of the table, population and hierarchy files (default utf-8), "
                        "e.g. latin-1, cp1252")
    p.add_argument("--json", default=None, metavar="OUT.json", help="write all figures as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary table")
    p.set_defaults(handler=run)


def _names(values: list[str]) -> list[str]:
    out: list[str] = []
    for text in values:
        for part in text.split(","):
            name = part.partition("=")[0].strip()
            if name and name not in out:
                out.append(name)
    return out


def _summary(path: str, risk: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"fedanon risk: {path}", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("released rows / suppressed", f"{risk['rows']} / {risk['suppressed_rows']}")
    t.add_row("classes / sample uniques", f"{risk['classes']} / {risk.get('sample_uniques')}")
    for model in ("prosecutor", "journalist"):
        r = risk.get(model)
        if r:
            t.add_row(model, f"highest {r['highest']:.2%}, average {r['average']:.2%}, "
                             f"{r['records_at_risk']} records at risk (> {risk['threshold']:g})")
    if risk.get("marketer"):
        t.add_row("marketer", f"average {risk['marketer']['average']:.2%}")
    t.add_row("population", risk["population"])
    if risk.get("note"):
        t.add_row("note", risk["note"])
    sat = risk["satisfies"]
    t.add_row("largest k", str(sat["k"]))
    for attr, s in sat["sensitive"].items():
        text = f"distinct l {s['distinct_l']}, entropy l {s['entropy_l']:.4g}, t {s['t_equal']:.4g} (equal)"
        if "t_hierarchical" in s:
            text += f", {s['t_hierarchical']:.4g} (hierarchical)"
        t.add_row(attr, text)
    Console().print(t)


def reported_suppressed_rows(path: str) -> int:
    """`suppressed_rows` of an anonymization report (one-line InputError naming the file otherwise)."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON report ({str(exc)[:120]})") from None
    doc = doc if isinstance(doc, dict) else {}
    # the written file's own count (suppressed rows dropped, or only a research subset written), else the run's
    key = next((k for k in ("suppressed_rows_in_output", "suppressed_subset_rows") if k in doc), "suppressed_rows")
    value = doc.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InputError(f"{path}: the report has no suppressed_rows count (a fedanon anonymize, simulate or "
                         f"run report has one), got {str(value)[:40]!r}")
    return value


def run(args: argparse.Namespace) -> int:
    from fedanon.data.io.columnar import delimiter_hint
    from fedanon.data.io.delimited import check_encoding, parse_delimiter
    from fedanon.data.io.registry import read_table
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.report.risk import DEFAULT_THRESHOLD, generalize_population, suppressed_rows_mask, table_risk

    delimiter = parse_delimiter(args.delimiter)
    hierarchy_delimiter = (delimiter if args.hierarchy_delimiter is None
                           else parse_delimiter(args.hierarchy_delimiter, "--hierarchy-delimiter"))
    encoding = check_encoding(args.encoding)
    source = read_table(args.input, delimiter, encoding)  # the reader its suffix names, as `anonymize` does
    header = source.columns
    qis = _names(args.qi)
    sensitive = _names(args.sensitive)
    for name in qis + sensitive:
        if name not in header:
            raise InputError(f"{args.input}, line 1: unknown column {name!r}; the table has columns: "
                             f"{', '.join(header)}{delimiter_hint(header, delimiter)}")
    qi_hierarchies = {}
    for text in args.qi:
        for part in text.split(","):
            name, sep, path = part.partition("=")
            if sep and path.strip():
                qi_hierarchies[name.strip()] = Hierarchy.read_csv(path.strip(), name.strip(), hierarchy_delimiter,
                                                                      encoding)
    hierarchies = {}
    for text in args.sensitive:
        name, sep, path = text.partition("=")
        if sep and path.strip():
            hierarchies[name.strip()] = Hierarchy.read_csv(path.strip(), name.strip(), hierarchy_delimiter, encoding)
    population = None
    if args.population is not None:
        known = read_table(args.population, delimiter, encoding)
        for name in qis:
            if name not in known.columns:
                raise InputError(f"{args.population}, line 1: population table lacks quasi-identifier {name!r}")
        population = known.encoded()
    table = source.encoded()
    count = args.suppressed_rows if args.report is None else reported_suppressed_rows(args.report)
    if count is not None and count < 0:
        raise InputError(f"--suppressed-rows must be 0 or more, got {count}")
    suppressed, _exact = suppressed_rows_mask(table, qis, count)
    if population is not None and qi_hierarchies:
        population = generalize_population(table, population, qi_hierarchies, suppressed)
    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    risk = table_risk(table, qis, sensitive=sensitive, hierarchies=hierarchies, population=population,
                      threshold=threshold, suppressed_rows=count)
    risk = {"input": str(args.input), "quasi_identifiers": qis, **risk}
    if args.json is not None:
        try:
            write_text_atomic(args.json, json.dumps(risk, indent=2) + "\n")
        except OSError as exc:
            raise InputError(f"{args.json}: cannot write ({exc.strerror or exc})") from None
    if not args.quiet:
        _summary(args.input, risk)
    return 0
