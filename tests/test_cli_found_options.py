"""Command-line options a new user reaches for: a second --sensitive, --encoding and
--hierarchy-delimiter on `risk` and `hierarchy`, `run -o`, `--version`."""

from __future__ import annotations

from pathlib import Path

import pytest

import fedanon
from fedanon.cli import main

EX = Path(fedanon.__file__).parent / "data" / "example"


def _one_line_error(capsys, *args: object) -> str:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# ----------------------------------------------------------------------------- a second --sensitive
@pytest.mark.parametrize("command", ["anonymize", "simulate"])
def test_second_sensitive_is_refused(tmp_path, capsys, command) -> None:
    out = tmp_path / "out.csv"
    line = _one_line_error(capsys, command, EX / "example.csv", "--qi", f"age={EX / 'example_hierarchy_age.csv'}",
                           "--sensitive", "diagnosis", "--sensitive", "sex", "--l-diversity", "distinct:2",
                           "-o", out)
    assert "--sensitive" in line and "'diagnosis'" in line and "'sex'" in line
    assert not out.exists()


def test_one_sensitive_still_works(tmp_path, capsys) -> None:
    out = tmp_path / "out.csv"
    assert main(["anonymize", str(EX / "example.csv"), "--qi", f"age={EX / 'example_hierarchy_age.csv'}",
                 "--sensitive", "diagnosis", "--l-diversity", "distinct:2", "-o", str(out), "-q"]) == 0
    assert out.read_text().splitlines()[0] == "age;diagnosis"
