"""Tables across several parties' columns of a vertical split in the statistics mode (in-process parties).

* B, seeded: the release equals `fedanon stats`'s (`release_statistics`) on the joined table when
  the local release draws from the helper's stream -- with tables across two and three parties,
  next to a table one party holds, whoever is the key holder.
* What every party receives holds no value, no hierarchy path, no key of the key holder and not
  the join key; the helper receives cell labels relabelled by a secret permutation, never the
  canonical ones, and never the parties' cells or the join key.
* C, seeded: the release minus every primary's seeded noise shares is exactly the joined table's
  counts; the helper sums encrypted counters over rows padded with pseudotuples, so the numbers of
  rows it groups are not the counts.
* A (no helper), seeded: the release minus every primary's shares is exactly the joined table's
  counts, whoever is the key holder; the parts travel round the ring of primaries, so no message
  holds a value, a path, a Paillier or commutative key, or a cell label or identifier that is not
  encrypted under some other party's commutative key; the master receives encrypted rows, the
  permuter the master's per-cell ciphertexts and the labels, never rows. With two primaries A refuses
  a joined table (no third party can put the counts into order).
* The pieces: the permutations are bijections that depend on the key, ciphertexts folded into a
  packed vector land in their slots, and the helper refuses labels or identifiers that do not fit.
"""

from __future__ import annotations

import types
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fedanon.crypto.commutative import EcCipher
from fedanon.crypto.paillier import PaillierPrivateKey, generate_paillier_keypair
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.registry import read_table
from fedanon.data.table import EncodedTable
from fedanon.dp.marginals import MarginalSpec, cell_keys, contingency, level_domain
from fedanon.dp.randomness import SeededRandomness
from fedanon.dp.shares import noise_shares, share_generator
from fedanon.dp.statistics import StatisticsRequest, release_statistics
from fedanon.errors import FedanonError
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import split_vertical
from fedanon.protocols.stats import roles as stats_roles
from fedanon.protocols.stats.joined import (JoinPlan, canonical_positions, count_joined, labelled_rows,
                                            part_permutation)
from fedanon.protocols.a.protocol import ColumnKeys, OpCounter, hash_input
from fedanon.protocols.stats.ring import TID_NAME, cell_inputs, own_share
from fedanon.protocols.stats.vectors import decrypt_vector, encrypt_vector, fold_ciphertexts

from datasets import ADULT_DIR, hierarchy_path

COLUMNS = ["age", "sex", "race"]  # split_vertical: age at p1, sex at p2, race at p3
ROWS = 700
ROLES = {"p1": "primary", "p2": "primary", "p3": "primary", "helper": "helper"}


@pytest.fixture(scope="module")
def pooled() -> tuple[list[list[str]], dict[str, Hierarchy]]:
    rows = read_table(ADULT_DIR / "adult.csv", ";", "utf-8").select(COLUMNS).rows()[:ROWS]
    return rows, {c: Hierarchy.read_csv(hierarchy_path("adult", c), c) for c in COLUMNS}


def _request(seed: int | None) -> StatisticsRequest:
    # across p2 and p3; one party's table; across all three, attributes interleaved
    return StatisticsRequest(1.0, (MarginalSpec.parse("sex,race"), MarginalSpec.parse("age:1"),
                                   MarginalSpec.parse("race:1,age:2,sex")), True, seed)


def _run(protocol: str, request: StatisticsRequest, rows, hierarchies, recipient: str = "p1", record: bool = False):
    shares = split_vertical(COLUMNS, rows, 3)
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    roles = {p: r for p, r in ROLES.items() if protocol != "A" or r == "primary"}
    settings = RunSettings(f"join-{protocol}", protocol, "vertical", None, roles, recipient,  # type: ignore[arg-type]
                           {"statistics": request.to_options()})
    return run_in_memory(settings, {**local, **({"helper": None} if "helper" in roles else {})}, record=record,
                         timeout_s=300)


@pytest.mark.parametrize("recipient", ["p1", "p3"])
def test_b_joined_release_is_the_local_release_of_the_joined_table(pooled, recipient: str) -> None:
    rows, hierarchies = pooled
    request = _request(seed=31)
    run = _run("B", request, rows, hierarchies, recipient)
    assert not run.errors, run.errors
    release = dict(run.outcomes[recipient].report["statistics"])
    protocol = release.pop("protocol")
    local = release_statistics(EncodedTable.from_rows(COLUMNS, rows), hierarchies, list(request.marginals),
                               request.epsilon, SeededRandomness(31, "helper"))
    assert release == local
    assert protocol["joined"]["tables"] == ["sex:0,race:0", "race:1,age:2,sex:0"]
    assert f"'{'p2' if recipient == 'p1' else 'p1'}'" in protocol["joined"]["how"]  # the permuter is no key holder
    assert all("statistics" not in run.outcomes[p].report for p in ROLES if p != recipient)


def _planted_canary(pooled, tmp_path) -> tuple[list[list[str]], dict[str, Hierarchy], str, Path]:
    """The pooled rows with a canary race value in one row, and hierarchies whose race hierarchy
    knows the canary and was read from a path under a folder no message may name."""
    rows, hierarchies = pooled
    canary = "CANARY-RACE-5e7b"
    path = tmp_path / "secret-folder" / "race.csv"
    race = hierarchies["race"]
    planted = {**hierarchies, "race": Hierarchy.from_rows("race", [*race.rows, [canary.encode(), *race.rows[0][1:]]],
                                                          str(path))}
    rows = [list(r) for r in rows]
    rows[3][COLUMNS.index("race")] = canary
    return rows, planted, canary, path


@pytest.mark.parametrize("protocol", ["B", "C"])
def test_joined_messages_hold_no_value_key_or_canonical_label(pooled, monkeypatch, tmp_path, protocol: str) -> None:
    rows, planted, canary, path = _planted_canary(pooled, tmp_path)
    paillier: list[PaillierPrivateKey] = []
    join_keys: list[bytes] = []
    real_keypair, real_urandom = stats_roles.generate_paillier_keypair, stats_roles.os.urandom

    def keep_keypair(*a, **k):
        paillier.append(real_keypair(*a, **k))
        return paillier[-1]

    def keep_urandom(n: int) -> bytes:
        join_keys.append(real_urandom(n))
        return join_keys[-1]

    monkeypatch.setattr(stats_roles, "generate_paillier_keypair", keep_keypair)
    monkeypatch.setattr(stats_roles, "os", types.SimpleNamespace(urandom=keep_urandom))
    base = _request(seed=None)
    request = StatisticsRequest(base.epsilon, (*base.marginals, MarginalSpec.parse("age,sex")), True, None)
    run = _run(protocol, request, rows, planted, record=True)
    assert not run.errors, run.errors
    assert len(paillier) == 1 and len(join_keys) == 1
    factors = [int(f).to_bytes((int(f).bit_length() + 7) // 8, "big") for f in (paillier[0].p, paillier[0].q)]
    values = [canary, "Female", "White", "Amer-Indian-Eskimo", "Asian-Pac-Islander"]
    cell_values = [*(v.encode() for v in values), *(v.encode().hex().encode() for v in values)]
    secrets = [str(path).encode(), b"secret-folder", *factors, join_keys[0]]
    topics: dict[str, set[str]] = {}
    for party, transport in run.transports.items():
        for _sender, topic, payload in transport.recorded:
            topics.setdefault(party, set()).add(topic)
            # only the key holder receives cells (of the tables and parts the others hold): the release names them
            checked = secrets if (topic == "s/cells" and party == "p1") else secrets + cell_values
            if topic == "s/join-key" and party != "helper":  # the primaries share it, straight from the key holder
                checked = [n for n in checked if n != join_keys[0]]
            for needle in checked:
                assert needle not in payload, (party, topic, needle[:20])
    assert any(v in payload for _s, t, payload in run.transports["p1"].recorded if t == "s/cells"
               for v in cell_values)  # positive control of the search
    assert {"s/rows", "s/counts", "s/key"} <= topics["helper"]
    assert not {"s/cells", "s/join-key"} & topics["helper"]
    assert "s/join-key" in topics["p2"] and "s/joined" in topics["p2"]  # the permuter
    # the helper gets p1's age part of "age,sex" relabelled by σ (keyed by the join key), not its canonical cells
    sent = [payload for sender, topic, payload in run.transports["helper"].recorded
            if topic == "s/rows" and sender == "p1"]
    assert len(sent) == 1
    labels = np.frombuffer(codec.unpack_message(sent[0], "rows")["labels/4"], dtype=">u4").astype(np.int64)
    ages = EncodedTable.from_rows(["age"], [[r[COLUMNS.index("age")]] for r in rows])
    canonical = cell_keys(ages, planted, MarginalSpec.parse("age"))[1]
    sigma = part_permutation(join_keys[0], f"join-{protocol}", 4, 0, len(level_domain(planted["age"], 0)))
    if protocol == "B":
        assert sorted(labels.tolist()) == sorted(sigma[canonical].tolist())
    else:  # C adds pseudotuples whose labels are copies of real rows' labels
        assert len(labels) == ROWS + ROWS // 4
        assert not Counter(sigma[canonical].tolist()) - Counter(labels.tolist())
        assert set(labels.tolist()) == set(sigma[canonical].tolist())
        assert Counter(canonical.tolist()) - Counter(labels.tolist())  # not the canonical cells plus copies
    assert sorted(labels.tolist()) != sorted(canonical.tolist())
    release = run.outcomes["p1"].report["statistics"]  # positive control: the release names the planted value
    assert any(canary in cell for m in release["marginals"] for cell in m["cells"])


def test_c_joined_release_minus_the_shares_is_the_joined_tables_counts(pooled) -> None:
    rows, hierarchies = pooled
    request = _request(seed=23)
    run = _run("C", request, rows, hierarchies, "p2", record=True)
    assert not run.errors, run.errors
    release = run.outcomes["p2"].report["statistics"]
    table = EncodedTable.from_rows(COLUMNS, rows)
    truth = [[len(rows)]] + [contingency(table, hierarchies, spec)[1].reshape(-1).tolist() for spec in request.marginals]
    released = [np.array([release["total"]["count"]])] + [np.array([c[-1] for c in m["cells"]])
                                                           for m in release["marginals"]]
    for party in ("p1", "p2", "p3"):
        generator = share_generator(SeededRandomness(23, party))
        released = [r - noise_shares(generator, len(r), request.scale, 3) for r in released]
    assert [r.tolist() for r in released] == truth
    assert "counters" in release["protocol"]["joined"]["how"] and "'p1'" in release["protocol"]["joined"]["how"]
    # the helper groups real rows and pseudotuples (a quarter more), with one encrypted counter each
    from fedanon.protocols.kit import codec as wire
    sent = {sender: wire.unpack_message(payload, "rows") for sender, topic, payload
            in run.transports["helper"].recorded if topic == "s/rows"}
    assert set(sent) == {"p1", "p2", "p3"}
    assert all(len(parts["tids"]) == 16 * (ROWS + ROWS // 4) for parts in sent.values())
    counter_parties = [p for p, parts in sent.items() if "counters" in parts]
    assert counter_parties == ["p2"]  # the first part holder: the parts are ordered by the first attribute


def _minus_shares(release: dict, request: StatisticsRequest, seed: int, parties: list[str]) -> list[list[int]]:
    released = [np.array([release["total"]["count"]])] + [np.array([c[-1] for c in m["cells"]])
                                                           for m in release["marginals"]]
    for party in parties:
        generator = share_generator(SeededRandomness(seed, party))
        released = [r - noise_shares(generator, len(r), request.scale, len(parties)) for r in released]
    return [r.tolist() for r in released]


@pytest.mark.parametrize("recipient, master, permuter", [("p1", "p2", "p3"), ("p3", "p1", "p2")])
def test_a_joined_release_minus_the_shares_is_the_joined_tables_counts(pooled, recipient, master, permuter) -> None:
    rows, hierarchies = pooled
    request = _request(seed=41)
    run = _run("A", request, rows, hierarchies, recipient)
    assert not run.errors, run.errors
    release = run.outcomes[recipient].report["statistics"]
    table = EncodedTable.from_rows(COLUMNS, rows)
    truth = [[len(rows)]] + [contingency(table, hierarchies, spec)[1].reshape(-1).tolist() for spec in request.marginals]
    assert _minus_shares(release, request, 41, ["p1", "p2", "p3"]) == truth
    # a wrong seed (other shares) does not give the counts: the check can fail
    assert _minus_shares(release, request, 42, ["p1", "p2", "p3"]) != truth
    joined = release["protocol"]["joined"]
    assert joined["tables"] == ["sex:0,race:0", "race:1,age:2,sex:0"]
    assert f"master {master!r}" in joined["how"] and f"primary {permuter!r}" in joined["how"]
    assert release["protocol"]["aggregator"] == master
    assert all("statistics" not in run.outcomes[p].report for p in ("p1", "p2", "p3") if p != recipient)


def test_a_joined_messages_hold_no_value_key_or_plain_label(pooled, monkeypatch, tmp_path) -> None:
    rows, planted, canary, path = _planted_canary(pooled, tmp_path)
    paillier: list[PaillierPrivateKey] = []
    commutative: list[bytes] = []
    real_keypair = stats_roles.generate_paillier_keypair

    def keep_keypair(*a, **k):
        paillier.append(real_keypair(*a, **k))
        return paillier[-1]

    class KeptKeys(ColumnKeys):
        def __init__(self, *a, **k) -> None:
            super().__init__(*a, **k)
            commutative.extend(key.to_bytes() for key in self.keys.values())

    monkeypatch.setattr(stats_roles, "generate_paillier_keypair", keep_keypair)
    monkeypatch.setattr(stats_roles, "ColumnKeys", KeptKeys)
    request = _request(seed=None)
    run = _run("A", request, rows, planted, record=True)
    assert not run.errors, run.errors
    assert len(paillier) == 1 and len(commutative) == 3 * 6  # 3 parties x (2 + 3 parts + identifiers)
    factors = [int(f).to_bytes((int(f).bit_length() + 7) // 8, "big") for f in (paillier[0].p, paillier[0].q)]
    values = [canary, "Female", "White", "Amer-Indian-Eskimo", "Asian-Pac-Islander"]
    cell_values = [*(v.encode() for v in values), *(v.encode().hex().encode() for v in values)]
    # every label and identifier as hashed into the group, before any party's layer
    def size(attribute: str, level: int) -> int:
        return len(level_domain(planted[attribute], level))

    # segment 1: sex (p2), race (p3); segment 3: race:1 (p3), age:2 (p1), sex (p2) -- parts by first attribute
    plan_columns = {"stats/1/0": size("sex", 0), "stats/1/1": size("race", 0), "stats/3/0": size("race", 1),
                    "stats/3/1": size("age", 2), "stats/3/2": size("sex", 0)}
    plain = [e for column, size in plan_columns.items()
             for e in EcCipher.hash_to_group(cell_inputs("join-A", column, size))]
    tids = split_vertical(COLUMNS, rows, 3)[0]
    tid_values = [r[tids.local_data(planted).columns.index(tids.local_data(planted).tid_column)]
                  for r in tids.local_data(planted).rows]
    plain += EcCipher.hash_to_group([hash_input("join-A", TID_NAME, t) for t in tid_values[:50]])
    secrets = [str(path).encode(), b"secret-folder", *factors, *commutative]
    topics: dict[str, set[str]] = {}
    for party, transport in run.transports.items():
        for sender, topic, payload in transport.recorded:
            topics.setdefault(party, set()).add(topic)
            checked = secrets if (topic == "s/cells" and party == "p1") else secrets + cell_values
            for needle in checked + plain:
                assert needle not in payload, (party, sender, topic, needle[:20])
    assert any(v in payload for _s, t, payload in run.transports["p1"].recorded if t == "s/cells"
               for v in cell_values)  # positive control of the search
    assert "s/held" in topics["p2"] and "s/joined" not in topics["p2"]  # the master gets encrypted rows
    assert "s/joined" in topics["p3"] and "s/labels" in topics["p3"] and "s/held" not in topics["p3"]  # the permuter
    assert not {"s/join-key", "s/rows"} & set().union(*topics.values())  # no join key, no helper's rows
    # the master's counts reach the permuter encrypted, in the master's order: the joined table's counts
    # with the cells relabelled, not in canonical order (the key holder's secret reads them here)
    sent = [payload for sender, topic, payload in run.transports["p3"].recorded if topic == "s/joined"]
    assert len(sent) == 1
    cts = paillier[0].public_key.ciphertexts_from_bytes(codec.unpack_message(sent[0], "joined")["counts"])
    master_counts = [int(v) for v in paillier[0].decrypt_many(cts, workers=1)]
    table = EncodedTable.from_rows(COLUMNS, rows)
    first, big = (contingency(table, planted, request.marginals[i])[1].reshape(-1).tolist() for i in (0, 2))
    assert len(master_counts) == len(first) + len(big)
    assert sorted(master_counts[len(first):]) == sorted(big) and master_counts[len(first):] != big
    assert sorted(master_counts[:len(first)]) == sorted(first)
    # positive control: the needles are what a party's share holds before the ring encrypts it
    assert len(plain) == sum(plan_columns.values()) + 50 and len(set(plain)) == len(plain)
    p3 = split_vertical(COLUMNS, rows, 3)[2].local_data(planted)
    plans = [JoinPlan(1, [size("sex", 0), size("race", 0)], [("p2", [0]), ("p3", [1])])]
    share = own_share(EcCipher, "join-A", "p3", [r[p3.columns.index(p3.tid_column)] for r in p3.rows],
                      EncodedTable.from_rows(p3.columns, p3.rows), planted, [MarginalSpec.parse("sex,race")], plans,
                      OpCounter())
    assert share.columns == ["stats/1/1"] and set(share.dictionaries[0]) <= set(plain)
    assert share.tids is not None and set(share.tids[:200]) & set(plain)


def test_a_refuses_a_joined_table_with_two_primaries(pooled) -> None:
    rows, hierarchies = pooled
    shares = split_vertical(["sex", "race"], [[r[1], r[2]] for r in rows], 2)
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    request = StatisticsRequest(1.0, (MarginalSpec.parse("sex,race"),), True, 5)
    settings = RunSettings("join-A2", "A", "vertical", None, {"p1": "primary", "p2": "primary"}, "p1",  # type: ignore[arg-type]
                           {"statistics": request.to_options()})
    run = run_in_memory(settings, local, timeout_s=120)
    assert set(run.errors) == {"p1", "p2"}
    messages = [str(e) for e in run.errors.values()]
    assert any("at least three primaries" in m and "\n" not in m for m in messages), messages


def test_part_permutations_are_keyed_bijections() -> None:
    key, other = b"k" * 32, b"o" * 32
    sigma = part_permutation(key, "run", 1, 0, 500)
    assert sorted(sigma.tolist()) == list(range(500))
    assert not np.array_equal(sigma, np.arange(500))
    assert np.array_equal(sigma, part_permutation(key, "run", 1, 0, 500))
    for changed in (part_permutation(other, "run", 1, 0, 500), part_permutation(key, "run2", 1, 0, 500),
                    part_permutation(key, "run", 2, 0, 500), part_permutation(key, "run", 1, 1, 500)):
        assert not np.array_equal(sigma, changed)
    plan = JoinPlan(1, [3, 4, 5], [("a", [0, 2]), ("b", [1])])
    positions = canonical_positions(key, "run", plan)
    assert sorted(positions.tolist()) == list(range(60))
    # canonical cell (i, j, k): part a holds (i, k) -> sub-cell i*5+k, part b holds j
    sa, sb = part_permutation(key, "run", 1, 0, 15), part_permutation(key, "run", 1, 1, 4)
    assert positions[(2 * 4 + 1) * 5 + 3] == sa[2 * 5 + 3] * 4 + sb[1]


def test_folded_ciphertexts_land_in_their_slots() -> None:
    secret = generate_paillier_keypair()
    key = secret.public_key
    size = 100  # three packed ciphertexts
    own = np.arange(size, dtype=np.int64) - 50
    cells = {0: 7, 41: 3, 42: 11, 99: 1000}
    singles = dict(zip(cells, key.encrypt_many(list(cells.values()), workers=1)))
    folded = fold_ciphertexts(key, encrypt_vector(key, own), size, singles)
    want = own.copy()
    for at, v in cells.items():
        want[at] += v
    assert np.array_equal(decrypt_vector(secret, folded, size, 1), want)
    with pytest.raises(FedanonError, match="outside"):
        fold_ciphertexts(key, encrypt_vector(key, own), size, {size: singles[0]})


def test_the_helper_refuses_labels_and_identifiers_that_do_not_fit(pooled) -> None:
    rows, hierarchies = pooled
    spec = MarginalSpec.parse("sex,race")
    plan = JoinPlan(1, [2, 5], [("p-sex", [0]), ("p-race", [1])])
    key = b"j" * 32
    tids = [str(i) for i in range(50)]
    sex = EncodedTable.from_rows(["sex"], [[r[1]] for r in rows[:50]])
    race = EncodedTable.from_rows(["race"], [[r[2]] for r in rows[:50]])
    a = labelled_rows(key, "run", "p-sex", tids, sex, hierarchies, [spec], [plan])
    b = labelled_rows(key, "run", "p-race", tids, race, hierarchies, [spec], [plan])
    counts = count_joined({"p-sex": a, "p-race": b}, [plan])[0]
    positions = canonical_positions(key, "run", plan)
    # plain Python: the cells in hierarchy order (first appearance), counted row by row
    sexes = list(dict.fromkeys(row[0].decode() for row in hierarchies["sex"].rows))
    races = list(dict.fromkeys(row[0].decode() for row in hierarchies["race"].rows))
    truth = [0] * (len(sexes) * len(races))
    for r in rows[:50]:
        truth[sexes.index(r[1]) * len(races) + races.index(r[2])] += 1
    assert counts[positions].tolist() == truth
    bad = dict(b, **{"labels/1": np.full(50, 5, dtype=">u4").tobytes()})  # label 5 of a 5-cell part
    with pytest.raises(FedanonError, match="do not fit"):
        count_joined({"p-sex": a, "p-race": bad}, [plan])
    fewer = labelled_rows(key, "run", "p-race", tids[:-1], EncodedTable.from_rows(["race"], [[r[2]] for r in rows[:49]]),
                          hierarchies, [spec], [plan])
    with pytest.raises(FedanonError, match="identifier tokens differ"):
        count_joined({"p-sex": a, "p-race": fewer}, [plan])
