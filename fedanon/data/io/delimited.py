"""Delimited text I/O for tables as data stewards have them, with errors that name file and line.

Reading follows RFC 4180 (fields may be quoted with `"`, a quote inside a quoted field is
doubled, quoted fields may hold the delimiter and line breaks), accepts any Python
encoding (UTF-8 by default; a UTF-8 byte-order mark is skipped) and trims surrounding
whitespace from every cell, as the engine always has.

Why pyarrow for tables: its CSV reader parses in C++ on all cores and returns
dictionary-encoded columns directly, so a table becomes per-column integer codes plus a
dictionary of distinct values without ever building a Python object per row. That is
the shape the engine works on (`EncodedTable`). Small files (hierarchies, research
subsets) go through Python's `csv` module, which keeps exact physical line numbers.

Writing quotes a value only where needed (delimiter, quote, line break, or surrounding
whitespace), per distinct value, and joins rows column-wise in pyarrow in batches.
"""

from __future__ import annotations

import codecs
import csv
import io
import mmap
import os
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from fedanon.kit.atomicfile import atomic_binary
from fedanon.kit.cores import available_cores
from fedanon.data.io.columnar import (DEFAULT_DELIMITER, DEFAULT_ENCODING, ColumnarTable, narrow_codes,
                                       numpy_integers)
from fedanon.data.io.registry import register_reader
from fedanon.data.table import EncodedTable
from fedanon.errors import InputError

WRITE_BATCH_ROWS = 1 << 16
WRITE_THREADS_MAX = 8  # formatting threads (pyarrow formats without the GIL): one per core, 2..8
WRITE_AHEAD_PER_THREAD = 2  # batches formatted ahead of the file at most (~5 MB each at 65,536 rows)
READ_BLOCK_BYTES = 1 << 22  # pyarrow's parse unit (default 1 MiB): fewer, larger blocks parse faster
# Python codec names whose text has '"', CR and LF only as those ASCII bytes (see `may_quote`)
_ASCII_SAFE_ENCODINGS = {"utf-8", "ascii", "iso8859-1", "iso8859-15", "cp1252"}
_MAX_ECHO = 200

_ESCAPES = {"\\t": "\t", "tab": "\t", "\\s": " ", "space": " ", "\\\\": "\\"}


def parse_delimiter(text: str, what: str = "--delimiter") -> str:
    """One delimiter character; `\\t` / `tab` stand for a tab (a shell cannot easily pass one)."""
    value = _ESCAPES.get(text.lower() if text.lower() in ("tab", "space") else text, text)
    if len(value) != 1:
        raise InputError(f"{what} must be a single character (or \\t for a tab), got {text[:_MAX_ECHO]!r}")
    if value in ('"', "\n", "\r"):
        raise InputError(f"{what} cannot be {value!r}: it is reserved for quoting and line breaks")
    return value


def check_encoding(name: str, what: str = "--encoding") -> str:
    """A codec Python knows (e.g. utf-8, latin-1, cp1252); `utf-8-sig` is plain UTF-8 here."""
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise InputError(f"{what}: unknown text encoding {name[:_MAX_ECHO]!r} (e.g. utf-8, latin-1, cp1252)") from None


def _echo(value: str) -> str:
    return repr(value if len(value) <= _MAX_ECHO else value[:_MAX_ECHO] + "…")


# --------------------------------------------------------------------------- small files
def _open_text(path: Path, encoding: str):  # type: ignore[no-untyped-def]
    try:
        # utf-8-sig skips a byte-order mark before the csv module sees the first quote
        return open(path, encoding="utf-8-sig" if encoding == "utf-8" else encoding, newline="")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None


# Leading bytes of file formats users hand over instead of delimited text. Why: such a file
# fails to decode somewhere in its middle, and "try --encoding latin-1" would send the user
# the wrong way (latin-1 decodes any byte, so the file would then be read as garbage).
BINARY_FORMATS: tuple[tuple[bytes, str], ...] = (
    (b"PAR1", "a Parquet file"),
    (b"PK\x03\x04", "a ZIP archive (an .xlsx or .ods workbook is one)"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office document (e.g. an .xls workbook)"),
    (b"\x1f\x8b", "gzip-compressed"),
    (b"SQLite format 3\x00", "an SQLite database"),
)


def binary_format(path: Path) -> str | None:
    """What known non-text format `path` starts with, if any (None also when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return None  # the text reader reports it
    return next((kind for magic, kind in BINARY_FORMATS if head.startswith(magic)), None)


def refuse_binary(path: Path) -> None:
    """InputError when `path` is a known binary format rather than delimited text."""
    kind = binary_format(path)
    if kind is not None:
        raise InputError(f"{path}: is {kind}, not delimited text; fedanon reads CSV: "
                         f"save the table as CSV (UTF-8) first")


def _records(path: Path, delimiter: str, encoding: str) -> Iterator[tuple[int, list[str]]]:
    """(first physical line, cells) per non-blank CSV record, RFC 4180 quoting."""
    refuse_binary(path)
    fh = _open_text(path, encoding)
    with fh:
        reader = csv.reader(fh, delimiter=delimiter, quotechar='"', doublequote=True, strict=True)
        start = 1
        try:
            for cells in reader:
                line = start
                start = reader.line_num + 1
                if not cells or all(not c.strip() for c in cells) and len(cells) == 1:
                    continue
                yield line, [c.strip() for c in cells]
        except UnicodeDecodeError as exc:
            raise InputError(_decode_problem(path, encoding, exc)) from None
        except csv.Error as exc:
            raise InputError(f"{path}, line {reader.line_num}: malformed CSV ({exc})") from None


def _decode_problem(path: Path, encoding: str, exc: UnicodeDecodeError | None = None) -> str:
    """Name the line of the first byte that does not decode, and suggest --encoding."""
    data = path.read_bytes()
    if exc is None or not isinstance(exc.object, (bytes, bytearray)) or len(exc.object) != len(data):
        try:
            data.decode(encoding)
            return f"{path}: not {encoding} text (give the file's encoding with --encoding)"
        except UnicodeDecodeError as found:
            exc = found
    line = data.count(b"\n", 0, exc.start) + 1
    return (f"{path}, line {line}: not {encoding} text (byte {data[exc.start:exc.start + 1]!r} at offset "
            f"{exc.start}); give the file's encoding with --encoding, e.g. --encoding latin-1")


def read_delimited(path: str | Path, delimiter: str = DEFAULT_DELIMITER,
                   encoding: str = DEFAULT_ENCODING) -> list[tuple[int, list[str]]]:
    """Non-blank records split per RFC 4180, with the 1-based line each starts on."""
    return list(_records(Path(path), delimiter, encoding))


def format_delimited(rows: Iterable[Sequence[str]], delimiter: str = DEFAULT_DELIMITER) -> str:
    """Records as RFC 4180 text that `read_delimited` reads back cell for cell.

    Why the csv writer: a generated cell may hold the delimiter (an interval label
    `[4, 5[` in a comma-separated hierarchy); it is quoted only then.
    """
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, quotechar='"', doublequote=True, lineterminator="\n",
               quoting=csv.QUOTE_MINIMAL).writerows(rows)
    return buf.getvalue()


# --------------------------------------------------------------------------- delimited tables
class DelimitedTable(ColumnarTable):
    """A `ColumnarTable` read from a delimited text file: errors name the physical line."""

    def line_numbers(self, rows: Sequence[int]) -> list[int]:
        """Physical line of each data row (error path only: re-scans the file)."""
        wanted = sorted(set(int(r) for r in rows))
        found: dict[int, int] = {}
        if wanted:
            records = _records(self.source, self.delimiter, self.encoding)
            next(records, None)  # header
            target = iter(wanted)
            want = next(target)
            for r, (line, _cells) in enumerate(records):
                if r == want:
                    found[r] = line
                    want = next(target, -1)
                    if want < 0:
                        break
        return [found.get(int(r), int(r) + 2) for r in rows]

    def where(self, rows: Sequence[int]) -> list[str]:
        return [f"line {n}" for n in self.line_numbers(rows)]


def _header(path: Path, delimiter: str, encoding: str) -> tuple[int, list[str]]:
    records = _records(path, delimiter, encoding)
    first = next(records, None)
    if first is None:
        raise InputError(f"{path}: file is empty (expected a header line and data rows)")
    line, header = first
    if any(not name for name in header):
        raise InputError(f"{path}, line {line}: empty column name in header {_echo(delimiter.join(header))}")
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InputError(f"{path}, line {line}: duplicate column name {_echo(name)}")
        seen.add(name)
    return line, header


def _first_ragged_row(path: Path, header: list[str], delimiter: str, encoding: str) -> str | None:
    width = len(header)
    records = _records(path, delimiter, encoding)
    next(records, None)
    for line, cells in records:
        if len(cells) != width:
            return (f"{path}, line {line}: {len(cells)} values, expected {width} "
                    f"(header: {_echo(delimiter.join(header))}); row: {_echo(delimiter.join(cells))}")
    return None


def may_quote(path: Path, encoding: str) -> bool:
    """Whether the file may hold a quoted field (and so a line break inside a value).

    Without a quote there is no line break inside a value, and pyarrow can cut the file
    into blocks at any line break and parse them on all cores; with
    `newlines_in_values` it must find the blocks' ends serially (at 4.8 M rows 3.6 s
    instead of 1.6 s). One memchr over the mapped file (~0.1 s per 400 MB) decides.
    Only for encodings that write '"' and line breaks as their ASCII bytes and use
    those bytes for nothing else; any other encoding is read the careful way.
    """
    if encoding not in _ASCII_SAFE_ENCODINGS:
        return True
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                return False
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return data.find(b"\"") >= 0
    except (OSError, ValueError):
        return True  # not mappable (a pipe, say): the careful way


@register_reader("csv", (".csv", ".tsv", ".txt", ".tab"))
def read_columns(path: str | Path, delimiter: str = DEFAULT_DELIMITER,
                 encoding: str = DEFAULT_ENCODING) -> ColumnarTable:
    """Read a CSV table into per-column codes and dictionaries (see `ColumnarTable`).

    Raises InputError naming file and line for an empty, ragged, malformed or
    wrongly encoded file.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv as pacsv

    path = Path(path)
    encoding = check_encoding(encoding)
    line, header = _header(path, delimiter, encoding)
    as_dictionary = pa.dictionary(pa.int32(), pa.string())
    try:
        table = pacsv.read_csv(
            path,
            # our (trimmed) header names, so every column is read as dictionary-encoded text even when a
            # raw header cell has surrounding whitespace (found by tests/test_security_fuzz.py)
            read_options=pacsv.ReadOptions(encoding=encoding, use_threads=True, column_names=header, skip_rows=line,
                                           block_size=READ_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char='"', double_quote=True,
                                             newlines_in_values=may_quote(path, encoding), ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(column_types={n: as_dictionary for n in header},
                                                 strings_can_be_null=False, quoted_strings_can_be_null=False),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        if isinstance(exc, UnicodeDecodeError) or "UTF8" in str(exc):
            raise InputError(_decode_problem(path, encoding)) from None
        raise InputError(_first_ragged_row(path, header, delimiter, encoding)
                         or f"{path}: malformed CSV ({str(exc)[:_MAX_ECHO]})") from None
    if table.num_rows == 0:
        raise InputError(f"{path}: file has a header but no data rows")
    table = table.unify_dictionaries()
    codes: list[np.ndarray] = []
    dictionaries: list[list[str]] = []
    chunks: list = []
    for i, name in enumerate(header):
        chunks = [c for c in table.column(i).chunks if len(c)]
        indices = np.concatenate([numpy_integers(c.indices) for c in chunks])
        dictionary = chunks[0].dictionary
        trimmed = pc.utf8_trim_whitespace(dictionary)
        if not trimmed.equals(dictionary):
            merged = pc.dictionary_encode(trimmed)  # trimming may make two values equal
            indices = numpy_integers(merged.indices)[indices]
            dictionary = merged.dictionary
        values = dictionary.to_pylist()
        if len(values) < len(dictionary) or indices.size and int(indices.max()) >= len(values):
            raise InputError(f"{path}: internal dictionary mismatch in column {name!r}")  # pragma: no cover
        # pyarrow encodes each chunk in order of first appearance; unification appends
        # later chunks' new values, so the codes follow first appearance overall
        codes.append(narrow_codes(indices, len(values)))
        dictionaries.append(values)
    del table, chunks
    # the parser's buffers are free now; hand them back to the OS instead of keeping them in
    # pyarrow's pool for the rest of the run (~300 MB at 4.8 M rows, all of it at the peak)
    pa.default_memory_pool().release_unused()
    return DelimitedTable(path, header, codes, dictionaries, delimiter, encoding)


def read_table_csv(path: str | Path, delimiter: str = DEFAULT_DELIMITER,
                   encoding: str = DEFAULT_ENCODING) -> tuple[list[str], list[list[str]]]:
    """Header + rows (row-wise strings). Raises InputError naming file and line."""
    table = read_columns(path, delimiter, encoding)
    return table.columns, table.rows()


# --------------------------------------------------------------------------- arrow <-> numpy
# pyarrow's `pa.array(...)` and `Array.to_numpy()` import pandas on first use when it is installed
# (~0.5 s of a run) only to ask whether their argument is a pandas object; building arrays from
# buffers and viewing them as NumPy arrays directly asks nothing and copies nothing.
def arrow_integers(values: np.ndarray):  # type: ignore[no-untyped-def]
    """A NumPy integer array as a pyarrow array of the same type (no nulls, shares memory)."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def arrow_strings(values: Sequence[str]):  # type: ignore[no-untyped-def]
    """Python strings as a pyarrow string array (UTF-8)."""
    import pyarrow as pa

    data = [v.encode("utf-8") for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int32)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    return pa.Array.from_buffers(pa.string(), len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def _empty_strings(n: int):  # type: ignore[no-untyped-def]
    """n empty strings as a pyarrow string array: zero offsets, no data (no Python object per row)."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.zeros(n + 1, dtype=np.int32)), pa.py_buffer(b"")])


# --------------------------------------------------------------------------- writing
def quote_value(value: str, delimiter: str) -> str:
    """RFC 4180 quoting, only where a reader would otherwise mis-read the value."""
    if (delimiter in value or '"' in value or "\n" in value or "\r" in value
            or (value and (value[0].isspace() or value[-1].isspace()))):
        return '"' + value.replace('"', '""') + '"'
    return value


def _as_text(value: str | bytes) -> str:
    return value.decode("utf-8", errors="backslashreplace") if isinstance(value, bytes) else str(value)


def write_columns(path: str | Path, columns: Sequence[str], codes: Sequence[np.ndarray],
                  dictionaries: Sequence[Sequence[str | bytes]], delimiter: str = DEFAULT_DELIMITER,
                  rows: np.ndarray | None = None) -> int:
    """Write a dictionary-encoded table as UTF-8 CSV in batches; returns the rows written.

    `rows` (optional) selects and orders the rows to write. Each distinct value is
    quoted once; rows are never one Python object each. When no value needs quoting
    (the usual case) pyarrow's CSV writer formats the dictionary-encoded columns (about
    twice as fast); otherwise pyarrow joins the quoted values column-wise. Batches are
    formatted into memory on `write_threads()` threads (pyarrow runs without the GIL) and
    written in order, at most `WRITE_AHEAD_PER_THREAD` batches per thread ahead of the file.
    """
    import pyarrow as pa

    texts = [[_as_text(v) for v in d] for d in dictionaries]
    quoted = [[quote_value(v, delimiter) for v in d] for d in texts]
    n = int(codes[0].shape[0]) if len(codes) else 0
    total = n if rows is None else int(len(rows))
    header = (delimiter.join(quote_value(c, delimiter) for c in columns) + "\n").encode("utf-8")
    plain = bool(columns) and all(q == t for qs, ts in zip(quoted, texts) for q, t in zip(qs, ts))
    values = [arrow_strings(q) for q in quoted]
    format_batch = _plain_batch if plain else _quoted_batch

    def batch_text(start: int):  # type: ignore[no-untyped-def]
        stop = min(start + WRITE_BATCH_ROWS, total)
        batch = [np.asarray(c)[start:stop] if rows is None else np.asarray(c)[np.asarray(rows[start:stop])]
                 for c in codes]
        return format_batch(batch, values, delimiter)

    starts = range(0, total, WRITE_BATCH_ROWS)
    with atomic_binary(path) as fh:  # whole or not at all: a cut-short release looks like a release
        fh.write(header)
        if len(starts) <= 1:
            for start in starts:
                fh.write(batch_text(start))
        else:
            _write_in_order(fh, batch_text, starts)
    pa.default_memory_pool().release_unused()
    return total


def write_threads() -> int:
    """Formatting threads: one per usable core, at least 2 (the file write itself waits on
    I/O) and at most WRITE_THREADS_MAX (beyond that the ordered write is the bottleneck)."""
    return max(2, min(WRITE_THREADS_MAX, available_cores()))


def _write_in_order(fh, batch_text, starts: range) -> None:  # type: ignore[no-untyped-def]
    """Format batches on worker threads and write them in order, a bounded number ahead."""
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    threads = write_threads()
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="fedanon-csv") as pool:
        pending: deque = deque()
        try:
            for start in starts:
                pending.append(pool.submit(batch_text, start))
                if len(pending) >= WRITE_AHEAD_PER_THREAD * threads:
                    fh.write(pending.popleft().result())
            while pending:
                fh.write(pending.popleft().result())
        finally:
            for future in pending:  # a failed write: drop the batches not yet formatted
                future.cancel()


def _plain_batch(batch: list[np.ndarray], values: list, delimiter: str):  # type: ignore[no-untyped-def]
    """Rows of values that need no quoting, by pyarrow's CSV writer on dictionary arrays (a buffer)."""
    import pyarrow as pa
    from pyarrow import csv as pacsv

    arrays = [pa.DictionaryArray.from_arrays(arrow_integers(c), v) for c, v in zip(batch, values)]
    sink = pa.BufferOutputStream()
    pacsv.write_csv(pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(batch))]), sink,
                    write_options=pacsv.WriteOptions(include_header=False, delimiter=delimiter,
                                                     quoting_style="none", batch_size=WRITE_BATCH_ROWS))
    return sink.getvalue()


def _quoted_batch(batch: list[np.ndarray], values: list, delimiter: str) -> bytes:
    """Rows joined column-wise from already quoted values."""
    import pyarrow.compute as pc

    cells = [pc.take(v, arrow_integers(c.astype(np.int64))) for v, c in zip(values, batch)]
    # separators as arrow scalars: a Python str would be converted by a call that imports pandas
    lines = cells[0] if len(cells) == 1 else pc.binary_join_element_wise(*cells, arrow_strings([delimiter])[0])
    text = pc.binary_join_element_wise(lines, _empty_strings(len(batch[0])), arrow_strings(["\n"])[0])
    return _contiguous_bytes(text)


def _contiguous_bytes(array) -> bytes:  # type: ignore[no-untyped-def]
    """The concatenated values of a pyarrow string array, straight from its data buffer."""
    array = array.combine_chunks() if hasattr(array, "combine_chunks") else array
    _validity, offsets, data = array.buffers()
    bounds = np.frombuffer(offsets, dtype=np.int32, count=len(array) + 1, offset=array.offset * 4)
    return memoryview(data)[int(bounds[0]):int(bounds[-1])].tobytes() if len(array) else b""


def write_encoded_csv(path: str | Path, table: EncodedTable, delimiter: str = DEFAULT_DELIMITER) -> int:
    """Write an `EncodedTable` (UTF-8 byte dictionaries, as a protocol's result arrives) straight
    from its codes and dictionaries; returns the rows written."""
    codes = np.asfortranarray(table.codes)  # the writer takes whole columns
    return write_columns(path, table.columns, [codes[:, c] for c in range(len(table.columns))],
                         table.dictionaries, delimiter)


def write_table_csv(path: str | Path, columns: Sequence[str], rows: Iterable[Sequence[str | bytes]],
                    delimiter: str = DEFAULT_DELIMITER) -> int:
    """Write header + rows (bytes cells are decoded as UTF-8, invalid bytes escaped)."""
    rows = rows if isinstance(rows, list) else list(rows)
    codes: list[np.ndarray] = []
    dictionaries: list[list[str | bytes]] = []
    for c in range(len(columns)):
        lookup: dict[str | bytes, int] = {}
        setdefault = lookup.setdefault
        codes.append(np.fromiter((setdefault(row[c], len(lookup)) for row in rows), dtype=np.int64, count=len(rows)))
        dictionaries.append(list(lookup))
    return write_columns(path, columns, codes, dictionaries, delimiter)


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name the same file (also through links); the output must never be the input."""
    pa_, pb_ = Path(a), Path(b)
    try:
        return pa_.resolve() == pb_.resolve() or (pb_.exists() and pa_.exists() and pa_.samefile(pb_))
    except OSError:
        return False
