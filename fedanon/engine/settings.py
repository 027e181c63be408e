"""Where one party's engine groups the rows of a check: a backend, its workers, a scheduler.

This is a party's own compute, decided by the institution that runs the search (the helper
of Protocol B, the master of Protocol A), like its listen address -- not part of what a run
asks for. It therefore lives in the party config (`[engine]`), reaches the protocol roles
through their `RoleContext`, and is never sent to another party: the optimum is the same on
every backend (`backends/base.py`), so no other party has a reason to know it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from fedanon.engine.check.backends.base import DEFAULT_BACKEND, check_backend
from fedanon.engine.check.backends.processes import resolve_workers
from fedanon.engine.result import AnonymizationResult
from fedanon.errors import InputError, clip

#: a Dask scheduler address: PROTOCOL://HOST:PORT (tcp, tls or a UCX transport)
SCHEDULER_ADDRESS = re.compile(r"^(tcp|tls|ucx)://[A-Za-z0-9.\-\[\]:]+:\d{1,5}$")


@dataclass(frozen=True)
class EngineSettings:
    """The engine's backend choice, as `fedanon anonymize --backend/--workers/--scheduler` take it.

    `workers`: a whole number >= 1 or "auto" (resolved against the table's row count when
    the search starts, as `--workers auto` is); with the Dask backend and no `scheduler`, the
    size of the local cluster started for the search.
    """

    backend: str = DEFAULT_BACKEND
    workers: int | str = 1
    scheduler: str | None = None

    def validate(self, where: str, key: str = "engine.") -> "EngineSettings":
        """Self, or an InputError of one line naming `where` (a file), the key and the bad value;
        `key` prefixes the setting's name ("engine." for the TOML table, "--" for flags)."""
        try:
            check_backend(self.backend)
        except InputError as exc:
            raise InputError(f"{where}: {key}backend: {exc}") from None
        if self.backend == "dask" and find_spec("distributed") is None:  # refused at start-up, not at each run
            raise InputError(f"{where}: {key}backend dask needs dask[distributed]: pip install 'fedanon[cluster]'")
        if isinstance(self.workers, bool) or not isinstance(self.workers, (int, str)):
            raise InputError(f"{where}: {key}workers must be a whole number >= 1 or 'auto', "
                             f"got {clip(repr(self.workers))}")
        try:
            resolve_workers(self.workers, 0)
        except InputError as exc:
            raise InputError(f"{where}: {key}{str(exc).removeprefix('--')}") from None
        if self.scheduler is not None:
            if self.backend != "dask":
                raise InputError(f"{where}: {key}scheduler {clip(self.scheduler)!r} needs {key}backend dask "
                                 f"(got {clip(self.backend)!r})")
            if not SCHEDULER_ADDRESS.match(self.scheduler):
                raise InputError(f"{where}: {key}scheduler must be an address like tcp://HOST:8786, "
                                 f"got {clip(self.scheduler)!r}")
        return self

    @property
    def is_default(self) -> bool:
        return self == EngineSettings()

    def anonymize_options(self, n_rows: int) -> dict[str, Any]:
        """Keyword arguments of `engine.anonymize` for a table of `n_rows` rows."""
        return {"backend": self.backend, "workers": resolve_workers(self.workers, n_rows),
                "scheduler": self.scheduler}

    def redact(self, text: str) -> str:
        """`text` without this party's scheduler address, for a failure message its peers see
        (a cluster that cannot be reached names its address; the address stays in the party's log)."""
        if not self.scheduler:
            return text
        host_port = self.scheduler.partition("://")[2]
        for secret in (self.scheduler, host_port, host_port.rpartition(":")[0]):
            if secret:
                text = text.replace(secret, "<scheduler>")
        return text

    def as_dict(self) -> dict[str, Any]:
        """The `[engine]` table (TOML has no null: an unset scheduler is left out)."""
        out: dict[str, Any] = {"backend": self.backend, "workers": self.workers}
        if self.scheduler is not None:
            out["scheduler"] = self.scheduler
        return out


#: what `engine.anonymize` adds to a result's `extra` (and so to its report) about where the rows
#: were grouped
ENGINE_FACTS = ("backend", "workers", "backend_start_s")


def keep_engine_private(result: AnonymizationResult) -> AnonymizationResult:
    """`result` with the facts of this party's engine taken out of its report, for a role whose
    report reaches its peers or the coordinator: how an institution computes is its own business,
    and the optimum does not depend on it (`backends/base.py`)."""
    for key in ENGINE_FACTS:
        result.extra.pop(key, None)
    return result
