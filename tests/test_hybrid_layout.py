"""LAYOUT.toml: parsing, the checks against the pooled table and the party files, the drop rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_checks import one_line_error
from datasets import EXAMPLE_DIR, EXAMPLE_QIS, qi_flags
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.layout import check_against_columns, check_party_files, parse_layout
from fedanon.errors import InputError
from fedanon.protocols.sim.hybrid import joined_rows, split_hybrid

GOOD = """\
identifier = "pid"

[[party]]
name = "clinic1"
columns = ["age", "sex"]
persons = "1/2"

[[party]]
name = "clinic2"
columns = ["sex", "age"]
persons = "2/2"

[[party]]
name = "registry"
columns = ["zipcode", "diagnosis"]
persons = ["1/3", "2/3"]
"""


def _write(tmp_path: Path, text: str, name: str = "layout.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _example() -> tuple[list[str], list[list[str]]]:
    return read_table_csv(EXAMPLE_DIR / "example.csv")


def test_groups_shares_and_the_joined_rows(tmp_path: Path) -> None:
    layout = parse_layout(_write(tmp_path, GOOD))
    assert [[p.name for p in g] for g in layout.column_groups()] == [["clinic1", "clinic2"], ["registry"]]
    header, rows = _example()
    shares = split_hybrid(header, rows, layout)
    assert [s.columns for s in shares] == [["pid", "age", "sex"], ["pid", "sex", "age"], ["pid", "zipcode", "diagnosis"]]
    assert [r[0] for r in shares[0].rows] == ["1", "3", "5", "7"]
    assert [r[0] for r in shares[2].rows] == ["1", "2", "4", "5", "7", "8"]
    # rows 3 and 6 (1-based) are at a clinic but not at the registry: dropped from the join
    assert layout.joined_rows(len(rows)) == [0, 1, 3, 4, 6, 7]
    assert joined_rows(header, rows, layout) == [rows[i] for i in (0, 1, 3, 4, 6, 7)]
    # the cells a share carries are the pooled cells of its persons
    assert shares[1].rows[0] == ["2", rows[1][1], rows[1][0]]


@pytest.mark.parametrize("edit, line, fragment", [
    (('persons = "2/2"', 'persons = "1/2"'), 11, "overlaps party 'clinic1': both claim the cells of row 1"),
    (('columns = ["zipcode", "diagnosis"]', 'columns = ["zipcode"]'), None, "diagnosis are held by no party"),
    (('columns = ["zipcode", "diagnosis"]', 'columns = ["zipcode", "diagnosis", "income"]'), 15,
     "unknown column 'income'"),
    (('columns = ["sex", "age"]', 'columns = ["sex", "zipcode"]'), 10, "parties that share a column must hold"),
    (('persons = ["1/3", "2/3"]', 'persons = "4/3"'), 16, 'expected "all" or "i/n"'),
    (('name = "clinic2"', 'name = "clinic1"'), 9, "declared twice"),
    (('columns = ["age", "sex"]', 'columns = ["age", "pid"]'), 5, "is not a data column"),
])
def test_bad_layouts_fail_with_file_line_key_and_value(tmp_path: Path, edit: tuple[str, str], line: int | None,
                                                       fragment: str) -> None:
    old, new = edit
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    header, rows = _example()
    with pytest.raises(InputError) as caught:
        check_against_columns(parse_layout(path), header, len(rows))
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: " if line else f"{path}"), message
    assert fragment in message and "\n" not in message, message


def test_a_person_twice_at_one_party_and_two_parties_claiming_one_cell(tmp_path: Path) -> None:
    (tmp_path / "c1.csv").write_text("pid;age;sex\nA;30;male\nB;41;female\nA;52;male\n", encoding="utf-8")
    (tmp_path / "c2.csv").write_text("pid;age;sex\nC;30;male\n", encoding="utf-8")
    (tmp_path / "reg.csv").write_text("pid;zipcode\nA;81667\nB;81675\nC;81925\n", encoding="utf-8")
    text = ('identifier = "pid"\n[[party]]\nname = "c1"\ncolumns = ["age", "sex"]\ndata = "c1.csv"\n'
            '[[party]]\nname = "c2"\ncolumns = ["age", "sex"]\ndata = "c2.csv"\n'
            '[[party]]\nname = "reg"\ncolumns = ["zipcode"]\ndata = "reg.csv"\n')
    layout = parse_layout(_write(tmp_path, text))
    with pytest.raises(InputError, match=r"c1.csv:4: pid = 'A': identifier appears twice at party 'c1' "
                                         r"\(also on line 2\)"):
        check_party_files(layout)
    (tmp_path / "c1.csv").write_text("pid;age;sex\nA;30;male\nB;41;female\nC;52;male\n", encoding="utf-8")
    with pytest.raises(InputError, match="pid = 'C': party 'c2' and party 'c1' both hold the cells"):
        check_party_files(layout)
    (tmp_path / "c2.csv").write_text("pid;age;sex\nD;30;male\n", encoding="utf-8")
    files = check_party_files(layout)
    assert files["c2"].identifiers == ["D"] and files["reg"].identifiers == ["A", "B", "C"]


def test_simulate_rejects_a_bad_layout_with_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, GOOD.replace('persons = "2/2"', 'persons = "all"', 1))
    line = one_line_error(capsys, "simulate", EXAMPLE_DIR / "example.csv", "--split", "hybrid", "--layout", path,
                          *qi_flags("example", EXAMPLE_QIS), "--insensitive", "diagnosis", "--k", "2",
                          "-o", tmp_path / "out.csv", "--in-memory", "-q")
    assert f"{path}:11: party[2].persons = ['all']: overlaps party 'clinic1'" in line, line
    line = one_line_error(capsys, "simulate", EXAMPLE_DIR / "example.csv", "--split", "hybrid",
                          *qi_flags("example", EXAMPLE_QIS), "--k", "2", "-o", tmp_path / "out.csv", "-q")
    assert "--split hybrid needs --layout" in line
    bad = _write(tmp_path, "identifier = 3\n", "bad.toml")
    line = one_line_error(capsys, "simulate", EXAMPLE_DIR / "example.csv", "--split", "hybrid", "--layout", bad,
                          *qi_flags("example", EXAMPLE_QIS), "--k", "2", "-o", tmp_path / "out.csv", "-q")
    assert line.endswith(f"{bad}:1: identifier = 3: the identifier column's name must be a non-empty string"), line
