"""Protocol C over real daemons: 3 primaries + helper, gRPC over mutual TLS on 127.0.0.1.

Each case equals the centralized engine (transformation and row multiset, pseudotuples
gone); the matrix over models, splits, suppression and counter schemes runs in memory
(test_protocol_c.py) -- here the 3-party cases go through the real network stack,
including the TLS binding of the counter key and the column-key bundles.
"""

from __future__ import annotations


import numpy as np
import pytest

from fedanon.consortium.simulation import simulate_table
from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.protocols.sim.equivalence import centralized, differences

from datasets import ADULT_DIR as DATA
QIS = ["sex", "age", "race", "marital-status"]
COLUMNS = QIS + ["salary-class"]


@pytest.fixture(scope="module")
def adult():
    columns, rows = read_table_csv(DATA / "adult.csv")
    pick = np.random.default_rng(77).choice(len(rows), size=300, replace=False)
    idx = [columns.index(c) for c in COLUMNS]
    rows = [[rows[i][j] for j in idx] for i in sorted(pick.tolist())]
    paths = {a: DATA / f"adult_hierarchy_{a}.csv" for a in COLUMNS}
    return rows, paths, {a: Hierarchy.read_csv(p, a) for a, p in paths.items()}


CASES = [
    ("horizontal", "paillier", AnonymizationConfig(QIS, k=5, metric="loss"), False),
    ("vertical", "elgamal", AnonymizationConfig(QIS, k=2, suppression=0.05, metric="discernibility",
                                                l_diversity=LDiversity("recursive", 2, "salary-class", c=4)), False),
    ("horizontal", "elgamal", AnonymizationConfig(QIS, suppression=0.03, metric="precision",
                                                  t_closeness=TCloseness(0.15, "hierarchical", "salary-class")), False),
    ("vertical", "elgamal", AnonymizationConfig(QIS, k=2, metric="aecs", delta_presence=DeltaPresence(0.0, 0.5)),
     True),
    # entropy: per-QI leaf counts at setup, per-QI suppressed-row counts in the extra round
    ("horizontal", "elgamal", AnonymizationConfig(QIS, k=5, suppression=0.03, metric="nonuniform-entropy"), False),
]


@pytest.mark.slow
@pytest.mark.parametrize("split,counters,config,delta", CASES, ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_three_primaries_over_daemons_equal_centralized(adult, tmp_path, split, counters, config, delta):
    rows, paths, hierarchies = adult
    subset = (np.arange(len(rows)) % 3 == 0) if delta else None
    central = centralized(COLUMNS, rows, hierarchies, config, subset)
    sim = simulate_table(COLUMNS, rows, paths, config, split, 3, subset=subset, transport="grpc", protocol="C",
                         options={"counters": counters}, workdir=tmp_path)
    helper = sim.party_reports["helper"]
    assert differences(central, helper["transformation"], sim.columns, sim.rows) == []
    assert len(sim.rows) == (len(rows) if subset is None else int(subset.sum()))
    key_holder = sim.party_reports["p1"]
    assert key_holder["pseudotuples_dropped"] > 0 and key_holder["counters"] == counters
    assert helper["checks"] > 0 and helper["traffic"]["bytes_received_by_phase"]["anonymize"] > 0
    if config.metric == "nonuniform-entropy":
        assert helper["suppression_rounds"] > 0
