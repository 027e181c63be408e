"""The Arrow IPC / Feather reader: one module (fedanon/data/io/feather.py) on the reader registry.

The same table given as CSV, Parquet, Feather (v2 = the IPC file format), an `.arrow` IPC file and
an `.arrow` IPC stream must give byte-identical releases, from flags and from a TOML run file;
`fedanon simulate` reads it; a bad file is one line on stderr naming it, exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedanon.cli import main
from fedanon.data.io.registry import format_of, formats, read_table
from model_cases import EXAMPLE, QI_FLAGS, released

pa = pytest.importorskip("pyarrow")
import pyarrow.csv as pacsv  # noqa: E402
import pyarrow.feather as feather  # noqa: E402
import pyarrow.ipc as ipc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

QIS = ("age", "sex", "zipcode")
MODEL = ["--k", "2", "--sensitive", "diagnosis", "--l-diversity", "distinct:2", "--suppression", "0.2"]


def _example_arrow():
    table = pacsv.read_csv(EXAMPLE / "example.csv", parse_options=pacsv.ParseOptions(delimiter=";"))
    assert pa.types.is_integer(table.schema.field("zipcode").type)  # numbers stay numbers in the files
    return table


def _files(tmp_path: Path) -> dict[str, Path]:
    """The running example in every Arrow flavour the reader takes, plus Parquet."""
    table = _example_arrow()
    paths = {"feather": tmp_path / "example.feather", "ipc-file": tmp_path / "example.arrow",
             "ipc-stream": tmp_path / "stream.arrow", "parquet": tmp_path / "example.parquet"}
    feather.write_feather(table, paths["feather"])
    with ipc.new_file(paths["ipc-file"], table.schema) as writer:
        writer.write_table(table)
    with ipc.new_stream(paths["ipc-stream"], table.schema) as writer:
        writer.write_table(table)
    pq.write_table(table, paths["parquet"])
    # a categorical column, as pandas writes one: a dictionary-encoded column in the file
    categorical = table.set_column(1, "sex", table.column("sex").dictionary_encode())
    paths["dictionary"] = tmp_path / "categorical.feather"
    feather.write_feather(categorical, paths["dictionary"])
    return paths


def test_registered_by_suffix():
    assert "feather" in formats()
    for name in ("a.arrow", "a.feather", "A.FEATHER", "a.fea"):
        assert format_of(name) == "feather"
    assert format_of("a.csv") == "csv" and format_of("a.parquet") == "parquet"


def test_every_flavour_gives_the_csv_release_byte_for_byte(tmp_path):
    expected_path = tmp_path / "csv.csv"
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, *MODEL, "-o", str(expected_path), "-q"]) == 0
    expected = expected_path.read_bytes()
    assert expected.count(b"\n") == 9
    for name, source in _files(tmp_path).items():
        out = tmp_path / f"{name}.out.csv"
        assert main(["anonymize", str(source), *QI_FLAGS, *MODEL, "-o", str(out), "-q", "--verify"]) == 0, name
        assert out.read_bytes() == expected, name


def test_toml_run_file_reads_it(tmp_path):
    source = _files(tmp_path)["feather"]
    from_flags, from_toml = tmp_path / "flags.csv", tmp_path / "toml.csv"
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *QI_FLAGS, *MODEL, "-o", str(from_flags), "-q"]) == 0
    run = tmp_path / "run.toml"
    run.write_text("\n".join([f'input = "{source}"', f'output = "{from_toml}"', "k = 2", 'sensitive = "diagnosis"',
                              'l_diversity = "distinct:2"', "suppression = 0.2", "[qi]",
                              *[f'{c} = "{EXAMPLE / f"example_hierarchy_{c}.csv"}"' for c in QIS]]) + "\n")
    assert main(["anonymize", "--config", str(run), "-q"]) == 0
    assert from_toml.read_bytes() == from_flags.read_bytes()


def test_simulate_reads_it(tmp_path):
    source = _files(tmp_path)["ipc-file"]
    sim_out, ref_out = tmp_path / "sim.csv", tmp_path / "ref.csv"
    flags = [*QI_FLAGS, "--k", "2", "--suppression", "0.25"]
    assert main(["simulate", "--protocol", "B", "--split", "horizontal", "--parties", "2", str(source), *flags,
                 "--output", str(sim_out), "-q"]) == 0
    assert main(["anonymize", str(EXAMPLE / "example.csv"), *flags, "--output", str(ref_out), "-q"]) == 0
    assert released(sim_out) == released(ref_out)


def test_values_are_the_csv_text_and_codes_are_narrow(tmp_path):
    table = read_table(_files(tmp_path)["ipc-stream"])
    assert table.columns == ["age", "sex", "zipcode", "diagnosis"]
    assert all(codes.dtype == np.uint8 for codes in table.codes)
    assert table.dictionaries[table.index("zipcode")][:2] == ["82667", "81775"]
    assert table.where([0, 7]) == ["row 1", "row 8"]


def _one_error_line(capsys, source: Path) -> str:
    code = main(["anonymize", str(source), *QI_FLAGS, "--k", "2", "-o", "/dev/null"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "Traceback" not in err[0] and str(source) in err[0]
    return err[0]


def test_bad_files_are_one_line_exit_2(tmp_path, capsys):
    garbage = tmp_path / "garbage.feather"
    garbage.write_bytes(b"age;sex\n34;male\n")
    assert "not a readable Arrow IPC / Feather file" in _one_error_line(capsys, garbage)
    whole = _files(tmp_path)["feather"].read_bytes()
    truncated = tmp_path / "truncated.arrow"
    truncated.write_bytes(whole[: len(whole) // 2])
    assert "not a readable" in _one_error_line(capsys, truncated)
    gap = tmp_path / "gap.feather"
    feather.write_feather(pa.table({"age": ["34", None], "sex": ["male", "female"]}), gap)
    line = _one_error_line(capsys, gap)
    assert "row 2" in line and "'age'" in line
    nested = tmp_path / "nested.arrow"
    feather.write_feather(pa.table({"age": [[34], [45]], "sex": ["male", "female"]}), nested)
    line = _one_error_line(capsys, nested)
    assert "'age'" in line and "no text form" in line
    empty = tmp_path / "empty.feather"
    feather.write_feather(_example_arrow().slice(0, 0), empty)
    assert "no data rows" in _one_error_line(capsys, empty)


def test_parquet_and_feather_refuse_alike(tmp_path, capsys):
    """Both readers convert through one function (data/io/arrowtables.py): a Parquet file with a
    nested column, a gap or no rows is refused in one line as a Feather file is, not with a traceback."""
    nested = {"age": [[34], [45]], "sex": ["male", "female"]}
    gap = {"age": ["34", None], "sex": ["male", "female"]}
    for name, columns, expected in (("nested", nested, "no text form"), ("gap", gap, "row 2: column 'age'")):
        for suffix, write in ((".parquet", pq.write_table), (".feather", feather.write_feather)):
            path = tmp_path / f"{name}{suffix}"
            write(pa.table(columns), path)
            line = _one_error_line(capsys, path)
            assert expected in line, line
    empty = tmp_path / "empty.parquet"
    pq.write_table(_example_arrow().slice(0, 0), empty)
    assert "no data rows" in _one_error_line(capsys, empty)
