"""Wire format of tables, hierarchies and multi-part protocol messages (§4.5.4).

A table travels dictionary-compressed and column by column: per column a dictionary
of opaque byte strings (in the protocols: ciphertexts), each distinct value once, then
that column's codes in the narrowest unsigned type that holds them (one byte for up to
256 values). Codes of one column sit together and are mostly one byte, so the whole
blob, Snappy-compressed, is a fraction of a row-major int32 matrix. Hierarchies
travel as tables whose columns are their levels.

The format is a compact hand-rolled binary one rather than protobuf because the
network layer only moves opaque bytes and the hot part (the codes) must be NumPy
buffers. Decoding validates every length, count, code width and code so a truncated
or corrupted message yields a `ProtocolError` naming what is wrong, never an
IndexError deep inside the engine.

Layout of an (uncompressed) table body, integers little-endian u32 unless noted::

    magic "FTB2" | n_rows | n_cols
    per column:  len(name) name | n_values | n_values x len | concatenated values
                 | width (u8: 1, 2 or 4) | n_rows codes of `width` bytes (unsigned)

A message is a sequence of named parts: magic "FMS1" | n_parts | per part
len(name) name | len(payload) payload (u64 length) — parts are already-encoded blobs.
"""

from __future__ import annotations

import contextlib
import contextvars
import struct
from typing import Iterator, Mapping, Sequence

import numpy as np
import snappy

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.errors import HierarchyError, ProtocolError

_TABLE_MAGIC = b"FTB2"
_CODE_TYPES = {1: "<u1", 2: "<u2", 4: "<u4"}
_MESSAGE_MAGIC = b"FMS1"
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_MAX_U32 = 0xFFFFFFFF


class _Reader:
    """Bounds-checked cursor over a byte buffer; every overrun becomes a ProtocolError."""

    def __init__(self, data: bytes | memoryview, what: str) -> None:
        self._view = memoryview(data)
        self._pos = 0
        self._what = what

    def _need(self, n: int, field: str) -> None:
        if n < 0 or self._pos + n > len(self._view):
            raise ProtocolError(
                f"corrupt {self._what}: {field} needs {n} bytes at offset {self._pos}, "
                f"but only {len(self._view) - self._pos} remain"
            )

    def u32(self, field: str) -> int:
        self._need(4, field)
        (value,) = _U32.unpack_from(self._view, self._pos)
        self._pos += 4
        return int(value)

    def u64(self, field: str) -> int:
        self._need(8, field)
        (value,) = _U64.unpack_from(self._view, self._pos)
        self._pos += 8
        return int(value)

    def take(self, n: int, field: str) -> memoryview:
        self._need(n, field)
        out = self._view[self._pos: self._pos + n]
        self._pos += n
        return out

    def expect_end(self) -> None:
        if self._pos != len(self._view):
            raise ProtocolError(
                f"corrupt {self._what}: {len(self._view) - self._pos} trailing bytes after the payload"
            )


def _compress(body: bytes) -> bytes:
    return snappy.compress(body)


DEFAULT_MAX_DECOMPRESSED = 4 << 30
_max_decompressed: contextvars.ContextVar[int] = contextvars.ContextVar("max_decompressed",
                                                                        default=DEFAULT_MAX_DECOMPRESSED)


@contextlib.contextmanager
def decompression_limit(max_bytes: int) -> Iterator[None]:
    """Refuse Snappy blocks that would expand beyond `max_bytes` (a party daemon sets this per run)."""
    token = _max_decompressed.set(max_bytes)
    try:
        yield
    finally:
        _max_decompressed.reset(token)


def snappy_length(blob: bytes | memoryview, what: str) -> int:
    """The uncompressed length a raw Snappy block declares (its leading varint), read before decompressing."""
    result = shift = 0
    for i in range(min(5, len(blob))):
        byte = blob[i]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
    raise ProtocolError(f"corrupt {what}: no Snappy length header")


def checked_uncompress(blob: bytes, what: str) -> bytes:
    """Snappy-decompress `blob`, refusing before any allocation if it declares more than the limit."""
    limit = _max_decompressed.get()
    declared = snappy_length(blob, what)
    if declared > limit:
        raise ProtocolError(f"{what} would decompress to {declared} bytes, above the limit of {limit} bytes "
                            "(limits.max_decompressed_mib)")
    return _decompress_raw(blob, what)


def _decompress(blob: bytes, what: str) -> bytes:
    return checked_uncompress(blob, what)


def _decompress_raw(blob: bytes, what: str) -> bytes:
    try:
        return snappy.uncompress(blob)
    except Exception as exc:  # snappy raises its own error types, varying by version
        raise ProtocolError(f"corrupt {what}: Snappy decompression failed ({exc})") from None


def _pack_dictionary(values: Sequence[bytes]) -> bytes:
    lengths = np.fromiter((len(v) for v in values), dtype=np.uint32, count=len(values))
    return _U32.pack(len(values)) + lengths.astype("<u4").tobytes() + b"".join(values)


def _unpack_dictionary(reader: _Reader, column: str) -> list[bytes]:
    count = reader.u32(f"dictionary size of column {column!r}")
    lengths = np.frombuffer(reader.take(4 * count, f"value lengths of column {column!r}"), dtype="<u4")
    total = int(lengths.sum(dtype=np.uint64))
    blob = bytes(reader.take(total, f"values of column {column!r}"))
    ends = np.cumsum(lengths, dtype=np.int64).tolist()
    starts = [0] + ends[:-1]
    return [blob[s:e] for s, e in zip(starts, ends)]


def _code_width(values: int) -> int:
    """Bytes per code for a column whose codes lie in [0, values)."""
    return 1 if values <= 1 << 8 else 2 if values <= 1 << 16 else 4


def encode_table_parts(columns: Sequence[str], codes: np.ndarray, dictionaries: Sequence[Sequence[bytes]]) -> bytes:
    """Encode a code matrix and its dictionaries (the primitive behind `encode_table`).

    Each column's codes take the narrowest width that holds both its dictionary and its
    largest code, so a code past the dictionary still reaches the receiver, which rejects it."""
    codes = np.asarray(codes)
    if codes.ndim != 2 or codes.shape[1] != len(columns) or len(dictionaries) != len(columns):
        raise ProtocolError(
            f"cannot encode table: {len(columns)} columns, {len(dictionaries)} dictionaries, codes {codes.shape}"
        )
    n_rows = codes.shape[0]
    if n_rows > _MAX_U32:
        raise ProtocolError(f"cannot encode table with {n_rows} rows (more than 2^32 - 1)")
    parts = [_TABLE_MAGIC, _U32.pack(n_rows), _U32.pack(len(columns))]
    for c, (name, dictionary) in enumerate(zip(columns, dictionaries)):
        raw = name.encode("utf-8")
        parts.append(_U32.pack(len(raw)) + raw)
        parts.append(_pack_dictionary(dictionary))
        column = codes[:, c]
        low, high = (int(column.min()), int(column.max())) if n_rows else (0, 0)
        if low < 0 or high > _MAX_U32:
            raise ProtocolError(f"cannot encode table: column {name!r} has codes in [{low}, {high}]")
        width = _code_width(max(len(dictionary), high + 1))
        parts.append(bytes([width]) + column.astype(_CODE_TYPES[width]).tobytes())
    return _compress(b"".join(parts))


def decode_table_parts(blob: bytes, what: str = "table") -> tuple[list[str], np.ndarray, list[list[bytes]]]:
    """Inverse of `encode_table_parts`; validates magic, lengths, code widths and code ranges.

    The code matrix comes back column-major (int32), the layout the engine reads."""
    reader = _Reader(_decompress(blob, what), what)
    magic = bytes(reader.take(4, "magic"))
    if magic != _TABLE_MAGIC:
        raise ProtocolError(f"corrupt {what}: bad magic {magic!r} (expected {_TABLE_MAGIC!r})")
    n_rows = reader.u32("row count")
    n_cols = reader.u32("column count")
    columns: list[str] = []
    dictionaries: list[list[bytes]] = []
    column_codes: list[np.ndarray] = []
    for c in range(n_cols):
        name_len = reader.u32(f"name length of column #{c}")
        try:
            name = bytes(reader.take(name_len, f"name of column #{c}")).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"corrupt {what}: name of column #{c} is not UTF-8") from None
        columns.append(name)
        dictionary = _unpack_dictionary(reader, name)
        dictionaries.append(dictionary)
        width = reader.take(1, f"code width of column {name!r}")[0]
        if width not in _CODE_TYPES:
            raise ProtocolError(f"corrupt {what}: column {name!r} declares codes of {width} bytes (1, 2 or 4)")
        column = np.frombuffer(reader.take(width * n_rows, f"codes of column {name!r}"), dtype=_CODE_TYPES[width])
        if n_rows and int(column.max()) >= len(dictionary):
            raise ProtocolError(
                f"corrupt {what}: column {name!r} has codes in [{int(column.min())}, {int(column.max())}] "
                f"but a dictionary of {len(dictionary)} values"
            )
        column_codes.append(column)
    reader.expect_end()
    codes = np.empty((n_rows, n_cols), dtype=np.int32, order="F")
    for c, column in enumerate(column_codes):
        codes[:, c] = column
    return columns, codes, dictionaries


def encode_table(table: EncodedTable) -> bytes:
    """Dictionary-compressed, Snappy-compressed bytes of an `EncodedTable`."""
    return encode_table_parts(table.columns, table.codes, table.dictionaries)


def decode_table(blob: bytes, what: str = "table") -> EncodedTable:
    columns, codes, dictionaries = decode_table_parts(blob, what)
    if len(set(columns)) != len(columns):
        raise ProtocolError(f"corrupt {what}: duplicate column names {columns}")
    return EncodedTable(columns, codes, dictionaries)


def encode_hierarchy(hierarchy: Hierarchy) -> bytes:
    """A hierarchy as a table whose columns are its levels (name carries the attribute)."""
    rows = hierarchy.rows
    height = hierarchy.height
    table = EncodedTable.from_rows([f"{hierarchy.attribute}\x00{level}" for level in range(height)], rows)
    return encode_table(table)


def decode_hierarchy(blob: bytes, what: str = "hierarchy") -> Hierarchy:
    """Inverse of `encode_hierarchy`; the tree structure is re-validated by `Hierarchy.from_rows`."""
    table = decode_table(blob, what)
    if not table.columns:
        raise ProtocolError(f"corrupt {what}: no levels")
    attribute = table.columns[0].split("\x00", 1)[0]
    if table.n_rows == 0:
        raise ProtocolError(f"corrupt {what}: hierarchy of {attribute!r} has no rows")
    try:
        return Hierarchy.from_rows(attribute, table.decode_rows(), source=f"{what} of {attribute!r}")
    except HierarchyError as exc:  # a malformed tree from a peer is a protocol fault, not the user's input
        raise ProtocolError(f"corrupt {what}: {str(exc)[:300]}") from None


def pack_message(parts: Mapping[str, bytes]) -> bytes:
    """Frame several named blobs into one payload (a table, its hierarchies, flags, ...)."""
    out = [_MESSAGE_MAGIC, _U32.pack(len(parts))]
    for name, payload in parts.items():
        raw = name.encode("utf-8")
        out.append(_U32.pack(len(raw)) + raw + _U64.pack(len(payload)))
        out.append(bytes(payload))
    return b"".join(out)


def unpack_message(blob: bytes, what: str = "message") -> dict[str, bytes]:
    reader = _Reader(blob, what)
    magic = bytes(reader.take(4, "magic"))
    if magic != _MESSAGE_MAGIC:
        raise ProtocolError(f"corrupt {what}: bad magic {magic!r} (expected {_MESSAGE_MAGIC!r})")
    count = reader.u32("part count")
    parts: dict[str, bytes] = {}
    for i in range(count):
        name_len = reader.u32(f"name length of part #{i}")
        try:
            name = bytes(reader.take(name_len, f"name of part #{i}")).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError(f"corrupt {what}: name of part #{i} is not UTF-8") from None
        size = reader.u64(f"length of part {name!r}")
        parts[name] = bytes(reader.take(size, f"payload of part {name!r}"))
    reader.expect_end()
    return parts


def require_part(parts: Mapping[str, bytes], name: str, what: str = "message") -> bytes:
    try:
        return parts[name]
    except KeyError:
        raise ProtocolError(f"corrupt {what}: missing part {name!r} (has {', '.join(parts) or 'none'})") from None


def encode_flags(flags: np.ndarray) -> bytes:
    """A boolean vector (e.g. research-subset membership) as length + packed bits."""
    flags = np.asarray(flags, dtype=bool)
    return _U32.pack(len(flags)) + np.packbits(flags).tobytes()


def decode_flags(blob: bytes, what: str = "flags") -> np.ndarray:
    reader = _Reader(blob, what)
    n = reader.u32("flag count")
    packed = reader.take((n + 7) // 8, "flag bits")
    reader.expect_end()
    return np.unpackbits(np.frombuffer(packed, dtype=np.uint8), count=n).astype(bool)


def encode_codes(matrix: np.ndarray) -> bytes:
    """A 2-D int32 code matrix (e.g. a hierarchy as codes into its column's dictionary)."""
    matrix = np.ascontiguousarray(matrix, dtype="<i4")
    if matrix.ndim != 2:
        raise ProtocolError(f"cannot encode a code matrix of shape {matrix.shape}")
    rows, cols = matrix.shape
    return _compress(_U32.pack(rows) + _U32.pack(cols) + matrix.tobytes())


def decode_codes(blob: bytes, what: str, bound: int) -> np.ndarray:
    """Inverse of `encode_codes`; every code must index a dictionary of `bound` values."""
    reader = _Reader(_decompress(blob, what), what)
    rows = reader.u32("row count")
    cols = reader.u32("column count")
    raw = reader.take(4 * rows * cols, "codes")
    reader.expect_end()
    matrix = np.frombuffer(raw, dtype="<i4").astype(np.int32).reshape(rows, cols)
    if matrix.size and (matrix.min() < 0 or matrix.max() >= bound):
        raise ProtocolError(f"corrupt {what}: codes in [{matrix.min()}, {matrix.max()}] for a dictionary of {bound} values")
    return matrix
