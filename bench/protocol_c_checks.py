#!/usr/bin/env python3
"""CPU per component of Protocol C's check loop with Paillier counters, without daemons.

    python3 bench/protocol_c_checks.py [--k 5] [--pseudotuples 0.25] [--metric nonuniform-entropy]

Full ADULT (8 QIs, no suppression), padded with pseudotuples; the helper's
`EncryptedCountChecker` and the key holder's `CountJudge` in one process, both with all
cores as in the daemons. Prints JSON: per component (helper's sums from rows, roll-up
sums, packing; key holder's answers) wall and CPU seconds -- CPU of this process plus
the crypto pool workers (read from /proc), so the noise of a shared machine shows in
wall, not CPU -- and the load average. Compare revisions by alternating runs with
PYTHONPATH pointing at each checkout.

Why not bench/protocol_c.py: its phases are wall times of four daemons sharing the
cores. The counters here are valid Paillier encryptions made cheaply -- (1 + m·n)·R_i
mod n² with 64 fresh DJN randomizers reused -- which is NOT secure and only fine here:
the cost of sums, packing and decryption does not depend on the randomizers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: a checkout named there wins

QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


def _cpu_of(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--pseudotuples", type=float, default=0.25)
    # the engine's default metric, as every figure recorded with this script so far; bench/protocol_c.py
    # uses loss (no per-QI leaf marginals at setup, a different search): pass --metric loss to match it
    ap.add_argument("--metric", default="nonuniform-entropy")
    args = ap.parse_args()

    import numpy as np

    import fedanon
    from fedanon.crypto import paillier, parallel
    from fedanon.crypto.counters import PaillierCounterPrivateKey
    from fedanon.engine import EncodedTable, read_table_csv
    from fedanon.engine.anonymizer import prepare_structure, search
    from fedanon.model.config import AnonymizationConfig
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.protocols.c.counted_checks import CountJudge, EncryptedCountChecker, RowCounters
    from fedanon.protocols.c.pseudotuples import resample_rows

    data = Path(fedanon.__file__).parent / "data" / "adult"
    columns, rows = read_table_csv(data / "adult.csv")
    hierarchies = {a: Hierarchy.read_csv(data / f"adult_hierarchy_{a}.csv", a) for a in QIS}
    rng = np.random.default_rng(3)
    fakes = resample_rows(rows, int(len(rows) * args.pseudotuples), rng=rng)
    padded = rows + fakes
    real = np.r_[np.ones(len(rows), bool), np.zeros(len(fakes), bool)]
    order = rng.permutation(len(padded))
    padded, real = [padded[i] for i in order], real[order]
    table = EncodedTable.from_rows(columns, padded)

    sk = paillier.generate_paillier_keypair()
    pk = sk.public_key
    randomizers = [pk.randomizer() for _ in range(64)]
    width = pk.ciphertext_bytes
    blob = [int((1 + int(b) * pk.n) * randomizers[i % 64] % pk.nsquare).to_bytes(width, "big")
            for i, b in enumerate(real.tolist())]
    key = PaillierCounterPrivateKey(sk)
    pub = key.public_key
    config = AnonymizationConfig(QIS, k=args.k, suppression=0.0, metric=args.metric)
    parallel.warm_up(None)
    counters = RowCounters(pub.load(blob, workers=None), None)
    structure = prepare_structure(table, hierarchies, config, require_subset=False)

    def cpu() -> float:
        return time.process_time() + _cpu_of(parallel.worker_pids(None))

    acc: dict[str, list[float]] = {}

    def timed(obj: object, name: str, label: str) -> None:
        inner = getattr(obj, name)

        def wrapper(*a, **kw):
            t0, c0 = time.perf_counter(), cpu()
            try:
                return inner(*a, **kw)
            finally:
                s = acc.setdefault(label, [0.0, 0.0, 0])
                s[0] += time.perf_counter() - t0
                s[1] += cpu() - c0
                s[2] += 1

        setattr(obj, name, wrapper)

    box: dict[str, CountJudge] = {}
    checker = EncryptedCountChecker(structure, pub, counters, lambda req: box["judge"].answer(req))
    box["judge"] = CountJudge(key, config, checker.setup_request(), workers=None)
    checker.adopt(box["judge"].facts())
    timed(checker.sums, "from_rows", "helper sums from rows")
    timed(checker.sums, "rolled", "helper roll-up sums")
    timed(pub, "sums_message", "helper packing")
    timed(box["judge"], "answer", "key holder answers")
    load_start = os.getloadavg()
    t0, c0 = time.perf_counter(), cpu()
    outcome = search(structure, checker)
    total = {"wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(cpu() - c0, 2)}
    checker.close()
    pub.unload(counters.real)
    report = {label: {"wall_s": round(w, 2), "cpu_s": round(c, 2), "calls": n} for label, (w, c, n) in acc.items()}
    report.update({"search": total, "optimum": list(structure.lattice.node_levels(outcome.node)),
                   "fedanon": str(Path(fedanon.__file__).parent), "metric": args.metric, "load_start": list(load_start),
                   "load_end": list(os.getloadavg())})
    print(json.dumps(report))


if __name__ == "__main__":
    main()
