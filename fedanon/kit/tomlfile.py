"""Reading a TOML file a user named, with every failure as one InputError naming it.

Shared by the run files of `fedanon anonymize`/`simulate` and the party/run configs of
the network commands, so a directory, an unreadable or non-UTF-8 file and a syntax
error read the same everywhere (and never end in a traceback). A UTF-8 byte-order
mark is accepted, as in the CSV readers.
"""

from __future__ import annotations

import codecs
import tomllib
from pathlib import Path
from typing import Any

from fedanon.errors import InputError


def load_toml_file(path: str | Path, what: str = "TOML file") -> dict[str, Any]:
    """The parsed document; `what` names the kind of file in messages (e.g. "run file")."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        # a UTF-8 byte-order mark (Windows editors write one) is not part of the document
        return tomllib.loads(data.removeprefix(codecs.BOM_UTF8).decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: {what} not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a {what}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read {what} ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at offset "
                         f"{exc.start}); a {what} must be UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays/tables recursively
        raise InputError(f"{path}: not valid TOML: nested too deeply") from None
