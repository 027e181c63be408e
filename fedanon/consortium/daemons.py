"""A simulated consortium whose daemons serve several runs of one split.

Why: starting three or four party daemons (a Python process each, a crypto worker pool each,
a TLS server each) and stopping them again costs seconds of CPU per run, more than a small
run itself. Runs of one split (horizontal or vertical) give every party the same columns, so
the same party configs serve them all: the daemons start once, and before each run the party
files are rewritten with that run's rows. A hybrid consortium's parties are those of its layout
(`fedanon.data.layout`), each dealt its columns for the persons its rule selects. A daemon reads its data file again when the file
changed (it keeps no run's data past its data cache), so no restart is needed; the roster of
each run names only the parties its protocol has (Protocol A's run leaves the helper out).

A run may also bring its own privacy config (another model, other parameters), as long as it
names the consortium's quasi-identifiers and only sensitive attributes the consortium's config
gave the parties: a party's config fixes which of its columns are QIs (with their hierarchies)
and which are sensitive, and a run cannot change that without a restart. A consortium started
with a research subset writes the subset column for every run (every row released where a run
brings none); a run whose models need no subset ignores the column.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from fedanon.data.io.delimited import write_table_csv
from fedanon.data.layout import Layout
from fedanon.engine.settings import EngineSettings
from fedanon.errors import InputError, PeerError
from fedanon.parties import reaper
from fedanon.parties.coordinator import Coordinator
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.protocols.registry import HELPER, PRIMARY, protocol_spec
from fedanon.protocols.sim.hybrid import split_hybrid
from fedanon.protocols.sim.split import Share, split_horizontal, split_vertical

EventCallback = Callable[[str, str, str, float], None]  # party, phase, "start"/"end", elapsed


def free_name(columns: Sequence[str], wanted: str) -> str:
    """`wanted`, prefixed with underscores until no column has that name."""
    while wanted in columns:
        wanted = "_" + wanted
    return wanted


def write_share(path: Path, share: Share) -> str | None:
    """Write one party's share as its data file (atomically); returns the subset column's name, if any."""
    cols = list(share.columns)
    rows = share.rows
    subset_col = None
    if share.research_subset is not None:
        subset_col = free_name(cols, "research_subset")
        cols = cols + [subset_col]
        rows = [row + ["1" if flag else "0"] for row, flag in zip(share.rows, share.research_subset)]
    before = path.stat().st_mtime_ns if path.exists() else None
    tmp = path.with_name(path.name + ".tmp")
    write_table_csv(tmp, cols, rows)
    os.replace(tmp, path)
    after = path.stat().st_mtime_ns
    if before is not None and after <= before:  # a coarse clock: make the change visible to the daemon
        os.utime(path, ns=(after, before + 1_000))
    return subset_col


def share_party(name: str, share: Share, path: Path, hierarchy_paths: dict[str, Path], config: Any,
                engine: EngineSettings | None = None) -> SimulatedParty:
    """Write the share to `path` and describe the primary that serves it.

    The caller has removed identifying columns; what is neither a QI nor a sensitive
    attribute of a model is released unchanged (insensitive).
    """
    qis = set(config.quasi_identifiers)
    sensitive = set(config.sensitive_attributes)
    subset_col = write_share(path, share)
    held = [c for c in share.columns if c != share.tid_column]
    return SimulatedParty(
        name=name, role=PRIMARY, csv_path=path,
        qi_hierarchies={c: hierarchy_paths[c] for c in held if c in qis},
        sensitive={c: hierarchy_paths.get(c) for c in held if c in sensitive},
        insensitive=[c for c in held if c not in qis and c not in sensitive],
        tid_column=share.tid_column, subset_column=subset_col, engine=engine or EngineSettings(),
    )


def deal(columns: list[str], rows: list[list[str]], distribution: str, parties: int,
         layout: Layout | None = None, subset: np.ndarray | None = None) -> list[Share]:
    """The shares of `rows`: `parties` of them, or one per layout party (hybrid). `subset`: the
    research-subset flags of the rows (horizontal: each party its rows' flags; vertical: the
    first party holds them all)."""
    if distribution == "horizontal":
        return split_horizontal(columns, rows, parties, research_subset=subset)
    if distribution == "vertical":
        return split_vertical(columns, rows, parties, research_subset=subset)
    if distribution == "hybrid":
        if layout is None:
            raise InputError("a hybrid consortium needs a layout")
        if subset is not None:
            raise InputError("a hybrid consortium takes no research subset")
        return split_hybrid(columns, rows, layout)
    raise InputError(f"unknown split {distribution!r} (horizontal, vertical, hybrid)")


@dataclasses.dataclass
class DaemonRun:
    """One run's decrypted result (in input column order) and the coordinator's report."""

    columns: list[str]
    rows: list[list[str]]
    report: dict[str, Any]
    elapsed_s: float

    @property
    def party_reports(self) -> dict[str, dict[str, Any]]:
        return self.report.get("party_reports", {})


class SplitConsortium:
    """Primaries (plus a helper if asked) as daemons for one split, serving several runs.

    Use as a context manager: the daemons start on entry and stop on exit, also on error;
    data files, keys and certificates live in a temporary folder removed on exit (and by the
    reaper if this process is killed).
    """

    def __init__(self, columns: list[str], distribution: str, parties: int, hierarchy_paths: dict[str, Path],
                 config: Any, *, helper: bool, seed_rows: list[list[str]], layout: Layout | None = None,
                 seed_subset: np.ndarray | None = None) -> None:
        """`seed_rows`: the rows the daemons start with (a run may bring others of the same columns).
        `layout`: the hybrid split's layout, which names the parties (`parties` is then ignored).
        `config`: the QIs and sensitive attributes every run may use (the parties' column roles).
        `seed_subset`: research-subset flags of `seed_rows`; given, the parties get a subset column."""
        self.columns = list(columns)
        self.distribution = distribution
        self.layout = layout
        self.n = len(layout.names) if distribution == "hybrid" and layout is not None else parties
        self.hierarchy_paths = hierarchy_paths
        self.config = config
        self.helper = helper
        self._seed = seed_rows
        self._seed_subset = seed_subset
        self._stack = contextlib.ExitStack()
        self._close_lock = threading.Lock()
        self._paths: dict[str, Path] = {}
        self.net: SimulatedNetwork | None = None
        self.names = list(layout.names) if distribution == "hybrid" and layout is not None else \
            [f"p{i + 1}" for i in range(parties)]
        self._layout: list[list[str]] = []

    def __enter__(self) -> "SplitConsortium":
        with contextlib.ExitStack() as stack:
            base = stack.enter_context(reaper.guarded_temp_dir("fedanon-consortium-"))
            shares = deal(self.columns, self._seed, self.distribution, self.n, self.layout, self._seed_subset)
            self._layout = [list(s.columns) for s in shares]
            self._paths = {name: base / f"{name}.csv" for name in self.names}
            members = [share_party(name, share, self._paths[name], self.hierarchy_paths, self.config)
                       for name, share in zip(self.names, shares)]
            if self.helper:
                members.append(SimulatedParty(name="helper", role=HELPER))
            self.net = stack.enter_context(SimulatedNetwork(members))
            self._stack = stack.pop_all()  # from here on, __exit__ stops the daemons and removes the folder
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the daemons and remove the folder. Safe to call again and from another thread (a
        demo that is stopped closes every split's consortium from its main thread; a run in progress
        then fails at once instead of finishing after the process has said that all is clean)."""
        with self._close_lock:
            self.net = None
            self._stack.close()

    def _check_roles(self, config: Any) -> None:
        """Refuse a run config that needs other column roles than the parties were started with."""
        if config is self.config:
            return
        if list(config.quasi_identifiers) != list(self.config.quasi_identifiers):
            raise InputError(f"a run of this consortium must name its quasi-identifiers "
                             f"{list(self.config.quasi_identifiers)}, not {list(config.quasi_identifiers)}")
        other = [a for a in config.sensitive_attributes if a not in self.config.sensitive_attributes]
        if other:
            raise InputError(f"sensitive attribute(s) {other} are not sensitive at this consortium's parties "
                             f"({list(self.config.sensitive_attributes)})")

    def run(self, rows: list[list[str]], protocol: str, options: dict[str, Any] | None = None,
            on_event: EventCallback | None = None, *, config: Any = None,
            subset: np.ndarray | None = None) -> DaemonRun:
        """Deal `rows`, put each share in its party's data file, run `protocol` once.

        `config`: this run's privacy config (default: the consortium's); `subset`: the rows'
        research-subset flags, for a consortium started with a subset (default: every row)."""
        net = self.net  # None once closed (also by another thread, while this run goes)
        if net is None:
            raise PeerError("this consortium's daemons are not running (used outside its `with` block, or stopped)")
        config = self.config if config is None else config
        self._check_roles(config)
        if self._seed_subset is None:
            if subset is not None:
                raise InputError("this consortium was started without a research subset; a run cannot bring one")
        elif subset is None:
            subset = np.ones(len(rows), dtype=bool)
        shares = deal(self.columns, rows, self.distribution, self.n, self.layout, subset)
        if [list(s.columns) for s in shares] != self._layout:
            raise InputError("a run of this consortium must give every party the same columns as its first")
        for name, share in zip(self.names, shares):
            write_share(self._paths[name], share)
        spec = protocol_spec(protocol)
        if spec.needs_helper and not self.helper:
            raise InputError(f"protocol {spec.name} needs a helper; this consortium has none")
        start = time.perf_counter()
        cfg = net.run_config(protocol, self.distribution, config, self.names[0], options)
        cfg = dataclasses.replace(cfg, parties=[p for p in cfg.parties if p.role in spec.roles])
        outcome = Coordinator(cfg, on_event=on_event).run()
        elapsed = time.perf_counter() - start
        if outcome.output_rows is None or outcome.output_columns is None:
            raise PeerError("the run finished without a result at the recipient")
        report = outcome.report
        report["simulation"] = {"daemons": len(cfg.parties), "transport": "gRPC + mutual TLS on 127.0.0.1",
                                "daemons_reused": True}
        order = [c for c in self.columns if c in outcome.output_columns]
        index = [outcome.output_columns.index(c) for c in order]
        result = [[row[i] for i in index] for row in outcome.output_rows]
        return DaemonRun(order, result, report, elapsed)
