"""What `fedanon demo` shows and leaves behind: live phase lines, the summary table, the files.

The fast tests use the in-memory mode and the 8-row example; the daemon tests (real gRPC over
mutual TLS on 127.0.0.1) are in the slow lane. A demo whose secure result differs from the
centralized one must still end with a non-zero exit status, and say MISMATCH in its table.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from fedanon.cli import main
from fedanon.consortium.daemons import SplitConsortium
from fedanon.consortium.phaselines import PhaseLines
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.delimited import read_table_csv
from fedanon.model.config import AnonymizationConfig
from fedanon.protocols.sim.equivalence import centralized

from cli_checks import drop_first_released_row
from datasets import EXAMPLE_DIR as EXAMPLE

QIS = ("age", "sex", "zipcode")
ROOT = Path(__file__).resolve().parents[1]


def _printed_paths(out: str) -> list[Path]:
    """The lines after the 'wrote N files to' line: one path each."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("wrote "))
    return [Path(line.strip()) for line in lines[start + 1:] if line.strip()]


def test_phase_lines_name_party_phase_and_duration() -> None:
    stream = io.StringIO()
    lines = PhaseLines("B horizontal", stream=stream)
    lines("p2", "encrypt", "start", 0.10)
    lines("helper", "encrypt", "start", 0.20)
    lines("p2", "encrypt", "end", 0.55)
    text = stream.getvalue().splitlines()
    assert re.fullmatch(r"\s+B horizontal\s+p2\s+encrypt\s+\.\.\.", text[0]), text
    assert re.fullmatch(r"\s+B horizontal\s+helper\s+encrypt\s+\.\.\.", text[1]), text
    assert re.fullmatch(r"\s+B horizontal\s+p2\s+encrypt\s+0\.45 s", text[2]), text  # end minus start
    quiet = io.StringIO()
    off = PhaseLines("B horizontal", enabled=False, stream=quiet)
    off("p2", "encrypt", "start", 0.1)
    off("p2", "encrypt", "end", 0.2)
    assert quiet.getvalue() == ""


def test_in_memory_demo_ends_with_a_table_and_the_paths_it_wrote(tmp_path: Path, capsys) -> None:
    out_dir = tmp_path / "demo-out"
    assert main(["demo", "--dataset", "example", "--in-memory", "--parties", "2", "--protocol", "B",
                 "--output-dir", str(out_dir)]) == 0
    out = capsys.readouterr().out
    table = out[out.index("summary"):]
    assert re.search(r"B\s+│\s+horizontal\s+│\s+8\s+│\s+equal", table), table
    assert re.search(r"B\s+│\s+vertical\s+│\s+8\s+│\s+equal", table), table
    paths = _printed_paths(out)
    assert sorted(p.name for p in paths) == ["B-horizontal.csv", "B-horizontal.json", "B-vertical.csv",
                                             "B-vertical.json", "summary.json"]
    for path in paths:
        assert path.is_file() and path.parent == out_dir, path
    # the released table is the run's result: the centralized anonymization of the example
    header, rows = read_table_csv(out_dir / "B-vertical.csv")
    hierarchies = {q: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{q}.csv", q) for q in QIS}
    central = centralized(*read_table_csv(EXAMPLE / "example.csv"), hierarchies,
                          AnonymizationConfig(list(QIS), k=2, metric="nonuniform-entropy"))
    assert header == central.columns and Counter(map(tuple, rows)) == Counter(map(tuple, central.rows))
    summary = json.loads((out_dir / "summary.json").read_text())
    assert [(r["protocol"], r["split"], r["equal_to_centralized"]) for r in summary["runs"]] == [
        ("B", "horizontal", True), ("B", "vertical", True)]
    assert json.loads((out_dir / "B-horizontal.json").read_text())["party_reports"]


def test_default_output_folder_is_fresh_under_the_current_one(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fedanon-demo").mkdir()  # taken: the demo must not write into an old folder
    assert main(["demo", "--dataset", "example", "--in-memory", "--parties", "2", "--protocol", "B",
                 "--split", "horizontal"]) == 0
    paths = _printed_paths(capsys.readouterr().out)
    assert {p.parent for p in paths} == {Path("fedanon-demo-2")}
    assert not any((tmp_path / "fedanon-demo").iterdir())
    assert all((tmp_path / p).is_file() for p in paths)


def test_a_result_that_differs_from_centralized_fails_the_demo(tmp_path: Path, monkeypatch, capsys) -> None:
    """The run's released table loses one row: MISMATCH in the text and the table, exit status 1."""
    drop_first_released_row(monkeypatch)
    assert main(["demo", "--dataset", "example", "--in-memory", "--parties", "2", "--protocol", "B",
                 "--split", "vertical", "--output-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH with the centralized anonymization" in out
    assert re.search(r"B\s+│\s+vertical\s+│\s+8\s+│\s+MISMATCH", out), out
    runs = json.loads((tmp_path / "summary.json").read_text())["runs"]
    assert runs[0]["equal_to_centralized"] is False and runs[0]["problems"]


# ----------------------------------------------------------------------------- over daemons (slow lane)

@pytest.mark.slow
def test_daemon_demo_prints_a_line_per_party_and_phase_and_quiet_silences_them(tmp_path: Path, capsys) -> None:
    assert main(["demo", "--dataset", "example", "--protocol", "B", "--split", "horizontal",
                 "--output-dir", str(tmp_path / "loud")]) == 0
    captured = capsys.readouterr()
    report = json.loads((tmp_path / "loud" / "B-horizontal.json").read_text())
    entered = {party: [phase for phase, seconds in rep["phases"].items() if seconds > 0]
               for party, rep in report["party_reports"].items()}
    assert set(entered) == {"p1", "p2", "p3", "helper"} and "anonymize" in entered["helper"]
    for party, phases in entered.items():
        assert set(phases) >= {"encrypt", "decrypt"}, entered
        for phase in phases:  # a line as each party starts each of its phases, one with its time as it ends
            started = rf"^\s+B horizontal\s+{party}\s+{phase}\s+\.\.\.$"
            ended = rf"^\s+B horizontal\s+{party}\s+{phase}\s+\d+\.\d\d s$"
            assert len(re.findall(started, captured.err, re.M)) == 1, (party, phase, captured.err)
            assert len(re.findall(ended, captured.err, re.M)) == 1, (party, phase, captured.err)
    assert "OK: identical to the centralized anonymization" in captured.out
    assert all(p.is_file() for p in _printed_paths(captured.out))

    assert main(["demo", "--dataset", "example", "--protocol", "B", "--split", "horizontal", "-q",
                 "--output-dir", str(tmp_path / "quiet")]) == 0
    captured = capsys.readouterr()
    assert "B horizontal" not in captured.err and " encrypt " not in captured.err
    assert "OK: identical to the centralized anonymization" in captured.out


@pytest.mark.slow
def test_one_set_of_daemons_serves_runs_on_other_rows() -> None:
    """The second run brings other rows through the same daemons: its result is theirs, not the first's."""
    columns, rows = read_table_csv(EXAMPLE / "example.csv")
    paths = {q: EXAMPLE / f"example_hierarchy_{q}.csv" for q in QIS}
    hierarchies = {q: Hierarchy.read_csv(p, q) for q, p in paths.items()}
    config = AnonymizationConfig(list(QIS), k=2, suppression=0.5, metric="loss")
    fewer = rows[:6]
    with SplitConsortium(columns, "vertical", 2, paths, config, helper=True, seed_rows=rows) as consortium:
        assert consortium.net is not None
        pids = {name: consortium.net.pid(name) for name in ("p1", "p2", "helper")}
        first = consortium.run(rows, "B")
        second = consortium.run(fewer, "C", {"counters": "elgamal"})
        third = consortium.run(rows, "A")  # a protocol without a helper: the helper is left out of its roster
        assert {name: consortium.net.pid(name) for name in pids} == pids  # no daemon restarted
    for run, data in ((first, rows), (second, fewer), (third, rows)):
        expected = centralized(columns, data, hierarchies, config)
        assert run.columns == expected.columns
        assert Counter(map(tuple, run.rows)) == Counter(map(tuple, expected.rows))
    assert len(second.rows) == 6 and "helper" not in third.party_reports


def _wait(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def _daemon_pids(tmp: Path) -> list[int]:
    """Party daemons whose config lies under `tmp` (the killed demo's own)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "party serve" in cmdline and str(tmp) in cmdline:
                pids.append(int(entry.name))
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_demo_killed_while_both_splits_run_leaves_nothing(tmp_path: Path, sig: int) -> None:
    """Both splits' daemons up at once (eight of them): a killed demo stops all and removes every share."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = dict(os.environ, TMPDIR=str(scratch),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-m", "fedanon", "demo", "--dataset", "example", "-q",
                             "-o", str(tmp_path / "out")], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        up = _wait(lambda: len(list(scratch.glob("fedanon-sim-*/*.ready"))) >= 8 or proc.poll() is not None, 120)
        assert up and proc.poll() is None, "the demo ended before both splits' daemons were up"
        daemons = _daemon_pids(scratch)
        assert len(daemons) == 8, daemons
        proc.send_signal(sig)
        proc.wait(30)
        assert proc.returncode != 0
        assert _wait(lambda: not _daemon_pids(scratch), 20), "daemons still running"
        assert _wait(lambda: not list(scratch.glob("fedanon-*")), 20), list(scratch.iterdir())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
