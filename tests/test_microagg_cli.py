"""`fedanon microaggregate` end to end: roles, output, report, TOML, and one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fedanon.cli import main

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT / "fedanon" / "data" / "adult" / "adult.csv"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def table(tmp_path: Path) -> Path:
    return write(tmp_path / "t.csv", "name;age;hours;ward\n"
                                     "ann;20;40;a\nbob;22;38;b\ncid;21;42;a\n"
                                     "dan;60;10;b\neve;62;12;a\nfay;61;11;b\n")


def test_roles_output_and_report(table: Path, tmp_path: Path) -> None:
    out, report = tmp_path / "out.csv", tmp_path / "r.json"
    rc = main(["microaggregate", str(table), "--attribute", "age,hours", "--insensitive", "ward", "--k", "3",
               "-o", str(out), "--report", str(report), "-q"])
    assert rc == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "age;hours;ward"  # 'name' has no role: removed
    # MDAV, k = 3: {ann, bob, cid} (age 21, hours 40) and {dan, eve, fay} (61, 11)
    assert lines[1:] == ["21;40;a", "21;40;b", "21;40;a", "61;11;b", "61;11;a", "61;11;b"]
    doc = json.loads(report.read_text())
    assert doc["removed_columns"] == ["name"]
    assert doc["groups"] == {"groups": 2, "smallest_group": 3, "largest_group": 3}
    # age: SSE = (1 + 1 + 0) * 2 = 4; SST = 21^2 + 19^2 + 20^2 twice = 2404 (mean 41)
    # hours: SSE = 0 + 4 + 4 + 1 + 1 + 0 = 10; SST = 14.5^2 + 12.5^2 + 16.5^2 + 15.5^2 + 13.5^2 + 14.5^2 = 1271.5 (mean 25.5)
    # (standardizing divides SSE and SST by the same variance, so the ratios are those of raw values)
    loss = doc["information_loss"]
    assert loss["sse_sst_per_attribute"]["age"] == pytest.approx(4 / 2404, rel=1e-12)
    assert loss["sse_sst_per_attribute"]["hours"] == pytest.approx(10 / 1271.5, rel=1e-12)
    # overall: both attributes standardized, SST = 6 + 6 = 12; SSE = 6 * 4/2404 + 6 * 10/1283.5
    assert loss["sse_sst"] == pytest.approx((6 * 4 / 2404 + 6 * 10 / 1271.5) / 12, rel=1e-12)
    assert doc["record_linkage_risk"] == pytest.approx(1 / 3)


def test_toml_run_file_and_flag_precedence(table: Path, tmp_path: Path) -> None:
    config = write(tmp_path / "run.toml", 'input = "t.csv"\noutput = "o.csv"\nattributes = ["age"]\n'
                                          'k = 2\nmethod = "univariate"\nsort_by = "age"\naggregate = "median"\n')
    assert main(["microaggregate", "--config", str(config), "--k", "3", "-q"]) == 0
    lines = (tmp_path / "o.csv").read_text().splitlines()
    assert lines == ["age", "21", "21", "21", "61", "61", "61"]  # k = 3 from the flag, medians of 20 22 21 / 60 62 61


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "fedanon", "microaggregate", *args], capture_output=True,
                          text=True, env=env, timeout=120)


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_non_numeric_value_names_file_line_and_value(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.csv", "age;x\n20;1\n21;2\n\"tw\nenty\";3\n23;4\n")
    line = one_line_error(run_cli(str(bad), "--attribute", "age", "--k", "2", "-o", str(tmp_path / "o.csv")))
    assert str(bad) in line and "line 4" in line and "tw" in line and "'age'" in line
    assert not (tmp_path / "o.csv").exists()


def test_empty_cell_is_reported(tmp_path: Path) -> None:
    bad = write(tmp_path / "gap.csv", "age;x\n20;1\n;2\n")
    line = one_line_error(run_cli(str(bad), "--attribute", "age", "--k", "1"))
    assert "line 3" in line and "empty cell" in line


@pytest.mark.parametrize("k, words", [("0", "at least 1"), ("7", "exceeds the number of data rows (6)")])
def test_bad_k(table: Path, k: str, words: str) -> None:
    assert words in one_line_error(run_cli(str(table), "--attribute", "age", "--k", k))


def test_unknown_attribute(table: Path) -> None:
    line = one_line_error(run_cli(str(table), "--attribute", "income", "--k", "2"))
    assert str(table) in line and "line 1" in line and "'income'" in line


def test_output_may_not_be_the_input(table: Path) -> None:
    before = table.read_text()
    assert "input file" in one_line_error(run_cli(str(table), "--attribute", "age", "--k", "2", "-o", str(table)))
    assert table.read_text() == before


def test_bad_toml_setting(tmp_path: Path, table: Path) -> None:
    config = write(tmp_path / "bad.toml", 'input = "t.csv"\nattributes = ["age"]\nk = "3"\n')
    assert "k must be an integer" in one_line_error(run_cli("--config", str(config)))


def test_adult_age_mdav_k5(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert main(["microaggregate", str(ADULT), "--attribute", "age", "--k", "5", "--report", str(report), "-q"]) == 0
    doc = json.loads(report.read_text())
    assert doc["records"] == 30162
    assert doc["groups"]["smallest_group"] >= 5 and doc["groups"]["largest_group"] <= 9
    assert 0 < doc["information_loss"]["sse_sst"] < 0.001  # ages repeat a lot: groups are nearly pure
    assert doc["per_attribute"]["age"]["released_mean"] == pytest.approx(doc["per_attribute"]["age"]["mean"])


def test_kward_row_limit_is_one_line(table: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    import fedanon.cli.microaggregate as command

    monkeypatch.setattr(command, "KWARD_MAX_ROWS", 5)
    assert main(["microaggregate", str(table), "--attribute", "age", "--k", "2", "--method", "kward", "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "at most 5 rows" in err[0] and "6" in err[0]
