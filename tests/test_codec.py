"""Wire format of tables, hierarchies and messages: round trips and clear errors on corruption."""

from __future__ import annotations

import os

import numpy as np
import pytest

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.errors import ProtocolError
from fedanon.protocols.kit import codec


def _random_table(rng: np.random.Generator, rows: int, cols: int) -> EncodedTable:
    data = [[os.urandom(int(rng.integers(0, 40))) if rng.random() < 0.3 else str(rng.integers(0, 5)).encode()
             for _ in range(cols)] for _ in range(rows)]
    return EncodedTable.from_rows([f"c{i}" for i in range(cols)], data)


@pytest.mark.parametrize("rows,cols", [(0, 3), (1, 1), (57, 4), (2000, 9)])
def test_table_round_trip(rows: int, cols: int) -> None:
    table = _random_table(np.random.default_rng(rows), rows, cols)
    back = codec.decode_table(codec.encode_table(table))
    assert back.columns == table.columns
    assert back.dictionaries == table.dictionaries
    assert np.array_equal(back.codes, table.codes)
    assert back.decode_rows() == table.decode_rows()


def test_compression_shrinks_repetitive_structure() -> None:
    table = EncodedTable.from_rows(["a", "b"], [[str(i % 3), "x"] for i in range(10000)])
    blob = codec.encode_table(table)
    assert len(blob) < table.codes.nbytes / 10


def test_hierarchy_round_trip() -> None:
    h = Hierarchy.from_rows("age", [["34", "20-60", "*"], ["45", "20-60", "*"], ["66", ">=61", "*"]])
    back = codec.decode_hierarchy(codec.encode_hierarchy(h))
    assert back.attribute == "age" and back.rows == h.rows


def test_message_round_trip_and_flags() -> None:
    flags = np.array([True, False, True, True, False, False, False, True, True])
    parts = {"table": b"\x00\x01" * 5, "flags": codec.encode_flags(flags), "empty": b""}
    back = codec.unpack_message(codec.pack_message(parts))
    assert back == parts
    assert np.array_equal(codec.decode_flags(back["flags"]), flags)


@pytest.mark.parametrize("cut", [1, 5, 17, 40])
def test_truncated_table_is_a_protocol_error(cut: int) -> None:
    blob = codec.encode_table(_random_table(np.random.default_rng(1), 30, 3))
    with pytest.raises(ProtocolError, match="corrupt"):
        codec.decode_table(blob[:-cut])


def test_out_of_range_code_is_rejected() -> None:
    blob = codec.encode_table_parts(["a"], np.array([[0], [3]], dtype=np.int32), [[b"x", b"y"]])
    with pytest.raises(ProtocolError, match="column 'a' has codes in \\[0, 3\\] but a dictionary of 2"):
        codec.decode_table(blob)


def test_bad_magic_and_trailing_bytes() -> None:
    import snappy
    with pytest.raises(ProtocolError, match="bad magic"):
        codec.decode_table(snappy.compress(b"XXXX" + b"\x00" * 8))
    good = codec.pack_message({"a": b"1"})
    with pytest.raises(ProtocolError, match="trailing"):
        codec.unpack_message(good + b"\x00")
    with pytest.raises(ProtocolError, match="bad magic"):
        codec.unpack_message(b"nope")
    with pytest.raises(ProtocolError, match="missing part 'b'"):
        codec.require_part(codec.unpack_message(good), "b")


def test_codes_of_every_width_round_trip() -> None:
    """Columns of 2, 300 and 70,000 values travel with 1-, 2- and 4-byte codes and come back exact."""
    rng = np.random.default_rng(3)
    sizes = [2, 300, 70_000]
    codes = np.stack([rng.integers(0, n, 80_000) for n in sizes], axis=1).astype(np.int32)
    codes[:70_000, 2] = np.arange(70_000)  # every value of the widest column is used
    dictionaries = [[str(v).encode() for v in range(n)] for n in sizes]
    table = EncodedTable(["a", "b", "c"], codes, dictionaries)
    back = codec.decode_table(codec.encode_table(table))
    assert back.dictionaries == dictionaries and np.array_equal(back.codes, codes)


def test_a_code_past_a_small_dictionary_is_rejected_not_truncated() -> None:
    """A code of 300 in a column of 2 values must not wrap into a one-byte code the receiver accepts."""
    blob = codec.encode_table_parts(["a"], np.array([[0], [300]], dtype=np.int32), [[b"x", b"y"]])
    with pytest.raises(ProtocolError, match="column 'a' has codes in \\[0, 300\\] but a dictionary of 2"):
        codec.decode_table(blob)
    with pytest.raises(ProtocolError, match="cannot encode table: column 'a' has codes in \\[-1, 0\\]"):
        codec.encode_table_parts(["a"], np.array([[0], [-1]], dtype=np.int32), [[b"x"]])
