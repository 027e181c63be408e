"""SafePub across institutions: a protocol's DP release is the local release of the same sample.

The primaries sample (horizontal: each its own rows; vertical: the same persons everywhere,
by a keyed PRF of the TID), the search party runs the local release's search on ciphertext
(C: the key holder scores from decrypted class sizes and draws, the helper sums and generalizes).
With a seed for every party (tests only), a run must release exactly what
`engine.safepub.release` does on the pooled table with the same sample and the search
party's stream; without seeds two runs differ; the vertical sampler keeps a person with
probability β (chi-square); nothing a primary sends holds a cell value, a path or a key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from fedanon.cli import main
from fedanon.consortium.simulation import result_summary
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.io.delimited import read_table_csv
from fedanon.data.table import EncodedTable
from fedanon.dp.randomness import randomness
from fedanon.engine.safepub import release
from fedanon.model.config import AnonymizationConfig
from fedanon.model.registry import ParseContext, model_type
from fedanon.protocols.b import protocol as protocol_b
from fedanon.protocols.dp import release as dp_release
from fedanon.protocols.kit import codec
from fedanon.protocols.kit.api import RunSettings
from fedanon.protocols.sim.local_run import LocalRun, run_in_memory
from fedanon.protocols.sim.split import horizontal_row_groups, split_horizontal, split_vertical
from test_dp_samplers import check_fits
from test_leakage import views

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT / "fedanon" / "data" / "adult"
QIS = ["age", "sex", "race", "education"]
ROWS = 2400
PARTIES = {"p1": "primary", "p2": "primary", "p3": "primary", "helper": "helper"}


@pytest.fixture(scope="module")
def pooled() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    columns, rows = read_table_csv(ADULT / "adult.csv")
    keep = [columns.index(c) for c in [*QIS, "salary-class"]]
    data = [[row[i] for i in keep] for row in rows[:ROWS]]
    hierarchies = {q: Hierarchy.read_csv(ADULT / f"adult_hierarchy_{q}.csv", q) for q in QIS}
    return [*QIS, "salary-class"], data, hierarchies


def dp_config(seed: int | None, epsilon: float = 1.0) -> AnonymizationConfig:
    options = {"steps": 12} if seed is None else {"steps": 12, "seed": seed}
    model = model_type("dp").parse(f"{epsilon},1e-6", ParseContext(options=options))
    return AnonymizationConfig(QIS, models=[model])


def run_b(pooled, distribution: str, config: AnonymizationConfig, record: bool = False,  # noqa: ANN001
          protocol: str = "B", options: dict | None = None) -> LocalRun:
    columns, rows, hierarchies = pooled
    split = split_horizontal if distribution == "horizontal" else split_vertical
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(split(columns, rows, 3))}
    parties = PARTIES if protocol != "A" else {p: r for p, r in PARTIES.items() if r == "primary"}
    settings = RunSettings(f"dp-{distribution}", protocol, distribution, config, parties, "p1", options or {})
    run = run_in_memory(settings, local, record=record, timeout_s=300)
    assert not run.errors, run.errors
    return run


def pooled_sample(run: LocalRun, distribution: str, n_rows: int) -> np.ndarray:
    """The pooled table's rows the primaries sampled (each knows its own sample)."""
    if distribution == "vertical":  # every party holds every person, in TID order
        return run.outcomes["p1"].sample
    groups = horizontal_row_groups(n_rows, 3)
    return np.sort(np.concatenate([np.asarray(groups[i])[run.outcomes[f"p{i + 1}"].sample] for i in range(3)]))


#: C's counters: Paillier (the default) in one split, ElGamal in the other (faster, same scores)
C_COUNTERS = {"horizontal": {}, "vertical": {"counters": "elgamal"}}
#: who draws: B's helper, A's master (the recipient's right neighbour), C's key holder (the recipient)
SEARCH_PARTY = {"B": "helper", "A": "p2", "C": "p1"}


@pytest.mark.parametrize("protocol, distribution", [("B", "horizontal"), ("B", "vertical"), ("A", "horizontal"),
                                                    ("A", "vertical"), ("C", "horizontal"), ("C", "vertical")])
def test_a_seeded_run_releases_what_the_local_release_does_on_the_same_sample(pooled, protocol: str,  # noqa: ANN001
                                                                              distribution: str) -> None:
    columns, rows, hierarchies = pooled
    config = dp_config(seed=11)
    run = run_b(pooled, distribution, config, protocol=protocol,
                options=C_COUNTERS[distribution] if protocol == "C" else None)
    search_party = SEARCH_PARTY[protocol]
    sample = pooled_sample(run, distribution, len(rows))
    if distribution == "vertical":  # the same persons at every party
        for party in ("p2", "p3"):
            assert np.array_equal(run.outcomes[party].sample, sample)
    assert 0.5 < sample.size / len(rows) < 0.7   # β = 0.593
    local = release(EncodedTable.from_rows(columns, rows), hierarchies, config, rows=sample,
                    rng=randomness(11, stream=search_party))
    got = run.outcomes["p1"]
    report = got.report
    assert report["transformation"] == local.transformation
    assert report["dp"]["search"]["drawn"] == local.extra["dp"]["search"]["drawn"]
    assert report["dp"]["sampled_rows"] == sample.size == local.output.n_rows
    index = [got.output_columns.index(c) for c in columns]
    released = Counter(tuple(row[i] for i in index) for row in got.output_rows)
    expected = Counter(tuple(v.decode() for v in row) for row in local.output.decode_rows())
    assert released == expected
    assert report["suppressed_rows"] == local.suppressed_rows
    # the report states the parameters, the split of the budget and that the release is a draw
    dp = report["dp"]
    assert dp["k"] == local.extra["dp"]["k"] and dp["beta"] == pytest.approx(1 - np.exp(-0.9))
    assert dp["epsilon_anon"] + dp["epsilon_search"] == pytest.approx(1.0)
    assert "not an optimum" in dp["selection"] and dp["seeded"] is True and dp["search_party"] == search_party
    assert report["optimum_found"] is False
    if protocol == "C":   # the key holder's scores are the local release's, bit for bit
        assert dp["search"]["chosen_score"] == local.extra["dp"]["search"]["chosen_score"]
        q, n, total = len(QIS), sample.size, len(rows)   # the local release charges the whole input
        charged = dp["granularity_loss_of_sample"] * n * q
        assert (charged + q * (total - n)) / (total * q) == pytest.approx(local.extra["dp"]["granularity_loss"], rel=1e-12)
        assert report["pseudotuples_dropped"] > 0


def test_the_same_seed_repeats_a_run_and_no_seed_does_not(pooled) -> None:  # noqa: ANN001
    one = run_b(pooled, "horizontal", dp_config(seed=3))
    two = run_b(pooled, "horizontal", dp_config(seed=3))
    assert all(np.array_equal(one.outcomes[p].sample, two.outcomes[p].sample) for p in ("p1", "p2", "p3"))
    # the parties draw different streams from one seed: equal row counts, different samples
    assert not np.array_equal(one.outcomes["p1"].sample, one.outcomes["p2"].sample)
    free = [run_b(pooled, distribution, dp_config(seed=None)) for distribution in ("horizontal", "horizontal",
                                                                                     "vertical", "vertical")]
    for a, b in ((free[0], free[1]), (free[2], free[3])):
        assert not np.array_equal(a.outcomes["p1"].sample, b.outcomes["p1"].sample)
        assert a.outcomes["p1"].report["dp"]["randomness"] == "opendp"


@pytest.mark.parametrize("protocol, distribution", [("C", "hybrid"), ("A", "hybrid"), ("B", "hybrid")])
def test_unsupported_protocols_stop_before_any_data_moves(pooled, protocol: str, distribution: str) -> None:  # noqa: ANN001
    columns, rows, hierarchies = pooled
    split = split_horizontal if distribution == "horizontal" else split_vertical
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(split(columns, rows, 3))}
    parties = PARTIES if protocol != "A" else {p: r for p, r in PARTIES.items() if r == "primary"}
    settings = RunSettings("dp-refused", protocol, distribution, dp_config(seed=1), parties, "p1", {})
    run = run_in_memory(settings, local, record=True, timeout_s=60)
    assert set(run.errors) == set(parties)
    assert all(f"Protocol {protocol} makes no differentially private release" in str(e) for e in run.errors.values())
    assert all(not t.recorded for t in run.transports.values())   # nothing was sent at all


def test_b_refuses_hierarchies_cut_to_the_data_before_any_data_moves(pooled) -> None:  # noqa: ANN001
    """Leaf counts of hierarchies cut to the sample would make the score depend on the data."""
    columns, rows, hierarchies = pooled
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(split_horizontal(columns, rows, 3))}
    settings = RunSettings("dp-scope", "B", "horizontal", dp_config(seed=1), PARTIES, "p1", {"hierarchy_scope": "data"})
    run = run_in_memory(settings, local, record=True, timeout_s=60)
    assert set(run.errors) == set(PARTIES)
    assert all("hierarchy_scope 'data' cannot be combined with --dp" in str(e) for e in run.errors.values())
    assert not any(t == "b/data" for _, t, _ in run.transports["helper"].recorded)


def test_the_samplers_keep_each_row_with_probability_beta() -> None:
    """Chi-square over 10⁵ rows / TIDs against β, and against β off by 20 % (which must be rejected)."""
    config = dp_config(seed=None, epsilon=0.5)
    beta = config.model("dp").parameters().beta
    for kept in (dp_release.keep_rows(config, "p1", 100_000), dp_release.keep_rows(dp_config(seed=4, epsilon=0.5),
                                                                                 "p2", 100_000)):
        observed = np.array([(~kept).sum(), kept.sum()], dtype=float)
        check_fits(observed, np.array([1 - beta, beta]), [np.array([1 - beta * f, beta * f]) for f in (0.8, 1.2)])
    tids = [f"person-{i}" for i in range(100_000)]
    kept = dp_release.keep_persons(config, os.urandom(32), "B", "rate-run", tids)
    observed = np.array([(~kept).sum(), kept.sum()], dtype=float)
    check_fits(observed, np.array([1 - beta, beta]), [np.array([1 - beta * f, beta * f]) for f in (0.8, 1.2)])
    # another key, another sample; the same key, the same sample (what makes parties agree)
    other = dp_release.keep_persons(config, os.urandom(32), "B", "rate-run", tids)
    assert (other != kept).mean() > 0.3
    key = os.urandom(32)
    assert np.array_equal(dp_release.keep_persons(config, key, "B", "r", tids[:500]),
                          dp_release.keep_persons(config, key, "B", "r", tids[:500]))


@pytest.mark.parametrize("protocol, distribution", [("B", "horizontal"), ("B", "vertical"), ("A", "horizontal"),
                                                    ("A", "vertical")])
def test_what_a_primary_sends_holds_no_cell_value_path_or_key(pooled, protocol: str, distribution: str,  # noqa: ANN001
                                                              monkeypatch) -> None:
    """Every value of the insensitive column is a canary: a sampled row's canary reaches only the
    recipient's decryption (A: the owners' answers to its decoding request); no column key, no
    sampling key and no path travels; no hello announces a row count."""
    generated: list[bytes] = []
    derived: list[bytes] = []
    real_generate, real_derive = protocol_b.generate_key, dp_release.derive_key

    def spy_generate() -> bytes:
        generated.append(real_generate())
        return generated[-1]

    def spy_derive(key: bytes, context: bytes) -> bytes:
        derived.append(real_derive(key, context))
        return derived[-1]

    monkeypatch.setattr(protocol_b, "generate_key", spy_generate)
    monkeypatch.setattr(dp_release, "generate_key", spy_generate)
    monkeypatch.setattr(dp_release, "derive_key", spy_derive)
    columns, rows, hierarchies = pooled
    canaries = [f"CANARY-{i:05d}-salary" for i in range(len(rows))]
    planted = [row[:-1] + [c] for row, c in zip(rows, canaries)]
    run = run_b((columns, planted, hierarchies), distribution, dp_config(seed=None), record=True, protocol=protocol)
    released = {row[run.outcomes["p1"].output_columns.index("salary-class")] for row in run.outcomes["p1"].output_rows}
    assert len(released) > 0.4 * len(rows)   # the sampled rows' canaries did travel, encrypted
    vertical = distribution == "vertical"
    # B's leader draws a key per column (+ the TID's), A's first party the sampling key (vertical);
    # vertically every primary derives the PRF key from it
    assert len(generated) == (len(columns) + vertical if protocol == "B" else vertical)
    assert len(derived) == (3 if vertical else 0)
    secrets = [str(ADULT).encode(), str(ROOT).encode(), *generated, *derived]
    hellos = []
    for party, transport in run.transports.items():
        for sender, topic, payload in transport.recorded:
            if topic.endswith("/hello"):
                hellos.append(json.loads(codec.unpack_message(payload)["control"]))
            for view in views(payload):
                if not (protocol == "A" and party == "p1" and topic == "a/decoded"):
                    assert b"CANARY-" not in view, f"a cell value reached {party} from {sender} in {topic}"
                for secret in secrets:
                    assert secret not in view, f"a key or path reached {party} from {sender} in {topic}"
    # the integrating party learnt no count of the input: every hello announces 0 rows
    assert len(hellos) == (3 if protocol == "B" else 2) and all(h["rows"] == 0 for h in hellos)


def test_c_helper_learns_no_class_size_and_key_holder_no_cell(pooled) -> None:  # noqa: ANN001
    """C in a DP run: the helper receives the key holder's steps (the drawn transformation and
    the candidates to sum) and the report's `dp` entry without any row count; the key holder
    receives per candidate only encrypted class sizes and loss fractions; no cell value (a
    canary in every row of the insensitive column) reaches either during the search, and
    no hello announces a row count."""
    columns, rows, hierarchies = pooled
    canaries = [f"CANARY-{i:05d}-salary" for i in range(len(rows))]
    planted = [row[:-1] + [c] for row, c in zip(rows, canaries)]
    run = run_b((columns, planted, hierarchies), "horizontal", dp_config(seed=None), record=True, protocol="C",
                options={"counters": "elgamal"})
    key_holder = run.outcomes["p1"].report["dp"]
    assert key_holder["sampled_rows"] > 0 and "chosen_score" in key_holder["search"]
    helper_in = [(sender, topic, blob) for sender, topic, blob in run.transports["helper"].recorded]
    steps = [json.loads(blob) for _, topic, blob in helper_in if topic == "c/dp-step"]
    assert len(steps) >= 2 and all(set(step) in ({"pivot", "nodes"}, {"final", "dp"}) for step in steps)
    final = steps[-1]["dp"]
    assert "sampled_rows" not in final and "granularity_loss_of_sample" not in final
    assert "chosen_score" not in final["search"] and final["search"]["drawn"] == key_holder["search"]["drawn"]
    assert "sampled_rows" not in run.outcomes["p2"].report["dp"]   # the others hear the helper's report
    hellos = [json.loads(codec.unpack_message(blob)["control"]) for _, topic, blob in helper_in if topic == "c/hello"]
    assert len(hellos) == 3 and all(h["rows"] == 0 for h in hellos)
    # no suppression limit travels: without a limit it would be the number of sampled rows
    assert not any(topic == "c/facts" for _, topic, _ in helper_in)
    sums = [blob for _, topic, blob in run.transports["p1"].recorded if topic == "c/dp-sums"]
    assert len(sums) == len(steps) - 1
    for blob in sums:
        parts = codec.unpack_message(blob)
        assert set(json.loads(parts.pop("control"))) == {"nodes"}
        for part in parts.values():
            node = codec.unpack_message(part)
            assert set(json.loads(node.pop("control"))) == {"levels", "classes"} and set(node) == {"sizes", "weights"}
            assert node["sizes"][0] in (0x50, 0x45)   # a counter-sum message (Paillier / ElGamal), no count
    for party in ("helper", "p1"):
        for sender, topic, payload in run.transports[party].recorded:
            if topic in ("c/dp-step", "c/dp-sums", "c/setup", "c/facts", "c/data"):
                assert not any(b"CANARY-" in view for view in views(payload)), (party, topic)


def test_the_run_summary_fills_the_helpers_dp_entry_from_the_key_holders() -> None:
    """C's helper reports the `dp` entry without the row counts, the key holder with them: the
    summary written for the user takes the helper's and fills in what it lacks."""
    helper = {"transformation": {"age": 1}, "dp": {"k": 73, "search": {"drawn": [[1]]}}}
    key_holder = {"transformation": {"age": 1}, "suppressed_rows": 4,
                  "dp": {"k": 73, "sampled_rows": 900, "search": {"drawn": [[1]], "chosen_score": -2.5}}}
    summary = result_summary({"helper": helper, "p1": key_holder})
    assert summary["dp"] == {"k": 73, "sampled_rows": 900, "search": {"drawn": [[1]], "chosen_score": -2.5}}
    assert summary["suppressed_rows"] == 4 and "sampled_rows" not in helper["dp"]   # the reports are not changed


def test_c_refuses_class_means_with_dp_before_any_data_moves(pooled) -> None:  # noqa: ANN001
    columns, rows, hierarchies = pooled
    local = {f"p{i + 1}": s.local_data(hierarchies) for i, s in enumerate(split_horizontal(columns, rows, 3))}
    settings = RunSettings("dp-means", "C", "horizontal", dp_config(seed=1), PARTIES, "p1",
                           {"aggregate_means": ["salary-class"]})
    run = run_in_memory(settings, local, record=True, timeout_s=60)
    assert set(run.errors) == set(PARTIES)
    assert all("aggregate_means cannot be combined with --dp" in str(e) for e in run.errors.values())
    assert not any(t == "c/data" for _, t, _ in run.transports["helper"].recorded)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedanon", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)


QI_FLAGS = [f for q in QIS for f in ("--qi", f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}")]


def test_simulate_with_dp_flags_and_toml(tmp_path: Path) -> None:
    """`fedanon simulate --dp` with flags and with a run file: the same seeded release and a report
    that states the parameters; unsupported protocols and splits are refused in one line."""
    flags = ["--insensitive", "salary-class", "--dp", "2,1e-6", "--dp-steps", "8", "--dp-search-budget", "0.4",
             "--seed", "5", "--in-memory", "-q"]
    assert main(["simulate", str(ADULT / "adult.csv"), *QI_FLAGS, *flags, "-o", str(tmp_path / "f.csv"),
                 "--report", str(tmp_path / "f.json")]) == 0
    qi_table = "\n".join(f'{q} = "{ADULT / f"adult_hierarchy_{q}.csv"}"' for q in QIS)
    (tmp_path / "run.toml").write_text(
        f'input = "{ADULT / "adult.csv"}"\noutput = "{tmp_path / "t.csv"}"\ninsensitive = ["salary-class"]\n'
        'dp = {epsilon = 2, delta = 1e-6, steps = 8, search_budget = 0.4, seed = 5}\n'
        f"[qi]\n{qi_table}\n", encoding="utf-8")
    assert main(["simulate", "--config", str(tmp_path / "run.toml"), "--in-memory", "-q"]) == 0
    assert Counter((tmp_path / "f.csv").read_text().splitlines()) == \
        Counter((tmp_path / "t.csv").read_text().splitlines())
    report = json.loads((tmp_path / "f.json").read_text())
    dp = report["dp"]
    assert dp == report["party_reports"]["helper"]["dp"] == report["party_reports"]["p2"]["dp"]
    assert dp["epsilon"] == 2 and dp["delta"] == 1e-6 and dp["epsilon_search"] == 0.4 and dp["steps"] == 8
    assert dp["budget"]["entries"][-1]["detail"]["k"] == dp["k"] and dp["k"] > 1
    assert report["rows_written"] == dp["sampled_rows"] < 30162
    for extra, message in ((["--protocol", "A", "--verified"], "--verified"),
                           (["--baseline"], "--baseline"), (["--dp-steps", "0"], "--dp-steps"),
                           (["--dp-search-budget", "3"], "--dp-search-budget")):
        bad = _cli("simulate", str(ADULT / "adult.csv"), *QI_FLAGS, "--dp", "1,1e-6", "--in-memory", "-q",
                   "-o", "x.csv", *extra, cwd=tmp_path)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and message in bad.stderr, bad.stderr
    assert not (tmp_path / "x.csv").exists()


def test_anonymize_refuses_search_flags_with_dp(tmp_path: Path) -> None:
    """--workers, --node-budget, --time-limit and --backend tune the optimal search, which a --dp
    release does not run: refused in one line instead of ignored."""
    for extra in (["--workers", "2"], ["--node-budget", "10"], ["--time-limit", "5"], ["--backend", "dask"]):
        bad = _cli("anonymize", str(ADULT / "adult.csv"), *QI_FLAGS, "--dp", "1,1e-6", "-o", "x.csv", *extra,
                   cwd=tmp_path)
        assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and extra[0] in bad.stderr, bad.stderr
    assert not (tmp_path / "x.csv").exists()


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["B", "A"])
def test_daemons_release_a_dp_sample_over_grpc(tmp_path: Path, protocol: str) -> None:
    """The same through party daemons (real gRPC over mutual TLS), vertical: A's sampling key
    travels sealed under keys bound to the TLS certificates."""
    out = _cli("simulate", str(ADULT / "adult.csv"), *QI_FLAGS, "--insensitive", "salary-class", "--split",
               "vertical", "--protocol", protocol, "--dp", "1,1e-6", "--dp-steps", "10", "-o", "d.csv",
               "--report", "d.json", "-q", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    report = json.loads((tmp_path / "d.json").read_text())
    dp = report["dp"]
    assert dp["search_party"] == ("helper" if protocol == "B" else "p2")
    assert dp["seeded"] is False and report["rows_written"] == dp["sampled_rows"]
    assert abs(dp["sampled_rows"] / 30162 - dp["beta"]) < 0.02


@pytest.mark.slow
def test_fedanon_run_makes_a_dp_release_in_b_and_c(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    """`fedanon run` with `[privacy.dp]` in the run file, over party daemons (gRPC, mutual TLS)."""
    import tomli_w
    from example_parties import example_primaries

    from fedanon.parties.config import run_config_dict
    from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty

    (tmp_path / "shares").mkdir()
    parties = example_primaries(tmp_path / "shares", insensitive=["diagnosis"])
    parties.append(SimulatedParty("helper", "helper"))
    model = model_type("dp").parse("2,1e-6", ParseContext(options={"steps": 5}))
    with SimulatedNetwork(parties) as network:
        cfg = network.run_config("B", config=AnonymizationConfig(["age", "sex", "zipcode"], models=[model]))
        cfg.output, cfg.report = tmp_path / "result.csv", tmp_path / "report.json"
        run_toml = tmp_path / "run.toml"
        run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
        import tomllib

        models = tomllib.loads(run_toml.read_text())["privacy"]["models"]
        assert [m["model"] for m in models] == ["dp"] and models[0]["epsilon"] == 2
        assert main(["run", "--config", str(run_toml), "--no-progress"]) == 0
        report = json.loads((tmp_path / "report.json").read_text())
        dp = report["party_reports"]["helper"]["dp"]
        assert dp["epsilon"] == 2 and dp["k"] > 8 and dp["search_party"] == "helper"
        assert report["output_rows"] == dp["sampled_rows"]  # 8 rows, k > 8: every sampled row suppressed
        capsys.readouterr()
        assert main(["run", "--config", str(run_toml), "--protocol", "C", "--no-progress"]) == 0
        report = json.loads((tmp_path / "report.json").read_text())
        recipient = cfg.result_recipient
        dp = report["party_reports"][recipient]["dp"]   # C: the key holder (the recipient) draws
        assert dp["search_party"] == recipient and dp["epsilon"] == 2 and dp["k"] > 8
        assert "sampled_rows" not in report["party_reports"]["helper"]["dp"]
        assert report["output_rows"] == dp["sampled_rows"]
