#!/usr/bin/env python3
"""Microaggregation: fedanon's methods beside the PyPI implementations, same data, same k.

    python3 bench/microagg.py [--k 3 --k 5 --k 10] [--peer-rows 5000] [--json OUT.json]

Data (all deterministic):
* adult-age: ADULT's `age` (30,162 rows, 1 attribute);
* adult-age-edu: `age` and `education-num`, the ordinal years-of-education code of the
  UCI Adult file, derived from `education` by the UCI mapping (Preschool 1 ... Doctorate 16);
* synthetic-100k: 100,000 x 5 correlated Gaussian attributes on different scales (seeded).

Contenders (SSE/SST always by `fedanon.microagg.quality.sse_sst` on z-scores, so the
figures compare):
* fedanon mdav / univariate (pc1) / individual / kward (k-Ward on the first --peer-rows rows);
* anonypyx MDAVGeneric (MDAV, builds an n x n distance matrix: first --peer-rows rows only,
  with fedanon's MDAV on the same rows for the same-data comparison). Given numeric
  columns only, it measures every distance to the centroid as NaN and starts each round
  at the first remaining record instead of the farthest; a constant categorical column
  (distance 0) makes it run MDAV as published, and that is what is measured;
* microagg1d: optimal univariate microaggregation (1 attribute only; its numba
  compilation is done before the clock starts);
* microaggregation.calculate_sse_dynamic: optimal split of a given order into contiguous
  groups of k..2k-1 (SSE only), on the data sorted by the first principal component --
  the best any single-axis method can do.

Times are wall-clock seconds and process CPU seconds of one run each, on whatever machine
runs this; the figures of one run compare with each other (same machine, same load), not
across runs. On a shared machine the CPU seconds are the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedanon.data.io.delimited import read_columns  # noqa: E402
from fedanon.microagg.api import microaggregate_array  # noqa: E402
from fedanon.microagg.quality import sse_sst  # noqa: E402
from fedanon.microagg.scaling import standardize  # noqa: E402
from fedanon.microagg.univariate import first_principal_component  # noqa: E402
from fedanon.microagg.aggregate import aggregate  # noqa: E402

ADULT = ROOT / "fedanon" / "data" / "adult" / "adult.csv"
EDUCATION_NUM = {"Preschool": 1, "1st-4th": 2, "5th-6th": 3, "7th-8th": 4, "9th": 5, "10th": 6, "11th": 7,
                 "12th": 8, "HS-grad": 9, "Some-college": 10, "Assoc-voc": 11, "Assoc-acdm": 12,
                 "Bachelors": 13, "Masters": 14, "Prof-school": 15, "Doctorate": 16}


def adult() -> tuple[np.ndarray, np.ndarray]:
    table = read_columns(ADULT)
    a, e = table.index("age"), table.index("education")
    age = np.asarray([float(v) for v in table.dictionaries[a]])[table.codes[a]]
    edu = np.asarray([float(EDUCATION_NUM[v]) for v in table.dictionaries[e]])[table.codes[e]]
    return age, edu


def synthetic(n: int = 100_000, d: int = 5, seed: int = 20261127) -> np.ndarray:
    rng = np.random.default_rng(seed)
    mixing = rng.standard_normal((d, d))
    return (rng.standard_normal((n, d)) @ mixing) * np.array([1.0, 10.0, 100.0, 0.1, 1000.0][:d])


CPU_SECONDS: list[float] = []  # process CPU time of the last timed call (less sensitive to a busy machine)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    CPU_SECONDS[:] = [time.process_time() - cpu]
    return out, time.perf_counter() - start


def loss_of_labels(values: np.ndarray, labels: np.ndarray) -> float:
    return float(sse_sst(values, aggregate(values, labels, "mean"))["sse_sst"])


def fedanon_row(values: np.ndarray, k: int, method: str) -> tuple[float, float]:
    result, seconds = timed(lambda: microaggregate_array(values, k, method, quality=False))
    released = result.released
    return float(sse_sst(values, released)["sse_sst"]), seconds


def anonypyx_mdav(values: np.ndarray, k: int) -> tuple[float, float]:
    import pandas as pd
    from anonypyx.microaggregation import MDAVGeneric

    frame = pd.DataFrame(values, columns=[f"x{j}" for j in range(values.shape[1])])
    features = list(frame.columns)
    # MDAVGeneric adds a Hamming distance over the categorical columns; with none, that is
    # 0/0 = NaN for every record, and the "farthest from the centroid" becomes the first
    # remaining record. One constant categorical column (distance 0 everywhere) restores MDAV.
    frame["constant"] = pd.Categorical([0] * len(frame), categories=[0])  # its own factorized code
    clusters, seconds = timed(lambda: MDAVGeneric(frame, features + ["constant"]).partition(k))
    labels = np.empty(values.shape[0], dtype=np.int64)
    for g, members in enumerate(clusters):
        labels[np.asarray(members, dtype=np.int64)] = g
    return loss_of_labels(values, labels), seconds


def microagg1d_optimal(values: np.ndarray, k: int) -> tuple[float, float]:
    from microagg1d import univariate_microaggregation

    univariate_microaggregation(np.arange(20, dtype=np.float64), 3)  # numba compiles on first use: not timed
    labels, seconds = timed(lambda: np.asarray(univariate_microaggregation(values[:, 0].copy(), k)))
    return loss_of_labels(values, labels.astype(np.int64)), seconds


def ordered_dp(values: np.ndarray, k: int) -> tuple[float, float]:
    """`microaggregation`'s optimal contiguous split, on the records sorted by pc1 (or the one attribute)."""
    from microaggregation import calculate_sse_dynamic

    z = standardize(values)
    key = first_principal_component(z)
    ordered = np.ascontiguousarray(z[np.argsort(key, kind="stable")])
    sse, seconds = timed(lambda: calculate_sse_dynamic(ordered, k))
    return float(sse) / float((z ** 2).sum()), seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, action="append", default=None, help="group sizes (default 3, 5, 10)")
    ap.add_argument("--peer-rows", type=int, default=5000,
                    help="rows for the O(n^2) contenders (anonypyx MDAV, k-Ward; default 5000)")
    ap.add_argument("--skip-synthetic", action="store_true", help="only the ADULT data sets")
    ap.add_argument("--json", default=None, metavar="OUT.json")
    args = ap.parse_args()
    ks = args.k or [3, 5, 10]
    age, edu = adult()
    datasets: list[tuple[str, np.ndarray]] = [("adult-age", age[:, None]), ("adult-age-edu", np.column_stack([age, edu]))]
    if not args.skip_synthetic:
        datasets.append(("synthetic-100k", synthetic()))
    rows: list[dict[str, Any]] = []

    def add(data: str, values: np.ndarray, k: int, who: str, fn: Callable[[], tuple[float, float]]) -> None:
        try:
            loss, seconds = fn()
            row = {"data": data, "rows": int(values.shape[0]), "attributes": int(values.shape[1]), "k": k,
                   "implementation": who, "sse_sst": loss, "seconds": round(seconds, 3),
                   "cpu_seconds": round(CPU_SECONDS[0], 3)}
        except Exception as exc:  # a peer that fails is reported, not fatal
            row = {"data": data, "rows": int(values.shape[0]), "attributes": int(values.shape[1]), "k": k,
                   "implementation": who, "error": f"{type(exc).__name__}: {str(exc)[:120]}"}
        rows.append(row)
        shown = (f"{row['sse_sst']:.6f}  {row['seconds']:8.2f} s  {row['cpu_seconds']:8.2f} cpu-s"
                 if "sse_sst" in row else row["error"])
        print(f"{data:15} {row['rows']:>7} x{row['attributes']} k={k:<3} {who:38} {shown}", flush=True)

    for name, values in datasets:
        small = values[:args.peer_rows]
        for k in ks:
            add(name, values, k, "fedanon mdav", lambda: fedanon_row(values, k, "mdav"))
            add(name, values, k, "fedanon univariate (pc1)", lambda: fedanon_row(values, k, "univariate"))
            if values.shape[1] > 1:
                add(name, values, k, "fedanon individual", lambda: fedanon_row(values, k, "individual"))
            else:
                add(name, values, k, "microagg1d optimal univariate", lambda: microagg1d_optimal(values, k))
            add(name, values, k, "microaggregation optimal split of pc1 order", lambda: ordered_dp(values, k))
            if values.shape[0] > args.peer_rows:
                add(f"{name}[:{args.peer_rows}]", small, k, "fedanon mdav", lambda: fedanon_row(small, k, "mdav"))
            add(f"{name}[:{args.peer_rows}]", small, k, "anonypyx MDAVGeneric", lambda: anonypyx_mdav(small, k))
            add(f"{name}[:{args.peer_rows}]", small, k, "fedanon kward", lambda: fedanon_row(small, k, "kward"))
    summary = []
    for name, _values in datasets:
        for k in ks:
            ours = [r for r in rows if r["data"] == f"{name}[:{args.peer_rows}]" and r["k"] == k and "sse_sst" in r]
            mine = next((r for r in ours if r["implementation"] == "fedanon mdav"), None)
            peer = next((r for r in ours if r["implementation"] == "anonypyx MDAVGeneric"), None)
            if mine is None:  # the data set has no more rows than --peer-rows
                mine = next((r for r in rows if r["data"] == name and r["k"] == k
                             and r["implementation"] == "fedanon mdav" and "sse_sst" in r), None)
            if mine and peer and peer["rows"] == mine["rows"]:
                summary.append({"data": name, "k": k, "fedanon_mdav_sse_sst": mine["sse_sst"],
                                "anonypyx_mdav_sse_sst": peer["sse_sst"],
                                "ratio": mine["sse_sst"] / peer["sse_sst"] if peer["sse_sst"] else None,
                                "speedup": peer["seconds"] / mine["seconds"] if mine["seconds"] else None,
                                "cpu_speedup": peer["cpu_seconds"] / mine["cpu_seconds"] if mine["cpu_seconds"] else None})
    print("\nMDAV, same rows: fedanon vs anonypyx (SSE/SST ratio, time ratio)")
    for s in summary:
        print(f"  {s['data']:15} k={s['k']:<3} SSE/SST {s['fedanon_mdav_sse_sst']:.6f} vs {s['anonypyx_mdav_sse_sst']:.6f}"
              f"  ratio {s['ratio']:.4f}  anonypyx/fedanon time {s['speedup']:.1f}x (cpu {s['cpu_speedup']:.1f}x)")
    if args.json:
        doc = {"command": " ".join(["python3", "bench/microagg.py", *sys.argv[1:]]),
               "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "load_average": list(os.getloadavg())},
               "rows": rows, "mdav_vs_anonypyx": summary}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
