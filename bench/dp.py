#!/usr/bin/env python3
"""(ε, δ)-differentially private releases of ADULT (SafePub) next to the non-DP optimum.

    python3 bench/dp.py [--epsilons 0.5,1,2,4] [--delta 1e-6] [--repeat 5] [--steps 100] [--json OUT.json]

ADULT (30,162 rows) with all 9 attributes as QIs. For each ε: the derived k and β, then
`--repeat` releases drawn with OpenDP (no seed: every release is a different draw), each
with its granularity (Iyengar's loss per cell, averaged over all input rows and QIs; a row
that is not sampled or is suppressed counts 1 per QI), suppressed and released rows and time.
Reference in the same run: the optimal (Flash) k-anonymization for the same k with the loss
metric and up to 99 % suppression -- what k-anonymity alone would give, without sampling and
without the randomized search -- and its time. Time of deriving k is reported apart (it is
paid once per (ε, δ)).
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

from fedanon.dp import parameters as dp_parameters  # noqa: E402
from fedanon.engine import AnonymizationConfig, EncodedTable, anonymize  # noqa: E402
from fedanon.engine.safepub import release  # noqa: E402
from fedanon.model.registry import ParseContext, model_type  # noqa: E402

from bench.tables import ATTRS, load_adult  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epsilons", default="0.5,1,2,4")
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    header, rows, hierarchies = load_adult()
    table = EncodedTable.from_rows(header, rows)
    out = {"machine": platform.machine(), "python": platform.python_version(), "rows": table.n_rows,
           "qis": ATTRS, "delta": args.delta, "steps": args.steps, "repeat": args.repeat, "runs": []}
    print(f"{'eps':>5} {'k':>5} {'beta':>6} {'k time':>7} | {'DP granularity (min/med/max)':>30} "
          f"{'suppr. (med)':>12} {'released (med)':>14} {'time (med)':>10} | {'optimum gran.':>13} "
          f"{'suppr.':>7} {'time':>7}")
    for eps in [float(e) for e in args.epsilons.split(",")]:
        model = model_type("dp").parse({"epsilon": eps, "delta": args.delta, "steps": args.steps}, ParseContext())
        params = model.parameters()
        t0 = time.perf_counter()
        k = dp_parameters.derive_k(args.delta, params.epsilon_anon)   # uncached: its time is reported
        k_time = time.perf_counter() - t0
        assert k == params.k
        config = AnonymizationConfig(ATTRS, metric="loss", models=[model])
        draws = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            result = release(table, hierarchies, config)
            elapsed = time.perf_counter() - t0
            dp = result.extra["dp"]
            draws.append({"granularity": dp["granularity_loss"], "loss_of_released_rows": result.information_loss,
                          "suppressed_rows": result.suppressed_rows, "sampled_rows": dp["sampled_rows"],
                          "released_rows": dp["sampled_rows"] - result.suppressed_rows,
                          "transformation": result.transformation, "time_s": elapsed})
        t0 = time.perf_counter()
        optimum = anonymize(table, hierarchies, AnonymizationConfig(ATTRS, k=k, suppression=0.99, metric="loss"))
        opt_time = time.perf_counter() - t0
        run = {"epsilon": eps, "k": k, "beta": params.beta, "epsilon_search": params.epsilon_search,
               "k_derivation_s": k_time, "draws": draws,
               "optimum": {"granularity": optimum.information_loss, "suppressed_rows": optimum.suppressed_rows,
                           "transformation": optimum.transformation, "time_s": opt_time}}
        out["runs"].append(run)
        g = sorted(d["granularity"] for d in draws)
        med = statistics.median
        print(f"{eps:5g} {k:5d} {params.beta:6.3f} {k_time:6.2f}s | "
              f"{g[0]:8.3f} / {med(g):.3f} / {g[-1]:.3f}{'':7} "
              f"{med(d['suppressed_rows'] for d in draws):12.0f} {med(d['released_rows'] for d in draws):14.0f} "
              f"{med(d['time_s'] for d in draws):9.2f}s | {optimum.information_loss:13.3f} "
              f"{optimum.suppressed_rows:7d} {opt_time:6.2f}s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
