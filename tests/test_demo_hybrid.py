"""`fedanon demo`'s hybrid case: Protocol B on the bundled 2+1 ADULT layout, checked like the other runs.

The reference here is built without the demo's or the layout module's code: the 2+1 layout's
registry holds every person, so the joined table is all of ADULT on the layout's six columns,
anonymized by the engine in the test. The fast tests run in memory; the daemon run (real gRPC
over mutual TLS on 127.0.0.1) is in the slow lane.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from fedanon.cli import main
from fedanon.data.io.delimited import read_table_csv
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.sim.equivalence import centralized

from cli_checks import drop_first_released_row
from datasets import load

#: the columns of layout-2-1.toml (clinics: sex, age, race; registry: the other three)
COLUMNS = ["sex", "age", "race", "marital-status", "education", "salary-class"]
QIS = COLUMNS[:5]


def _reference():
    header, rows, hierarchies = load("adult", QIS)
    index = [header.index(c) for c in COLUMNS]
    config = AnonymizationConfig(QIS, k=5, suppression=0.02, metric="loss")
    return centralized(COLUMNS, [[r[i] for i in index] for r in rows], hierarchies, config)


def _assert_released_is(path: Path, report: Path, central) -> None:
    header, rows = read_table_csv(path)
    assert header == central.columns
    assert Counter(map(tuple, rows)) == Counter(map(tuple, central.rows))
    run = json.loads(report.read_text())
    assert set(run["party_reports"]) == {"clinic1", "clinic2", "registry", "helper"}  # the layout's parties


def test_in_memory_demo_runs_b_on_the_hybrid_layout_and_equals_the_joined_reference(tmp_path: Path, capsys) -> None:
    assert main(["demo", "--split", "hybrid", "--in-memory", "-q", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("summary"):]
    assert re.search(r"B\s+│\s+hybrid\s+│\s+30,162\s+│\s+equal", table), table
    assert not re.search(r"[AC]\s+│\s+hybrid", table), table  # A and C only with --full or --protocol
    assert "OK: identical to the centralized anonymization of the joined table" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(r["protocol"], r["split"], r["equal_to_centralized"], r["layout"], r["joined_rows"])
            for r in summary["runs"]] == [("B", "hybrid", True, "layout-2-1.toml", 30162)]
    _assert_released_is(tmp_path / "B-hybrid.csv", tmp_path / "B-hybrid.json", _reference())


def test_a_hybrid_result_that_differs_from_the_joined_reference_fails_the_demo(tmp_path: Path, monkeypatch,
                                                                                capsys) -> None:
    drop_first_released_row(monkeypatch)
    assert main(["demo", "--split", "hybrid", "--in-memory", "-q", "--output-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH with the centralized anonymization of the joined table" in out
    assert re.search(r"B\s+│\s+hybrid\s+│\s+30,162\s+│\s+MISMATCH", out), out
    runs = json.loads((tmp_path / "summary.json").read_text())["runs"]
    assert runs[0]["split"] == "hybrid" and runs[0]["equal_to_centralized"] is False and runs[0]["problems"]


def test_hybrid_split_of_a_data_set_without_a_layout_is_one_line_and_status_2(tmp_path: Path, capsys) -> None:
    assert main(["demo", "--dataset", "example", "--split", "hybrid", "--in-memory",
                 "--output-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no bundled hybrid layout" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_daemon_demo_runs_the_hybrid_case_over_tls_and_equals_the_joined_reference(tmp_path: Path, capsys) -> None:
    assert main(["demo", "--split", "hybrid", "--protocol", "B", "-q", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"B\s+│\s+hybrid\s+│\s+30,162\s+│\s+equal", out), out
    report = tmp_path / "B-hybrid.json"
    assert json.loads(report.read_text())["simulation"]["transport"] == "gRPC + mutual TLS on 127.0.0.1"
    _assert_released_is(tmp_path / "B-hybrid.csv", report, _reference())
