"""Hybrid runs through `fedanon run` between real party daemons: what leaves a party.

The scanner and the run harness of `test_security_leakage_daemons.py` (coordinator requests and
stream events, Ping replies, every other party's logs and files, the result and report), on a
hybrid network: p1 and p3 hold age and diagnosis for disjoint persons, p2 holds the cities of
all but one of them (that person is dropped by the join). Canaries: p2's cities (generalized
away by 2-anonymity), every party's data and config paths, p2's TLS key, and p1's and p3's
person identifiers, which must never leave their holders in any form.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import test_security_leakage_daemons as leakage
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

IDS = [f"pseudonym-7c1e-{i:02d}" for i in range(12)]


@pytest.fixture(scope="module")
def hworld(tmp_path_factory):
    base = tmp_path_factory.mktemp("hleak")
    diagnosis = ["flu", "cold"]
    p1 = leakage._write_share(base / "p1-Ñandú-secret", [(IDS[i], 20 + i, diagnosis[i % 2]) for i in range(6)], {},
                              header=("id", "age", "diagnosis"))
    p3 = leakage._write_share(base / "p3-Ørsted-secret", [(IDS[i], 20 + i, diagnosis[i % 2]) for i in range(6, 12)],
                              {}, header=("id", "age", "diagnosis"))
    cities = leakage.CITIES_P2
    p2 = leakage._write_share(base / "p2-Škoda-secret-⚑", [(IDS[i], cities[i]) for i in range(11)],
                              {c: ("South" if i % 2 else "North") for i, c in enumerate(cities)}, header=("id", "city"))
    with SimulatedNetwork([p1, p2, p3, SimulatedParty("helper", "helper")]) as net:
        yield net, base, {"p1": p1, "p2": p2, "p3": p3}


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["A", "B", "C"])
def test_successful_hybrid_run_leaks_nothing(hworld, tmp_path: Path, monkeypatch, capsys, protocol: str) -> None:
    net, _base, parties = hworld
    code, artifacts = leakage._run(net, tmp_path, monkeypatch, capsys, {}, protocol, "hybrid")
    assert code == 0, [a[2][:2000] for a in artifacts[:2]]
    canaries: dict[str, list[Any]] = leakage._canaries(net, parties)
    canaries["p1"] += IDS[:6]
    canaries["p3"] = [str(parties["p3"].csv_path.parent), str(net.config_paths["p3"]), *IDS[6:]]
    canaries["p2"] += IDS[:11]  # p2 holds them too: only their holders may name them
    found = [leak for leak in leakage._leaks(artifacts, canaries)
             if not any(f"{holder}'s {ident[:30]!r} in {other}'s" in leak  # a shared identifier in its
                        for holder, other in (("p1", "p2"), ("p2", "p1"), ("p3", "p2"), ("p2", "p3"))  # co-holder's
                        for ident in IDS)]  # own files is not a leak
    assert not found, found[:10]
    rows = (tmp_path / "result.csv").read_text(encoding="utf-8").splitlines()
    assert len(rows) == 12 and set(rows[0].split(";")) >= {"age", "city", "diagnosis"}, rows[:2]  # 11 joined persons
    assert not any("pseudonym" in row for row in rows)
