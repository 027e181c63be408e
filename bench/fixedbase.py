#!/usr/bin/env python3
"""Fixed-base exponentiation for Paillier randomizers: the comb against windows and powmod.

    python3 bench/fixedbase.py [--count 6300] [--sample 1000] [--json OUT.json]

A 3072-bit key's DJN base h_s, 1536-bit uniform exponents, one core (CPU time). For
`--count` exponentiations (default: one pool worker's share of ADULT's Protocol C counters
on this 2-core machine) it measures the table build and the time per power on a sample of
`--sample` exponents, best of 3, and reports the projected total per method:

* comb: `fedanon.crypto.fixedbase` with the shape `shape_for(count)` picks (what encrypts);
* windows w = 8 and w = 10: the fixed-base window table fedanon used before the comb,
  written out here as the reference (h^(d·2^(w·i)) for every digit d and window i);
* powmod: gmpy2.powmod per exponent, no table (the floor without precomputation).

Ratios are against windows w = 10, the previous method, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gmpy2  # noqa: E402
from gmpy2 import mpz  # noqa: E402

from fedanon.crypto import fixedbase  # noqa: E402
from fedanon.crypto.paillier import generate_paillier_keypair  # noqa: E402


class Windows:
    """Reference: h^(d·2^(w·i)) mod m for every w-bit digit d and window i; one multiplication per window."""

    def __init__(self, h: mpz, mod: mpz, exp_bits: int, w: int) -> None:
        self.mod, self.w, self.mask, self.rows = mod, w, (1 << w) - 1, []
        base = h
        for _ in range(-(-exp_bits // w)):
            row = [mpz(1), base]
            for _ in range(2, 1 << w):
                row.append(row[-1] * base % mod)
            self.rows.append(row)
            base = row[-1] * base % mod

    def pow(self, e: int) -> mpz:
        acc, mod, mask, w = mpz(1), self.mod, self.mask, self.w
        for row in self.rows:
            d = e & mask
            if d:
                acc = acc * row[d] % mod
            e >>= w
        return acc


def best_cpu(fn: Callable[[], object], repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=6300)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    sk = generate_paillier_keypair(3072)
    pk = sk.public_key
    bits = (pk.bits + 1) // 2
    raw = fixedbase.random_exponents(args.sample, bits)
    exponents = [int.from_bytes(row.tobytes(), "big") for row in raw]
    shape = fixedbase.shape_for(args.count, bits)
    rows = []

    def add(name: str, build_s: float, per_power_s: float, entries: int, note: str) -> None:
        rows.append({"method": name, "build_s": round(build_s, 3), "per_power_ms": round(per_power_s * 1e3, 4),
                     "table_entries": entries, "table_mb": round(entries * pk.ciphertext_bytes / 1e6, 1),
                     "total_s": round(build_s + args.count * per_power_s, 2),
                     "powers_per_cpu_s": round(1 / per_power_s, 1), "note": note})

    t = time.process_time()
    comb = fixedbase.Comb(pk.hs, pk.nsquare, shape)
    build = time.process_time() - t
    patterns_s = best_cpu(lambda: fixedbase.column_patterns(raw, shape).tolist()) / args.sample
    patterns = fixedbase.column_patterns(raw, shape).tolist()
    power_s = best_cpu(lambda: [comb.pow_patterns(u) for u in patterns]) / args.sample
    assert comb.pow_patterns(patterns[0]) == gmpy2.powmod(pk.hs, exponents[0], pk.nsquare)
    add("comb", build, power_s + patterns_s, shape.entries,
        f"rows {shape.rows}, blocks {shape.blocks}: {shape.columns} multiplications + "
        f"{shape.block_columns - 1} squarings per power (bit patterns included)")
    del comb
    for w in (8, 10):
        t = time.process_time()
        table = Windows(pk.hs, pk.nsquare, bits, w)
        build = time.process_time() - t
        power_s = best_cpu(lambda: [table.pow(e) for e in exponents]) / args.sample
        assert table.pow(exponents[0]) == gmpy2.powmod(pk.hs, exponents[0], pk.nsquare)
        add(f"windows w={w}", build, power_s, len(table.rows) * (1 << w),
            f"{len(table.rows)} multiplications per power")
        del table
    few = exponents[: max(1, args.sample // 10)]
    power_s = best_cpu(lambda: [gmpy2.powmod(pk.hs, e, pk.nsquare) for e in few]) / len(few)
    add("powmod", 0.0, power_s, 0, "gmpy2.powmod, no table")

    reference = next(r for r in rows if r["method"] == "windows w=10")["total_s"]
    load = os.getloadavg()
    print(f"# fixed-base exponentiation, Paillier-3072 DJN randomizers, {bits}-bit exponents, one core "
          f"(CPython {platform.python_version()}, load average {load[0]:.2f})")
    print(f"# {args.count:,} powers (projected from a sample of {args.sample:,}, best of 3), CPU seconds\n")
    print(f"{'method':<14}{'build s':>9}{'ms/power':>10}{'powers/s':>10}{'table MB':>10}{'total s':>9}"
          f"{'vs w=10':>9}  note")
    for r in rows:
        r["vs_windows_w10"] = round(r["total_s"] / reference, 3)
        print(f"{r['method']:<14}{r['build_s']:>9.2f}{r['per_power_ms']:>10.3f}{r['powers_per_cpu_s']:>10.0f}"
              f"{r['table_mb']:>10.1f}{r['total_s']:>9.2f}{r['vs_windows_w10']:>8.2f}x  {r['note']}")
    if args.json:
        args.json.write_text(json.dumps({"count": args.count, "sample": args.sample, "exp_bits": bits,
                                         "machine": {"cores": os.cpu_count(), "python": platform.python_version(),
                                                     "load_average": list(load)},
                                         "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
