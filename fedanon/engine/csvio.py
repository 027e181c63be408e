"""Delimited text I/O for tables, with errors that name file and line.

Kept deliberately simple (no quoting): ARX-style exports and the bundled data are
plain `;`-separated files, and a value containing the delimiter is a user error we
report rather than guess around.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from fedanon.errors import InputError


def read_delimited(path: str | Path, delimiter: str = ";") -> list[tuple[int, list[str]]]:
    """Non-blank lines split on the delimiter, with 1-based line numbers."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    out: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        out.append((number, [cell.strip() for cell in line.split(delimiter)]))
    return out


def read_table_csv(path: str | Path, delimiter: str = ";") -> tuple[list[str], list[list[str]]]:
    """Header + rows. Raises InputError naming file and line for empty or ragged input."""
    lines = read_delimited(path, delimiter)
    if not lines:
        raise InputError(f"{path}: file is empty (expected a header line and data rows)")
    header_line, header = lines[0]
    if any(not name for name in header):
        raise InputError(f"{path}, line {header_line}: empty column name in header {header!r}")
    seen: set[str] = set()
    for name in header:
        if name in seen:
            raise InputError(f"{path}, line {header_line}: duplicate column name {name!r}")
        seen.add(name)
    if len(lines) == 1:
        raise InputError(f"{path}: file has a header but no data rows")
    rows: list[list[str]] = []
    width = len(header)
    for number, cells in lines[1:]:
        if len(cells) != width:
            raise InputError(
                f"{path}, line {number}: {len(cells)} values, expected {width} "
                f"(header: {delimiter.join(header)}); row: {delimiter.join(cells)!r}"
            )
        rows.append(cells)
    return header, rows


def write_table_csv(
    path: str | Path, columns: Sequence[str], rows: Sequence[Sequence[str | bytes]], delimiter: str = ";"
) -> None:
    """Write header + rows; bytes cells are decoded as UTF-8 (invalid bytes escaped)."""

    def cell(v: str | bytes) -> str:
        return v.decode("utf-8", errors="backslashreplace") if isinstance(v, bytes) else str(v)

    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(delimiter.join(columns) + "\n")
        for row in rows:
            fh.write(delimiter.join(cell(v) for v in row) + "\n")
