"""The statistics mode of `fedanon simulate`: noisy counts and marginals of the dealt table.

`--stats-marginal ATTR[:LEVEL],...` (repeatable) with `--epsilon` turns a simulation from
anonymizing into counting: the table is dealt as usual, every party runs its protocol's
statistics mode (`protocols/stats/`) and the key holder's release is written to `--output` as
the JSON `fedanon stats` writes for one table. The attributes' cells come from their
hierarchies, given as for an anonymizing run with `--qi NAME=HIERARCHY.csv`; `--seed` (tests
only) seeds every party's draws.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fedanon.cli.kit.inputs import load_inputs
from fedanon.cli.kit.runconfig import option_dest, run_from_args
from fedanon.consortium.simulation import print_phase_table
from fedanon.consortium.statistics import simulate_statistics
from fedanon.dp.marginals import MarginalSpec
from fedanon.dp.statistics import StatisticsRequest
from fedanon.errors import InputError
from fedanon.kit.atomicfile import write_text_atomic
from fedanon.parties.reaper import guarded_temp_dir
from fedanon.protocols.stats.roles import PHASES

#: flags of an anonymizing simulation that a statistics run does not read (dest, flag)
_NOT_READ = (("baseline", "--baseline"), ("html", "--html"), ("per_party_keys", "--per-party-keys"),
             ("layout", "--layout"), ("dp", "--dp"), ("aggregate", "--aggregate"), ("sensitive", "--sensitive"),
             ("k", "--k"))


def add_statistics_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group(
        "statistics (instead of anonymizing)",
        "release the row count and contingency tables of the pooled table with discrete Laplace noise, as "
        "`fedanon stats` does for one table; --output is then the JSON release. Cells come from the --qi "
        "hierarchies. Horizontal and vertical splits (each table's attributes at one party); Protocol B's helper draws the noise, in Protocols A and C every "
        "primary adds a share of it")
    g.add_argument("--stats-marginal", action="append", default=[], metavar="ATTR[:LEVEL],...",
                   help="a contingency table over these attributes at these hierarchy levels (repeat)")
    g.add_argument("--epsilon", type=float, default=None, metavar="EPSILON",
                   help="total privacy budget of the statistics, split evenly over the released tables")
    g.add_argument("--no-total", action="store_true", help="do not release the total row count")


def statistics_requested(args: argparse.Namespace) -> bool:
    return bool(args.stats_marginal) or args.epsilon is not None or args.no_total


def run_statistics(args: argparse.Namespace) -> int:
    """`fedanon simulate` in the statistics mode (flags checked before any party starts)."""
    if args.epsilon is None:
        raise InputError("--stats-marginal needs --epsilon EPSILON (the budget of the released tables)")
    given = [flag for dest, flag in _NOT_READ if getattr(args, dest, None) not in (None, False, [])]
    if given:
        raise InputError(f"{', '.join(given)} appl{'ies' if len(given) == 1 else 'y'} to anonymizing runs, "
                         "not to a statistics release (--stats-marginal)")
    seed_dest = option_dest("dp", "seed")
    seed = getattr(args, seed_dest, None)
    setattr(args, seed_dest, None)  # --seed belongs to --dp otherwise; here it seeds the statistics
    if seed is not None:
        try:
            seed = int(seed)
        except ValueError:
            raise InputError(f"--seed must be an integer >= 0, got {seed!r}") from None
    request = StatisticsRequest(args.epsilon, tuple(MarginalSpec.parse(t) for t in args.stats_marginal),
                                not args.no_total, seed)
    spec = run_from_args(args)
    inputs = load_inputs(spec)
    table = inputs.table
    with guarded_temp_dir("fedanon-stats-hier-") as folder:
        paths: dict[str, Path] = {}
        for name, hierarchy in inputs.hierarchies.items():  # normalized: the parties read ;-separated UTF-8
            paths[name] = Path(folder) / f"{name}.csv"
            hierarchy.write_csv(paths[name])
        run = simulate_statistics(list(table.columns), table.rows(), paths, request, args.parties,
                                  protocol=args.protocol, distribution=args.distribution,
                                  split_mode=args.split_mode, recipient=args.recipient,
                                  transport="memory" if args.in_memory else "grpc", progress=not args.quiet)
    release: dict[str, Any] = {"input": str(spec.input), **run.release}
    _write(spec.output, release)
    if spec.report:
        _write(spec.report, {**run.report, "input": str(spec.input), "output": str(spec.output),
                             "statistics": run.release})
    if request.seed is not None:
        print("fedanon simulate: seeded noise (--seed) is for tests only: not private", file=sys.stderr)
    if not args.quiet:
        tables = len(release["marginals"])
        total = f"total {release['total']['count']}, " if "total" in release else ""
        print(f"Protocol {args.protocol}, {args.distribution}, {args.parties} primaries: {total}{tables} noisy "
              f"table(s), epsilon {release['budget']['epsilon_spent']:g} spent -> {spec.output} "
              f"({run.elapsed_s:.2f} s)")
        print_phase_table(run.party_reports, "time and bytes per phase and party", PHASES)
    return 0


def _write(path: Path | None, doc: dict[str, Any]) -> None:
    if path is None:
        return
    try:
        write_text_atomic(Path(path), json.dumps(doc, indent=2, default=str) + "\n")
    except OSError as exc:
        raise InputError(f"{path}: cannot write ({exc.strerror or exc})") from None
