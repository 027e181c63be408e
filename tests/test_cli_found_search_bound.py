"""`fedanon anonymize` bounds the search of a huge lattice by default and says the optimum is not proven.

11 QIs on a few hundred rows used to keep the best-first search proving optimality for
minutes (no default bound). The default bound (`DEFAULT_TIME_LIMIT_S`) is set small here
through the same module constant the command reads, so the test is fast; small lattices
are still searched exactly.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

import fedanon
from fedanon.cli import anonymize as anonymize_cli
from fedanon.cli import main

DATA = Path(fedanon.__file__).parent / "data"
ADULT = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
COPIES = {"age2": "age", "education2": "education", "marital2": "marital-status"}  # 11 QIs, 388,800 nodes


@pytest.fixture(scope="module")
def wide_table(tmp_path_factory) -> tuple[Path, list[str]]:
    """500 ADULT rows with 11 QIs (three columns copied, each with its own hierarchy file)."""
    folder = tmp_path_factory.mktemp("wide")
    lines = (DATA / "adult" / "adult.csv").read_text().splitlines()
    header = lines[0].split(";")
    picked = np.random.default_rng(11).choice(len(lines) - 1, 500, replace=False) + 1
    index = [header.index(c) for c in ADULT]
    copy_index = [header.index(src) for src in COPIES.values()]
    out = [";".join(ADULT + list(COPIES))]
    for i in picked:
        cells = lines[i].split(";")
        out.append(";".join([cells[j] for j in index] + [cells[j] for j in copy_index]))
    table = folder / "wide.csv"
    table.write_text("\n".join(out) + "\n")
    qi_args = []
    for name in ADULT + list(COPIES):
        source = DATA / "adult" / f"adult_hierarchy_{COPIES.get(name, name)}.csv"
        qi_args += ["--qi", f"{name}={source}"]
    return table, qi_args


def test_huge_lattice_stops_at_the_default_bound_and_says_not_proven(tmp_path, capsys, monkeypatch,
                                                                     wide_table) -> None:
    monkeypatch.setattr(anonymize_cli, "DEFAULT_TIME_LIMIT_S", 0.5)
    table, qi_args = wide_table
    report = tmp_path / "r.json"
    code = main(["anonymize", str(table), *qi_args, "--k", "5", "-o", str(tmp_path / "o.csv"),
                 "--report", str(report), "--verify"])  # no --time-limit: the default applies
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(report.read_text())
    assert doc["lattice_size"] == 388_800 and doc["lattice_size"] > doc["node_budget"]
    assert doc["time_limit_s"] == 0.5
    assert doc["optimum_found"] is False and doc["verified"] is True
    assert 0 <= doc["loss_lower_bound"] <= doc["information_loss"] and doc["gap"] > 0
    # without the bound this search takes minutes; with it, the dive and 0.5 s of best-first
    assert doc["elapsed_s"] < 60
    assert "not proven" in out and "0.5 s time limit" in out


def test_small_lattice_is_still_searched_exactly(tmp_path, capsys) -> None:
    ex = DATA / "example"
    qi = [x for a in ("age", "sex", "zipcode") for x in ("--qi", f"{a}={ex / f'example_hierarchy_{a}.csv'}")]
    docs = []
    for extra in ([], ["--time-limit", "none"]):
        report = tmp_path / f"r{len(docs)}.json"
        assert main(["anonymize", str(ex / "example.csv"), *qi, "--k", "2", "-o", str(tmp_path / "o.csv"),
                     "--report", str(report), "-q", *extra]) == 0, capsys.readouterr().err
        docs.append(json.loads(report.read_text()))
    assert docs[0]["optimum_found"] is True and docs[1]["optimum_found"] is True
    assert docs[0]["transformation"] == docs[1]["transformation"] == {"age": 1, "sex": 0, "zipcode": 3}
    assert "loss_lower_bound" not in docs[0]  # exact Flash, not the bounded heuristic


@pytest.mark.parametrize("given, want", [(None, "default"), ("none", None), ("NONE", None), ("12.5", 12.5)])
def test_time_limit_values(given, want) -> None:
    args = argparse.Namespace(node_budget=None, time_limit=given)
    expected = anonymize_cli.DEFAULT_TIME_LIMIT_S if want == "default" else want
    assert anonymize_cli.search_limits(args).time_limit == expected


@pytest.mark.parametrize("bad", ["0", "-3", "nan", "soon"])
def test_bad_time_limit_is_one_line(tmp_path, capsys, bad) -> None:
    ex = DATA / "example"
    code = main(["anonymize", str(ex / "example.csv"), "--qi", f"age={ex / 'example_hierarchy_age.csv'}",
                 "--time-limit", bad, "-o", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--time-limit" in err and bad in err
