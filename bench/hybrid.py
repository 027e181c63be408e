#!/usr/bin/env python3
"""Benchmark of Protocols A, B and C on hybrid layouts of ADULT, against their vertical runs.

    python3 bench/hybrid.py [--protocols A,B,C] [--repeat 1] [--json OUT.json]

ADULT (bundled copy, 30,162 rows) with six columns (QIs sex, age, race, marital-status,
education; salary-class released unchanged), 5-anonymity without suppression, loss metric.
Two hybrid layouts (bundled as `fedanon/data/adult/layout-2-1.toml` and `layout-2-2.toml`, the
ones the hybrid tests use):

* 2+1: two clinics hold sex, age, race for alternate persons; a registry holds the other
  three columns for everybody;
* 2+2: the clinics split the persons 2:1; a census holds marital-status and education for
  three persons in four (every fourth is dropped by the join); a payroll office holds
  salary-class for everybody.

Every party (and B's and C's helper) is a separate daemon on 127.0.0.1 (gRPC over mutual
TLS, fresh certificates). Reported per run: the result recipient's time for the whole run
(sum of its phases, daemon start-up excluded), the anonymizing party's anonymize phase, the
bytes all parties sent, the rows released. Reference, measured in the same run: the same
protocol on a vertical split of the same six columns over three parties (every party holds
every person), and "x vertical" = hybrid total / vertical total. C uses ElGamal counters.
Each result is checked against the engine on the joined plaintext table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedanon.consortium.simulation import simulate_table  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.data.io.delimited import read_table_csv  # noqa: E402
from fedanon.data.layout import parse_layout  # noqa: E402
from fedanon.model.config import AnonymizationConfig  # noqa: E402
from fedanon.protocols.sim.equivalence import centralized, differences  # noqa: E402
from fedanon.protocols.sim.hybrid import joined_rows  # noqa: E402

import fedanon  # noqa: E402

DATA = Path(fedanon.__file__).parent / "data" / "adult"
COLUMNS = ["sex", "age", "race", "marital-status", "education", "salary-class"]
QIS = COLUMNS[:5]
#: The bundled layouts (the hybrid tests run the same files).
LAYOUTS = {"2+1": DATA / "layout-2-1.toml", "2+2": DATA / "layout-2-2.toml"}


def _measure(sim: Any) -> dict[str, Any]:
    reports = sim.party_reports
    recipient = sim.report.get("result_recipient")
    total = float(sum(reports[recipient].get("phases", {}).values()))
    anonymize = max(float(r.get("phases", {}).get("anonymize", 0.0)) for r in reports.values())
    sent = sum(int(b) for r in reports.values() for b in r.get("traffic", {}).get("bytes_sent_by_phase", {}).values())
    return {"total_s": round(total, 3), "anonymize_s": round(anonymize, 3), "bytes_sent": sent,
            "rows": len(sim.rows)}


def _check(sim: Any, columns: list[str], rows: list[list[str]], hierarchies: dict[str, Hierarchy],
           config: AnonymizationConfig) -> None:
    summary = next(r for r in sim.party_reports.values() if r.get("transformation"))
    problems = differences(centralized(columns, rows, hierarchies, config), summary["transformation"],
                           sim.columns, sim.rows)
    if problems:
        raise SystemExit("MISMATCH: " + "; ".join(problems))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--protocols", default="A,B,C")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", default=None, metavar="OUT.json")
    args = parser.parse_args()
    header, all_rows = read_table_csv(DATA / "adult.csv")
    index = [header.index(c) for c in COLUMNS]
    rows = [[r[i] for i in index] for r in all_rows]
    paths = {c: DATA / f"adult_hierarchy_{c}.csv" for c in COLUMNS}
    hierarchies = {c: Hierarchy.read_csv(p, c) for c, p in paths.items()}
    config = AnonymizationConfig(QIS, k=5, suppression=0.0, metric="loss")
    results: list[dict[str, Any]] = []
    layouts = {name: parse_layout(path) for name, path in LAYOUTS.items()}
    for protocol in args.protocols.upper().split(","):
        options = {"counters": "elgamal"} if protocol == "C" else {}
        cases: list[tuple[str, Any]] = [("vertical, 3 parties", None)] + list(layouts.items())
        reference = None
        for label, layout in cases:
            runs = []
            for _ in range(args.repeat):
                if layout is None:
                    sim = simulate_table(list(COLUMNS), rows, paths, config, "vertical", 3, options=options,
                                         protocol=protocol)
                    _check(sim, list(COLUMNS), rows, hierarchies, config)
                else:
                    sim = simulate_table(list(COLUMNS), rows, paths, config, "hybrid", 0, options=options,
                                         protocol=protocol, layout=layout)
                    _check(sim, list(COLUMNS), joined_rows(COLUMNS, rows, layout), hierarchies, config)
                runs.append(_measure(sim))
            row = {"protocol": protocol, "layout": label if layout is None else f"hybrid {label}",
                   **{k: statistics.median(r[k] for r in runs) for k in runs[0]}}
            if layout is None:
                reference = row["total_s"]
            row["x_vertical"] = round(row["total_s"] / reference, 2) if reference else None
            results.append(row)
            print(f"{protocol}  {row['layout']:<20} total {row['total_s']:8.2f} s  anonymize "
                  f"{row['anonymize_s']:7.2f} s  sent {row['bytes_sent'] / 1e6:7.2f} MB  rows {row['rows']:6d}  "
                  f"x vertical {row['x_vertical']}", flush=True)
    if args.json:
        texts = {name: path.read_text(encoding="utf-8") for name, path in LAYOUTS.items()}
        meta = {"python": platform.python_version(), "cpus": os.cpu_count(), "repeat": args.repeat,
                "config": config.to_dict(), "columns": COLUMNS, "layouts": texts}
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
