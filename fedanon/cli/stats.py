"""`fedanon stats`: differentially private counts and contingency tables of one local table.

A thin shell around `fedanon.dp.marginals`: it reads the table and the hierarchies that
define each marginal's cells, draws the noise and writes one JSON file that holds the noisy
tables together with the budget each of them spent.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from fedanon.data.prepare import check_values_in_hierarchies
from fedanon.cli.kit.runconfig import parse_qi
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.delimited import check_encoding, parse_delimiter, same_file
from fedanon.data.io.registry import read_table
from fedanon.dp.marginals import MarginalSpec
from fedanon.dp.statistics import release_statistics
from fedanon.dp.randomness import randomness
from fedanon.errors import InputError
from fedanon.kit.atomicfile import write_text_atomic


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "stats",
        help="differentially private counts and contingency tables of one local table",
        description="Release the row count and marginals (contingency tables over chosen attributes, "
                    "optionally at hierarchy levels) with discrete Laplace noise calibrated to EPSILON; "
                    "the budget each table spends is written into the output.",
    )
    p.add_argument("input", metavar="INPUT.csv", help="table to count (first line = header)")
    p.add_argument("--epsilon", type=float, required=True, metavar="EPSILON",
                   help="total privacy budget, split evenly over the released tables")
    p.add_argument("--marginal", action="append", default=[], metavar="ATTR[:LEVEL],...",
                   help="a contingency table over these attributes at these hierarchy levels (repeat)")
    p.add_argument("--hierarchy", action="append", default=[], metavar="NAME=HIERARCHY.csv",
                   help="the hierarchy that defines an attribute's cells at every level (repeat)")
    p.add_argument("--no-total", action="store_true", help="do not release the total row count")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="seed the noise so a run can be repeated: FOR TESTS ONLY, not private")
    p.add_argument("--output", "-o", required=True, metavar="STATS.json", help="the noisy tables and the budget")
    p.add_argument("--delimiter", default=";", metavar="CHAR", help="field delimiter of the data files (default ';')")
    p.add_argument("--encoding", default="utf-8", metavar="NAME", help="text encoding of the input files")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    epsilon = args.epsilon
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InputError(f"--epsilon must be a positive number, got {epsilon!r}")
    if args.seed is not None and args.seed < 0:
        raise InputError(f"--seed must be an integer >= 0, got {args.seed}")
    specs = [MarginalSpec.parse(text) for text in args.marginal]
    output = Path(args.output)
    if same_file(output, Path(args.input)):
        raise InputError(f"--output {output} is the input file; refusing to overwrite it")
    delimiter = parse_delimiter(args.delimiter)
    encoding = check_encoding(args.encoding)
    named = dict(parse_qi(text) for text in args.hierarchy)
    table = read_table(Path(args.input), delimiter, encoding)
    for name in sorted({a for s in specs for a in s.attributes} | set(named)):
        if name not in table.columns:
            raise InputError(f"{table.source}, line 1: unknown column {name!r}; "
                             f"the table has columns: {', '.join(table.columns)}")
    hierarchies = {name: Hierarchy.read_csv(path, name, delimiter, encoding) for name, path in named.items()}
    check_values_in_hierarchies(table, hierarchies)
    encoded = table.encoded()
    rng = randomness(args.seed)
    result = release_statistics(encoded, hierarchies, specs, epsilon, rng, total=not args.no_total)
    result = {"input": str(args.input), **result}
    try:
        write_text_atomic(output, json.dumps(result, indent=2) + "\n")
    except OSError as exc:
        raise InputError(f"{output}: cannot write ({exc.strerror or exc})") from None
    if rng.seeded:
        print("fedanon stats: seeded noise (--seed) is for tests only: not private", file=sys.stderr)
    return 0
