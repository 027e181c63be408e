"""Output files that appear whole or not at all: written to a temporary file beside the
target and renamed over it only when the write succeeded.

Why: a release file cut short (a full disk, a killed process) still looks like a release.
A steward who finds `out.csv` after a failed run must not mistake a truncated table for the
result, and the previous good file must not be lost to a failed overwrite. Used for every
result table, report and generated hierarchy (`fedanon anonymize`, `risk`, `simulate`,
`hierarchy`, the coordinator). Neutral module: it knows nothing of the engine or the protocols.

Special files (a FIFO, /dev/null, /dev/stdout) are written in place; a symbolic link keeps
pointing where it did and its target gets the content. A new file gets the usual mode (0666
less the umask) and a replaced one keeps its mode, as with `open(path, "w")`.
"""

from __future__ import annotations

import os
import secrets
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

__all__ = ["atomic_binary", "write_text_atomic"]


@contextmanager
def atomic_binary(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file handle whose content replaces `path` when the `with` body completes;
    on any exception the temporary file is removed and `path` is left as it was."""
    target = Path(path).resolve()  # a symlink's target gets the content, the link stays
    if target.exists() and not target.is_file():
        with open(target, "wb") as fh:  # a device or a pipe: no rename possible
            yield fh
        return
    tmp, fd = _create_beside(target)
    try:
        if target.is_file():  # a replaced file keeps its permissions (a steward's 0600 stays 0600)
            os.fchmod(fd, stat.S_IMODE(target.stat().st_mode))
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_text_atomic(path: str | Path, text: str) -> None:
    """`text` as UTF-8 into `path`, whole or not at all (`atomic_binary`)."""
    with atomic_binary(path) as fh:
        fh.write(text.encode("utf-8"))


def _create_beside(target: Path) -> tuple[Path, int]:
    """A new, empty temporary file in the target's folder (same file system: the rename is atomic).
    A missing folder is an OSError, as for `open(path, "w")`."""
    for _ in range(100):
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {target.name}")  # pragma: no cover
