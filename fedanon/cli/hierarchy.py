"""`fedanon hierarchy interval|mask|order|date|auto`: write an ARX-format hierarchy CSV.

Values come from a column of a table (`--from INPUT.csv --column NAME`) or from
`--values` (a comma list, or LO..HI for a range of integers). The command is a
thin shell over `fedanon.data.builders`; the built hierarchy is validated
(monotone, one row per value) before it is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from fedanon.kit.atomicfile import atomic_binary
from fedanon.errors import InputError


def _numbers(text: str, what: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{what} {text!r}: expected comma-separated numbers") from None


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{what} {text!r}: expected comma-separated integers") from None


def parse_values(text: str) -> list[str]:
    """`a,b,c` or `LO..HI` (integers, inclusive)."""
    lo, sep, hi = text.partition("..")
    if sep and lo.strip().lstrip("-").isdigit() and hi.strip().lstrip("-").isdigit():
        a, b = int(lo), int(hi)
        if b < a or b - a > 1_000_000:
            raise InputError(f"--values {text!r}: need LO <= HI and at most a million values")
        return [str(i) for i in range(a, b + 1)]
    return [v.strip() for v in text.split(",") if v.strip()]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "hierarchy", help="build a generalization hierarchy (ARX CSV) from a column or a value list",
        description="Build a generalization hierarchy and write it in ARX's CSV layout "
                    "(one line per value: value;level1;...;*).")
    kinds = p.add_subparsers(dest="kind", metavar="KIND")
    specs = {
        "interval": "numbers -> intervals of fixed width, coarser per level (bottom/top coding)",
        "mask": "codes (zip, ICD) -> characters masked right to left",
        "order": "ordinal values -> neighbouring groups in a given or natural order",
        "date": "dates -> month, quarter, year, decade, century",
        "auto": "pick one of the above from the data, with defaults",
    }
    for kind, text in specs.items():
        k = kinds.add_parser(kind, help=text, description=text)
        src = k.add_argument_group("values")
        src.add_argument("--from", dest="source", metavar="INPUT.csv", default=None,
                         help="table to take the column's distinct values from")
        src.add_argument("--column", metavar="NAME", default=None, help="column of INPUT.csv")
        src.add_argument("--values", metavar="LIST", default=None,
                         help="values instead of --from: a,b,c or LO..HI (integers)")
        src.add_argument("--delimiter", default=";", metavar="CHAR", help="delimiter of INPUT.csv and output (';')")
        src.add_argument("--encoding", default="utf-8", metavar="NAME",
                         help="text encoding of INPUT.csv and of the written hierarchy (default utf-8), so that "
                              "`fedanon anonymize --encoding NAME` reads both alike")
        k.add_argument("--output", "-o", metavar="HIERARCHY.csv", default=None,
                       help="where to write (default: standard output)")
        if kind == "interval":
            k.add_argument("--width", type=float, default=None,
                           help="width of the level-1 intervals (default: 1/2/5 x 10^n giving ~10 intervals)")
            k.add_argument("--widths", default=None, metavar="W1,W2,...",
                           help="explicit width per level, each a multiple of the previous one")
        if kind in ("interval", "order"):
            k.add_argument("--fanout", default="2", metavar="F1,F2,...",
                           help="groups joined per level (last one repeats; default 2)")
        if kind == "interval":
            k.add_argument("--bottom", type=float, default=None, help="bottom coding: values below become '<BOTTOM'")
            k.add_argument("--top", type=float, default=None, help="top coding: values at/above become '>=TOP'")
        if kind == "mask":
            k.add_argument("--char", default="*", help="mask character (default '*')")
            k.add_argument("--step", type=int, default=1, help="characters masked per level (default 1)")
            k.add_argument("--levels", type=int, default=None, help="number of masking levels before '*'")
        if kind == "order":
            k.add_argument("--order", default=None, metavar="V1,V2,...|FILE",
                           help="the order of the values (a comma list or a file with one value per line); "
                                "default: numeric if all values are numbers, else alphabetical")
        if kind == "date":
            k.add_argument("--format", default=None, metavar="STRPTIME",
                           help="date format, e.g. %%d.%%m.%%Y (default: detected)")
            k.add_argument("--levels", default="month,year,decade", metavar="U1,U2,...",
                           help="units from fine to coarse (month, quarter, year, decade, century)")
        k.set_defaults(handler=run)
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])


def _options(args: argparse.Namespace) -> dict[str, Any]:
    kind = args.kind
    opts: dict[str, Any] = {}
    if kind == "interval":
        opts.update(width=args.width, fanout=_ints(args.fanout, "--fanout"), bottom=args.bottom, top=args.top)
        if args.widths:
            opts["widths"] = _numbers(args.widths, "--widths")
    elif kind == "order":
        opts["fanout"] = _ints(args.fanout, "--fanout")
        if args.order:
            path = Path(args.order)
            if "," not in args.order and path.is_file():
                try:
                    text = path.read_text(encoding=args.encoding)
                except UnicodeDecodeError as exc:
                    raise InputError(f"--order {path}: not {args.encoding} text (byte {exc.object[exc.start:exc.start + 1]!r} "
                                     f"at offset {exc.start}); give its encoding with --encoding") from None
                opts["order"] = [line.strip() for line in text.splitlines() if line.strip()]
            else:
                opts["order"] = [v.strip() for v in args.order.split(",") if v.strip()]
    elif kind == "mask":
        opts.update(char=args.char, step=args.step, levels=args.levels)
    elif kind == "date":
        opts.update(format=args.format, units=[u.strip() for u in args.levels.split(",") if u.strip()])
    return opts


def run(args: argparse.Namespace) -> int:
    from fedanon.data.io.delimited import check_encoding, parse_delimiter
    from fedanon.data.builders import build_for_values, column_values

    args.delimiter = parse_delimiter(args.delimiter)
    args.encoding = check_encoding(args.encoding)
    if (args.source is None) == (args.values is None):
        raise InputError("give the values either with --from INPUT.csv --column NAME or with --values")
    if args.source is not None:
        if not args.column:
            raise InputError("--from needs --column NAME")
        values = column_values(args.source, args.column, args.delimiter, args.encoding)
        name = args.column
    else:
        values = parse_values(args.values)
        name = args.column or "values"
    hierarchy = build_for_values(args.kind, name, values, **_options(args))
    if args.output is None:
        sys.stdout.write(hierarchy.csv_text(args.delimiter))
        return 0
    try:
        data = hierarchy.csv_text(args.delimiter).encode(args.encoding)
    except UnicodeEncodeError as exc:
        raise InputError(f"{args.output}: value {exc.object[exc.start:exc.end]!r} cannot be written as "
                         f"{args.encoding}; choose another --encoding (e.g. utf-8)") from None
    try:
        with atomic_binary(args.output) as fh:  # whole or not at all
            fh.write(data)
    except OSError as exc:
        raise InputError(f"{args.output}: cannot write ({exc.strerror or exc})") from None
    print(f"fedanon hierarchy: wrote {args.output} ({len(hierarchy.rows)} values, {hierarchy.height} levels "
          f"incl. the original)", file=sys.stderr)
    return 0
