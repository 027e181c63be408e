"""Deviating parties over real daemons (gRPC, mutual TLS, 127.0.0.1): a wrong release is never published.

Each test starts the daemons with `tests/deviations/` first on PYTHONPATH and one
deviation named in `FEDANON_TEST_DEVIATION`; that party's daemon rewrites one message as
an attacker would and otherwise follows the protocol. The run must fail at the
recipient with an error that names the deviation for what it is, and no output is written.
Honest runs of the same worlds are covered by the protocol daemon tests.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import fedanon
from fedanon.consortium.simulation import simulate_table
from fedanon.model.config import AnonymizationConfig
from fedanon.data.io.delimited import read_table_csv
from fedanon.errors import FedanonError

DATA = Path(fedanon.__file__).parent / "data" / "adult"
HOOKS = Path(__file__).parent / "deviations"
QIS = ["sex", "age", "race", "marital-status"]
COLUMNS = QIS + ["salary-class"]


@pytest.fixture(scope="module")
def adult():
    """Draw n ADULT rows (seeded): 400 for B; C needs 3,000, where the pseudotuples marked real
    no longer break the suppression limit (on fewer rows the key holder's judge notices them)."""
    columns, rows = read_table_csv(DATA / "adult.csv")
    idx = [columns.index(c) for c in COLUMNS]
    paths = {a: DATA / f"adult_hierarchy_{a}.csv" for a in COLUMNS}

    def sample(n: int):
        pick = np.random.default_rng(28).choice(len(rows), size=n, replace=False)
        return [[rows[i][j] for j in idx] for i in sorted(pick.tolist())], paths

    return sample


def _deviate(monkeypatch, deviation: str) -> None:
    monkeypatch.setenv("FEDANON_TEST_DEVIATION", deviation)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HOOKS), os.environ.get("PYTHONPATH", "")]))


def _simulate(adult, tmp_path, protocol: str, split: str = "horizontal", n: int = 400, **options):
    rows, paths = adult(n)
    config = AnonymizationConfig(QIS, k=5, suppression=0.02, metric="loss")
    return simulate_table(COLUMNS, rows, paths, config, split, 2, transport="grpc", protocol=protocol,
                          options=options, workdir=tmp_path)


@pytest.mark.parametrize("split", ["horizontal", "vertical"])
def test_b_helper_duplicating_every_row_is_caught(adult, tmp_path, monkeypatch, split) -> None:
    """Duplication doubles every class, so the privacy check and the own-rows check both pass;
    the primaries' own row counts, sent straight to the recipient, do not add up."""
    _deviate(monkeypatch, "b-helper-duplicates-rows")
    with pytest.raises(FedanonError) as caught:
        _simulate(adult, tmp_path, "B", split)
    text = str(caught.value)
    assert "the result holds 800 rows" in text and "announced" in text, text


def test_c_helper_marking_pseudotuples_real_is_caught(adult, tmp_path, monkeypatch) -> None:
    """Every counter re-encrypted as Enc(1): the key holder would keep the 25 % fake rows as real."""
    _deviate(monkeypatch, "c-helper-counters-all-real")
    with pytest.raises(FedanonError) as caught:
        _simulate(adult, tmp_path, "C", n=3000, counters="elgamal")
    text = str(caught.value)
    assert "the result holds 3750 rows" in text and "announced 3000" in text, text


def test_a_master_duplicating_every_row_is_caught(adult, tmp_path, monkeypatch) -> None:
    """Protocol A has no helper: its master anonymizes. Doubling the rows keeps every check but the count."""
    _deviate(monkeypatch, "a-master-duplicates-rows")
    with pytest.raises(FedanonError) as caught:
        _simulate(adult, tmp_path, "A")
    text = str(caught.value)
    assert "the master deviated" in text and "the result holds 800 rows" in text and "announced 400" in text, text


@pytest.mark.parametrize("deviation, named", [
    ("b-helper-drops-rows", "the result holds 390 rows, but the primaries announced 400"),
    ("b-helper-swaps-rows", "the multiset digest differs"),
    ("b-helper-reports-another-transformation", "the multiset digest differs"),
    ("b-helper-suppresses-more", "violates the run's privacy model"),
])
def test_b_helper_deviations_are_caught_and_named(adult, tmp_path, monkeypatch, deviation: str, named: str) -> None:
    _deviate(monkeypatch, deviation)
    with pytest.raises(FedanonError) as caught:
        _simulate(adult, tmp_path, "B")
    assert named in str(caught.value), str(caught.value)


def test_c_helper_swapping_the_counter_key_is_caught(adult, tmp_path, monkeypatch) -> None:
    """With its own counter key in the roster the helper could read every class size; the key holder's
    signature over its key (made with its TLS key) does not verify for the swapped one."""
    _deviate(monkeypatch, "c-helper-swaps-counter-key")
    with pytest.raises(FedanonError) as caught:
        _simulate(adult, tmp_path, "C", counters="elgamal")
    assert "counter key" in str(caught.value) or "signature" in str(caught.value), str(caught.value)


def test_c_helper_swapping_the_screening_key_is_caught(adult, tmp_path, monkeypatch) -> None:
    """Paillier counters with suppression and an entropy metric: the key holder also announces a
    screening key (an ElGamal key for the screening sums); a helper's own key in its place, sent
    to the other primary only, fails the key holder's signature there before any counter is
    encrypted under it."""
    _deviate(monkeypatch, "c-helper-swaps-screen-key")
    rows, paths = adult(400)
    config = AnonymizationConfig(QIS, k=5, suppression=0.02, metric="nonuniform-entropy")
    with pytest.raises(FedanonError) as caught:
        simulate_table(COLUMNS, rows, paths, config, "horizontal", 2, transport="grpc", protocol="C",
                       options={"counters": "paillier"}, workdir=tmp_path)
    assert "signature on the key-agreement public key of 'p1' is invalid" in str(caught.value), str(caught.value)
