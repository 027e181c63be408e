"""Benchmark: reading a CSV table into the engine's encoded form, and writing it back.

    python3 bench/csvio.py [--scale 10] [--repeat 3] [--json OUT.json]

Phases, each best of --repeat: `read` (fedanon.data.io.delimited.read_columns: pyarrow's
multithreaded reader into per-column codes + dictionaries), `encode` (the engine's int32
code matrix), `write` (write_columns: per-value quoting, pyarrow batch join). The
reference, measured in the same run on the same file, is the row-wise path the project
used before: split every line in Python, then `EncodedTable.from_rows`. Input: ADULT
(30,162 rows, 9 columns) repeated --scale times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import fedanon  # noqa: E402
from fedanon.data.io.delimited import read_columns, write_columns  # noqa: E402
from fedanon.data.table import EncodedTable  # noqa: E402

ADULT = Path(fedanon.__file__).parent / "data" / "adult" / "adult.csv"


def rowwise_reference(path: Path) -> EncodedTable:
    """The pre-pyarrow path: one Python list per row, then dictionary-encode column-wise."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = [c.strip() for c in lines[0].split(";")]
    rows = [[c.strip() for c in line.split(";")] for line in lines[1:] if line.strip()]
    return EncodedTable.from_rows(header, rows)


def best(repeat: int, action):  # type: ignore[no-untyped-def]
    times, value = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        value = action()
        times.append(time.perf_counter() - t0)
    return min(times), value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=10, help="ADULT repeated this many times (default 10)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fedanon-bench-csv-") as tmp:
        source = Path(tmp) / "adult.csv"
        lines = ADULT.read_text(encoding="utf-8").splitlines()
        source.write_text("\n".join([lines[0]] + lines[1:] * args.scale) + "\n", encoding="utf-8")
        size = source.stat().st_size
        t_read, table = best(args.repeat, lambda: read_columns(source))
        t_encode, encoded = best(args.repeat, table.encoded)
        out = Path(tmp) / "out.csv"
        t_write, _ = best(args.repeat, lambda: write_columns(out, table.columns, table.codes, table.dictionaries))
        t_ref, reference = best(args.repeat, lambda: rowwise_reference(source))
        assert reference.decode_rows() == encoded.decode_rows(), "the two readers disagree"
        rows = table.n_rows
    phases = [("read (pyarrow, columnar)", t_read), ("encode (int32 matrix)", t_encode),
              ("write (quoted, batched)", t_write), ("reference: row-wise read + from_rows", t_ref)]
    print(f"{rows:,} rows x {len(table.columns)} columns, {size / 2**20:.1f} MiB; best of {args.repeat}; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'phase':<40}{'s':>9}{'MiB/s':>9}{'rows/s':>13}")
    for name, t in phases:
        print(f"{name:<40}{t:>9.3f}{size / 2**20 / t:>9.1f}{rows / t:>13,.0f}")
    ratio = t_ref / (t_read + t_encode)
    print(f"read+encode vs reference: {ratio:.1f}x faster")
    if args.json:
        args.json.write_text(json.dumps({
            "rows": rows, "columns": len(table.columns), "bytes": size, "repeat": args.repeat,
            "load_1min": os.getloadavg()[0], "cpus": os.cpu_count(),
            "seconds": {name: t for name, t in phases}, "speedup_vs_rowwise": ratio}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
