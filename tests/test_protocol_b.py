"""Protocol B over the in-memory transport: equivalence with the centralized engine, and errors.

The central property (docs/design.md): for every split, party count, privacy model and
suppression limit, the decrypted result equals what the engine computes on the pooled
plaintext -- same transformation, same row multiset. When the pooled data has no
solution, every party must stop with NoSolutionError.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedanon.model.config import AnonymizationConfig

from fedanon.model.privacy.presence import DeltaPresence

from fedanon.model.privacy.ldiversity import LDiversity
from fedanon.data.hierarchy import Hierarchy
from fedanon.engine.result import NoSolutionError
from fedanon.errors import ProtocolError
from fedanon.protocols.kit.api import LocalData
from fedanon.protocols.sim.local_run import LocalRun, run_in_memory
from protocol_cases import (
    EX_ATTRS,
    EX_QIS,
    MODELS,
    assert_all_fail,
    check_equivalent,
    load,
    research_subset,
    run_protocol,
    sample_adult,
    settings_for,
    shares_for,
)

ADULT_QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]


@pytest.fixture(scope="module")
def example() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    return load("example", EX_ATTRS)


@pytest.fixture(scope="module")
def adult_sample() -> tuple[list[str], list[list[str]], dict[str, Hierarchy]]:
    return sample_adult(ADULT_QIS + ["salary-class"], 1500, seed=20240501, keep_all_columns=True)


def run_b(columns: list[str], rows: list[list[str]], hierarchies: dict[str, Hierarchy], config: AnonymizationConfig,
          distribution: str, n: int, subset: np.ndarray | None = None, options: dict | None = None,
          recipient: str = "p1", record: bool = False) -> tuple[LocalRun, dict[str, LocalData]]:
    return run_protocol("B", (columns, rows, hierarchies), config, distribution, n, subset, options, recipient,
                        record, timeout_s=120)


def assert_equivalent(columns, rows, hierarchies, config, distribution, n, subset=None, options=None,
                      recipient: str = "p1") -> LocalRun:
    run, central = check_equivalent("B", (columns, rows, hierarchies), config, distribution, n, subset, options,
                                    recipient, timeout_s=120)
    if central is not None:  # the helper ran the engine on ciphertext: same node, same loss
        helper = run.outcomes["helper"]
        assert helper.report["transformation"] == central.result.transformation
        assert helper.report["information_loss"] == pytest.approx(central.result.information_loss)
    return run


_subset = research_subset


@pytest.mark.parametrize("suppression", [0.0, 0.02])
@pytest.mark.parametrize("model", ["k", "recursive-l", "t-equal", "t-hierarchical", "delta"])
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
def test_adult_sample_equals_centralized(adult_sample, distribution: str, n: int, model: str,
                                         suppression: float) -> None:
    columns, rows, hierarchies = adult_sample
    qis = ADULT_QIS[:5]
    config = MODELS[model](qis, "salary-class", suppression, "loss" if model == "k" else "nonuniform-entropy")
    if model == "k":
        config.k = 5
    columns = qis + ["salary-class"]
    index = [list(adult_sample[0]).index(c) for c in columns]
    rows = [[r[i] for i in index] for r in rows]
    subset = _subset(len(rows)) if model == "delta" else None
    assert_equivalent(columns, rows, hierarchies, config, distribution, n, subset)


def test_vertical_per_party_keys_and_other_recipient(example) -> None:
    columns, rows, hierarchies = example
    config = AnonymizationConfig(EX_QIS, k=2, suppression=0.25)
    run = assert_equivalent(columns, rows, hierarchies, config, "vertical", 3, options={"per_party_keys": True},
                            recipient="p3")
    # with per-party keys, the other owners took part in the decrypt phase
    for p in ("p1", "p2"):
        assert run.outcomes[p].report["traffic"]["bytes_sent_by_phase"].get("decrypt", 0) > 0


def test_report_has_phases_and_bytes(example) -> None:
    columns, rows, hierarchies = example
    run, _ = run_b(columns, rows, hierarchies, AnonymizationConfig(EX_QIS, k=2), "horizontal", 2)
    assert not run.errors
    for name, outcome in run.outcomes.items():
        assert set(outcome.report["phases"]) == {"encrypt", "integrate", "anonymize", "decrypt"}
    helper = run.outcomes["helper"].report
    assert helper["phases"]["anonymize"] > 0
    # the recipient's check of the result is timed on its own (benchmarks report it apart)
    check = run.outcomes["p1"].report["result_check_s"]
    assert 0 < check <= run.outcomes["p1"].report["phases"]["decrypt"]
    received = helper["traffic"]["bytes_received_by_phase"]
    assert received["encrypt"] > 0
    sent = helper["traffic"]["bytes_sent_by_phase"]
    assert sent["decrypt"] > 0
    assert helper["integration"]["hierarchy_rules_received"] > helper["integration"]["hierarchy_rules_kept"]


def test_hierarchy_scope_data_sends_fewer_rules(example) -> None:
    columns, rows, hierarchies = example
    config = AnonymizationConfig(EX_QIS, k=2)
    full, _ = run_b(columns, rows, hierarchies, config, "horizontal", 3)
    part, _ = run_b(columns, rows, hierarchies, config, "horizontal", 3, options={"hierarchy_scope": "data"})
    assert not full.errors and not part.errors
    assert (part.outcomes["helper"].report["integration"]["hierarchy_rules_received"]
            < full.outcomes["helper"].report["integration"]["hierarchy_rules_received"])
    assert part.outcomes["p1"].report["transformation"] == full.outcomes["p1"].report["transformation"]


# ----------------------------------------------------------------------------- errors


def _all_fail(run: LocalRun, n: int, pattern: str, kind: type = ProtocolError) -> None:
    assert_all_fail(run, "B", n, pattern, kind)


def _shares(example, distribution: str, n: int = 3) -> dict[str, LocalData]:
    return shares_for(example, distribution, n)


def _run(local: dict[str, LocalData], distribution: str, config=None, options=None, record=False) -> LocalRun:
    config = config or AnonymizationConfig(EX_QIS, k=2)
    return run_in_memory(settings_for("B", distribution, len(local), config, options), local, record=record,
                         timeout_s=60)


def test_schema_mismatch_stops_every_party_before_data(example) -> None:
    local = _shares(example, "horizontal")
    local["p3"].columns = ["age", "sex", "zip", "diagnosis"]
    run = _run(local, "horizontal", record=True)
    _all_fail(run, 3, "schema mismatch (horizontal): party 'p3'")
    assert "'zip'" in str(run.errors["p1"])
    # nothing but hellos reached the helper: no b/data was ever sent
    topics = {topic for _, topic, _ in run.transports["helper"].recorded}
    assert topics == {"b/hello"}


def test_vertical_overlapping_columns(example) -> None:
    local = _shares(example, "vertical")
    ages = [r[0] for r in example[1]]
    local["p2"].columns.append("age")  # p1 holds age too
    local["p2"].rows = [row + [age] for row, age in zip(local["p2"].rows, ages)]
    local["p2"].hierarchies = dict(local["p2"].hierarchies, age=example[2]["age"])
    run = _run(local, "vertical")
    _all_fail(run, 3, "column 'age' is held by both party 'p1' and party 'p2'")


def test_conflicting_hierarchies_named_by_owners_only(example) -> None:
    local = _shares(example, "horizontal")
    rows = [list(r) for r in example[2]["age"].rows]
    i = next(i for i, r in enumerate(rows) if r[0] == b"18")
    rows[i][1] = b"20-60"  # 18 -> 20-60 at p3 but 18 -> 1-19 elsewhere
    local["p3"].hierarchies = dict(local["p3"].hierarchies, age=Hierarchy.from_rows("age", rows))
    run = _run(local, "horizontal")
    _all_fail(run, 3, "hierarchies of column 'age' disagree between party 'p1' and party 'p3'")
    assert "'18'" in str(run.errors["p1"]) and "'18'" in str(run.errors["p3"])
    assert "'18'" not in str(run.errors["p2"]) and "'18'" not in str(run.errors["helper"])


def test_hierarchy_height_mismatch(example) -> None:
    local = _shares(example, "horizontal", 2)
    rows = [r[:-1] for r in example[2]["zipcode"].rows]
    local["p2"].hierarchies = dict(local["p2"].hierarchies, zipcode=Hierarchy.from_rows("zipcode", rows))
    run = _run(local, "horizontal")
    _all_fail(run, 2, "hierarchies of column 'zipcode' differ: 6 levels at party 'p1', 5 at party 'p2'")


def test_duplicate_tids_stop_before_data(example) -> None:
    local = _shares(example, "vertical")
    local["p2"].rows[3][0] = local["p2"].rows[0][0]
    run = _run(local, "vertical", record=True)
    _all_fail(run, 3, "duplicate TIDs in column 'tid'")
    assert "'1'" in str(run.errors["p2"])  # the owner sees the value ...
    assert "'1'" not in str(run.errors["p1"]) and "'1'" not in str(run.errors["helper"])  # ... nobody else
    assert {topic for _, topic, _ in run.transports["helper"].recorded} == {"b/hello"}


def test_missing_tids_detected_on_ciphertext(example) -> None:
    local = _shares(example, "vertical")
    local["p3"].rows[4][0] = "9999"
    run = _run(local, "vertical")
    _all_fail(run, 3, "TID sets differ between the parties")
    assert "9999" in str(run.errors["p3"]) and "9999" not in str(run.errors["helper"])


def test_value_missing_from_hierarchy_named_locally(example) -> None:
    local = _shares(example, "horizontal", 2)
    local["p2"].rows[0][0] = "131"
    run = _run(local, "horizontal")
    _all_fail(run, 2, "value(s) of column 'age' are missing from its hierarchy")
    assert "'131'" in str(run.errors["p2"]) and "'131'" not in str(run.errors["helper"])


def test_delta_presence_flags_must_sit_at_one_party_vertically(example) -> None:
    local = _shares(example, "vertical", 2)
    for share in local.values():
        share.research_subset = _subset(8)
    config = AnonymizationConfig(EX_QIS, k=2, delta_presence=DeltaPresence(0.0, 0.6))
    run = _run(local, "vertical", config=config)
    _all_fail(run, 2, "exactly one party must hold the research-subset flags")


def test_per_party_keys_rejected_for_horizontal(example) -> None:
    run = _run(_shares(example, "horizontal", 2), "horizontal", options={"per_party_keys": True})
    _all_fail(run, 2, "per_party_keys applies only to vertical")


def test_no_solution_reaches_every_party(example) -> None:
    config = AnonymizationConfig(EX_QIS, k=9)  # more than the 8 rows
    run = _run(_shares(example, "horizontal", 2), "horizontal", config=config)
    _all_fail(run, 2, "", kind=NoSolutionError)


def test_local_failure_aborts_the_others_quickly(example) -> None:
    from fedanon.errors import PeerError

    local = _shares(example, "horizontal", 3)
    local["p2"] = None  # p2 cannot even start: the others must not wait for its hello
    run = _run(local, "horizontal")
    assert isinstance(run.errors["p2"], ProtocolError) and "has no local data" in str(run.errors["p2"])
    for party in ("p1", "p3", "helper"):
        assert isinstance(run.errors[party], PeerError), (party, run.errors.get(party))
        assert "'p2'" in str(run.errors[party])
    assert run.elapsed_s < 10


@pytest.mark.parametrize("distribution", ["horizontal", "vertical"])
def test_shared_keys_other_recipient(example, distribution: str) -> None:
    columns, rows, hierarchies = example
    config = AnonymizationConfig(EX_QIS, l_diversity=LDiversity("distinct", 2, "diagnosis"), suppression=0.25)
    assert_equivalent(columns, rows, hierarchies, config, distribution, 3, recipient="p2")
