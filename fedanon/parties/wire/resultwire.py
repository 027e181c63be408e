"""The anonymized result on its way from the result recipient to the coordinator.

It travels as the codec's table (`protocols/kit/codec.py`), the format every table between
parties already uses: each distinct value once per column plus the code matrix, Snappy-
compressed. The recipient sends the decrypted table as the protocol produced it, and the
coordinator writes the output file from the same codes and dictionaries, so no row is ever
built on the way. Decoding is the codec's bounds-checked one; anything malformed, of
another kind or too large becomes one `ProtocolError` that names the result.
"""

from __future__ import annotations

from fedanon.data.table import EncodedTable
from fedanon.errors import ProtocolError
from fedanon.protocols.kit import codec

WHAT = "result"
_MALFORMED = "the result sent by the recipient is malformed"


def encode_result(table: EncodedTable) -> bytes:
    """The plaintext result table (UTF-8 dictionaries) as the codec's table blob."""
    return codec.encode_table(table)


def decode_result(blob: bytes) -> EncodedTable:
    """Inverse of `encode_result`: the table, with every value checked to be UTF-8 text."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise ProtocolError(f"{_MALFORMED} (a {type(blob).__name__}, not bytes)")
    try:  # the codec refuses a block declaring more than the decompression limit before allocating
        table = codec.decode_table(bytes(blob), WHAT)
    except ProtocolError as exc:
        raise ProtocolError(f"{_MALFORMED} ({exc})") from None
    if table.n_rows and not table.columns:
        raise ProtocolError(f"{_MALFORMED} ({table.n_rows} rows without a column)")
    for column, dictionary in zip(table.columns, table.dictionaries):
        try:
            for value in dictionary:
                value.decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"{_MALFORMED} (a value of column {column!r} is not UTF-8)") from None
    return table
