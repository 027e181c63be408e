#!/usr/bin/env python3
"""Protocols over a shaped network: every party in its own network namespace (root only).

    sudo python3 bench/netns.py [--protocols B[,A,C]] [--rates 100mbit,10mbit] [--splits horizontal,vertical]
                                [--repeat 1] [--option KEY=VALUE ...] [--json OUT.json]

For each protocol, split and link rate, runs `deploy/netns-consortium.sh` (ADULT, 30,162
rows, 8 QIs, 5-anonymity, 2 % suppression, loss metric; 3 primaries + a helper when the
protocol needs one; coordinator in its own namespace; every link token-bucket shaped in
both directions) and reports seconds per phase at the result recipient, the helper's
anonymize time, pre+post (recipient total minus the engine's anonymize phase at the helper, or for A at the master = recipient; §4.6.4's
measure), payload and wire bytes sent by all parties, and whether the result equals the
centralized anonymization. The reference measured in the same run is the same protocol
and split over unshaped namespace links ("vs unshaped" = shaped pre+post / unshaped);
the dissertation's figures (Fast Ethernet between four desktops, Java) are quoted.
Each configuration is a fresh consortium (daemon start-up is not timed); median of --repeat.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "deploy" / "netns-consortium.sh"

# Quoted from the dissertation (§4.6.4, ADULT, 3 primaries + helper where applicable, Fast Ethernet).
DISSERTATION = {
    ("B", "horizontal"): "0.23 s pre+post; ≈ 1.4 MB",
    ("B", "vertical"): "0.28 s pre+post; ≈ 2 MB (2 primaries)",
    ("A", "horizontal"): "≈ 1 s; 2.85 MB per party",
    ("A", "vertical"): "≈ 30 s; 12.3 MB per party",
    ("C", "horizontal"): "37-48 s; 37 MB (2 primaries)",
    ("C", "vertical"): "37-48 s; 49 MB (2 primaries)",
}


def run_one(protocol: str, split: str, rate: str | None, workdir: Path, options: list[str]) -> dict[str, Any]:
    out = workdir / f"{protocol}-{split}-{rate or 'unshaped'}"
    fig_path = out.with_suffix(".json")
    args = [str(SCRIPT), "--protocol", protocol, "--split", split, "--json", str(fig_path), "--quiet", str(out)]
    if rate:
        args[1:1] = ["--rate", rate]
    for option in options:
        args[1:1] = ["--option", option]
    done = subprocess.run(args, capture_output=True, text=True, env=dict(os.environ, PYTHON=sys.executable))
    if done.returncode != 0 or not fig_path.exists():
        raise SystemExit(f"{protocol} {split} {rate}: harness failed ({done.returncode}): "
                         f"{done.stdout.strip()[-400:]} {done.stderr.strip()[-400:]}")
    return json.loads(fig_path.read_text())


def median_run(protocol: str, split: str, rate: str | None, repeat: int, workdir: Path,
               options: list[str]) -> dict[str, Any]:
    runs = [run_one(protocol, split, rate, workdir, options) for _ in range(repeat)]
    key = "pre_post_s" if runs[0]["pre_post_s"] is not None else "recipient_total_s"
    runs.sort(key=lambda r: r[key])
    chosen = dict(runs[len(runs) // 2])
    chosen["all_" + key] = [r[key] for r in runs]
    chosen["ok"] = all(r["equal_to_centralized"] for r in runs)
    return chosen


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    p.add_argument("--protocols", default="B")
    p.add_argument("--rates", default="100mbit,10mbit")
    p.add_argument("--splits", default="horizontal,vertical")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--json", type=Path)
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="run option passed to every run (e.g. counters=elgamal for Protocol C)")
    args = p.parse_args()
    protocols = [x.strip().upper() for x in args.protocols.split(",") if x.strip()]
    rates = [x.strip() for x in args.rates.split(",") if x.strip()]
    splits = [x.strip() for x in args.splits.split(",") if x.strip()]
    print(f"# netns benchmark ({platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} cores, load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    results: list[dict[str, Any]] = []
    header = ("| protocol | split | link | pre+post [s] | vs unshaped | recipient total [s] | encrypt / integrate / "
              "anonymize (helper) / decrypt [s] | MB sent (payload / wire) | equal | dissertation |")
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fedanon-bench-netns-") as tmp:
        for protocol in protocols:
            for split in splits:
                reference = median_run(protocol, split, None, args.repeat, Path(tmp), args.option)
                for rate in [None, *rates]:
                    fig = reference if rate is None else median_run(protocol, split, rate, args.repeat, Path(tmp),
                                                                           args.option)
                    fig["link"] = rate or "unshaped"
                    results.append(fig)
                    key = "pre_post_s" if fig["pre_post_s"] is not None else "recipient_total_s"
                    ratio = fig[key] / reference[key] if reference[key] else float("nan")
                    rs, hs = fig["recipient_s"], fig["helper_s"] or {}
                    phases = " / ".join(f"{rs[ph]:.3f}" if ph != "anonymize" or not hs else f"({hs[ph]:.3f})"
                                        for ph in rs)
                    payload = sum(fig["bytes_sent"].values()) / 1e6
                    wire = sum(fig["wire_bytes_sent"].values()) / 1e6
                    pre_post = f"{fig['pre_post_s']:.3f}" if fig["pre_post_s"] is not None else "-"
                    rows.append(f"| {protocol} | {split} | {fig['link']} | {pre_post} | {ratio:.2f}x | "
                                f"{fig['recipient_total_s']:.3f} | {phases} | {payload:.2f} / {wire:.2f} | "
                                f"{'yes' if fig['ok'] else 'NO'} | {DISSERTATION.get((protocol, split), '-')} |")
                    print(rows[-1], flush=True)
    print()
    print(header)
    print("|---|---|---|---:|---:|---:|---|---|---|---|")
    for row in rows:
        print(row)
    print(f"# load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        args.json.write_text(json.dumps({"machine": platform.node(), "cpus": os.cpu_count(),
                                         "results": results}, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
