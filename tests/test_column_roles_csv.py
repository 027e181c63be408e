"""Column roles and CSV input as data stewards have it (issue 8).

Each test reproduces a reported failure first: a `name` column used to be copied into
the "anonymized" output, quoted/Latin-1/tab-separated files were refused or mis-read,
only the first missing hierarchy value was reported, and `-o INPUT` overwrote the input.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedanon.cli import main
from fedanon.data.io.delimited import read_columns, read_table_csv, write_table_csv

from datasets import EXAMPLE_DIR as EX
QIS = ("age", "sex", "zipcode")
NAMES = ["Patient1", "Patient2", "Patient3", "Patient4", "Patient5", "Patient6", "Patient7", "Patient8"]


def _qi_flags(folder: Path = EX) -> list[str]:
    return [x for q in QIS for x in ("--qi", f"{q}={folder / f'example_hierarchy_{q}.csv'}")]


def _with_names(tmp_path: Path) -> Path:
    """The bundled example plus a direct identifier, as in the report."""
    header, rows = read_table_csv(EX / "example.csv")
    path = tmp_path / "withnames.csv"
    write_table_csv(path, ["name", *header], [[n, *r] for n, r in zip(NAMES, rows)])
    return path


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- roles
def test_undeclared_name_column_is_removed_by_anonymize(tmp_path, capsys) -> None:
    src = _with_names(tmp_path)
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    code, stdout, err = _cli(capsys, "anonymize", src, *_qi_flags(), "--k", "2", "--insensitive", "diagnosis",
                             "-o", out, "--report", rep, "--verify")
    assert code == 0, err
    text = out.read_text()
    assert not any(n in text for n in NAMES) and "name" not in text.splitlines()[0]
    assert text.splitlines()[0] == "age;sex;zipcode;diagnosis"
    report = json.loads(rep.read_text())
    assert report["removed_columns"] == ["name"] and report["columns"]["insensitive"] == ["diagnosis"]
    assert report["verified"] is True
    assert "removed columns" in stdout and "name" in stdout
    # diagnosis kept unchanged (insensitive), row for row
    _h, original = read_table_csv(src)
    _h, written = read_table_csv(out)
    assert [r[3] for r in written] == [r[4] for r in original]


def test_undeclared_columns_removed_without_insensitive(tmp_path, capsys) -> None:
    src = _with_names(tmp_path)
    out = tmp_path / "out.csv"
    code, _o, err = _cli(capsys, "anonymize", src, *_qi_flags(), "--k", "2", "-o", out, "-q")
    assert code == 0, err
    assert out.read_text().splitlines()[0] == "age;sex;zipcode"  # name AND diagnosis: no role -> removed


def test_roles_from_the_toml_run_file(tmp_path, capsys) -> None:
    src = _with_names(tmp_path)
    run = tmp_path / "run.toml"
    qi = "\n".join(f'{q} = "{EX / f"example_hierarchy_{q}.csv"}"' for q in QIS)
    run.write_text(f'input = "{src.name}"\noutput = "out.csv"\nreport = "rep.json"\nk = 2\n'
                   f'insensitive = ["diagnosis"]\n[qi]\n{qi}\n')
    code, _o, err = _cli(capsys, "anonymize", "--config", run, "-q")
    assert code == 0, err
    assert (tmp_path / "out.csv").read_text().splitlines()[0] == "age;sex;zipcode;diagnosis"
    assert json.loads((tmp_path / "rep.json").read_text())["removed_columns"] == ["name"]


def test_insensitive_column_must_exist_and_not_be_a_qi(tmp_path, capsys) -> None:
    code, _o, err = _cli(capsys, "anonymize", EX / "example.csv", *_qi_flags(), "--insensitive", "nope",
                         "-o", tmp_path / "o.csv")
    assert code == 2 and "unknown column 'nope' (insensitive)" in err and len(err.strip().splitlines()) == 1
    code, _o, err = _cli(capsys, "anonymize", EX / "example.csv", *_qi_flags(), "--insensitive", "age",
                         "-o", tmp_path / "o.csv")
    assert code == 2 and "'age' is declared insensitive and also as a quasi-identifier" in err


@pytest.mark.slow
def test_undeclared_name_column_removed_by_simulate_over_daemons(tmp_path, capsys) -> None:
    src = _with_names(tmp_path)
    out, rep = tmp_path / "sim.csv", tmp_path / "sim.json"
    code, stdout, err = _cli(capsys, "simulate", src, *_qi_flags(), "--k", "2", "--parties", "2",
                             "--insensitive", "diagnosis", "-o", out, "--report", rep)
    assert code == 0, err
    text = out.read_text()
    assert text.splitlines()[0] == "age;sex;zipcode;diagnosis" and not any(n in text for n in NAMES)
    assert json.loads(rep.read_text())["removed_columns"] == ["name"]
    assert "removed columns: name" in " ".join(stdout.split())


@pytest.mark.slow
def test_daemon_never_loads_or_sends_an_undeclared_column(tmp_path) -> None:
    """Party config with a `name` column nobody declared: it is absent from what leaves the daemon."""
    from fedanon.model.config import AnonymizationConfig
    from fedanon.parties.simulation import SimulatedParty, run_simulation

    from example_parties import example_primaries

    parties = example_primaries(tmp_path, _with_names(tmp_path), insensitive=["diagnosis"])
    parties.append(SimulatedParty("helper", "helper"))
    workdir = tmp_path / "w"
    result = run_simulation(parties, "B", "horizontal", AnonymizationConfig(list(QIS), k=2), "p1",
                            workdir=workdir, output=tmp_path / "o.csv", report=tmp_path / "r.json")
    assert result.output_columns == ["age", "sex", "zipcode", "diagnosis"]
    flat = json.dumps(result.report) + (tmp_path / "o.csv").read_text()
    assert not any(n in flat for n in NAMES)
    # the owners' own logs say what was removed
    assert "removed_columns=name" in (workdir / "logs" / "p1.log").read_text()


# ----------------------------------------------------------------------------- CSV input
def _latin1_quoted_comma(tmp_path: Path) -> Path:
    """Comma-separated, every header cell quoted, a value with a comma, Latin-1 text."""
    header, rows = read_table_csv(EX / "example.csv")
    diag = {"pneumonia": "Pneumonie, schwer", "gastritis": "Gastritis \"akut\" (Magen-Darm-Entzündung)"}
    body = "".join(",".join([r[0], r[1], r[2], '"' + diag[r[3]].replace('"', '""') + '"']) + "\r\n" for r in rows)
    path = tmp_path / "latin1.csv"
    path.write_bytes(('"age","sex","zipcode","diagnosis"\r\n' + body).encode("latin-1"))
    return path


def test_quoted_comma_separated_latin1_file_anonymizes(tmp_path, capsys) -> None:
    src = _latin1_quoted_comma(tmp_path)
    out, rep = tmp_path / "out.csv", tmp_path / "rep.json"
    code, _o, err = _cli(capsys, "anonymize", src, *_qi_flags(), "--k", "2", "--insensitive", "diagnosis",
                         "--delimiter", ",", "--hierarchy-delimiter", ";", "--encoding", "latin-1",
                         "-o", out, "--report", rep, "--verify", "-q")
    assert code == 0, err
    report = json.loads(rep.read_text())
    assert report["transformation"] == {"age": 1, "sex": 0, "zipcode": 3} and report["verified"] is True
    table = read_columns(out, ",")
    assert table.columns == ["age", "sex", "zipcode", "diagnosis"] and table.n_rows == 8
    assert sorted(table.dictionaries[3]) == ["Gastritis \"akut\" (Magen-Darm-Entzündung)", "Pneumonie, schwer"]
    # the output quotes exactly the values that need it
    assert '"Pneumonie, schwer"' in out.read_text(encoding="utf-8")
    assert '"Gastritis ""akut"" (Magen-Darm-Entzündung)"' in out.read_text(encoding="utf-8")


def test_latin1_file_without_encoding_names_the_line(tmp_path, capsys) -> None:
    src = _latin1_quoted_comma(tmp_path)
    code, _o, err = _cli(capsys, "anonymize", src, *_qi_flags(), "--delimiter", ",", "--hierarchy-delimiter", ";",
                         "-o", tmp_path / "o.csv")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert str(src) in err and "line 4" in err and "--encoding" in err  # first row with "ü"


def test_tab_delimiter_escape_bom_and_separate_hierarchy_delimiter(tmp_path, capsys) -> None:
    header, rows = read_table_csv(EX / "example.csv")
    src = tmp_path / "tab.tsv"
    src.write_bytes(("\ufeff" + "\t".join(header) + "\n" + "".join("\t".join(r) + "\n" for r in rows)).encode())
    hier = tmp_path / "h"
    hier.mkdir()
    for q in QIS:  # hierarchies as comma-separated files
        (hier / f"example_hierarchy_{q}.csv").write_text(
            (EX / f"example_hierarchy_{q}.csv").read_text().replace(";", ","))
    out = tmp_path / "out.tsv"
    code, _o, err = _cli(capsys, "anonymize", src, *_qi_flags(hier), "--k", "2", "--delimiter", "\\t",
                         "--hierarchy-delimiter", ",", "-o", out, "-q", "--verify")
    assert code == 0, err
    first = out.read_text().splitlines()[0]
    assert first == "age\tsex\tzipcode"


def test_all_missing_hierarchy_values_reported_at_once(tmp_path, capsys) -> None:
    header, rows = read_table_csv(EX / "example.csv")
    extra = [[str(100 + i), "male", f"9{i:04d}", "pneumonia"] for i in range(25)]  # age AND zipcode unknown
    src = tmp_path / "many.csv"
    write_table_csv(src, header, rows + extra)
    code, _o, err = _cli(capsys, "anonymize", src, *_qi_flags(), "-o", tmp_path / "o.csv")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "50 value(s) missing" in err
    assert "line 10: age '100'" in err and "line 10: zipcode '90000'" in err
    assert err.count("line ") == 20 and "and 30 more" in err


def test_output_may_not_overwrite_the_input(tmp_path, capsys) -> None:
    src = tmp_path / "in.csv"
    src.write_bytes((EX / "example.csv").read_bytes())
    before = src.read_bytes()
    code, _o, err = _cli(capsys, "anonymize", src, *_qi_flags(), "--k", "2", "-o", src)
    assert code == 2 and "refusing to overwrite" in err and len(err.strip().splitlines()) == 1
    assert src.read_bytes() == before


def test_reader_is_columnar_with_narrow_codes(tmp_path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('a;b\n1;"x;y"\n2;""\n1;"multi\nline"\n  3 ;x\n')
    table = read_columns(path)
    assert table.columns == ["a", "b"] and table.n_rows == 4
    assert table.dictionaries == [["1", "2", "3"], ["x;y", "", "multi\nline", "x"]]
    assert [c.dtype.name for c in table.codes] == ["uint8", "uint8"]
    assert table.codes[0].tolist() == [0, 1, 0, 2]
    assert table.line_numbers([3, 2]) == [6, 4]  # the quoted line break shifts later lines
    out = tmp_path / "o.csv"
    write_table_csv(out, table.columns, table.rows())
    assert read_columns(out).rows() == table.rows()  # round trip through the quoting writer


def test_parallel_parse_only_without_quotes_and_rows_equal_csv_module(tmp_path) -> None:
    """Files without a quote are parsed block-parallel (no line break can sit inside a value);
    one quote anywhere -- here only after the first parse blocks -- keeps the careful parse, and
    both give the csv module's rows (a scan of only the first block would split "multi/line")."""
    import csv
    import io

    from fedanon.data.io import delimited as csvio

    body = "".join(f"{i % 97};v{i % 13};{'x' * (i % 7)}\n" for i in range(450_000))
    assert len(body) > csvio.READ_BLOCK_BYTES
    plain, quoted = tmp_path / "plain.csv", tmp_path / "quoted.csv"
    plain.write_text("a;b;c\n" + body)
    quoted.write_text("a;b;c\n" + body + '5;"multi\nline";"q""uote"\n' + body[:body.index("\n", 1000) + 1])
    assert not csvio.may_quote(plain, "utf-8") and csvio.may_quote(quoted, "utf-8")
    assert csvio.may_quote(plain, "utf-16")  # an encoding whose quote is not the byte '"': careful
    for path in (plain, quoted):
        expected = [[c.strip() for c in row] for row in csv.reader(io.StringIO(path.read_text()), delimiter=";")][1:]
        assert read_columns(path).rows() == expected


def test_reading_and_writing_never_import_pandas(tmp_path) -> None:
    """pyarrow imports pandas (~0.5 s) on its first `pa.array`/`to_numpy`; the CSV path avoids both,
    quoting writer and trimmed dictionaries included."""
    import subprocess
    import sys

    src = tmp_path / "t.csv"
    src.write_text('a;b\n1; x \n2;"y;z"\n1;w\n')
    code = ("import sys; from fedanon.data.io.delimited import read_columns, write_columns; "
            f"t = read_columns({str(src)!r}); write_columns({str(tmp_path / 'o.csv')!r}, t.columns, t.codes, "
            "t.dictionaries); print('pandas' in sys.modules, t.dictionaries)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False [['1', '2'], ['x', 'y;z', 'w']]"
    assert (tmp_path / "o.csv").read_text() == 'a;b\n1;x\n2;"y;z"\n1;w\n'
