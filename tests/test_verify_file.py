"""`fedanon anonymize --verify` checks the file it wrote, not the rows in memory.

Faults between the in-memory result and the disk (a lost row, a changed cell, a lost
column) must make --verify fail; correct files (full, --drop-suppressed, δ-presence
release) must pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedanon.cli import anonymize as anonymize_cli
from fedanon.cli import main
from fedanon.data.io import delimited as csvio

from datasets import EXAMPLE_DIR as EXAMPLE
QI_FLAGS = [f"--qi={q}={EXAMPLE / f'example_hierarchy_{q}.csv'}" for q in ("age", "sex", "zipcode")]
MODEL = [*QI_FLAGS, "--sensitive", "diagnosis", "--l-diversity", "recursive:4,2", "--suppression", "0.25",
         "--metric", "aecs"]  # optimum (1,0,3) suppresses 2 rows (docs/design.md)


def run(tmp_path: Path, *extra: str) -> tuple[int, dict]:
    report = tmp_path / "r.json"
    code = main(["anonymize", str(EXAMPLE / "example.csv"), *MODEL, "--output", str(tmp_path / "out.csv"),
                 "--report", str(report), "--verify", "-q", *extra])
    return code, json.loads(report.read_text())


@pytest.mark.parametrize("extra", [(), ("--drop-suppressed",)])
def test_correct_file_verifies(tmp_path: Path, extra) -> None:
    code, report = run(tmp_path, *extra)
    assert code == 0 and report["verified"] and report["suppressed_rows"] > 0


def test_delta_presence_release_verifies(tmp_path: Path) -> None:
    subset = tmp_path / "subset.csv"
    subset.write_text("age;sex;zipcode;diagnosis\n34;male;82667;pneumonia\n66;male;81925;gastritis\n", encoding="utf-8")
    code, report = run(tmp_path, "--delta-presence", f"0,0.6:{subset}")
    assert code == 0 and report["verified"] and report["rows_written"] == 2


def corrupting(how: str):
    """Wrap the CLI's writer: write as usual, then damage the file the way a faulty writer would."""
    original = anonymize_cli.write_columns

    def write(path, *args, **kwargs):
        original(path, *args, **kwargs)
        header, rows = csvio.read_table_csv(path)
        if how == "drop-row":
            rows = rows[:-1]
        elif how == "cell":
            rows[0][0] = "61-99" if rows[0][0] != "61-99" else "1-19"
        elif how == "column":
            header, rows = header[1:], [r[1:] for r in rows]
        elif how == "sensitive":
            col = list(header).index("diagnosis")
            rows[0][col] = "gastritis" if rows[0][col] != "gastritis" else "pneumonia"
        Path(path).write_text("\n".join(";".join(r) for r in [header, *rows]) + "\n", encoding="utf-8")

    return write


@pytest.mark.parametrize("how", ["drop-row", "cell", "column", "sensitive"])
def test_fault_on_the_way_to_disk_fails_verify(tmp_path: Path, monkeypatch, capsys, how: str) -> None:
    monkeypatch.setattr(anonymize_cli, "write_columns", corrupting(how))
    code, report = run(tmp_path)
    assert code == 1 and not report["verified"] and report["violations"]
    assert "verifier found violations" in capsys.readouterr().err


def test_optimum_found_comes_from_the_search(monkeypatch) -> None:
    """Flash proves its optimum; an outcome that does not (a heuristic, a time limit) is reported as such."""
    from fedanon.engine import AnonymizationConfig, anonymize
    from fedanon.engine.search import flash
    from fedanon.data.hierarchy import Hierarchy
    from fedanon.data.table import EncodedTable

    header, rows = csvio.read_table_csv(EXAMPLE / "example.csv")
    table = EncodedTable.from_rows(header, rows)
    hier = {q: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{q}.csv", q) for q in ("age", "sex", "zipcode")}
    config = AnonymizationConfig(["age", "sex", "zipcode"], k=2)
    assert anonymize(table, hier, config).optimum_found is True
    run = flash.FlashSearch.run

    def stopped_early(self):
        outcome = run(self)
        outcome.optimum_found = False
        return outcome

    monkeypatch.setattr(flash.FlashSearch, "run", stopped_early)
    result = anonymize(table, hier, config)
    assert result.optimum_found is False and result.to_report()["optimum_found"] is False
