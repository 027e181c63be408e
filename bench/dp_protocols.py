#!/usr/bin/env python3
"""SafePub across institutions: the DP release of ADULT by Protocols B, A and C next to the local one.

    python3 bench/dp_protocols.py [--epsilon 1] [--delta 1e-6] [--steps 100] [--parties 3] [--repeat 3]
                                  [--protocols B,A,C] [--c-rows 3000] [--json OUT.json]

ADULT (30,162 rows, all 9 attributes as QIs), one (ε, δ). Reference in the same run: the local
release (`engine.safepub.release`, sampling, search and k-anonymization in one process). Then
the same release made by Protocol B (helper draws) and A (master draws), horizontally and
vertically, every party a thread of this process over the in-memory transport (the same role
code as a daemon run, no sockets or TLS). Each row: median wall time over `--repeat` OpenDP draws
and its ratio to the local release's, the sampled and suppressed rows and the granularity of the
sample (Iyengar's loss over the sampled rows and QIs, a suppressed row counting 1 per QI), the
figure a protocol's search party can compute. Every draw is a different random release.

Protocol C (key holder draws; Paillier counters, its default) runs on the first `--c-rows` rows
of ADULT only: its encryption of every sampled row's counter and its per-candidate encrypted class
sums make a run on all rows take many minutes on a small machine. Its rows are therefore timed
against their own reference in the same run: the local release of those same rows.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fedanon.engine import AnonymizationConfig, EncodedTable  # noqa: E402
from fedanon.engine.safepub import release  # noqa: E402
from fedanon.model.registry import ParseContext, model_type  # noqa: E402
from fedanon.protocols.kit.api import RunSettings  # noqa: E402
from fedanon.protocols.sim.local_run import run_in_memory  # noqa: E402
from fedanon.protocols.sim.split import split_horizontal, split_vertical  # noqa: E402

from bench.tables import ATTRS, load_adult  # noqa: E402


def local_draw(table: EncodedTable, hierarchies, config) -> dict:  # noqa: ANN001
    t0 = time.perf_counter()
    result = release(table, hierarchies, config)
    elapsed = time.perf_counter() - t0
    dp = result.extra["dp"]
    sampled = dp["sampled_rows"]
    granularity = (dp["granularity_loss"] * table.n_rows - (table.n_rows - sampled)) / sampled
    return {"time_s": elapsed, "sampled_rows": sampled, "suppressed_rows": result.suppressed_rows,
            "granularity_of_sample": granularity, "transformation": result.transformation}


def protocol_draw(protocol: str, distribution: str, parties: int, header, rows, hierarchies, config) -> dict:  # noqa: ANN001
    split = split_horizontal if distribution == "horizontal" else split_vertical
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(split(header, rows, parties))}
    roles = {name: "primary" for name in local}
    if protocol in ("B", "C"):
        roles["helper"] = "helper"
    settings = RunSettings(f"bench-dp-{protocol}-{distribution}", protocol, distribution, config, roles, "p1", {})
    t0 = time.perf_counter()
    run = run_in_memory(settings, local, timeout_s=3600)
    elapsed = time.perf_counter() - t0
    if run.errors:
        raise SystemExit(f"{protocol} {distribution}: {run.errors}")
    report = run.outcomes["p1"].report
    dp = report["dp"]
    return {"time_s": elapsed, "sampled_rows": dp["sampled_rows"], "suppressed_rows": report["suppressed_rows"],
            "granularity_of_sample": dp["granularity_loss_of_sample"], "transformation": report["transformation"],
            "search_party": dp["search_party"], "phases_recipient": report.get("phases")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--protocols", default="B,A,C", help="comma-separated, of B, A, C")
    ap.add_argument("--c-rows", type=int, default=3000, help="Protocol C runs on the first N rows (default 3000)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    header, rows, hierarchies = load_adult()
    keep = [header.index(a) for a in ATTRS]
    rows = [[row[i] for i in keep] for row in rows]
    header = list(ATTRS)
    table = EncodedTable.from_rows(header, rows)
    model = model_type("dp").parse({"epsilon": args.epsilon, "delta": args.delta, "steps": args.steps},
                                   ParseContext())
    config = AnonymizationConfig(ATTRS, metric="loss", models=[model])
    params = model.parameters()
    out = {"machine": platform.machine(), "python": platform.python_version(), "rows": table.n_rows, "qis": ATTRS,
           "epsilon": args.epsilon, "delta": args.delta, "steps": args.steps, "k": params.k, "beta": params.beta,
           "parties": args.parties, "repeat": args.repeat, "transport": "in-memory (threads, no TLS)", "runs": []}
    protocols = [p.strip().upper() for p in args.protocols.split(",") if p.strip()]
    out["protocols"], out["c_rows"] = protocols, args.c_rows
    print(f"epsilon {args.epsilon:g}, delta {args.delta:g}: k = {params.k}, beta = {params.beta:.3f}; "
          f"{args.parties} parties, {args.repeat} draws each (median)")
    print(f"{'run':>20} {'time':>8} {'x local':>8} {'sampled':>8} {'suppressed':>10} {'granularity of sample':>22}")
    full = [p for p in protocols if p in ("B", "A")]
    if full:
        _measure(out, [("local", "-")] + [(p, d) for p in full for d in ("horizontal", "vertical")],
                 args, header, rows, hierarchies, config)
    if "C" in protocols:
        few = rows[:args.c_rows]
        _measure(out, [("local", "-"), ("C", "horizontal"), ("C", "vertical")], args, header, few, hierarchies, config)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


def _measure(out: dict, cases: list[tuple[str, str]], args: argparse.Namespace, header: list[str],  # noqa: ANN001
             rows: list[list[str]], hierarchies, config) -> None:
    """One block of rows, timed against its first case (the local release of the same rows)."""
    table = EncodedTable.from_rows(header, rows)
    reference = None
    med = statistics.median
    for protocol, distribution in cases:
        draws = [local_draw(table, hierarchies, config) if protocol == "local" else
                 protocol_draw(protocol, distribution, args.parties, header, rows, hierarchies, config)
                 for _ in range(args.repeat)]
        t = med(d["time_s"] for d in draws)
        reference = reference or t
        out["runs"].append({"protocol": protocol, "distribution": distribution, "rows": table.n_rows,
                            "median_time_s": t, "ratio_to_local": t / reference, "draws": draws})
        label = f"{protocol} {distribution[:4]} ({table.n_rows})"
        print(f"{label:>20} {t:7.2f}s {t / reference:7.1f}x "
              f"{med(d['sampled_rows'] for d in draws):8.0f} {med(d['suppressed_rows'] for d in draws):10.0f} "
              f"{med(d['granularity_of_sample'] for d in draws):22.3f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
