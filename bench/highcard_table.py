#!/usr/bin/env python3
"""Write the high-cardinality profiling table as CSV files, for runs of the `fedanon` CLI.

    python3 bench/highcard_table.py OUT_DIR [--rows N] [--income-levels 4|5] [--seed S]

The table is `bench.tables.highcard`: ADULT plus a ZIP-like quasi-identifier (≈ 13,600
values, hierarchy 12345 → 1234* → … → *****) and a numeric sensitive attribute `income`
(≈ 800 values) with an interval hierarchy; `--income-levels 5` gives that hierarchy five
levels (value → band of 10 → band of 50 → band of 200 → *), 4 the bands of 10 and 100.
`--rows N` resamples it to N rows (each attribute drawn from a different random row,
seeded), for memory growth with the rows. Deterministic: the same arguments write the
same files.

Files (`bench.fresh.TableFiles`): `table.csv` and one `hierarchy_<attribute>.csv` per quasi-identifier and for
`income`; the argument list of a run is printed (QIs, sensitive attribute).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.fresh import TableFiles  # noqa: E402
from bench.tables import HIGHCARD_QIS, SENSITIVE, highcard, resample_codes  # noqa: E402


def write_table(out_dir: Path, rows: int | None = None, income_levels: int = 5,
                seed: int = 20261123) -> list[str]:
    """Write the table and its hierarchies to `out_dir`; returns the CLI arguments that name them."""
    table, hier = highcard(seed, income_levels=income_levels)
    if rows is not None and rows != table.n_rows:
        table = resample_codes(table, rows)
    files = TableFiles.write(out_dir, table, {a: hier[a] for a in HIGHCARD_QIS + [SENSITIVE]})
    args = [str(files.table)]
    for attr in HIGHCARD_QIS:
        args += ["--qi", f"{attr}={files.hierarchies[attr]}"]
    return args + ["--sensitive", f"{SENSITIVE}={files.hierarchies[SENSITIVE]}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--rows", type=int, default=None, help="resample to this many rows (default: ADULT's 30,162)")
    ap.add_argument("--income-levels", type=int, choices=(4, 5), default=5)
    ap.add_argument("--seed", type=int, default=20261123)
    args = ap.parse_args(argv)
    print(" ".join(write_table(args.out_dir, args.rows, args.income_levels, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
