"""The statistics mode over real daemons: gRPC with mutual TLS on loopback (slow lane).

`fedanon simulate --stats-marginal` (daemons) and `fedanon run` with `[options] statistics`
on a run file: a seeded C run's release minus the primaries' shares is the pooled table's
counts, and a seeded B run releases what the in-process run releases. Tables across several
parties' columns of a vertical split: B and C on their helper's join, A (no helper) on the join
round its ring of primaries -- its release minus the shares is the joined table's counts, and
neither its release, its report nor the coordinator's output holds a party's path or TLS key.
(What each message between the parties holds is checked in process, where the transports record
the bytes the daemons send: `test_protocol_stats_joined.py`.)
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedanon.cli import main
from fedanon.consortium.daemons import share_party
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.registry import read_table
from fedanon.data.table import EncodedTable
from fedanon.dp.marginals import MarginalSpec, contingency
from fedanon.dp.randomness import SeededRandomness
from fedanon.dp.shares import noise_shares, share_generator
from fedanon.dp.statistics import StatisticsRequest
from fedanon.model.config import AnonymizationConfig
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.protocols.sim.split import split_horizontal

from cli_checks import one_line_error
from datasets import ADULT_DIR, hierarchy_path

pytestmark = pytest.mark.slow

COLUMNS = ["sex", "race", "age"]
MARGINALS = ["sex,race", "age:2"]


def _pooled(n: int) -> list[list[str]]:
    return read_table(ADULT_DIR / "adult.csv", ";", "utf-8").select(COLUMNS).rows()[:n]


def _truth(rows, request: StatisticsRequest) -> list[np.ndarray]:
    hierarchies = {c: Hierarchy.read_csv(hierarchy_path("adult", c), c) for c in COLUMNS}
    table = EncodedTable.from_rows(COLUMNS, rows)
    return [np.array([len(rows)])] + [contingency(table, hierarchies, s)[1].reshape(-1) for s in request.marginals]


def _released(release: dict) -> list[np.ndarray]:
    return [np.array([release["total"]["count"]])] + [np.array([c[-1] for c in m["cells"]])
                                                       for m in release["marginals"]]


def _minus_shares(release: dict, request: StatisticsRequest, parties: list[str]) -> list[np.ndarray]:
    out = _released(release)
    for party in parties:
        generator = share_generator(SeededRandomness(request.seed, party))
        out = [v - noise_shares(generator, len(v), request.scale, len(parties)) for v in out]
    return out


def test_fedanon_run_of_a_statistics_run_file(tmp_path, capsys) -> None:
    import tomli_w

    from fedanon.parties.config import run_config_dict

    rows = _pooled(600)
    request = StatisticsRequest(1.0, tuple(MarginalSpec.parse(m) for m in MARGINALS), True, 21)
    names = ["p1", "p2", "p3"]
    paths = {c: hierarchy_path("adult", c) for c in COLUMNS}
    config = AnonymizationConfig(COLUMNS)
    parties = [share_party(n, s, tmp_path / f"{n}.csv", paths, config)
               for n, s in zip(names, split_horizontal(COLUMNS, rows, 3))]
    parties.append(SimulatedParty("helper", "helper"))
    with SimulatedNetwork(parties) as net:  # real daemons, gRPC over mutual TLS on loopback
        cfg = net.run_config("C", options={"statistics": request.to_options()})
        cfg.output, cfg.report = tmp_path / "stats.json", tmp_path / "report.json"
        run_toml = tmp_path / "run.toml"
        run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
        assert "[privacy]" not in run_toml.read_text()  # a statistics run needs no privacy config
        code = main(["run", "--config", str(run_toml), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 0, err
        # a bad request in the run file: one line, before any party is contacted
        bad = run_config_dict(cfg)
        bad["options"] = {"statistics": {"epsilon": -1, "marginals": MARGINALS}}
        bad_toml = tmp_path / "bad.toml"
        bad_toml.write_bytes(tomli_w.dumps(bad).encode())
        assert "--epsilon must be a positive number" in one_line_error(capsys, "run", "--config", bad_toml,
                                                                        "--no-progress")
        assert "--html applies to anonymizing runs" in one_line_error(capsys, "run", "--config", run_toml,
                                                                       "--no-progress", "--html", tmp_path / "x.html")
    release = json.loads((tmp_path / "stats.json").read_text())
    for got, want in zip(_minus_shares(release, request, names), _truth(rows, request)):
        assert np.array_equal(got, want)
    report = json.loads((tmp_path / "report.json").read_text())
    assert set(report["party_reports"]) == {"p1", "p2", "p3", "helper"}
    assert "statistics" not in report["party_reports"]["helper"]


@pytest.mark.parametrize("split", ["horizontal", "vertical"])
def test_simulate_over_daemons_matches_the_in_process_run(tmp_path, capsys, split: str) -> None:
    common = ["simulate", str(ADULT_DIR / "adult.csv"), "--protocol", "B", "--parties", "2", "--seed", "6",
              "--split", split,
              "--epsilon", "0.5", "-q", *(f"--qi={c}={hierarchy_path('adult', c)}" for c in COLUMNS)]
    for m in MARGINALS:
        common += ["--stats-marginal", m]
    assert main([*common, "-o", str(tmp_path / "daemons.json"), "--report", str(tmp_path / "r.json")]) == 0
    assert main([*common, "-o", str(tmp_path / "threads.json"), "--in-memory"]) == 0
    capsys.readouterr()
    daemons = json.loads((tmp_path / "daemons.json").read_text())
    threads = json.loads((tmp_path / "threads.json").read_text())
    assert daemons == threads
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["simulation"]["transport"].startswith("gRPC + mutual TLS")


def test_simulate_a_deals_tables_across_parties_with_three_primaries(tmp_path, capsys) -> None:
    """`simulate --protocol A --split vertical`: with three primaries every attribute goes to its own
    party, so "sex,race" crosses parties and is joined round the ring (daemons = threads, seeded); with
    two -- no primary could order the master's counts -- every table stays at one party."""
    def common(parties: int) -> list[str]:
        out = ["simulate", str(ADULT_DIR / "adult.csv"), "--protocol", "A", "--parties", str(parties), "--seed", "8",
               "--split", "vertical", "--epsilon", "1", "-q", *(f"--qi={c}={hierarchy_path('adult', c)}" for c in COLUMNS)]
        for m in MARGINALS:
            out += ["--stats-marginal", m]
        return out

    assert main([*common(3), "-o", str(tmp_path / "daemons.json")]) == 0
    assert main([*common(3), "-o", str(tmp_path / "threads.json"), "--in-memory"]) == 0
    assert main([*common(2), "-o", str(tmp_path / "two.json"), "--in-memory"]) == 0
    capsys.readouterr()
    daemons = json.loads((tmp_path / "daemons.json").read_text())
    assert daemons == json.loads((tmp_path / "threads.json").read_text())
    assert daemons["protocol"]["joined"]["tables"] == ["sex:0,race:0"]
    two = json.loads((tmp_path / "two.json").read_text())
    assert "joined" not in two["protocol"]
    assert [m["cells"][0][:-1] for m in two["marginals"]] == [m["cells"][0][:-1] for m in daemons["marginals"]]


def test_run_files_count_tables_across_parties_as_fedanon_stats_does(tmp_path, capsys) -> None:
    """A vertical split with one column per party: "sex,race" and "age:2,sex" need a join (B: equal to
    the local release with the helper's stream; C and A: minus the shares, the exact counts)."""
    import tomli_w

    from fedanon.dp.statistics import release_statistics
    from fedanon.parties.config import run_config_dict
    from fedanon.protocols.sim.split import split_vertical

    rows = _pooled(500)
    request = StatisticsRequest(2.0, (MarginalSpec.parse("sex,race"), MarginalSpec.parse("age:2,sex")), True, 17)
    names = ["p1", "p2", "p3"]
    paths = {c: hierarchy_path("adult", c) for c in COLUMNS}
    config = AnonymizationConfig(COLUMNS)
    parties = [share_party(n, s, tmp_path / f"{n}.csv", paths, config)
               for n, s in zip(names, split_vertical(COLUMNS, rows, 3))]
    parties.append(SimulatedParty("helper", "helper"))
    with SimulatedNetwork(parties) as net:  # real daemons, gRPC over mutual TLS on loopback
        cfg = net.run_config("B", distribution="vertical", options={"statistics": request.to_options()})
        cfg.output = tmp_path / "stats.json"
        run_toml = tmp_path / "run.toml"
        run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
        code = main(["run", "--config", str(run_toml), "--no-progress"])
        assert code == 0, capsys.readouterr().err
        # Protocol C joins too, summing encrypted counters: the release minus the primaries' shares
        c_config = net.run_config("C", distribution="vertical", options={"statistics": request.to_options()})
        c_config.output = tmp_path / "stats-c.json"
        c_run = tmp_path / "c-run.toml"
        c_run.write_bytes(tomli_w.dumps(run_config_dict(c_config)).encode())
        assert main(["run", "--config", str(c_run), "--no-progress"]) == 0, capsys.readouterr().err
        c_release = json.loads((tmp_path / "stats-c.json").read_text())
        for got, want in zip(_minus_shares(c_release, request, names), _truth(rows, request)):
            assert np.array_equal(got, want)
        # Protocol A joins round its ring of primaries (no helper): minus the shares, the exact counts
        a_config = net.run_config("A", distribution="vertical", options={"statistics": request.to_options()})
        a_config.parties = [p for p in a_config.parties if p.role == "primary"]  # A has no helper
        a_config.output, a_config.report = tmp_path / "stats-a.json", tmp_path / "report-a.json"
        a_toml = tmp_path / "a.toml"
        a_toml.write_bytes(tomli_w.dumps(run_config_dict(a_config)).encode())
        capsys.readouterr()
        assert main(["run", "--config", str(a_toml), "--no-progress"]) == 0, capsys.readouterr().err
        printed = capsys.readouterr()
        a_release = json.loads((tmp_path / "stats-a.json").read_text())
        for got, want in zip(_minus_shares(a_release, request, names), _truth(rows, request)):
            assert np.array_equal(got, want)
        assert a_release["protocol"]["joined"]["tables"] == ["sex:0,race:0", "age:2,sex:0"]
        assert "ring" in a_release["protocol"]["joined"]["how"]
        exposed = (tmp_path / "stats-a.json").read_text() + (tmp_path / "report-a.json").read_text() \
            + printed.out + printed.err
        party_files = [str(tmp_path / f"{n}.csv") for n in names]
        keys = [net.tls(n).key.read_text().strip().splitlines()[1] for n in names]  # a line of each TLS private key
        assert all(path not in exposed for path in party_files) and str(tmp_path / "p2.csv") in party_files
        assert all(len(line) > 40 and line not in exposed for line in keys)
    release = json.loads((tmp_path / "stats.json").read_text())
    assert release.pop("protocol")["joined"]["tables"] == ["sex:0,race:0", "age:2,sex:0"]
    hierarchies = {c: Hierarchy.read_csv(hierarchy_path("adult", c), c) for c in COLUMNS}
    local = release_statistics(EncodedTable.from_rows(COLUMNS, rows), hierarchies, list(request.marginals),
                               request.epsilon, SeededRandomness(17, "helper"))
    assert {k: v for k, v in release.items() if k in local} == local
