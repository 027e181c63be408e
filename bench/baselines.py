#!/usr/bin/env python3
"""Table 4.1 of the dissertation, measured: secure integration vs. anonymize-then-integrate.

    python3 bench/baselines.py [--json OUT.json]

ADULT (bundled, 30,162 rows), 3 % suppression, non-uniform entropy, as §4.3:
* k-anonymity: k = 5, all 9 attributes quasi-identifiers;
* l-diversity: recursive-(4,3)-diversity of `occupation` (the attribute Table 3.2 marks
  as sensitive for ADULT), the other 8 attributes quasi-identifiers, k = 1.
Splits as Table 4.2: 3 parties vertical P1 {age, race, sex}, P2 {education,
marital-status, native-country}, P3 {occupation, salary-class, workclass}; 2 parties
vertical (not in the dissertation; our choice) P1 {age, race, sex, education,
marital-status}, P2 the other four; horizontal: rows dealt evenly in file order, the
last party taking the remainder.

For each case: the secure result's loss (= the centralized optimum, which every
protocol reproduces), the baseline's loss on the pooled table, and the percentage
(secure / baseline, Table 4.1's figure) printed next to the dissertation's value
(quoted, not measured here). Timing columns are measured on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import fedanon  # noqa: E402
from fedanon.engine.anonymizer import anonymize  # noqa: E402
from fedanon.oracle.baselines import horizontal_baseline, vertical_baseline  # noqa: E402
from fedanon.model.config import AnonymizationConfig, LDiversity  # noqa: E402
from fedanon.data.io.delimited import read_table_csv  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.data.table import EncodedTable  # noqa: E402

DATA = Path(fedanon.__file__).parent / "data" / "adult"
ATTRIBUTES = ["age", "race", "sex", "education", "marital-status", "native-country", "occupation",
              "salary-class", "workclass"]
VERTICAL = {
    3: [["age", "race", "sex"], ["education", "marital-status", "native-country"],
        ["occupation", "salary-class", "workclass"]],
    2: [["age", "race", "sex", "education", "marital-status"],
        ["native-country", "occupation", "salary-class", "workclass"]],
}
# Table 4.1, ADULT row (quoted): secure loss as % of the baseline's
DISSERTATION = {("k-anonymity", "vertical", 2): 50, ("k-anonymity", "vertical", 3): 45,
                ("k-anonymity", "horizontal", 2): 92, ("k-anonymity", "horizontal", 3): 97,
                ("l-diversity", "vertical", 2): 76, ("l-diversity", "vertical", 3): 65,
                ("l-diversity", "horizontal", 2): 70, ("l-diversity", "horizontal", 3): 68}


def configs() -> dict[str, AnonymizationConfig]:
    return {
        "k-anonymity": AnonymizationConfig(list(ATTRIBUTES), k=5, suppression=0.03),
        "l-diversity": AnonymizationConfig([a for a in ATTRIBUTES if a != "occupation"], k=1, suppression=0.03,
                                           l_diversity=LDiversity("recursive", 3, "occupation", 4)),
    }


def even_blocks(n: int, parties: int) -> list[list[int]]:
    size = n // parties
    return [list(range(p * size, n if p == parties - 1 else (p + 1) * size)) for p in range(parties)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", metavar="OUT.json", help="write the rows as JSON")
    args = ap.parse_args()
    columns, rows = read_table_csv(DATA / "adult.csv")
    hierarchies = {a: Hierarchy.read_csv(DATA / f"adult_hierarchy_{a}.csv", a) for a in ATTRIBUTES}
    table = EncodedTable.from_rows(columns, rows)
    out: list[dict[str, Any]] = []
    header = (f"{'model':<12} {'split':<10} {'P':>1} {'secure loss':>12} {'baseline loss':>14} {'%':>5} "
              f"{'diss. %':>7} {'secure s':>8} {'baseline s':>10}  notes")
    print(header)
    print("-" * len(header))
    for model, config in configs().items():
        t0 = time.perf_counter()
        central = anonymize(table, hierarchies, config)
        secure_s = time.perf_counter() - t0
        secure = (central.transformation, central.suppressed)
        for split in ("vertical", "horizontal"):
            for parties in (2, 3):
                t0 = time.perf_counter()
                if split == "horizontal":
                    b = horizontal_baseline(table, hierarchies, config, even_blocks(len(rows), parties), secure)
                    note = "per-party levels " + " | ".join(
                        ",".join(str(r["transformation"][q]) for q in config.quasi_identifiers)
                        for r in b.details["party_results"])
                else:
                    b = vertical_baseline(table, hierarchies, config, VERTICAL[parties], secure)
                    note = f"P{b.details['anonymizing_party']} anonymizes"
                baseline_s = time.perf_counter() - t0
                quoted = DISSERTATION[(model, split, parties)]
                row = {"model": model, "split": split, "parties": parties, "secure_loss": b.secure_loss,
                       "baseline_loss": b.baseline_loss, "percent": b.percent, "dissertation_percent": quoted,
                       "secure_transformation": central.transformation, "secure_s": secure_s,
                       "baseline_s": baseline_s, "details": b.details}
                out.append(row)
                print(f"{model:<12} {split:<10} {parties:>1} {b.secure_loss:>12.0f} {b.baseline_loss:>14.0f} "
                      f"{b.percent:>5.0f} {quoted:>7} {secure_s:>8.2f} {baseline_s:>10.2f}  {note}")
    print(f"\nsecure = centralized optimum (every protocol's result); % = secure loss / baseline loss; "
          f"'diss. %' quoted from Table 4.1; times measured here ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    if args.json:
        meta = {"machine": platform.platform(), "cores": os.cpu_count(), "load_1min": os.getloadavg()[0],
                "metric": "nonuniform-entropy", "suppression": 0.03}
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": out}, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
