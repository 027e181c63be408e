"""A party's own engine setting (`[engine]` in party.toml): parsed, refused in one line, used, never sent.

The party that runs the search (Protocol B's helper, Protocol A's master) groups rows where its
config says: `fedanon simulate --protocol B --backend dask` over real daemons (gRPC, mutual TLS on loopback)
must release exactly what `fedanon anonymize` does, on the running example and on an ADULT
sample, with the row groupings really on the Dask cluster (the scheduler of the local test
cluster counts the tasks the helper sent it). The setting is the party's own compute: it is in
no message a role sends (every payload of an in-memory B and A run is scanned for the
scheduler's address and the engine's report keys) and not in what the coordinator collects. A bad `[engine]` value is refused by
`party check-config` (and so by `party serve`, which loads the same way) in one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import tomli_w

distributed = pytest.importorskip("distributed")

from fedanon.cli import main  # noqa: E402
from fedanon.consortium.simulation import party_roles  # noqa: E402
from fedanon.data.hierarchy import Hierarchy  # noqa: E402
from fedanon.data.table import EncodedTable  # noqa: E402
from fedanon.engine import anonymize  # noqa: E402
from fedanon.engine import settings as settings_module  # noqa: E402
from fedanon.engine.settings import ENGINE_FACTS, EngineSettings  # noqa: E402
from fedanon.errors import InputError  # noqa: E402
from fedanon.model.config import AnonymizationConfig  # noqa: E402
from fedanon.parties.config import DataConfig, PartyConfig, TlsFiles, load_party_config, party_config_dict  # noqa: E402
from fedanon.protocols.kit.api import RunSettings  # noqa: E402
from fedanon.protocols.sim.local_run import run_in_memory  # noqa: E402
from fedanon.protocols.sim.split import split_horizontal  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from datasets import ADULT_DIR  # noqa: E402
from model_cases import EXAMPLE, QI_FLAGS, released  # noqa: E402
from test_dask_backend import WORKERS, cluster  # noqa: E402,F401  (the module's local cluster fixture)


# ----------------------------------------------------------------------------- the [engine] table
def _party_toml(tmp_path: Path, engine: dict | None) -> Path:
    cfg = PartyConfig(name="helper", listen="127.0.0.1:0",
                      tls=TlsFiles(tmp_path / "helper.crt", tmp_path / "helper.key", tmp_path / "ca.crt"),
                      peers={"p1": "127.0.0.1:1"}, coordinators=["steward"],
                      data=DataConfig(csv=EXAMPLE / "example.csv"))
    doc = party_config_dict(cfg)
    if engine is not None:
        doc["engine"] = engine
    path = tmp_path / "helper.toml"
    path.write_bytes(tomli_w.dumps(doc).encode())
    return path


def test_engine_table_read_and_written_back(tmp_path):
    assert load_party_config(_party_toml(tmp_path, None)).engine == EngineSettings()
    given = {"backend": "dask", "workers": 3, "scheduler": "tcp://10.0.0.1:8786"}
    cfg = load_party_config(_party_toml(tmp_path, given))
    assert cfg.engine == EngineSettings("dask", 3, "tcp://10.0.0.1:8786")
    assert party_config_dict(cfg)["engine"] == given  # the simulation harness writes it back the same
    assert load_party_config(_party_toml(tmp_path, {"workers": "auto"})).engine.workers == "auto"
    assert "engine" not in party_config_dict(load_party_config(_party_toml(tmp_path, None)))


@pytest.mark.parametrize("engine, needle", [
    ({"backend": "spark"}, "engine.backend: unknown backend 'spark'"),
    ({"workers": 0}, "engine.workers must be >= 1, got 0"),
    ({"workers": "many"}, "engine.workers must be a whole number >= 1 or 'auto', got 'many'"),
    ({"workers": 2.5}, "key 'engine.workers' has the wrong type"),
    ({"scheduler": "tcp://10.0.0.1:8786"}, "engine.scheduler 'tcp://10.0.0.1:8786' needs engine.backend dask"),
    ({"backend": "dask", "scheduler": "10.0.0.1"}, "engine.scheduler must be an address like tcp://HOST:8786"),
    ({"backend": "dask", "worker": 2}, "unknown key 'worker' in [engine] (did you mean 'workers'?)"),
])
def test_check_config_refuses_a_bad_engine_value_in_one_line(tmp_path, capsys, engine, needle):
    path = _party_toml(tmp_path, engine)
    assert main(["party", "check-config", "--config", str(path)]) == 2
    out, err = capsys.readouterr()
    assert needle in err and str(path) in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err and "config: ok" not in out


def test_dask_backend_without_the_library_refused_at_load(tmp_path, monkeypatch):
    monkeypatch.setattr(settings_module, "find_spec", lambda name: None if name == "distributed" else object())
    with pytest.raises(InputError, match=r"engine.backend dask needs dask\[distributed\]: pip install"):
        load_party_config(_party_toml(tmp_path, {"backend": "dask"}))


@pytest.mark.parametrize("flags, needle", [(["--backend", "spark"], "--backend: unknown backend 'spark'"),
                                           (["--workers", "0"], "--workers must be >= 1"),
                                           (["--scheduler", "tcp://127.0.0.1:1"], "--scheduler 'tcp://127.0.0.1:1' "
                                                                                 "needs --backend dask")])
def test_simulate_refuses_bad_engine_flags_before_any_party_starts(tmp_path, capsys, flags, needle):
    code = main(["simulate", "--protocol", "B", str(EXAMPLE / "example.csv"), *QI_FLAGS, "--k", "2",
                 "-o", str(tmp_path / "out.csv"), "-q", *flags])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out.csv").exists()


# ----------------------------------------------------------------------------- Protocol B, Dask-backed helper
def _tasks(client) -> int:
    """Tasks the test cluster's scheduler has processed so far (any client's)."""
    return client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)


def _simulate_equals_anonymize(tmp_path: Path, table: Path, flags: list[str], engine: list[str]) -> dict:
    sim, ref, report = tmp_path / "sim.csv", tmp_path / "ref.csv", tmp_path / "sim.json"
    assert main(["simulate", "--protocol", "B", "--parties", "2", str(table), *flags, "-o", str(sim),
                 "--report", str(report), "-q", *engine]) == 0
    assert main(["anonymize", str(table), *flags, "-o", str(ref), "-q"]) == 0
    assert released(sim) == released(ref)  # same transformation (the generalized cells) and rows
    return json.loads(report.read_text())


def _assert_engine_not_reported(report: dict, *secrets: str) -> None:
    """What the coordinator collected from every party holds nothing of the helper's engine."""
    text = json.dumps(report["party_reports"])
    for key in ENGINE_FACTS:
        assert f'"{key}"' not in text
    for secret in secrets:
        assert secret not in text


def test_simulate_b_with_a_dask_helper_equals_anonymize_on_the_example(tmp_path, cluster):  # noqa: F811
    address, client = cluster
    before = _tasks(client)
    report = _simulate_equals_anonymize(tmp_path, EXAMPLE / "example.csv", [*QI_FLAGS, "--k", "2"],
                                        ["--backend", "dask", "--scheduler", address])
    assert _tasks(client) > before  # the helper's row groupings ran on this cluster
    assert report["transformation"] == {"age": 1, "sex": 0, "zipcode": 3}
    _assert_engine_not_reported(report, address, "dask")


def _adult_sample(tmp_path: Path, rows: int = 400) -> tuple[Path, list[str]]:
    lines = (ADULT_DIR / "adult.csv").read_text().splitlines()
    path = tmp_path / "adult-sample.csv"
    path.write_text("\n".join(lines[:rows + 1]) + "\n")
    qis = ["sex", "age", "race", "marital-status", "education"]
    return path, [f"--qi={q}={ADULT_DIR / f'adult_hierarchy_{q}.csv'}" for q in qis]


@pytest.mark.slow
def test_simulate_b_with_a_dask_helper_equals_anonymize_on_adult(tmp_path, cluster):  # noqa: F811
    address, client = cluster
    table, qi_flags = _adult_sample(tmp_path)
    before = _tasks(client)
    report = _simulate_equals_anonymize(tmp_path, table, [*qi_flags, "--k", "5", "--suppression", "0.05"],
                                        ["--backend", "dask", "--scheduler", address])
    assert _tasks(client) > before
    _assert_engine_not_reported(report, address, "dask")


@pytest.mark.slow
def test_simulate_b_with_a_local_dask_cluster_of_two_workers(tmp_path):
    """`--backend dask --workers 2` without a scheduler: the helper's daemon starts (and stops) its own
    local cluster on loopback for the search."""
    _simulate_equals_anonymize(tmp_path, EXAMPLE / "example.csv", [*QI_FLAGS, "--k", "2"],
                               ["--backend", "dask", "--workers", str(WORKERS)])


# ----------------------------------------------------------------------------- never in a message
@pytest.mark.parametrize("protocol", ["B", "A"])  # the searching role: B's helper, A's master
def test_engine_setting_is_in_no_payload(protocol, cluster):  # noqa: F811
    """Every payload of a run whose searching party uses the Dask cluster, scanned for the
    scheduler's address and the engine's report keys; the release equals the central engine's."""
    address, client = cluster
    columns = ["age", "sex", "zipcode", "diagnosis"]
    rows = [line.split(";") for line in (EXAMPLE / "example.csv").read_text().splitlines()[1:]]
    hierarchies = {c: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{c}.csv", c) for c in columns[:3]}
    config = AnonymizationConfig(columns[:3], k=2)
    shares = split_horizontal(columns, rows, 3, "round-robin", None)
    local = {f"p{i + 1}": share.local_data(hierarchies) for i, share in enumerate(shares)}
    settings = RunSettings(f"engine-private-{protocol}", protocol, "horizontal", config,
                           party_roles(list(local), protocol), "p1")
    before = _tasks(client)
    run = run_in_memory(settings, local, record=True, engine=EngineSettings("dask", WORKERS, address))
    assert not run.errors, run.errors
    assert _tasks(client) > before  # the search's row groupings went to the cluster
    outcome = run.recipient_outcome
    central = anonymize(EncodedTable.from_rows(columns, rows), hierarchies, config)
    assert outcome is not None and outcome.output_rows is not None and outcome.output_columns is not None
    at = [list(central.output.columns).index(c) for c in outcome.output_columns]
    want = [tuple(row[i].decode() for i in at) for row in central.output.decode_rows()]
    assert sorted(map(tuple, outcome.output_rows)) == sorted(want)
    payloads = [payload for transport in run.transports.values() for _, _, payload in transport.recorded or []]
    assert payloads
    for payload in payloads:
        assert address.encode() not in payload and address.removeprefix("tcp://").encode() not in payload
        for key in ENGINE_FACTS:
            assert f'"{key}"'.encode() not in payload


@pytest.mark.slow  # the client tries to connect for 20 s
def test_an_unreachable_scheduler_stops_the_run_without_naming_it():
    """The helper's cluster cannot be reached: every party learns that the run stopped in the engine,
    none learns the address."""
    address = "tcp://127.0.0.1:1"  # nothing listens on port 1
    columns = ["age", "sex", "zipcode", "diagnosis"]
    rows = [line.split(";") for line in (EXAMPLE / "example.csv").read_text().splitlines()[1:]]
    hierarchies = {c: Hierarchy.read_csv(EXAMPLE / f"example_hierarchy_{c}.csv", c) for c in columns[:3]}
    shares = split_horizontal(columns, rows, 2, "round-robin", None)
    local = {f"p{i + 1}": share.local_data(hierarchies) for i, share in enumerate(shares)}
    settings = RunSettings("engine-unreachable", "B", "horizontal", AnonymizationConfig(columns[:3], k=2),
                           party_roles(list(local), "B"), "p1")
    run = run_in_memory(settings, local, record=True, engine=EngineSettings("dask", 1, address))
    assert set(run.errors) == set(settings.parties)
    for party, exc in run.errors.items():
        assert "anonymization failed at the helper" in str(exc) and "127.0.0.1:1" not in str(exc), (party, exc)
    for transport in run.transports.values():
        for _, _, payload in transport.recorded or []:
            assert b"127.0.0.1:1" not in payload
