"""`fedanon hierarchy`: comma-separated output fedanon reads back, and bad widths as one line.

Interval labels such as `[4, 5[` hold a comma; written unquoted with `--delimiter ,` they
split into extra cells and fedanon rejected its own file as a ragged hierarchy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fedanon.cli import main
from fedanon.data.io.delimited import read_delimited
from fedanon.data.hierarchy import Hierarchy


def _table(tmp_path: Path) -> Path:
    path = tmp_path / "people.csv"
    rows = [f"{20 + (i * 7) % 53},{'fm'[i % 2]},{1000 + i % 9}" for i in range(60)]
    path.write_text("age,sex,code\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("kind", ["interval", "auto"])
def test_comma_separated_hierarchy_reads_back(tmp_path, capsys, kind) -> None:
    table = _table(tmp_path)
    hier = tmp_path / "age.csv"
    assert main(["hierarchy", kind, "--from", str(table), "--column", "age", "--delimiter", ",", "-o", str(hier)]) == 0
    records = read_delimited(hier, ",")
    widths = {len(cells) for _line, cells in records}
    assert len(widths) == 1, widths  # not ragged
    assert any("," in cell for _line, cells in records for cell in cells)  # labels like "[20, 30[" survive whole
    assert {cells[0] for _line, cells in records} == {str(20 + (i * 7) % 53) for i in range(60)}
    Hierarchy.read_csv(hier, "age", ",")
    out = tmp_path / "out.csv"
    capsys.readouterr()
    code = main(["anonymize", str(table), "--delimiter", ",", "--hierarchy-delimiter", ",",
                 "--qi", f"age={hier}", "--insensitive", "sex", "--k", "3", "-o", str(out), "-q"])
    assert code == 0, capsys.readouterr().err
    assert out.read_text().splitlines()[0] == "age,sex"


def test_standard_output_is_quoted_too(tmp_path, capsys) -> None:
    assert main(["hierarchy", "interval", "--values", "0..9", "--width", "2", "--delimiter", ","]) == 0
    out = capsys.readouterr().out
    path = tmp_path / "h.csv"
    path.write_text(out)
    assert Hierarchy.read_csv(path, "x", ",").rows[0][1] == b"[0, 2["


@pytest.mark.parametrize("option", [["--width", "0"], ["--width", "-3"], ["--width", "inf"],
                                    ["--widths", "0"], ["--widths", "2,0"]])
def test_zero_or_negative_width_is_one_line(capsys, option) -> None:
    code = main(["hierarchy", "interval", "--values", "1..20", *option])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "interval width" in lines[0] and "> 0" in lines[0] and option[1].split(",")[-1] in lines[0]
