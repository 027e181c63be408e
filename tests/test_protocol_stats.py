"""The statistics mode of Protocols B and C (in-process parties): right counts, right noise, no leaks.

* B, seeded: the release equals `fedanon stats`'s on the pooled table when the local release
  draws from the helper's stream (the helper draws the noise, in the same order).
* C, seeded: the release minus the primaries' own noise shares (recomputed here from their
  seeded streams) is exactly the pooled table's counts: the noiseless path of the joint noise.
* What every party receives holds no data value, no file path and no key of the key holder.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedanon.crypto.paillier import PaillierPrivateKey
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.registry import read_table
from fedanon.data.table import EncodedTable
from fedanon.dp.marginals import MarginalSpec, contingency
from fedanon.dp.statistics import release_statistics
from fedanon.dp.randomness import SeededRandomness
from fedanon.dp.shares import noise_shares, share_generator
from fedanon.dp.statistics import StatisticsRequest
from fedanon.errors import FedanonError, InputError
from fedanon.protocols.kit.api import LocalData, RunSettings
from fedanon.protocols.sim.local_run import run_in_memory
from fedanon.protocols.sim.split import split_horizontal
from fedanon.protocols.stats import roles as stats_roles

from cli_checks import one_line_error
from datasets import ADULT_DIR, hierarchy_path

COLUMNS = ["age", "sex", "race"]
ROWS = 900
PARTIES = 3
ROLES = {"p1": "primary", "p2": "primary", "p3": "primary", "helper": "helper"}


@pytest.fixture(scope="module")
def pooled() -> tuple[list[list[str]], dict[str, Hierarchy]]:
    table = read_table(ADULT_DIR / "adult.csv", ";", "utf-8")
    rows = table.select(COLUMNS).rows()[:ROWS]
    hierarchies = {c: Hierarchy.read_csv(hierarchy_path("adult", c), c) for c in COLUMNS}
    return rows, hierarchies


def _request(seed: int | None = 5, total: bool = True) -> StatisticsRequest:
    return StatisticsRequest(1.5, (MarginalSpec.parse("sex,race"), MarginalSpec.parse("age:1"),
                                   MarginalSpec.parse("race:1,sex")), total, seed)


def _run(protocol: str, request: StatisticsRequest, rows, hierarchies, record: bool = False, local=None):
    shares = split_horizontal(COLUMNS, rows, PARTIES)
    local = local or {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    roles = {p: r for p, r in ROLES.items() if protocol != "A" or r == "primary"}  # A has no helper
    settings = RunSettings(f"stats-{protocol}", protocol, "horizontal", None, roles, "p1",  # type: ignore[arg-type]
                           {"statistics": request.to_options()})
    run = run_in_memory(settings, {**local, **({"helper": None} if "helper" in roles else {})}, record=record,
                        timeout_s=300)
    return run


def _true_vector(request: StatisticsRequest, rows, hierarchies) -> list[np.ndarray]:
    """The pooled table's exact counts per segment (total, then each marginal's cells)."""
    table = EncodedTable.from_rows(COLUMNS, rows)
    out = [np.array([len(rows)])] if request.total else []
    return out + [contingency(table, hierarchies, spec)[1].reshape(-1) for spec in request.marginals]


def _released_vector(release: dict) -> list[np.ndarray]:
    out = [np.array([release["total"]["count"]])] if "total" in release else []
    return out + [np.array([cell[-1] for cell in m["cells"]]) for m in release["marginals"]]


def test_b_seeded_release_is_the_local_release_with_the_helpers_stream(pooled) -> None:
    rows, hierarchies = pooled
    request = _request(seed=5)
    run = _run("B", request, rows, hierarchies)
    assert not run.errors, run.errors
    release = dict(run.outcomes["p1"].report["statistics"])
    protocol = release.pop("protocol")
    local = release_statistics(EncodedTable.from_rows(COLUMNS, rows), hierarchies, list(request.marginals),
                               request.epsilon, SeededRandomness(5, "helper"))
    assert release == local
    assert protocol["name"] == "B" and "helper" in protocol["noise"]
    # the noise is real: the release is not the exact counts
    assert any((r != t).any() for r, t in zip(_released_vector(release), _true_vector(request, rows, hierarchies)))
    # only the key holder holds the release
    assert all("statistics" not in run.outcomes[p].report for p in ("p2", "p3", "helper"))


@pytest.mark.parametrize("protocol", ["C", "A"])
def test_joint_noise_release_minus_the_primaries_shares_is_the_pooled_counts(pooled, protocol: str) -> None:
    rows, hierarchies = pooled
    request = _request(seed=8)
    run = _run(protocol, request, rows, hierarchies)
    assert not run.errors, run.errors
    release = run.outcomes["p1"].report["statistics"]
    truth = _true_vector(request, rows, hierarchies)
    noise = [np.zeros(len(t), dtype=np.int64) for t in truth]
    for party in ("p1", "p2", "p3"):  # each primary's seeded shares, in the order it drew them
        generator = share_generator(SeededRandomness(8, party))
        for i, t in enumerate(truth):
            noise[i] += noise_shares(generator, len(t), request.scale, PARTIES)
    released = _released_vector(release)
    for got, want, drawn in zip(released, truth, noise):
        assert np.array_equal(got - drawn, want)
    assert any(d.any() for d in noise)
    assert release["budget"]["epsilon_spent"] == pytest.approx(1.5)
    assert [e["epsilon"] for e in release["budget"]["entries"]] == [pytest.approx(1.5 / 4)] * 4
    assert release["protocol"]["name"] == protocol and "share" in release["protocol"]["noise"]
    # A has no helper: the primary after the key holder adds the ciphertexts
    assert release["protocol"]["aggregator"] == ("p2" if protocol == "A" else "helper")


def test_c_unseeded_release_has_the_release_format_and_noise(pooled) -> None:
    rows, hierarchies = pooled
    request = _request(seed=None, total=False)
    run = _run("C", request, rows, hierarchies)
    assert not run.errors, run.errors
    release = run.outcomes["p1"].report["statistics"]
    assert release["seeded"] is False and "total" not in release and len(release["marginals"]) == 3
    local = release_statistics(EncodedTable.from_rows(COLUMNS, rows), hierarchies, list(request.marginals),
                               request.epsilon, SeededRandomness(1), total=False)
    assert set(release) - {"protocol"} == set(local)
    assert [[c[:-1] for c in m["cells"]] for m in release["marginals"]] == \
        [[c[:-1] for c in m["cells"]] for m in local["marginals"]]
    released, truth = _released_vector(release), _true_vector(request, rows, hierarchies)
    assert any((r != t).any() for r, t in zip(released, truth))


@pytest.mark.parametrize("protocol", ["A", "B", "C"])
def test_no_message_holds_a_value_a_path_or_the_key_holders_key(pooled, protocol: str, tmp_path,
                                                                 monkeypatch) -> None:
    rows, hierarchies = pooled
    rows = [list(r) for r in rows]  # this test plants a value: its own copy
    # a value only p2 holds (in its data and its hierarchy), and a hierarchy file path
    canary = "CANARY-RACE-93ac1e"
    path = tmp_path / "secret-folder" / "race.csv"
    race = hierarchies["race"]
    planted = Hierarchy.from_rows("race", [*race.rows, [canary.encode(), *race.rows[0][1:]]], str(path))
    hier = {**hierarchies, "race": planted}
    rows[1][COLUMNS.index("race")] = canary  # dealt round-robin: row 1 goes to p2
    keys: list[PaillierPrivateKey] = []
    real = stats_roles.generate_paillier_keypair

    def keep(*a, **k):
        keys.append(real(*a, **k))
        return keys[-1]

    monkeypatch.setattr(stats_roles, "generate_paillier_keypair", keep)
    run = _run(protocol, _request(seed=None), rows, hier, record=True)
    assert not run.errors, run.errors
    assert len(keys) == 1
    factors = [int(f).to_bytes((int(f).bit_length() + 7) // 8, "big") for f in (keys[0].p, keys[0].q)]
    needles = [canary.encode(), str(path).encode(), b"secret-folder", b"Amer-Indian-Eskimo",
               b"Asian-Pac-Islander", b"Female", b"White", *factors]
    seen = 0
    for party, transport in run.transports.items():
        assert transport.recorded, party
        for _sender, topic, payload in transport.recorded:
            seen += 1
            for needle in needles:
                assert needle not in payload, (party, topic, needle[:20])
    assert seen >= 2 * PARTIES + 1  # keys, counts, sums and completion notices
    # positive control: the key holder's release names the planted cell
    release = run.outcomes["p1"].report["statistics"]
    assert any(canary in cell for m in release["marginals"] for cell in m["cells"])


def test_different_hierarchies_stop_the_run_at_every_party(pooled) -> None:
    rows, hierarchies = pooled
    shares = split_horizontal(COLUMNS, rows, PARTIES)
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    sex = hierarchies["sex"]
    other = Hierarchy.from_rows("sex", [*sex.rows, [b"Other", *sex.rows[0][1:]]], "x")
    local["p3"] = LocalData(local["p3"].columns, local["p3"].rows, {**local["p3"].hierarchies, "sex": other})
    run = _run("C", _request(), rows, hierarchies, local=local)
    assert set(run.errors) == set(ROLES)
    assert all("differ from the key holder's" in str(e) for e in run.errors.values()), run.errors


@pytest.mark.parametrize("options,message", [
    ({"epsilon": 0, "marginals": ["sex"]}, "--epsilon must be a positive number"),
    ({"epsilon": 1, "marginals": "sex"}, "must be a list"),
    ({"epsilon": 1, "marginals": [], "total": False}, "nothing to release"),
    ({"epsilon": 1, "marginals": ["sex"], "scale": 2}, "unknown key(s) scale"),
    ({"epsilon": 1, "marginals": ["sex:x"]}, "is not an integer"),
    ({"epsilon": 1, "marginals": ["sex"], "seed": -1}, "--seed must be an integer >= 0"),
])
def test_bad_requests_are_refused_with_the_setting_named(options, message) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        StatisticsRequest.from_options(options)


def test_the_request_round_trips_through_the_run_options() -> None:
    request = _request(seed=3)
    assert StatisticsRequest.from_options(json.loads(json.dumps(request.to_options()))) == request


def test_the_registry_serves_the_statistics_roles_only_for_a_statistics_run() -> None:
    from fedanon.protocols.registry import role_function, statistics_refusal

    assert statistics_refusal("A", "horizontal") is None and statistics_refusal("CHECK", "horizontal") is not None
    assert statistics_refusal("B", "hybrid") is not None and statistics_refusal("C", "vertical") is None
    # an anonymizing run of the same protocol still gets its own role (no statistics option: a B run)
    assert role_function("B", "helper").__name__ == "either"
    assert callable(stats_roles.roles("joint")["primary"])
    with pytest.raises(ValueError):
        stats_roles.roles("nobody")


@pytest.mark.parametrize("extra,message", [
    (["--split", "hybrid"], "not a hybrid one"),
    (["--layout", "x.toml"], "--layout applies to anonymizing runs"),
    (["--baseline"], "--baseline applies to anonymizing runs"),
    (["--seed", "x"], "--seed must be an integer"),
])
def test_simulate_refuses_what_a_statistics_run_cannot_do(capsys, tmp_path, extra, message) -> None:
    line = one_line_error(capsys, "simulate", ADULT_DIR / "adult.csv", "--stats-marginal", "sex", "--epsilon", "1",
                          f"--qi=sex={hierarchy_path('adult', 'sex')}", "-o", tmp_path / "s.json", "-q", *extra)
    assert message in line


def test_simulate_needs_epsilon_and_hierarchies(capsys, tmp_path) -> None:
    common = ["simulate", ADULT_DIR / "adult.csv", f"--qi=sex={hierarchy_path('adult', 'sex')}",
              "-o", tmp_path / "s.json", "-q", "--in-memory"]
    assert "needs --epsilon" in one_line_error(capsys, *common, "--stats-marginal", "sex")
    assert "'race' has no hierarchy" in one_line_error(capsys, *common, "--stats-marginal", "sex,race",
                                                       "--epsilon", "1")


def test_simulate_in_memory_writes_the_release(capsys, tmp_path) -> None:
    from fedanon.cli import main

    out = tmp_path / "stats.json"
    code = main(["simulate", str(ADULT_DIR / "adult.csv"), "--protocol", "C", "--in-memory", "--parties", "2",
                 "--stats-marginal", "sex", f"--qi=sex={hierarchy_path('adult', 'sex')}", "--epsilon", "2",
                 "--seed", "4", "-o", str(out), "-q"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "tests only" in err
    release = json.loads(out.read_text())
    assert release["input"].endswith("adult.csv") and release["seeded"] is True
    assert [c[0] for c in release["marginals"][0]["cells"]] == ["Male", "Female"]
    assert abs(release["total"]["count"] - 30162) < 60  # scale 1 noise on the ADULT row count


def test_protocol_errors_reach_every_party_as_fedanon_errors(pooled) -> None:
    rows, hierarchies = pooled
    settings = RunSettings("bad", "B", "horizontal", None, dict(ROLES), "p1",  # type: ignore[arg-type]
                           {"statistics": {"epsilon": -1, "marginals": ["sex"]}})
    shares = split_horizontal(COLUMNS, rows, PARTIES)
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    run = run_in_memory(settings, {**local, "helper": None}, timeout_s=60)
    assert set(run.errors) == set(ROLES) and all(isinstance(e, FedanonError) for e in run.errors.values())


# ----------------------------------------------------------------------------- vertical splits

def _vertical(protocol: str, request: StatisticsRequest, rows, record: bool = False):
    """Deal by table (each table's attributes at one party) and run in process; returns the run."""
    from fedanon.consortium.statistics import deal_tables_vertically

    hierarchies = {c: Hierarchy.read_csv(hierarchy_path("adult", c), c) for c in COLUMNS}
    shares = deal_tables_vertically(COLUMNS, rows, request, PARTIES)
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    roles = {p: r for p, r in ROLES.items() if protocol != "A" or r == "primary"}
    settings = RunSettings(f"v-{protocol}", protocol, "vertical", None, roles, "p1",  # type: ignore[arg-type]
                           {"statistics": request.to_options()})
    return run_in_memory(settings, {**local, **({"helper": None} if "helper" in roles else {})}, record=record,
                         timeout_s=300), shares


def _vertical_request(seed: int | None = 5) -> StatisticsRequest:
    return StatisticsRequest(1.0, (MarginalSpec.parse("sex,race"), MarginalSpec.parse("age:1")), True, seed)


def test_vertical_deal_keeps_every_table_at_one_party(pooled) -> None:
    from fedanon.consortium.statistics import deal_tables_vertically

    rows, _ = pooled
    shares = deal_tables_vertically(COLUMNS, rows, _vertical_request(), PARTIES)
    held = [set(s.columns) - {s.tid_column} for s in shares]
    assert {"sex", "race"} in held and {"age"} in held and set() in held
    assert all(len(s.rows) == len(rows) for s in shares)


def test_vertical_b_release_is_the_local_release_with_the_helpers_stream(pooled) -> None:
    rows, hierarchies = pooled
    request = _vertical_request(seed=12)
    run, _ = _vertical("B", request, rows)
    assert not run.errors, run.errors
    release = dict(run.outcomes["p1"].report["statistics"])
    release.pop("protocol")
    local = release_statistics(EncodedTable.from_rows(COLUMNS, rows), hierarchies, list(request.marginals),
                               request.epsilon, SeededRandomness(12, "helper"))
    assert release == local


@pytest.mark.parametrize("protocol", ["C", "A"])
def test_vertical_joint_noise_release_minus_the_shares_is_the_pooled_counts(pooled, protocol: str) -> None:
    rows, hierarchies = pooled
    request = _vertical_request(seed=13)
    run, _ = _vertical(protocol, request, rows, record=True)
    assert not run.errors, run.errors
    release = run.outcomes["p1"].report["statistics"]
    truth = _true_vector(request, rows, hierarchies)
    released = _released_vector(release)
    for party in ("p1", "p2", "p3"):
        generator = share_generator(SeededRandomness(13, party))
        released = [r - noise_shares(generator, len(r), request.scale, PARTIES) for r in released]
    for got, want in zip(released, truth):
        assert np.array_equal(got, want)
    # the cells travel to the key holder only; the aggregator receives no value and no identifier
    aggregator = release["protocol"]["aggregator"]
    for _sender, topic, payload in run.transports[aggregator].recorded:
        assert topic != "s/cells"
        for needle in (b"Female", b"White", b"Amer-Indian-Eskimo", "Female".encode().hex().encode()):
            assert needle not in payload, (topic, needle)


def test_vertical_table_across_two_parties_is_counted_by_a(pooled) -> None:
    """A has no helper; it joins round its ring of primaries (more: `test_protocol_stats_joined.py`)."""
    rows, hierarchies = pooled
    from fedanon.protocols.sim.split import split_vertical

    shares = split_vertical(COLUMNS, rows, PARTIES)  # one column per party: sex,race crosses two
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    roles = {p: r for p, r in ROLES.items() if r == "primary"}
    request = _vertical_request(seed=9)
    settings = RunSettings("x", "A", "vertical", None, roles, "p1",  # type: ignore[arg-type]
                           {"statistics": request.to_options()})
    run = run_in_memory(settings, local, timeout_s=120)
    assert not run.errors, run.errors
    release = run.outcomes["p1"].report["statistics"]
    assert release["protocol"]["joined"]["tables"] == ["sex:0,race:0"]
    released = _released_vector(release)
    for party in ("p1", "p2", "p3"):
        generator = share_generator(SeededRandomness(9, party))
        released = [r - noise_shares(generator, len(r), request.scale, PARTIES) for r in released]
    for got, want in zip(released, _true_vector(request, rows, hierarchies)):
        assert np.array_equal(got, want)


def test_vertical_parties_with_other_persons_stop_the_run(pooled) -> None:
    from fedanon.consortium.statistics import deal_tables_vertically

    rows, hierarchies = pooled
    request = _vertical_request()
    shares = deal_tables_vertically(COLUMNS, rows, request, PARTIES)
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(shares)}
    local["p2"].rows = local["p2"].rows[:-1]  # p2 lacks one person
    settings = RunSettings("y", "B", "vertical", None, dict(ROLES), "p1",  # type: ignore[arg-type]
                           {"statistics": request.to_options()})
    run = run_in_memory(settings, {**local, "helper": None}, timeout_s=120)
    assert set(run.errors) == set(ROLES)
    assert all("holds other persons than the key holder" in str(e) for e in run.errors.values()), run.errors


# ----------------------------------------------------------------------------- packed vectors

def test_packed_vectors_add_every_slot_without_carry() -> None:
    from fedanon.crypto.paillier import generate_paillier_keypair
    from fedanon.protocols.stats.vectors import LIMIT, MAX_ADDENDS, SLOTS, add_vectors, decrypt_vector, encrypt_vector

    secret = generate_paillier_keypair()
    key = secret.public_key
    size = 2 * SLOTS + 1  # three ciphertexts, the last with one value
    values = np.array([(LIMIT - 1) * (-1) ** i if i % 3 else -i for i in range(size)], dtype=np.int64)
    blob = encrypt_vector(key, values)
    summed = add_vectors(key, [blob] * MAX_ADDENDS, size, "test")
    assert np.array_equal(decrypt_vector(secret, summed, size, MAX_ADDENDS), MAX_ADDENDS * values)
    other = np.arange(size, dtype=np.int64) - 40
    mixed = add_vectors(key, [blob, encrypt_vector(key, other)], size, "test")
    assert np.array_equal(decrypt_vector(secret, mixed, size, 2), values + other)
    with pytest.raises(FedanonError, match="too large"):
        encrypt_vector(key, np.array([LIMIT]))
    with pytest.raises(FedanonError, match="expected"):
        add_vectors(key, [blob], size + SLOTS, "test")
