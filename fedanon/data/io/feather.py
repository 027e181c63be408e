"""Arrow IPC / Feather input (pyarrow): `.arrow`, `.feather`, `.fea`, read into dictionary-encoded columns.

Feather version 2 is the Arrow IPC file format, so one reader serves both names; an `.arrow`
file written as an IPC *stream* (no footer) is read as well, and Feather version 1 files as
pyarrow reads them. As for Parquet, every column is read as text (numbers and dates as pyarrow
renders them), so the release equals that of the same table exported to CSV; a column of a
type with no text form (a list, a struct) is refused naming it. The file has rows, not lines:
errors name the data row (1-based).
"""

from __future__ import annotations

from pathlib import Path

from fedanon.data.io.arrowtables import columnar_from_arrow
from fedanon.data.io.columnar import ColumnarTable
from fedanon.data.io.registry import register_reader
from fedanon.errors import InputError


def _read_arrow(path: Path):  # type: ignore[no-untyped-def]
    """The whole file as one pyarrow table: the IPC file format (Feather v2) or Feather v1 first,
    then the IPC stream format."""
    import pyarrow as pa
    import pyarrow.feather as feather
    import pyarrow.ipc as ipc

    try:
        return feather.read_table(path, memory_map=False)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not an Arrow/Feather file") from None
    except (pa.ArrowInvalid, OSError) as file_error:
        try:
            with pa.OSFile(str(path), "rb") as source:
                return ipc.open_stream(source).read_all()
        except (pa.ArrowInvalid, OSError):
            raise InputError(f"{path}: not a readable Arrow IPC / Feather file ({str(file_error)[:200]})") from None


@register_reader("feather", (".arrow", ".feather", ".fea"))
def read_feather(path: Path, delimiter: str = ";", encoding: str = "utf-8") -> ColumnarTable:
    return columnar_from_arrow(path, _read_arrow(path), delimiter, encoding)
