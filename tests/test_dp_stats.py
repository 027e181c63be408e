"""`fedanon stats`: exact contingency tables, noise calibrated to the budget split, the ledger."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.dp.marginals import MarginalSpec, contingency
from fedanon.dp.statistics import release_statistics
from fedanon.dp.randomness import Randomness
from fedanon.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT / "fedanon" / "data" / "adult"


class Recording(Randomness):
    """Noise of zero that records what it was asked for (scale and size)."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[int, float]] = []

    def bernoulli(self, n, p):  # noqa: ANN001, ANN201
        raise AssertionError("statistics sample nothing")

    def exponential_mechanism(self, scores, epsilon, sensitivity=1.0):  # noqa: ANN001, ANN201
        raise AssertionError("statistics select nothing")

    def discrete_laplace(self, size, scale):  # noqa: ANN001, ANN201
        self.calls.append((size, scale))
        return np.zeros(size, dtype=np.int64)


@pytest.fixture(scope="module")
def adult() -> tuple[pd.DataFrame, EncodedTable, dict[str, Hierarchy]]:
    df = pd.read_csv(ADULT / "adult.csv", sep=";", dtype=str)
    table = EncodedTable.from_rows(list(df.columns), df.itertuples(index=False, name=None))
    hierarchies = {q: Hierarchy.read_csv(ADULT / f"adult_hierarchy_{q}.csv", q) for q in ("age", "sex", "race")}
    return df, table, hierarchies


def test_contingency_counts_every_cell_of_the_hierarchy_domain(adult) -> None:  # noqa: ANN001
    df, table, hierarchies = adult
    domains, counts = contingency(table, hierarchies, MarginalSpec.parse("sex,race"))
    expected = df.groupby(["sex", "race"]).size()
    for (i, sex), (j, race) in ((a, b) for a in enumerate(domains[0]) for b in enumerate(domains[1])):
        assert counts[i, j] == expected.get((sex.decode(), race.decode()), 0)
    # age at level 0: the hierarchy lists ages no row holds; their cells are counted (as 0)
    domains, counts = contingency(table, hierarchies, MarginalSpec.parse("age"))
    assert len(domains[0]) > df["age"].nunique() and (counts == 0).any()
    assert counts.sum() == len(df)


def test_noise_scale_follows_the_budget_split(adult) -> None:  # noqa: ANN001
    _df, table, hierarchies = adult
    rng = Recording()
    out = release_statistics(table, hierarchies, [MarginalSpec.parse("sex,race"), MarginalSpec.parse("age:1")],
                             2.0, rng)
    # three queries (total + two marginals) of sensitivity 1 share ε = 2: scale 3/2 each
    assert rng.calls[0] == (1, 1.5)
    assert rng.calls[1][1] == 1.5 and rng.calls[2][1] == 1.5
    assert out["budget"]["epsilon_spent"] == pytest.approx(2.0)
    assert [e["epsilon"] for e in out["budget"]["entries"]] == pytest.approx([2 / 3] * 3)
    assert out["total"]["count"] == table.n_rows   # zero noise recorded: the exact count shows through
    with pytest.raises(InputError, match="no hierarchy"):
        release_statistics(table, hierarchies, [MarginalSpec.parse("education")], 1.0, rng)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedanon", "stats", *args], cwd=cwd, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)


def test_stats_command(tmp_path: Path) -> None:
    args = [str(ADULT / "adult.csv"), "--epsilon", "1", "--marginal", "sex,race", "--marginal", "age:2",
            "--hierarchy", f"sex={ADULT / 'adult_hierarchy_sex.csv'}",
            "--hierarchy", f"race={ADULT / 'adult_hierarchy_race.csv'}",
            "--hierarchy", f"age={ADULT / 'adult_hierarchy_age.csv'}"]
    one = _cli(*args, "--seed", "5", "-o", "one.json", cwd=tmp_path)
    two = _cli(*args, "--seed", "5", "-o", "two.json", cwd=tmp_path)
    assert one.returncode == 0 and two.returncode == 0, one.stderr
    assert "tests only" in one.stderr
    assert (tmp_path / "one.json").read_text() == (tmp_path / "two.json").read_text()
    real = _cli(*args, "-o", "real.json", cwd=tmp_path)
    assert real.returncode == 0, real.stderr
    out = json.loads((tmp_path / "real.json").read_text())
    assert out["seeded"] is False and out["mechanism"].startswith("discrete Laplace (OpenDP")
    assert out["budget"]["epsilon_spent"] == pytest.approx(1.0)
    sex_race = out["marginals"][0]
    assert len(sex_race["cells"]) == 2 * 5 and sex_race["scale"] == pytest.approx(3.0)
    noisy_total = sum(c[-1] for c in sex_race["cells"])
    assert abs(noisy_total - 30162) < 200      # ten cells of scale-3 noise
    bad = _cli(str(ADULT / "adult.csv"), "--epsilon", "-1", "--marginal", "sex", "-o", "x.json", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--epsilon" in bad.stderr
