"""Protocol A over real party daemons: gRPC over mutual TLS on 127.0.0.1, three data holders.

* every privacy model (k, ℓ, t equal/hierarchical, δ) horizontally and vertically equals
  the centralized engine (one set of daemons per split, several runs on it);
* `fedanon simulate --protocol A` and `fedanon run` with protocol = "A" and no helper;
* leakage: canaries planted at one party reach no other party except in the final
  output; no party but the master assembles the whole integrated table; and every
  element the master receives is classified by the exact set of encryption layers it
  carries (the test holds all keys): the integrated table arrives with all n layers,
  nothing ever arrives as a bare hashed value.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import tomli_w

from fedanon.cli import main as cli_main
from fedanon.crypto.commutative import EcCipher
from fedanon.model.config import AnonymizationConfig
from fedanon.model.privacy.presence import DeltaPresence
from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.model.privacy.tcloseness import TCloseness
from fedanon.data.io.delimited import read_table_csv, write_table_csv
from fedanon.data.hierarchy import Hierarchy
from fedanon.parties.wire import grpc_transport
from fedanon.parties.config import run_config_dict
from fedanon.parties.simulation import SimulatedNetwork, SimulatedParty
from fedanon.protocols.kit import codec
from fedanon.protocols.a import protocol as protocol_a
from fedanon.protocols.sim.equivalence import centralized, differences
from fedanon.protocols.sim.split import split_horizontal, split_vertical
from test_leakage import views

from datasets import EXAMPLE_DIR as EXAMPLE
QIS = ["age", "sex", "zipcode"]
CANARY_AGE = "CANARY-AGE-7f3a9c"
CANARY_DIAG = "CANARY-DIAGNOSIS-51be02"


def _example() -> tuple[list[str], list[list[str]], dict[str, Path]]:
    columns, rows = read_table_csv(EXAMPLE / "example.csv")
    paths = {a: EXAMPLE / f"example_hierarchy_{a}.csv" for a in QIS + ["diagnosis"]}
    return columns, rows, paths


def _parties(tmp: Path, columns, rows, paths: dict[str, Path], split: str, subset=None) -> list[SimulatedParty]:
    shares = split_horizontal(columns, rows, 3, research_subset=subset) if split == "horizontal" else \
        split_vertical(columns, rows, 3, research_subset=subset)
    parties = []
    for i, share in enumerate(shares):
        name = f"p{i + 1}"
        cols, data = list(share.columns), [list(r) for r in share.rows]
        subset_col = None
        if share.research_subset is not None:
            subset_col = "in_subset"
            cols.append(subset_col)
            data = [r + ["1" if f else "0"] for r, f in zip(data, share.research_subset)]
        write_table_csv(tmp / f"{name}.csv", cols, data)
        held = [c for c in share.columns if c != share.tid_column]
        parties.append(SimulatedParty(name, "primary", csv_path=tmp / f"{name}.csv",
                                      qi_hierarchies={c: paths[c] for c in held if c in QIS},
                                      sensitive={c: paths.get(c) for c in held if c not in QIS},
                                      tid_column=share.tid_column, subset_column=subset_col))
    return parties


MODELS = {
    "k": AnonymizationConfig(QIS, k=2, suppression=0.25),
    "recursive-l": AnonymizationConfig(QIS, k=1, l_diversity=LDiversity("recursive", 2, "diagnosis", c=4),
                                       metric="aecs"),
    "t-equal": AnonymizationConfig(QIS, t_closeness=TCloseness(0.3, "equal", "diagnosis")),
    "t-hierarchical": AnonymizationConfig(QIS, t_closeness=TCloseness(0.2, "hierarchical", "diagnosis"),
                                          suppression=0.25),
    "delta": AnonymizationConfig(QIS, k=2, delta_presence=DeltaPresence(0.0, 0.6)),
}


@pytest.mark.parametrize("split", ["horizontal", "vertical"])
def test_every_model_over_three_daemons_equals_centralized(tmp_path: Path, split: str) -> None:
    columns, rows, paths = _example()
    hierarchies = {a: Hierarchy.read_csv(p, a) for a, p in paths.items()}
    subset = np.array([i % 3 == 0 for i in range(len(rows))])
    with SimulatedNetwork(_parties(tmp_path, columns, rows, paths, split, subset)) as net:
        for name, config in MODELS.items():
            run_subset = subset if config.delta_presence is not None else None
            central = centralized(columns, rows, hierarchies, config, run_subset)
            outcome = net.run("A", split, config, "p1")
            assert outcome.output_rows is not None, name
            reports = outcome.report["party_reports"]
            assert set(reports) == {"p1", "p2", "p3"}  # no helper
            master = reports["p1"]["master"]
            assert master == "p2" and reports[master]["is_master"]
            assert differences(central, reports["p1"]["transformation"], outcome.output_columns,
                               outcome.output_rows) == [], name


def test_simulate_and_run_cli_with_protocol_a(tmp_path: Path, capsys) -> None:
    flags = [f"--qi={q}={EXAMPLE / f'example_hierarchy_{q}.csv'}" for q in QIS]
    out, rep, ref = tmp_path / "sim.csv", tmp_path / "sim.json", tmp_path / "ref.csv"
    assert cli_main(["simulate", "--protocol", "A", "--split", "vertical", "--parties", "3",
                     str(EXAMPLE / "example.csv"), *flags, "--k", "2", "--output", str(out),
                     "--report", str(rep), "-q"]) == 0
    assert cli_main(["anonymize", str(EXAMPLE / "example.csv"), *flags, "--k", "2", "--output", str(ref), "-q"]) == 0
    assert Counter(map(tuple, read_table_csv(out)[1])) == Counter(map(tuple, read_table_csv(ref)[1]))
    report = json.loads(rep.read_text())
    assert {r["party"] for r in report["phase_table"]} == {"p1", "p2", "p3"}
    assert {r["phase"] for r in report["phase_table"]} == set(protocol_a.PHASES)

    # `fedanon run` on running daemons, protocol = "A" in run.toml and no helper in [parties]
    columns, rows, paths = _example()
    with SimulatedNetwork(_parties(tmp_path, columns, rows, paths, "horizontal")) as net:
        cfg = net.run_config("A", "horizontal", AnonymizationConfig(QIS, k=2).to_dict(), "p3",
                             options={"verified": True})
        cfg.output, cfg.report = tmp_path / "run.csv", tmp_path / "run.json"
        run_toml = tmp_path / "run.toml"
        run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
        assert cli_main(["run", "--config", str(run_toml), "--no-progress"]) == 0
        report = json.loads((tmp_path / "run.json").read_text())
        assert report["protocol"] == "A" and set(report["party_reports"]) == {"p1", "p2", "p3"}
        assert all(r["verification"]["verified_by"] == ["p1", "p2", "p3"] for r in report["party_reports"].values())
        header, result = read_table_csv(tmp_path / "run.csv")  # the parties also declared diagnosis
        ref_header, ref_rows = read_table_csv(ref)
        keep = [header.index(c) for c in ref_header]
        assert Counter(tuple(r[i] for i in keep) for r in result) == Counter(map(tuple, ref_rows))
        # a helper in [parties] is refused before anything starts
        cfg.parties.append(type(cfg.parties[0])("p9", "127.0.0.1:1", "helper"))
        run_toml.write_bytes(tomli_w.dumps(run_config_dict(cfg)).encode())
        assert cli_main(["run", "--config", str(run_toml), "--no-progress"]) == 2
        assert "protocol A has only 'primary' parties" in capsys.readouterr().err


# ----------------------------------------------------------------------------- leakage over gRPC


def _planted(tmp: Path, split: str) -> tuple[list[SimulatedParty], str, dict[str, list[str]]]:
    columns, rows, paths = _example()
    age_rows = Path(paths["age"]).read_text().splitlines() + [f"{CANARY_AGE};61-99;*"]
    (tmp / "age.csv").write_text("\n".join(age_rows) + "\n")
    paths = {**paths, "age": tmp / "age.csv"}
    owner_row = 0 if split == "vertical" else 1  # p2 holds row 1 horizontally; p1 holds age+diagnosis vertically
    rows = [list(r) for r in rows]
    rows[owner_row][columns.index("age")] = CANARY_AGE
    rows[owner_row][columns.index("diagnosis")] = CANARY_DIAG
    parties = _parties(tmp, columns, rows, paths, split)
    owner = "p1" if split == "vertical" else "p2"
    domains = {c: sorted({r[j] for r in rows}) for j, c in enumerate(columns)}
    for q in QIS:
        domains[q] = sorted(set(domains[q]) | {v.decode() for row in Hierarchy.read_csv(paths[q], q).rows for v in row})
    domains["tid"] = [str(i + 1) for i in range(len(rows))]
    return parties, owner, domains


@pytest.mark.parametrize("split", ["horizontal", "vertical"])
def test_leakage_over_grpc(tmp_path: Path, split: str, monkeypatch: pytest.MonkeyPatch) -> None:
    received: dict[str, list[tuple[str, str, bytes]]] = {}
    real_receive = grpc_transport.GrpcTransport.receive

    def recording_receive(self, sender, topic, *args, **kwargs):
        payload = real_receive(self, sender, topic, *args, **kwargs)
        received.setdefault(self.me, []).append((sender, topic, payload))
        return payload

    monkeypatch.setattr(grpc_transport.GrpcTransport, "receive", recording_receive)
    keys: dict[str, protocol_a.ColumnKeys] = {}
    real_init = protocol_a.ColumnKeys.__init__

    def spy_init(self, owner, *args, **kwargs):
        real_init(self, owner, *args, **kwargs)
        keys[owner] = self

    monkeypatch.setattr(protocol_a.ColumnKeys, "__init__", spy_init)

    parties, owner, domains = _planted(tmp_path, split)
    # recipient p3 -> master p1 (the recipient's right neighbour); 1-diverse keeps the diagnosis canary
    config = AnonymizationConfig(QIS, k=1, l_diversity=LDiversity("distinct", 1, "diagnosis"))
    with SimulatedNetwork(parties, in_process=True) as net:
        outcome = net.run("A", split, config, "p3")
    master, recipient = "p1", "p3"
    assert outcome.report["party_reports"][master]["is_master"]
    assert any(CANARY_DIAG in row for row in outcome.output_rows)  # the canary is in the final output ...

    # ... and reaches nobody else, except the owner's decoded values sent to the recipient at the very end
    canaries = [CANARY_AGE.encode(), CANARY_DIAG.encode()]
    for party, messages in received.items():
        if party == owner:
            continue
        assert messages
        for sender, topic, payload in messages:
            if party == recipient and topic == "a/decoded" and sender == owner:
                continue  # the final output, decoded by its owner for the recipient
            for view in views(payload):
                for canary in canaries:
                    assert canary not in view, f"{canary!r} reached {party} from {sender} in {topic}"

    # no party but the master assembles the whole integrated table: every table anyone receives
    # before the result lacks rows (horizontal) or columns (vertical)
    total_rows = 8
    all_columns = {"age", "sex", "zipcode", "diagnosis"}
    for party, messages in received.items():
        for sender, topic, payload in messages:
            if not topic.startswith(("a/enc/", "a/int")):
                continue
            parts = codec.unpack_message(payload)
            cols, codes, _ = codec.decode_table_parts(parts["table"])
            assert codes.shape[0] < total_rows or set(cols) != all_columns, (party, topic)
    integration = outcome.report["party_reports"][master]["integration"]
    assert integration["rows"] == total_rows and set(integration["columns"]) == all_columns

    # classify every element the master received by the exact set of layers it carries
    run_id = outcome.run_id
    ring = ["p1", "p2", "p3"]
    layers_of: dict[bytes, frozenset[str]] = {}
    for column, values in domains.items():
        if split == "horizontal" and column == "tid":
            continue
        hashed = EcCipher.hash_to_group([protocol_a.hash_input(run_id, column, v) for v in values], workers=1)
        for size in range(len(ring) + 1):
            for subset in itertools.combinations(ring, size):
                elements = hashed
                for party in subset:
                    elements = keys[party].keys[column].encrypt_many(elements, workers=1)
                for e in elements:
                    layers_of[e] = frozenset(subset)
    seen: Counter = Counter()
    for sender, topic, payload in received[master]:
        if not topic.startswith(("a/enc/", "a/int")):
            continue
        parts = codec.unpack_message(payload)
        _cols, _codes, dictionaries = codec.decode_table_parts(parts["table"])
        elements = [e for d in dictionaries for e in d]
        raw = parts.get("tids", b"")
        elements += [raw[i:i + 32] for i in range(0, len(raw), 32)]
        for e in elements:
            assert e in layers_of, f"{topic}: an element the test cannot classify"
            layers = layers_of[e]
            assert layers, f"{topic}: a bare hashed value reached the master"
            if topic == "a/int":
                # the table the master integrates: every one of the n parties has encrypted it
                assert layers == frozenset(ring), (topic, sorted(layers))
            else:  # on the way round the ring the master adds its own layer itself
                assert master not in layers, (topic, sorted(layers))
            seen[(topic, len(layers))] += 1
    assert seen[("a/int", 3)] > 0 and seen[("a/enc/1", 1)] > 0 and seen[("a/enc/2", 2)] > 0
