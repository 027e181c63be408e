"""`fedanon microaggregate`: numeric attributes released as group means or medians.

Every column has a role: `--attribute` columns are microaggregated, `--insensitive`
columns are written unchanged, every other column is identifying and removed. Settings
can also come from a TOML file (`--config`); flags given on the command line win.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from fedanon.kit.atomicfile import write_text_atomic
from fedanon.data.io.delimited import parse_delimiter, read_columns, same_file, write_columns
from fedanon.errors import InputError
from fedanon.microagg.aggregate import AGGREGATES
from fedanon.microagg.api import METHODS, assess, microaggregate_array
from fedanon.microagg.io import encode_numbers, numeric_column
from fedanon.microagg.kward import KWARD_MAX_ROWS
from fedanon.kit.tomlfile import load_toml_file

DEFAULTS: dict[str, Any] = {"method": "mdav", "aggregate": "mean", "sort_by": "pc1", "delimiter": ";",
                            "encoding": "utf-8", "decimals": None, "insensitive": []}
_TOML_TYPES: dict[str, type] = {"input": str, "output": str, "report": str, "k": int, "method": str,
                                "aggregate": str, "sort_by": str, "delimiter": str, "encoding": str,
                                "decimals": int, "attributes": list, "insensitive": list}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "microaggregate", help="release numeric attributes as group means/medians (MDAV, k-Ward, ...)",
        description="Microaggregation: records are grouped into groups of at least k similar records and "
                    "each numeric attribute is released as its group's mean or median. Reports information "
                    "loss (SSE/SST) and distance-based record-linkage risk.")
    p.add_argument("input", metavar="INPUT.csv", nargs="?", default=None, help="table (first line = header)")
    p.add_argument("--attribute", action="append", default=None, metavar="NAME[,NAME...]",
                   help="numeric column to microaggregate (repeat or comma-separate)")
    p.add_argument("--insensitive", action="append", default=None, metavar="NAME",
                   help="column written unchanged; columns with no role are identifying and removed")
    p.add_argument("--k", type=int, default=None, help="smallest group size")
    p.add_argument("--method", choices=METHODS, default=None,
                   help="mdav (default), univariate (single-axis sorting), individual (individual sorting), "
                        f"kward (at most {KWARD_MAX_ROWS:,} rows)")
    p.add_argument("--aggregate", choices=AGGREGATES, default=None, help="group value: mean (default) or median")
    p.add_argument("--sort-by", dest="sort_by", default=None, metavar="NAME|pc1|zsum",
                   help="univariate: sort on an attribute, the first principal component (pc1, default) or "
                        "the sum of z-scores (zsum)")
    p.add_argument("--decimals", type=int, default=None, metavar="N",
                   help="round released values to N decimals (figures are computed on the rounded values)")
    p.add_argument("-o", "--output", default=None, metavar="OUT.csv", help="released table")
    p.add_argument("--report", default=None, metavar="REPORT.json", help="write settings and quality as JSON")
    p.add_argument("--config", default=None, metavar="RUN.toml", help="settings from a TOML file")
    p.add_argument("--delimiter", default=None, metavar="CHAR", help="field delimiter (default ';')")
    p.add_argument("--encoding", default=None, help="text encoding of INPUT.csv (default utf-8)")
    p.add_argument("--quiet", "-q", action="store_true", help="no summary table")
    p.set_defaults(handler=run)


def _toml(path: str) -> dict[str, Any]:
    doc = load_toml_file(path, "run file")
    unknown = sorted(set(doc) - set(_TOML_TYPES))
    if unknown:
        raise InputError(f"{path}: unknown setting(s) {', '.join(unknown)}; allowed: {', '.join(sorted(_TOML_TYPES))}")
    base = Path(path).parent
    out: dict[str, Any] = {}
    for key, value in doc.items():
        kind = _TOML_TYPES[key]
        if isinstance(value, bool) or not isinstance(value, kind) or \
                (kind is list and not all(isinstance(v, str) and v for v in value)):
            want = {int: "an integer", str: "a string", list: "a list of column names"}[kind]
            raise InputError(f"{path}: {key} must be {want}, got {str(value)[:200]!r}")
        out[key] = str(base / value) if key in ("input", "output", "report") and not Path(value).is_absolute() else value
    return out


def _names(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    out: list[str] = []
    for text in values:
        for part in text.split(","):
            if part.strip() and part.strip() not in out:
                out.append(part.strip())
    return out


def settings(args: argparse.Namespace) -> dict[str, Any]:
    """Defaults < TOML file < flags."""
    merged = dict(DEFAULTS)
    if args.config is not None:
        merged.update(_toml(args.config))
    flags = {"input": args.input, "output": args.output, "report": args.report, "k": args.k,
             "method": args.method, "aggregate": args.aggregate, "sort_by": args.sort_by,
             "delimiter": args.delimiter, "encoding": args.encoding, "decimals": args.decimals,
             "attributes": _names(args.attribute), "insensitive": _names(args.insensitive)}
    merged.update({key: value for key, value in flags.items() if value is not None})
    for key in ("input", "attributes", "k"):
        if merged.get(key) in (None, []):
            flag = {"input": "INPUT.csv", "attributes": "--attribute NAME", "k": "--k K"}[key]
            raise InputError(f"missing {flag} (on the command line or in --config)")
    if merged["method"] not in METHODS:
        raise InputError(f"method must be one of {', '.join(METHODS)}, got {merged['method']!r}")
    if merged["aggregate"] not in AGGREGATES:
        raise InputError(f"aggregate must be one of {', '.join(AGGREGATES)}, got {merged['aggregate']!r}")
    if merged["k"] < 1:
        raise InputError(f"--k must be at least 1, got {merged['k']}")
    if merged["decimals"] is not None and not 0 <= merged["decimals"] <= 15:
        raise InputError(f"--decimals must be between 0 and 15, got {merged['decimals']}")
    merged["delimiter"] = parse_delimiter(merged["delimiter"])
    both = set(merged["attributes"]) & set(merged["insensitive"])
    if both:
        raise InputError(f"column {sorted(both)[0]!r} is both an --attribute and --insensitive; give it one role")
    return merged


def _check_paths(s: dict[str, Any]) -> None:
    for key in ("output", "report"):
        if s.get(key) is not None and Path(s["input"]).exists() and same_file(s[key], s["input"]):
            raise InputError(f"--{key} {s[key]} is the input file; refusing to overwrite it")
    if s.get("output") and s.get("report") and same_file(s["output"], s["report"]):
        raise InputError(f"--output and --report name the same file {s['output']}")


def _summary(s: dict[str, Any], report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"fedanon microaggregate: {s['input']}", show_header=False)
    t.add_column("", style="bold")
    t.add_column("")
    t.add_row("method / k / aggregate", f"{report['method']} / {report['k']} / {report['aggregate']}")
    t.add_row("records", str(report["records"]))
    groups = report["groups"]
    for name, g in (groups.items() if "groups" not in groups else [("groups", groups)]):
        t.add_row(name if name != "groups" else "groups", f"{g['groups']} (sizes {g['smallest_group']}..{g['largest_group']})")
    t.add_row("information loss SSE/SST", f"{report['information_loss']['sse_sst']:.4%}")
    t.add_row("record-linkage risk", f"{report['record_linkage_risk']:.4%}")
    if report["removed_columns"]:
        t.add_row("removed (no role)", ", ".join(report["removed_columns"]))
    Console().print(t)


def run(args: argparse.Namespace) -> int:
    s = settings(args)
    _check_paths(s)
    table = read_columns(s["input"], s["delimiter"], s["encoding"])
    for name in s["attributes"] + s["insensitive"]:
        table.index(name)  # unknown column: one line naming file and line 1
    values = np.column_stack([numeric_column(table, name) for name in s["attributes"]])
    n = int(values.shape[0])
    if s["k"] > n:
        raise InputError(f"{s['input']}: --k {s['k']} exceeds the number of data rows ({n})")
    if s["method"] == "kward" and n > KWARD_MAX_ROWS:
        raise InputError(f"{s['input']}: k-Ward takes at most {KWARD_MAX_ROWS:,} rows, the table has {n:,}; "
                         f"use --method mdav")
    if s["method"] == "univariate" and s["sort_by"] not in s["attributes"] + ["pc1", "zsum"]:
        raise InputError(f"--sort-by must be one of the attributes ({', '.join(s['attributes'])}), pc1 or zsum, "
                         f"got {s['sort_by']!r}")
    result = microaggregate_array(values, s["k"], s["method"], s["aggregate"], s["attributes"], s["sort_by"],
                                  quality=False)
    if s["decimals"] is not None:
        result.released = np.round(result.released, s["decimals"])
    quality = assess(s["attributes"], values, result)
    kept = [c for c in table.columns if c in set(s["attributes"]) | set(s["insensitive"])]
    removed = [c for c in table.columns if c not in kept]
    if s.get("output") is not None:
        codes, dictionaries = [], []
        for name in kept:
            if name in s["attributes"]:
                c, d = encode_numbers(result.column(name))
            else:
                i = table.index(name)
                c, d = table.codes[i], table.dictionaries[i]
            codes.append(c)
            dictionaries.append(d)
        write_columns(s["output"], kept, codes, dictionaries, s["delimiter"])
    report = {"input": str(s["input"]), "output": s.get("output"), "method": s["method"], "k": s["k"],
              "aggregate": s["aggregate"], "sort_by": result.sort_by, "decimals": s["decimals"],
              "attributes": s["attributes"], "insensitive": s["insensitive"], "columns": kept,
              "removed_columns": removed, **quality}
    if s.get("report") is not None:
        write_text_atomic(s["report"], json.dumps(report, indent=2) + "\n")
    if not args.quiet:
        _summary(s, report)
    return 0
