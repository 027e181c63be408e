"""Hints a new user gets for common mistakes: each names the real cause, in one line, exit 2.

A comma-separated file read with ';', a Parquet file, an invalid date among valid ones,
a TOML file saved with a byte-order mark, a misspelled key in a run file.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import tomli_w

import fedanon
from fedanon.cli import main
from cli_checks import one_line_error as _one_line_error
from fedanon.parties.pki import certs
from fedanon.parties.config import RunConfig, RunPartyEntry, TlsFiles, run_config_dict

EX = Path(fedanon.__file__).parent / "data" / "example"
AGE = EX / "example_hierarchy_age.csv"




# ----------------------------------------------------------------------------- delimiter
@pytest.fixture
def comma_table(tmp_path) -> Path:
    path = tmp_path / "comma.csv"
    path.write_text((EX / "example.csv").read_text().replace(";", ","))
    return path


@pytest.mark.parametrize("command", [
    ["anonymize", "{t}", "--qi", f"age={AGE}", "--k", "2", "-o", "{o}"],
    ["risk", "{t}", "--qi", "age"],
    ["hierarchy", "auto", "--from", "{t}", "--column", "age"],
])
def test_comma_file_read_with_semicolon_suggests_the_delimiter(tmp_path, capsys, comma_table, command) -> None:
    args = [a.format(t=comma_table, o=tmp_path / "o.csv") for a in command]
    line = _one_line_error(capsys, *args)
    assert str(comma_table) in line and "unknown column 'age'" in line
    assert line.endswith("try --delimiter ,")
    assert not (tmp_path / "o.csv").exists()


def test_no_delimiter_hint_for_a_real_missing_column(tmp_path, capsys) -> None:
    line = _one_line_error(capsys, "risk", EX / "example.csv", "--qi", "height")
    assert "unknown column 'height'" in line and "--delimiter" not in line


# ----------------------------------------------------------------------------- parquet
@pytest.fixture
def parquet_file(tmp_path) -> Path:
    path = tmp_path / "people.parquet"
    pq.write_table(pa.table({"age": [34, 45, 66] * 20, "sex": ["male", "female", "male"] * 20}), path)
    return path


@pytest.mark.parametrize("command", [
    # anonymize and risk read a *.parquet file as Parquet; a Parquet file named *.csv gets the hint
    ["anonymize", "{c}", "--qi", f"age={AGE}", "--k", "2", "-o", "{o}"],
    ["anonymize", "{c}", "--qi", f"age={AGE}", "--k", "2", "-o", "{o}", "--encoding", "latin-1"],
    ["risk", "{c}", "--qi", "age"],
    ["hierarchy", "auto", "--from", "{t}", "--column", "age"],
])
def test_parquet_file_is_named_as_parquet(tmp_path, capsys, parquet_file, command) -> None:
    misnamed = tmp_path / "people.csv"
    misnamed.write_bytes(parquet_file.read_bytes())
    args = [a.format(t=parquet_file, c=misnamed, o=tmp_path / "o.csv") for a in command]
    parquet_file = misnamed if "{c}" in command else parquet_file
    line = _one_line_error(capsys, *args)
    assert str(parquet_file) in line and "Parquet" in line and "CSV" in line
    assert "--encoding" not in line


# ----------------------------------------------------------------------------- dates
def test_invalid_date_is_the_value_named(capsys) -> None:
    line = _one_line_error(capsys, "hierarchy", "date", "--values", "2020-01-03,2021-05-01,2020-02-30,2019-12-24")
    assert "'2020-02-30'" in line and "'%Y-%m-%d'" in line
    assert "2020-01-03" not in line  # a valid date is not blamed


def test_invalid_date_in_a_table_column(tmp_path, capsys) -> None:
    table = tmp_path / "visits.csv"
    table.write_text("id;visit\n" + "".join(f"{i};2021-0{1 + i % 9}-1{i % 10}\n" for i in range(30))
                     + "31;2021-04-31\n")
    line = _one_line_error(capsys, "hierarchy", "date", "--from", table, "--column", "visit")
    assert "'2021-04-31'" in line


def test_no_date_format_at_all_still_asks_for_format(capsys) -> None:
    line = _one_line_error(capsys, "hierarchy", "date", "--values", "soon,later")
    assert "--format" in line


# ----------------------------------------------------------------------------- TOML with a BOM
def test_run_file_with_a_byte_order_mark_is_accepted(tmp_path, capsys) -> None:
    run = tmp_path / "run.toml"
    text = f'input = "{EX / "example.csv"}"\noutput = "out.csv"\nk = 2\n[qi]\nage = "{AGE}"\n'
    run.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert main(["anonymize", "--config", str(run), "-q"]) == 0, capsys.readouterr().err
    assert (tmp_path / "out.csv").read_text().splitlines()[0] == "age"


# ----------------------------------------------------------------------------- typos in run files
def test_typo_in_anonymize_run_file_suggests_the_key(tmp_path, capsys) -> None:
    run = tmp_path / "run.toml"
    run.write_text(f'input = "{EX / "example.csv"}"\noutput = "out.csv"\nk = 2\nsupression = 0.1\n'
                   f'[qi]\nage = "{AGE}"\n')
    line = _one_line_error(capsys, "anonymize", "--config", run)
    assert str(run) in line and "'supression'" in line and "did you mean 'suppression'" in line


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("pki")
    certs.init_ca(folder, force=True)
    certs.issue(folder, "steward", hosts=["127.0.0.1"])
    return folder


def _run_config(path: Path, pki: Path, privacy: dict, run_extra: dict | None = None) -> Path:
    cfg = RunConfig(coordinator="steward", tls=TlsFiles(pki / "steward.crt", pki / "steward.key", pki / "ca.crt"),
                    protocol="B", distribution="horizontal",
                    parties=[RunPartyEntry("p1", "127.0.0.1:1", "primary"), RunPartyEntry("p2", "127.0.0.1:2", "primary"),
                             RunPartyEntry("helper", "127.0.0.1:3", "helper")],
                    result_recipient="p1", privacy=privacy, options={}, output=None, report=None)
    doc = run_config_dict(cfg)
    doc["run"].update(run_extra or {})
    path.write_text(tomli_w.dumps(doc))
    return path


@pytest.mark.parametrize("privacy, run_extra, key, suggestion", [
    ({"quasi_identifiers": ["age"], "k": 2, "supression": 0.1}, None, "supression", "suppression"),
    ({"quasi_identifiers": ["age"], "k": 2}, {"ouput": "result.csv"}, "ouput", "output"),
    ({"quasi_identifiers": ["age"], "k": 2, "l_diversity": {"variant": "distinct", "l": 2, "attribute": "d",
                                                            "c_value": 1}}, None, "c_value", None),
])
def test_typo_in_network_run_config_names_the_key(tmp_path, pki, capsys, privacy, run_extra, key, suggestion) -> None:
    config = _run_config(tmp_path / "run.toml", pki, privacy, run_extra)
    line = _one_line_error(capsys, "run", "--config", config, "--no-progress")
    assert str(config) in line and f"unknown key {key!r}" in line and "__init__" not in line
    if suggestion:
        assert f"did you mean {suggestion!r}" in line
