"""The result on its way from the recipient to the coordinator: the codec's table, exact, and
one clear `ProtocolError` for anything that is not a well-formed result."""

from __future__ import annotations

import csv
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import snappy

from fedanon.data.io.delimited import write_table_csv
from fedanon.data.table import EncodedTable
from fedanon.errors import ProtocolError
from fedanon.parties.coordinator import RunOutcome, write_outputs
from fedanon.parties.wire.resultwire import decode_result, encode_result
from fedanon.protocols.kit import codec

MALFORMED = "the result sent by the recipient is malformed"
ODD_VALUES = ["Zürich", "東京都", "", "*", "a;b", 'say "hi"', "line\nbreak", " padded ", "🙂"]


@pytest.fixture(scope="module")
def adult_result(adult_table) -> tuple[list[str], list[list[str]]]:  # type: ignore[no-untyped-def]
    """ADULT's rows with a suppressed and a generalized look, and odd values sprinkled over every column."""
    header, rows, _ = adult_table
    rng = np.random.default_rng(7)
    out = [list(row) for row in rows]
    for r in rng.choice(len(out), size=len(out) // 20, replace=False).tolist():
        out[r][:2] = ["*", "*"]  # suppressed QIs
    for r, c in zip(rng.integers(0, len(out), 3000).tolist(), rng.integers(0, len(header), 3000).tolist()):
        out[r][c] = ODD_VALUES[(r + c) % len(ODD_VALUES)]
    return list(header), out


def _one_error(blob: object) -> str:
    """Decoding fails with exactly one ProtocolError that names the result, on one line, no chained cause."""
    with pytest.raises(ProtocolError) as info:
        decode_result(blob)  # type: ignore[arg-type]
    exc = info.value
    message = str(exc)
    assert message.startswith(MALFORMED), message
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__), "two errors, not one"
    assert "\n" not in message and len(message) < 400, message
    return message


def test_an_adult_sized_result_round_trips_exactly(adult_result) -> None:  # type: ignore[no-untyped-def]
    columns, rows = adult_result
    table = EncodedTable.from_rows(columns, rows)
    back = decode_result(encode_result(table))
    assert back.columns == columns
    assert back.text_rows() == rows  # same rows, same order, every odd value intact
    assert back.dictionaries == table.dictionaries and np.array_equal(back.codes, table.codes)


def test_the_coordinator_writes_the_file_from_the_table_as_the_row_writer_did(
        tmp_path: Path, adult_result) -> None:  # type: ignore[no-untyped-def]
    """The output file straight from codes and dictionaries equals the row writer's file, byte for
    byte, and parses back to the very cells (a wrong column, order or quoting would show)."""
    columns, rows = adult_result
    outcome = RunOutcome("r", decode_result(encode_result(EncodedTable.from_rows(columns, rows))), {})
    written, reference = tmp_path / "out.csv", tmp_path / "rows.csv"
    write_outputs(outcome, written, None)
    write_table_csv(reference, columns, rows)
    assert written.read_bytes() == reference.read_bytes()
    with written.open(newline="", encoding="utf-8") as fh:
        assert list(csv.reader(fh, delimiter=";")) == [columns, *rows]


def test_empty_result_round_trips() -> None:
    back = decode_result(encode_result(EncodedTable.from_rows(["a", "b"], [])))
    assert back.columns == ["a", "b"] and back.n_rows == 0


@pytest.mark.parametrize("cut", [1, 3, 100, 5000])
def test_a_truncated_result_is_one_clear_error(adult_result, cut: int) -> None:  # type: ignore[no-untyped-def]
    columns, rows = adult_result
    blob = encode_result(EncodedTable.from_rows(columns, rows[:2000]))
    _one_error(blob[:-cut])


def test_a_result_declaring_more_than_the_limit_is_refused_before_decompression() -> None:
    blob = encode_result(EncodedTable.from_rows(["a"], [["x"]] * 10))
    with codec.decompression_limit(4):
        assert "above the limit" in _one_error(blob)


def test_a_result_declaring_more_than_it_carries_is_one_clear_error() -> None:
    """Headers claiming 2^31 rows, 2^32 - 1 rows of no column, a 4 GB value or a code width the
    format lacks, each in a few bytes: refused by the bounds checks, nothing allocated."""
    magic = snappy.uncompress(encode_result(EncodedTable.from_rows(["a"], [["x"]])))[:4]
    column_a = struct.pack("<I", 1) + b"a"
    one_value = struct.pack("<II", 1, 1) + b"x"
    cases = {
        "codes of column 'a'": struct.pack("<II", 1 << 31, 1) + column_a + one_value + b"\x01",
        "rows without a column": struct.pack("<II", 0xFFFFFFFF, 0),
        "values of column 'a'": struct.pack("<II", 1, 1) + column_a + struct.pack("<II", 1, 0xFFFFFFF0),
        "codes of 3 bytes": struct.pack("<II", 1, 1) + column_a + one_value + b"\x03\x00\x00\x00",
        "codes in [5, 5] but a dictionary of 1": struct.pack("<II", 1, 1) + column_a + one_value + b"\x01\x05",
    }
    for expected, body in cases.items():
        assert expected in _one_error(snappy.compress(magic + body))
    assert decode_result(snappy.compress(magic + struct.pack("<II", 1, 1) + column_a + one_value + b"\x01\x00")
                         ).text_rows() == [["x"]]  # the well-formed twin of the cases above


@pytest.mark.parametrize("kind", ["json rows", "message", "flags", "code matrix", "random", "empty"])
def test_a_blob_of_another_kind_is_one_clear_error(kind: str) -> None:
    blobs = {
        "json rows": snappy.compress(json.dumps({"columns": ["a"], "rows": [["1"]]}).encode()),
        "message": codec.pack_message({"table": encode_result(EncodedTable.from_rows(["a"], [["1"]]))}),
        "flags": codec.encode_flags(np.array([True, False])),
        "code matrix": codec.encode_codes(np.zeros((3, 2), dtype=np.int32)),
        "random": bytes(range(256)) * 4,
        "empty": b"",
    }
    _one_error(blobs[kind])


@pytest.mark.parametrize("value", ["text", None, 42, ["a", "b"]])
def test_a_value_that_is_not_bytes_is_one_clear_error(value: object) -> None:
    assert "not bytes" in _one_error(value)


def test_a_value_that_is_not_utf8_is_one_clear_error() -> None:
    blob = codec.encode_table(EncodedTable(["a"], np.zeros((1, 1), np.int32), [[b"\xff\xfe"]]))
    assert "column 'a' is not UTF-8" in _one_error(blob)


def test_renumbered_codes_a_result_as_its_rows_would_be_coded() -> None:
    """A decrypted result may keep unused dictionary values and one value under two codes (the
    suppression '*' beside a hierarchy's top '*'); recoding it must give the table its rows give,
    or the risk analysis would split a class in two."""
    dictionaries = [[b"x", b"*", b"unused", b"*", b"y"], [b"1", b"2"]]
    codes = np.array([[4, 1], [1, 0], [3, 0], [0, 1], [4, 1]], dtype=np.int32)
    table = EncodedTable(["q", "s"], codes, dictionaries)
    expected = EncodedTable.from_rows(["q", "s"], table.decode_rows())
    got = table.renumbered()
    assert got.dictionaries == expected.dictionaries == [[b"y", b"*", b"x"], [b"2", b"1"]]
    assert np.array_equal(got.codes, expected.codes)
    assert got.text_rows() == table.text_rows()
    assert EncodedTable(["q"], np.zeros((0, 1), np.int32), [[b"a"]]).renumbered().dictionaries == [[]]
