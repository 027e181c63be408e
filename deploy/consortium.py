#!/usr/bin/env python3
"""ADULT over a consortium of network namespaces: every party on its own "host", real links.

    deploy/netns-consortium.sh [--protocol A|B|C] [--split horizontal|vertical] [--rate RATE]
                               [--parties N] [--cut PARTY [--cut-at PHASE]] [--json OUT] OUTDIR
    deploy/netns-consortium.sh --layout LAYOUT.toml [--protocol A|B|C] [...] OUTDIR

Why: every other run puts all parties on 127.0.0.1. Here each primary, the helper (when
the protocol's spec says it needs one) and the coordinator get their own network
namespace and address on a bridge (`netlab.NetLab`), optionally with every link
rate-limited (`--rate 100mbit` = the dissertation's Fast Ethernet, `--rate 10mbit` a slow
WAN). Certificates are issued for those addresses, each daemon is started inside its
namespace (`fedanon party serve`), the coordinator runs `fedanon run` inside its own, and
the result is compared with the centralized anonymization of the pooled data. With
`--layout LAYOUT.toml` (a hybrid layout whose parties hold ADULT's columns by person rules,
docs/protocols/hybrid.md) the layout's parties replace p1..pN, each in its own namespace with
its own data file, and the reference is the centralized anonymization of the joined table. The last
line starts with `OK` when they are equal; exit status 0 (OK), 1 (run failed or result
differs), 2 (bad arguments), 3 (network namespaces unavailable here).

OUTDIR keeps everything for inspection: ca/ (run CA and certificates), <party>.toml,
<party>.csv (a hybrid party's: the identifier column and its columns), run.toml, logs/<party>.log and logs/coordinator.log, result.csv,
report.json. `--cut PARTY` pulls that party's cable (`ip link set ... down` on its bridge
port) when its daemon logs the start of phase `--cut-at` (default encrypt): the run must
then stop everywhere with an error naming it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from netlab import NetLab, NetLabError, parse_rate, unavailable_reason  # noqa: E402

import tomli_w  # noqa: E402

import fedanon  # noqa: E402
from fedanon.model.config import AnonymizationConfig  # noqa: E402
from fedanon.data.io.delimited import read_table_csv, write_table_csv  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.data.layout import Layout, check_against_columns, parse_layout  # noqa: E402
from fedanon.errors import InputError  # noqa: E402
from fedanon.parties.pki import certs# noqa: E402
from fedanon.parties.config import (  # noqa: E402
    DataConfig, Limits, PartyConfig, RunConfig, RunPartyEntry, TlsFiles, party_config_dict, run_config_dict,
)
from fedanon.protocols.sim.equivalence import centralized, differences  # noqa: E402
from fedanon.protocols.sim.hybrid import centralized_joined, split_hybrid  # noqa: E402
from fedanon.protocols.sim.split import split_horizontal, split_vertical  # noqa: E402

DATA = Path(fedanon.__file__).parent / "data" / "adult"
QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
PORT = 50051
COORDINATOR = "coordinator"
HELPER = "helper"
START_TIMEOUT_S = 90.0
EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 1, 2, 3


@dataclass(frozen=True)
class Topology:
    """What the protocol's registry spec says about the parties a run needs."""

    protocol: str
    needs_helper: bool
    phases: tuple[str, ...]


def topology(protocol: str) -> Topology:
    """Read the protocol spec from the registry (whether a helper is needed, the phases)."""
    from fedanon.protocols import registry

    spec_of = getattr(registry, "protocol_spec", None)
    if spec_of is not None:
        spec = spec_of(protocol)
        return Topology(spec.name, bool(spec.needs_helper), tuple(spec.phases))
    # Registries without specs only know B (and the connectivity check), which both use a helper.
    if protocol.upper() not in registry.available_protocols():
        raise ValueError(f"unknown protocol {protocol!r}; available: {', '.join(registry.available_protocols())}")
    return Topology(protocol.upper(), True, ("encrypt", "integrate", "anonymize", "decrypt"))


def anonymizing_protocols() -> list[str]:
    """Protocols this harness can run (those that anonymize; CHECK only proves connectivity)."""
    from fedanon.protocols import registry

    try:
        return list(registry.available_protocols(anonymizing=True))
    except TypeError:
        return [p for p in registry.available_protocols() if p != "CHECK"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="netns-consortium.sh", description=__doc__.split("\n\n")[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir", type=Path, metavar="OUTDIR", help="working directory (created; kept afterwards)")
    p.add_argument("--protocol", default="B", type=str.upper, help="A, B or C (default B)")
    p.add_argument("--split", default=None, choices=["horizontal", "vertical", "hybrid"],
                   help="default horizontal; hybrid (the default with --layout) needs --layout")
    p.add_argument("--layout", type=Path, default=None, metavar="LAYOUT.toml",
                   help="a hybrid layout of ADULT's columns (person rules; its parties replace --parties), "
                        "e.g. fedanon/data/adult/layout-2-1.toml")
    p.add_argument("--rate", default=None, help="shape every link, e.g. 100mbit or 10mbit (default: unshaped)")
    p.add_argument("--parties", type=int, default=3, help="number of primaries (default 3)")
    p.add_argument("--k", type=int, default=5, help="k-anonymity (default 5)")
    p.add_argument("--suppression", type=float, default=0.02, help="suppression limit (default 0.02)")
    p.add_argument("--metric", default="loss", help="information-loss metric (default loss)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="run option for the protocol, repeatable (e.g. counters=elgamal for Protocol C)")
    p.add_argument("--cut", metavar="PARTY", help="pull this party's cable mid-run (failure test)")
    p.add_argument("--cut-at", default="encrypt", metavar="PHASE", help="phase whose start triggers --cut")
    p.add_argument("--timeout", type=float, default=300.0, help="give up on the run after this many seconds")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the figures of this run as JSON")
    p.add_argument("--quiet", action="store_true", help="no phase table")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- preparation

def party_names(parties: int, needs_helper: bool, layout: Layout | None = None) -> list[str]:
    primaries = list(layout.names) if layout is not None else [f"p{i + 1}" for i in range(parties)]
    return primaries + ([HELPER] if needs_helper else [])


def load_layout(path: Path) -> Layout:
    """The layout of a hybrid run, checked against ADULT before any namespace is made. Its parties
    must hold ADULT's rows by person rules: with files of their own there is no pooled table here
    to compare the result with."""
    layout = parse_layout(path)
    if HELPER in layout.names or COORDINATOR in layout.names:
        raise InputError(f"{path}: a party may not be called {HELPER!r} or {COORDINATOR!r} here")
    columns, rows = read_table_csv(DATA / "adult.csv")
    unknown = [c for c in layout.columns if c not in columns]
    if unknown:
        raise layout.fail("columns", unknown[0], f"ADULT has no column {unknown[0]!r} (it has {', '.join(columns)})")
    check_against_columns(layout, [c for c in columns if c in set(layout.columns)], len(rows))
    return layout


def write_shares(outdir: Path, split: str, parties: int,
                 layout: Layout | None = None) -> tuple[list[str], list[list[str]], dict[str, DataConfig]]:
    """Deal ADULT over the primaries (hybrid: its layout columns over the layout's parties), write one
    CSV each; returns the pooled table and data sections."""
    columns, rows = read_table_csv(DATA / "adult.csv")
    if split == "hybrid":
        assert layout is not None
        keep = [i for i, c in enumerate(columns) if c in set(layout.columns)]
        columns, rows = [columns[i] for i in keep], [[r[i] for i in keep] for r in rows]
        shares = split_hybrid(columns, rows, layout)  # checks the layout against the columns first
    elif split == "horizontal":
        shares = split_horizontal(columns, rows, parties)
    else:
        shares = split_vertical(columns, rows, parties)
    data: dict[str, DataConfig] = {}
    for name, share in zip(party_names(parties, False, layout), shares):
        path = outdir / f"{name}.csv"
        write_table_csv(path, share.columns, share.rows)
        held = [c for c in share.columns if c != share.tid_column]
        data[name] = DataConfig(
            csv=path.resolve(),
            quasi_identifiers={c: (DATA / f"adult_hierarchy_{c}.csv") for c in held if c in QIS},
            sensitive={c: None for c in held if c not in QIS},  # travels encrypted, comes back unchanged
            tid_column=share.tid_column,
        )
    return columns, rows, data


def run_options(pairs: list[str]) -> dict[str, object]:
    """`--option KEY=VALUE` pairs as run options (numbers become numbers)."""
    options: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"netns-consortium.sh: --option needs KEY=VALUE, got {pair[:80]!r}")
        try:
            options[key] = float(value) if any(ch in value for ch in ".e") else int(value)
        except ValueError:
            options[key] = value
    return options


def write_configs(lab: NetLab, outdir: Path, names: list[str], data: dict[str, DataConfig],
                  protocol: str, split: str, config: AnonymizationConfig, limits: Limits,
                  options: dict[str, object] | None = None) -> Path:
    """Run CA, one certificate per party for its namespace address, party configs and run.toml."""
    ca = outdir / "ca"
    certs.init_ca(ca, force=True)
    address = {n: f"{lab.hosts[n].address}:{PORT}" for n in names}
    for name in names:
        certs.issue(ca, name, hosts=[lab.hosts[name].address])
    certs.issue(ca, COORDINATOR)

    def tls(name: str) -> TlsFiles:
        return TlsFiles(cert=(ca / f"{name}.crt").resolve(), key=(ca / f"{name}.key").resolve(),
                        ca=(ca / certs.CA_CERT).resolve())

    for name in names:
        cfg = PartyConfig(name=name, listen=address[name], tls=tls(name),
                          peers={o: address[o] for o in names if o != name}, coordinators=[COORDINATOR],
                          data=data.get(name), limits=limits)
        (outdir / f"{name}.toml").write_bytes(tomli_w.dumps(party_config_dict(cfg)).encode())
    run = RunConfig(coordinator=COORDINATOR, tls=tls(COORDINATOR), protocol=protocol, distribution=split,
                    parties=[RunPartyEntry(n, address[n], HELPER if n == HELPER else "primary") for n in names],
                    result_recipient=names[0], privacy=config.to_dict(), options=dict(options or {}),
                    output=(outdir / "result.csv").resolve(), report=(outdir / "report.json").resolve(),
                    limits=limits)
    path = outdir / "run.toml"
    path.write_bytes(tomli_w.dumps(run_config_dict(run)).encode())
    return path


# ----------------------------------------------------------------------------- running

def start_daemons(lab: NetLab, outdir: Path, names: list[str]) -> None:
    logs = outdir / "logs"
    logs.mkdir(exist_ok=True)
    for name in names:
        ready = outdir / f"{name}.ready"
        ready.unlink(missing_ok=True)
        with open(logs / f"{name}.log", "wb") as log:
            lab.popen(name, [sys.executable, "-m", "fedanon", "party", "serve", "--config",
                             str((outdir / f"{name}.toml").resolve()), "--ready-file", str(ready.resolve())],
                      stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    waiting = set(names)
    while waiting:
        for name in sorted(waiting):
            if (outdir / f"{name}.ready").exists():
                waiting.discard(name)
            elif lab.hosts[name].procs[-1].poll() is not None:
                raise RuntimeError(f"daemon {name!r} exited during start-up: {log_tail(logs / f'{name}.log')}")
        if waiting and time.monotonic() > deadline:
            raise RuntimeError(f"daemons {sorted(waiting)} not ready after {START_TIMEOUT_S:.0f} s")
        time.sleep(0.05)


def log_tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def phase_started(log: Path, phase: str) -> bool:
    """Has the daemon logged the start of `phase` (its `event=phase ... phase=X state=start` line)?"""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return False
    return re.search(rf"event=phase\b.*\bphase={re.escape(phase)}\b.*\bstate=start\b", text) is not None


@dataclass
class CoordinatorRun:
    returncode: int
    error: str
    cut_after_s: float | None
    stopped_after_s: float


def run_coordinator(lab: NetLab, outdir: Path, run_toml: Path, timeout: float,
                    cut: str | None, cut_at: str) -> CoordinatorRun:
    """`fedanon run` inside the coordinator's namespace; pulls `cut`'s cable when it starts `cut_at`."""
    log_path = outdir / "logs" / "coordinator.log"
    t0 = time.monotonic()
    cut_after: float | None = None
    with open(log_path, "wb") as log:
        proc = lab.popen(COORDINATOR, [sys.executable, "-m", "fedanon", "run", "--config", str(run_toml.resolve()),
                                       "--no-progress"], stdout=log, stderr=subprocess.STDOUT)
        while proc.poll() is None:
            if time.monotonic() - t0 > timeout:
                proc.kill()
                proc.wait()
                return CoordinatorRun(124, f"run did not finish within {timeout:.0f} s", cut_after,
                                      time.monotonic() - t0)
            if cut is not None and cut_after is None and phase_started(outdir / "logs" / f"{cut}.log", cut_at):
                lab.cut(cut)
                cut_after = time.monotonic() - t0
            time.sleep(0.02)
    text = log_path.read_text(errors="replace")
    error = next((line for line in reversed(text.splitlines()) if "error" in line), "")
    return CoordinatorRun(proc.returncode, error, cut_after, time.monotonic() - t0)


def wait_stopped(outdir: Path, names: list[str], timeout: float) -> dict[str, str]:
    """Per party, its `run_failed` log line once it has one (waits up to `timeout` for all)."""
    deadline = time.monotonic() + timeout
    found: dict[str, str] = {}
    while True:
        for name in names:
            if name not in found:
                text = (outdir / "logs" / f"{name}.log").read_text(errors="replace")
                line = next((ln for ln in text.splitlines() if "event=run_failed" in ln), None)
                if line is not None:
                    found[name] = line
        if len(found) == len(names) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# ----------------------------------------------------------------------------- reporting

def figures(report: dict[str, Any], phases: tuple[str, ...], recipient: str) -> dict[str, Any]:
    """Seconds per phase at the recipient and helper; payload and wire bytes sent by all parties per phase."""
    parties = report.get("party_reports", {})
    sent = {p: 0 for p in phases}
    wire = {p: 0 for p in phases}
    for rep in parties.values():
        traffic = rep.get("traffic", {})
        for phase, n in traffic.get("bytes_sent_by_phase", {}).items():
            sent[phase] = sent.get(phase, 0) + int(n)
        for phase, n in traffic.get("wire_bytes_sent_by_phase", {}).items():
            wire[phase] = wire.get(phase, 0) + int(n)
    rec = parties.get(recipient, {}).get("phases", {})
    helper = next((r for r in parties.values() if r.get("role") == HELPER), {})
    helper_phases = helper.get("phases", {})
    total = float(sum(rec.get(p, 0.0) for p in phases))
    # §4.6.4's pre+post: everything but the engine run, wherever it ran (helper, or A's master = recipient)
    engine_s = float((helper_phases if helper else rec).get("anonymize", 0.0))
    return {
        "recipient_s": {p: float(rec.get(p, 0.0)) for p in phases},
        "helper_s": {p: float(helper_phases.get(p, 0.0)) for p in phases} if helper else None,
        "bytes_sent": sent, "wire_bytes_sent": wire,
        "recipient_total_s": total,
        "pre_post_s": total - engine_s,
        "coordinator_elapsed_s": float(report.get("elapsed_s", 0.0)),
    }


def print_table(fig: dict[str, Any], phases: tuple[str, ...], title: str) -> None:
    print(title)
    print(f"  {'phase':<11}{'recipient s':>12}{'helper s':>10}{'payload kB':>12}{'wire kB':>10}")
    for p in phases:
        helper = f"{fig['helper_s'][p]:.3f}" if fig["helper_s"] else "-"
        print(f"  {p:<11}{fig['recipient_s'][p]:>12.3f}{helper:>10}{fig['bytes_sent'][p] / 1000:>12.1f}"
              f"{fig['wire_bytes_sent'][p] / 1000:>10.1f}")
    print(f"  {'total':<11}{fig['recipient_total_s']:>12.3f}{'':>10}{sum(fig['bytes_sent'].values()) / 1000:>12.1f}"
          f"{sum(fig['wire_bytes_sent'].values()) / 1000:>10.1f}")
    print(f"  pre+post (recipient total minus the anonymize phase of the party running the engine): "
          f"{fig['pre_post_s']:.3f} s")


def fail(message: str, code: int = EXIT_FAILED) -> int:
    print(f"netns-consortium: error: {message}", file=sys.stderr)
    print(f"FAILED: {message}")
    return code


# ----------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        topo = topology(args.protocol)
    except Exception as exc:  # noqa: BLE001 - the registry's own message names the protocol
        return fail(str(exc), EXIT_USAGE)
    if topo.protocol not in anonymizing_protocols():
        return fail(f"protocol {topo.protocol} does not anonymize; use one of {', '.join(anonymizing_protocols())}",
                    EXIT_USAGE)
    try:
        rate = parse_rate(args.rate) if args.rate else None
    except ValueError as exc:
        return fail(str(exc), EXIT_USAGE)
    if args.parties < 2:
        return fail(f"--parties must be at least 2, got {args.parties}", EXIT_USAGE)
    layout = None
    if args.layout is not None:
        if args.split not in (None, "hybrid"):
            return fail(f"--layout runs a hybrid split, not --split {args.split}", EXIT_USAGE)
        args.split = "hybrid"
        try:
            layout = load_layout(args.layout)
        except InputError as exc:
            return fail(str(exc), EXIT_USAGE)
    elif args.split == "hybrid":
        return fail("--split hybrid needs --layout LAYOUT.toml", EXIT_USAGE)
    args.split = args.split or "horizontal"
    names = party_names(args.parties, topo.needs_helper, layout)
    primaries = [n for n in names if n != HELPER]
    if args.cut is not None and args.cut not in names:
        return fail(f"--cut {args.cut!r} is not a party of this run ({', '.join(names)})", EXIT_USAGE)
    reason = unavailable_reason()
    if reason is not None:
        return fail(f"network namespaces are unavailable here: {reason}", EXIT_UNAVAILABLE)

    outdir: Path = args.outdir
    outdir.mkdir(parents=True, exist_ok=True)
    try:
        columns, rows, data = write_shares(outdir, args.split, args.parties, layout)
    except InputError as exc:
        return fail(str(exc), EXIT_USAGE)
    qis = [q for q in QIS if q in columns]
    config = AnonymizationConfig(qis, k=args.k, suppression=args.suppression, metric=args.metric)
    limits = Limits()
    try:
        with NetLab() as lab:
            for name in names + [COORDINATOR]:
                lab.add_host(name)
            if rate is not None:
                lab.shape(rate)
            run_toml = write_configs(lab, outdir, names, data, topo.protocol, args.split, config, limits,
                                     run_options(args.option))
            where = ", ".join(f"{n}={lab.hosts[n].address}" for n in names + [COORDINATOR])
            print(f"consortium {lab.tag}: protocol {topo.protocol}, {args.split}"
                  f"{f' ({args.layout.name})' if layout is not None else ''}, {len(primaries)} primaries"
                  f"{' + helper' if topo.needs_helper else ''}, links {args.rate or 'unshaped'}; {where}")
            start_daemons(lab, outdir, names)
            run = run_coordinator(lab, outdir, run_toml, args.timeout, args.cut, args.cut_at)
            stopped = wait_stopped(outdir, [n for n in names if n != args.cut], 30.0) if run.returncode else {}
    except (NetLabError, RuntimeError, OSError) as exc:
        return fail(str(exc))
    if args.cut is not None:
        return report_cut(args, run, stopped, names)
    if run.returncode != 0:
        return fail(f"the run failed (coordinator exit {run.returncode}): {run.error}")

    report = json.loads((outdir / "report.json").read_text())
    out_columns, out_rows = read_table_csv(outdir / "result.csv")
    hierarchies = {q: Hierarchy.read_csv(DATA / f"adult_hierarchy_{q}.csv", q) for q in qis}
    # hybrid: the persons every column group holds, as a trusted party holding all files would join them
    central = centralized_joined(columns, rows, layout, hierarchies, config) if layout is not None else \
        centralized(columns, rows, hierarchies, config)
    transformation = next((r.get("transformation") for r in report.get("party_reports", {}).values()
                           if r.get("transformation")), None)
    problems = differences(central, transformation, out_columns, out_rows)
    fig = figures(report, topo.phases, names[0])
    if not args.quiet:
        print_table(fig, topo.phases, f"time and bytes per phase ({topo.protocol}, {args.split}, "
                                      f"{args.rate or 'unshaped'}; payload/wire bytes sent by all parties)")
    if args.json:
        args.json.write_text(json.dumps({
            "protocol": topo.protocol, "split": args.split, "rate": args.rate, "primaries": len(primaries),
            "layout": str(args.layout) if layout is not None else None,
            "helper": topo.needs_helper, "rows": len(rows), "equal_to_centralized": not problems,
            "transformation": transformation, "machine": platform.node(), "load": os.getloadavg(), **fig,
        }, indent=2) + "\n")
    if problems:
        print("MISMATCH: " + "; ".join(problems))
        return EXIT_FAILED
    print(f"OK: protocol {topo.protocol} ({args.split}, {args.rate or 'unshaped'}) across {len(names) + 1} "
          f"namespaces equals the centralized anonymization"
          f"{' of the joined table' if layout is not None else ''} ({len(out_rows)} rows, transformation "
          f"{transformation})")
    return 0


def report_cut(args: argparse.Namespace, run: CoordinatorRun, stopped: dict[str, str], names: list[str]) -> int:
    """With --cut, success means: the run failed, the coordinator's error and every other party name it."""
    if run.cut_after_s is None:
        return fail(f"party {args.cut!r} never started phase {args.cut_at!r}, so its link was not cut")
    print(f"cut {args.cut}'s link {run.cut_after_s:.2f} s into the run; coordinator stopped after "
          f"{run.stopped_after_s:.2f} s with exit {run.returncode}: {run.error}")
    for name in names:
        if name != args.cut:
            print(f"  {name}: {stopped.get(name, '(no run_failed line)')}")
    if run.returncode == 0:
        return fail("the run succeeded although a party's link was cut")
    missing = [n for n in names if n != args.cut and n not in stopped]
    if missing:
        return fail(f"parties {missing} did not stop the run")
    if f"'{args.cut}'" not in run.error:
        return fail(f"the coordinator's error does not name party {args.cut!r}")
    print(f"OK: cutting {args.cut}'s link stopped the run everywhere; the coordinator names it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
