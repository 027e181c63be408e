"""Live per-party phase display for the coordinator (rich), fed by the daemons' phase events."""

from __future__ import annotations

import threading
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table


class PhaseProgress:
    def __init__(self, parties: list[tuple[str, str]], enabled: bool = True) -> None:
        self.enabled = enabled
        self._rows = {name: {"role": role, "phase": "waiting", "done": [], "elapsed": 0.0} for name, role in parties}
        self._lock = threading.Lock()
        self._live: Live | None = None

    def _table(self) -> Table:
        table = Table(title="fedanon run", expand=False)
        for col in ("party", "role", "current phase", "finished phases", "time [s]"):
            table.add_column(col)
        for name, row in self._rows.items():
            table.add_row(name, str(row["role"]), str(row["phase"]), ", ".join(row["done"]) or "-", f"{row['elapsed']:.1f}")
        return table

    def update(self, party: str, phase: str, state: str, elapsed: float) -> None:
        with self._lock:
            row = self._rows.get(party)
            if row is None:
                return
            row["elapsed"] = elapsed
            if state == "start":
                row["phase"] = phase
            else:
                row["done"].append(f"{phase}")
                row["phase"] = "-"
            if self._live is not None:
                self._live.update(self._table())

    def __enter__(self) -> "PhaseProgress":
        if self.enabled:
            self._live = Live(self._table(), console=Console(stderr=True), refresh_per_second=8, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None
