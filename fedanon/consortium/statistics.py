"""Simulated statistics runs: deal a pooled table, let the parties release noisy counts of it.

The library under `fedanon simulate --stats-marginal` (and its tests): the table is dealt
over simulated primaries as for an anonymizing run, but only the columns the requested tables
count travel to the parties, and the run's options carry the `statistics` request
(`dp.statistics`), so that every party runs its protocol's statistics mode
(`protocols/stats/roles.py`). The key holder's release comes back in its report.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedanon.consortium.daemons import share_party
from fedanon.consortium.simulation import HELPER_NAME, party_roles, primary_names, raise_first_error
from fedanon.data.hierarchy import Hierarchy
from fedanon.dp.statistics import StatisticsRequest
from fedanon.errors import InputError, PeerError
from fedanon.kit.atomicfile import write_text_atomic
from fedanon.model.config import AnonymizationConfig
from fedanon.parties import reaper
from fedanon.parties.simulation import SimulatedParty, run_simulation
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.registry import HELPER, STATISTICS_OPTION, statistics_joins, statistics_refusal
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import Share, free_tid_name, split_horizontal


@dataclass
class StatisticsRun:
    """The released statistics (as the key holder assembled them) and the run's report."""

    release: dict[str, Any]
    report: dict[str, Any]
    elapsed_s: float

    @property
    def party_reports(self) -> dict[str, dict[str, Any]]:
        return self.report.get("party_reports", {})


def release_of(party_reports: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """The statistics release in a run's party reports (the key holder's), or None."""
    for report in party_reports.values():
        if isinstance(report.get(STATISTICS_OPTION), dict):
            return report[STATISTICS_OPTION]
    return None


def check_statistics_option(options: dict[str, Any]) -> StatisticsRequest | None:
    """A run file's `[options] statistics`, checked where it enters from the user (None: no such option)."""
    if STATISTICS_OPTION not in options:
        return None
    return StatisticsRequest.from_options(options[STATISTICS_OPTION])


def write_release(outcome: Any, release: dict[str, Any], output: Path | None, report: Path | None) -> None:
    """`fedanon run` of a statistics run: the release as `fedanon stats` writes it to `output`,
    the coordinator's report (which holds it too) to `report`; atomically, folders made."""
    for path, doc in ((output, release), (report, outcome.report)):
        if path is not None:
            Path(path).resolve().parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(Path(path), json.dumps(doc, indent=2, sort_keys=path == report, default=str) + "\n")


def deal_tables_vertically(columns: list[str], rows: list[list[str]], request: StatisticsRequest,
                           parties: int, joins: bool = False) -> list[Share]:
    """A vertical split in which every requested table stays at one party: attributes that some
    table crosses form one group, groups are dealt round-robin, every party gets a shared TID.
    For a protocol that joins (`joins`), every attribute is its own group instead, so that tables
    cross the parties' columns."""
    group = {a: a for a in columns}

    def root(a: str) -> str:
        while group[a] != a:
            a = group[a]
        return a

    for spec in () if joins else request.marginals:
        for other in spec.attributes[1:]:
            group[root(other)] = root(spec.attributes[0])
    groups = list(dict.fromkeys(root(a) for a in columns))
    held: list[list[str]] = [[] for _ in range(parties)]
    for i, g in enumerate(groups):
        held[i % parties].extend(a for a in columns if root(a) == g)
    tid = free_tid_name(columns)
    shares = []
    for attributes in held:
        where = [columns.index(a) for a in attributes]
        shares.append(Share([tid, *attributes], [[str(r + 1), *(row[i] for i in where)] for r, row in enumerate(rows)],
                            tid, None))
    return shares


def simulate_statistics(columns: list[str], rows: list[list[str]], hierarchy_paths: dict[str, Path],
                        request: StatisticsRequest, parties: int, *, protocol: str = "C",
                        distribution: str = "horizontal", split_mode: str = "round-robin",
                        recipient: str | None = None, transport: str = "grpc", progress: bool = False,
                        options: dict[str, Any] | None = None) -> StatisticsRun:
    """Deal the table's counted columns over `parties` primaries (plus the protocol's helper) and
    run the statistics mode: daemons over gRPC and mutual TLS, or threads (`transport="memory"`)."""
    refusal = statistics_refusal(protocol, distribution)
    if refusal:
        raise InputError(refusal)
    if parties < 1:
        raise InputError(f"--parties must be at least 1, got {parties}")
    names = primary_names(parties)
    recipient = recipient or names[0]
    if recipient not in names:
        raise InputError(f"--recipient {recipient!r} is not a primary; the primaries are {', '.join(names)}")
    counted = request.attributes
    missing = [a for a in counted if a not in columns]
    if missing:
        raise InputError(f"--stats-marginal: the table has no column {', '.join(repr(m) for m in missing)}")
    lacking = [a for a in counted if a not in hierarchy_paths]
    if lacking:
        raise InputError(f"--stats-marginal: {', '.join(repr(a) for a in lacking)} has no hierarchy; give --qi "
                         f"NAME=FILE.csv (the cells must come from a hierarchy, not from the data)")
    where = [columns.index(a) for a in counted]
    dealt = [[row[i] for i in where] for row in rows]
    roles = party_roles(names, protocol)
    if distribution == "vertical":
        # without a helper (A) the join needs a third primary to order the counts: with two, keep tables whole
        joins = statistics_joins(protocol) and (HELPER in roles.values() or parties >= 3)
        shares = deal_tables_vertically(counted, dealt, request, parties, joins)
    else:
        shares = split_horizontal(counted, dealt, parties, split_mode)  # type: ignore[arg-type]
    run_options = {**(options or {}), STATISTICS_OPTION: request.to_options()}
    start = time.perf_counter()
    if transport == "memory":
        hierarchies = {a: Hierarchy.read_csv(hierarchy_paths[a], a) for a in counted}
        local: dict[str, Any] = {n: s.local_data(hierarchies) for n, s in zip(names, shares)}
        local.update({n: None for n, r in roles.items() if r == HELPER})
        settings = RunSettings(f"stats-{int(time.time() * 1000)}", protocol, distribution, None,  # type: ignore[arg-type]
                               roles, recipient, run_options)
        run = run_in_memory(settings, local)
        raise_first_error(run.errors)
        report: dict[str, Any] = {"protocol": protocol, "distribution": distribution,
                                  "party_reports": {n: {"role": roles[n], **o.report} for n, o in run.outcomes.items()},
                                  "simulation": {"daemons": 0, "transport": "in-memory (threads, no TLS)"}}
    else:
        config = AnonymizationConfig(counted)  # names the columns whose hierarchies the parties load
        with reaper.guarded_temp_dir("fedanon-stats-") as tmp:
            base = Path(tmp)
            simulated = [share_party(n, s, base / f"{n}.csv", hierarchy_paths, config) for n, s in zip(names, shares)]
            if roles.get(HELPER_NAME) == HELPER:
                simulated.append(SimulatedParty(name=HELPER_NAME, role=HELPER))
            result = run_simulation(simulated, protocol, distribution, None, recipient, run_options,
                                    progress=progress)
        report = result.report
    elapsed = time.perf_counter() - start
    release = release_of(report.get("party_reports", {}))
    if release is None:
        raise PeerError("the run finished without a statistics release at the key holder")
    report.update({"parties_primary": parties, "result_recipient": recipient, "elapsed_s": round(elapsed, 6)})
    return StatisticsRun(release, report, elapsed)
