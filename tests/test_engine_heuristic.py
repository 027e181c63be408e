"""The search beyond the node budget (engine/heuristic.py).

* Without a time limit it must prove the optimum: the same node and loss as the
  exhaustive reference (every node checked) on small lattices, ties included.
* With a time limit it returns a transformation the independent row-level verifier
  accepts, and a loss lower bound that is <= the exhaustive optimum <= its loss.
* `fedanon anonymize --node-budget/--time-limit` reports optimum_found, the bound
  and the gap, and rejects bad values with one line and exit code 2.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from fedanon.cli import main
from fedanon.engine import AnonymizationConfig, EncodedTable, Hierarchy, LDiversity, TCloseness, anonymize
from fedanon.data.io.delimited import read_table_csv
from fedanon.oracle.exhaustive import exhaustive_optimum
from fedanon.engine.search.heuristic import SearchLimits
from fedanon.engine.search.lattice import Lattice
from fedanon.oracle.verify import verify_result
from fedanon.errors import InputError

from datasets import DATA_DIR as DATA
ATTRS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


@pytest.fixture(scope="module")
def adult_sample():
    header, rows = read_table_csv(DATA / "adult" / "adult.csv")
    rows = [rows[i] for i in np.random.default_rng(5).choice(len(rows), 3000, replace=False)]
    attrs = ATTRS + ["salary-class"]
    hier = {a: Hierarchy.read_csv(DATA / "adult" / f"adult_hierarchy_{a}.csv", a) for a in attrs}
    return EncodedTable.from_rows(header, rows), hier


CONFIGS = [
    dict(qis=ATTRS[:5], k=5),
    dict(qis=ATTRS[:5], k=10, suppression=0.05),
    dict(qis=ATTRS[:5], k=3, suppression=0.02, metric="discernibility"),
    dict(qis=ATTRS[:4], k=2, suppression=0.05, metric="aecs"),
    dict(qis=ATTRS[:5], k=5, suppression=0.05, metric="nonuniform-entropy-monotonic"),
    dict(qis=ATTRS[:4], l_diversity=LDiversity("recursive", 3, "occupation", 3), suppression=0.05),
    dict(qis=ATTRS[:4], t_closeness=TCloseness(0.3, "hierarchical", "occupation"), suppression=0.03,
         metric="loss"),
]


@pytest.mark.parametrize("spec", CONFIGS, ids=lambda s: f"{s.get('metric', 'nue')}-{s.get('suppression', 0)}")
def test_heuristic_without_time_limit_proves_the_exhaustive_optimum(adult_sample, spec):
    table, hier = adult_sample
    spec = dict(spec)
    config = AnonymizationConfig(spec.pop("qis"), **spec)
    want_levels, want_loss = exhaustive_optimum(table, hier, config)
    got = anonymize(table, hier, config, limits=SearchLimits(node_budget=0))
    assert got.optimum_found and got.extra["gap"] == 0.0
    assert got.transformation == want_levels
    assert math.isclose(got.information_loss, want_loss, rel_tol=1e-12, abs_tol=1e-12)
    assert got.extra["loss_lower_bound"] == pytest.approx(want_loss, rel=1e-12)
    assert verify_result(table, hier, config, got) == []


@pytest.mark.parametrize("spec", CONFIGS[:3] + CONFIGS[5:6], ids=lambda s: f"{s.get('metric', 'nue')}-{s.get('suppression', 0)}")
def test_time_limited_heuristic_is_verified_and_bounded(adult_sample, spec):
    table, hier = adult_sample
    spec = dict(spec)
    config = AnonymizationConfig(spec.pop("qis"), **spec)
    _, optimum = exhaustive_optimum(table, hier, config)
    got = anonymize(table, hier, config, limits=SearchLimits(node_budget=0, time_limit=1e-6))
    assert verify_result(table, hier, config, got) == []  # the independent row-level check
    lower = got.extra["loss_lower_bound"]
    assert 0.0 <= lower <= optimum * (1 + 1e-12) + 1e-12 <= got.information_loss * (1 + 1e-12) + 2e-12
    if not got.optimum_found:
        assert got.extra["gap"] == pytest.approx((got.information_loss - lower) / got.information_loss)
    assert got.checks < Lattice([hier[q].height for q in config.quasi_identifiers]).size


def test_within_the_budget_the_exact_search_runs(adult_sample):
    table, hier = adult_sample
    config = AnonymizationConfig(ATTRS[:4], k=5)
    res = anonymize(table, hier, config, limits=SearchLimits(time_limit=1e-6))
    assert res.optimum_found and res.algorithm.startswith("Flash") and "loss_lower_bound" not in res.extra


def test_huge_lattice_is_searched_without_materializing(adult_sample):
    """16 QIs (ADULT's 8 plus copies): far beyond what Flash materializes."""
    table, hier = adult_sample
    copies = {f"{a}-copy": a for a in ATTRS}
    cols = list(table.columns) + list(copies)
    idx = [table.column_index(a) for a in copies.values()]
    wide = EncodedTable(cols, np.hstack([table.codes, table.codes[:, idx]]),
                        [list(d) for d in table.dictionaries] + [list(table.dictionaries[i]) for i in idx])
    whier = dict(hier)
    for new, old in copies.items():
        whier[new] = Hierarchy.from_rows(new, [[v.decode() for v in r] for r in hier[old].rows])
    config = AnonymizationConfig(ATTRS + list(copies), k=5)
    lat = Lattice([whier[q].height for q in config.quasi_identifiers])
    assert not lat.materializable
    with pytest.raises(InputError):
        _ = lat.levels
    res = anonymize(wide, whier, config, limits=SearchLimits(time_limit=2.0))
    assert res.lattice_size == lat.size
    assert verify_result(wide, whier, config, res) == []
    assert res.extra["loss_lower_bound"] <= res.information_loss


def _cli(args, capsys):
    code = main(["anonymize", *map(str, args)])
    return (code, *capsys.readouterr())


def test_cli_reports_bound_and_gap(tmp_path, capsys):
    ex = DATA / "example"
    qi = [x for a in ("age", "sex", "zipcode") for x in ("--qi", f"{a}={ex / f'example_hierarchy_{a}.csv'}")]
    rep = tmp_path / "r.json"
    code, out, err = _cli([ex / "example.csv", *qi, "--k", "2", "--node-budget", "0", "--output",
                           tmp_path / "o.csv", "--report", rep], capsys)
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["optimum_found"] is True and report["gap"] == 0.0
    assert report["transformation"] == {"age": 1, "sex": 0, "zipcode": 3}  # the exact optimum
    assert "optimum" in out and "proven" in out
    for bad in (["--time-limit", "0"], ["--time-limit", "nan"], ["--node-budget", "-1"]):
        code, out, err = _cli([ex / "example.csv", *qi, "--k", "2", *bad, "--output", tmp_path / "o.csv"], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1 and bad[0] in err, (bad, err)
