"""`fedanon risk` reads its table and its population through the reader registry, as `fedanon
anonymize` does: the same table as CSV, Parquet and Arrow/Feather gives the same risk report, and
a bad file of any format is one line on stderr naming it, exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedanon.cli import main
from datasets import ADULT_DIR

pa = pytest.importorskip("pyarrow")
import pyarrow.csv as pacsv  # noqa: E402
import pyarrow.feather as feather  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

QIS = ["sex", "age", "race", "marital-status", "education"]
ARGS = [*(a for q in QIS for a in ("--qi", f"{q}={ADULT_DIR / f'adult_hierarchy_{q}.csv'}")),
        "--sensitive", f"salary-class={ADULT_DIR / 'adult_hierarchy_salary-class.csv'}", "--threshold", "0.1"]


def _formats(tmp_path: Path, name: str, table) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    """`table` written as CSV (';'), Parquet and Feather; pyarrow keeps ages as integers in the latter two."""
    paths = {"csv": tmp_path / f"{name}.csv", "parquet": tmp_path / f"{name}.parquet",
             "feather": tmp_path / f"{name}.feather"}
    pacsv.write_csv(table, paths["csv"], pacsv.WriteOptions(delimiter=";", quoting_style="none"))
    pq.write_table(table, paths["parquet"])
    feather.write_feather(table, paths["feather"])
    return paths


def _report(tmp_path: Path, capsys, source: Path, population: Path) -> dict:
    out = tmp_path / f"risk-{source.suffix[1:]}.json"
    code = main(["risk", str(source), *ARGS, "--population", str(population), "--json", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report.pop("input") == str(source)
    return report


def test_parquet_and_feather_give_the_csv_report(tmp_path: Path, capsys) -> None:
    adult = pacsv.read_csv(ADULT_DIR / "adult.csv", parse_options=pacsv.ParseOptions(delimiter=";"))
    assert pa.types.is_integer(adult.schema.field("age").type)  # not text in the binary formats
    population = _formats(tmp_path, "population", adult)
    sample = _formats(tmp_path, "sample", adult.slice(0, 3000))
    reports = {fmt: _report(tmp_path, capsys, sample[fmt], population[fmt]) for fmt in sample}
    assert reports["csv"]["rows"] == 3000 and reports["csv"]["journalist"]  # the population was used
    assert reports["parquet"] == reports["csv"]
    assert reports["feather"] == reports["csv"]


def _one_error_line(capsys, args: list[str], path: Path) -> str:
    code = main(["risk", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "Traceback" not in err[0] and str(path) in err[0], err
    return err[0]


def test_bad_files_are_one_line_exit_2(tmp_path: Path, capsys) -> None:
    garbage = tmp_path / "garbage.parquet"
    garbage.write_bytes(b"sex;age\nmale;39\n")
    assert "not a readable Parquet file" in _one_error_line(capsys, [str(garbage), "--qi", "sex"], garbage)
    lacking = tmp_path / "lacking.feather"
    feather.write_feather(pa.table({"sex": ["male", "female"], "age": [39, 50]}), lacking)
    line = _one_error_line(capsys, [str(lacking), "--qi", "sex,race"], lacking)
    assert "unknown column 'race'" in line, line
    gap = tmp_path / "gap.parquet"
    pq.write_table(pa.table({"sex": ["male", None], "age": [39, 50]}), gap)
    assert "row 2" in _one_error_line(capsys, [str(lacking), "--qi", "sex", "--population", str(gap)], gap)
