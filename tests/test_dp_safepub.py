"""SafePub: derived parameters against the paper's formula, the score's sensitivity, and the
release through every entry point (flag, TOML, anonymize_frame)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fedanon
from fedanon.data.hierarchy import Hierarchy
from fedanon.data.table import EncodedTable
from fedanon.dp.parameters import SafePubParameters, delta_for_k, smallest_k
from fedanon.engine.anonymizer import LossFractions, prepare_structure
from fedanon.engine.safepub import GranularityScore
from fedanon.errors import InputError
from fedanon.model.config import AnonymizationConfig
from fedanon.model.criterion import build_criteria
from fedanon.model.registry import ParseContext, model_type

ROOT = Path(__file__).resolve().parent.parent
ADULT = ROOT / "fedanon" / "data" / "adult"
QIS = ["age", "sex", "race", "education"]


# --------------------------------------------------------------------------- parameters
def _delta_exact(k: int, beta: Fraction, gamma: Fraction, n_max: int) -> Fraction:
    """δ(k) = max_{n ≥ n_m} Σ_{j > γn} C(n, j) β^j (1-β)^(n-j), exactly, for n up to n_max."""
    n_m = max(1, math.ceil(k / gamma - 1))
    best = Fraction(0)
    for n in range(n_m, n_max + 1):
        start = math.floor(n * gamma) + 1
        tail = sum((math.comb(n, j) * beta ** j * (1 - beta) ** (n - j) for j in range(start, n + 1)), Fraction(0))
        best = max(best, tail)
    return best


def test_delta_of_k_by_hand() -> None:
    # ε_anon = ln 2: β = 1/2, γ = (2 - 1 + 1/2) / 2 = 3/4
    eps = math.log(2)
    # k=1: n_m = ⌈4/3 - 1⌉ = 1, a(1) = P[X ≥ 1; 1, ½] = 1/2 is the largest a(n)
    # k=2: n_m = ⌈8/3 - 1⌉ = 2, a(2) = P[X = 2; 2, ½] = 1/4
    # k=3: n_m = 3, a(3) = 1/8, a(4) = 1/16, a(5) = P[X ≥ 4; 5, ½] = 6/32 = 3/16
    assert delta_for_k(1, eps, 0.5) == pytest.approx(0.5, rel=1e-12)
    assert delta_for_k(2, eps, 0.5) == pytest.approx(0.25, rel=1e-12)
    assert delta_for_k(3, eps, 0.5) == pytest.approx(3 / 16, rel=1e-12)
    assert smallest_k(0.5, eps, 0.5) == 1
    assert smallest_k(0.25, eps, 0.5) == 2
    assert smallest_k(0.2, eps, 0.5) == 3


@pytest.mark.parametrize("delta", [0.1, 0.05, 0.01])
def test_smallest_k_matches_an_exact_rational_evaluation(delta: float) -> None:
    beta, gamma = Fraction(1, 2), Fraction(3, 4)
    exact_k = next(k for k in range(1, 200) if _delta_exact(k, beta, gamma, 160) <= Fraction(delta))
    assert smallest_k(delta, math.log(2), 0.5) == exact_k


def _delta_float(k: int, eps: float, beta: float, n_max: int) -> float:
    """An independent float evaluation with a fixed range of n (no Chernoff stop)."""
    gamma = (math.exp(eps) - 1 + beta) / math.exp(eps)
    best = 0.0
    for n in range(max(1, math.ceil(k / gamma - 1)), n_max + 1):
        start = math.floor(n * gamma) + 1
        logs = [math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1)
                + j * math.log(beta) + (n - j) * math.log1p(-beta) for j in range(start, n + 1)]
        best = max(best, sum(math.exp(x) for x in logs))
    return best


def test_derived_k_for_epsilon_one_delta_1e6() -> None:
    p = SafePubParameters(epsilon=1.0, delta=1e-6, epsilon_search=0.1, steps=100)
    assert p.epsilon_anon == pytest.approx(0.9)
    assert p.beta == pytest.approx(1 - math.exp(-0.9))
    assert p.epsilon_per_step == pytest.approx(0.001)
    k = p.k
    assert _delta_float(k, 0.9, p.beta, 1500) <= 1e-6 < _delta_float(k - 1, 0.9, p.beta, 1500)


def test_an_epsilon_too_large_to_derive_k_is_refused_at_once() -> None:
    import time

    start = time.perf_counter()
    with pytest.raises(InputError, match="too large to derive k"):
        SafePubParameters(epsilon=8.0, delta=1e-6, epsilon_search=0.8, steps=10).k
    assert time.perf_counter() - start < 5


# --------------------------------------------------------------------------- the score
def _random_table(rng: np.random.Generator, n: int) -> tuple[EncodedTable, dict[str, Hierarchy]]:
    values = {"a": [str(v) for v in range(6)], "b": ["x", "y", "z"]}
    hierarchies = {
        "a": Hierarchy.from_rows("a", [[v, "lo" if int(v) < 3 else "hi", "*"] for v in values["a"]]),
        "b": Hierarchy.from_rows("b", [[v, "*"] for v in values["b"]]),
    }
    rows = [[rng.choice(values["a"]), rng.choice(values["b"])] for _ in range(n)]
    return EncodedTable.from_rows(["a", "b"], rows), hierarchies


def _scores(table: EncodedTable, hierarchies: dict[str, Hierarchy], k: int, n_rows: int) -> dict:
    config = AnonymizationConfig(["a", "b"], k=k)
    structure = prepare_structure(table, hierarchies, config)
    score = GranularityScore(structure.grouper, LossFractions(structure), n_rows, k)
    return {levels: score(levels) for levels in np.ndindex(3, 2)}


@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_score_changes_by_at_most_one_when_a_row_is_added(k: int) -> None:
    """The exponential mechanism's ε holds only for a score of sensitivity 1."""
    rng = np.random.default_rng(k)
    worst = 0.0
    for _ in range(40):
        table, hierarchies = _random_table(rng, int(rng.integers(3, 14)))
        extra = [table.dictionaries[c][int(table.codes[int(rng.integers(table.n_rows)), c])].decode() for c in range(2)]
        rows = [[v.decode() for v in r] for r in table.decode_rows()]
        bigger = EncodedTable.from_rows(["a", "b"], rows + [extra])
        before = _scores(table, hierarchies, k, table.n_rows)
        after = _scores(bigger, hierarchies, k, bigger.n_rows)
        worst = max(worst, max(abs(after[n] - before[n]) for n in before))
    assert worst <= 1.0 + 1e-12
    assert worst > 0.3   # the bound is approached, so a looser normalization would show


# --------------------------------------------------------------------------- releases
@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    return pd.read_csv(ADULT / "adult.csv", sep=";")


def _frame(adult: pd.DataFrame, **dp: object):  # noqa: ANN202
    hierarchies = {q: str(ADULT / f"adult_hierarchy_{q}.csv") for q in QIS}
    return fedanon.anonymize_frame(adult, hierarchies, dp={"epsilon": 1.0, "delta": 1e-6, "steps": 20, **dp},
                                   insensitive=["salary-class"])


def test_anonymize_frame_dp_release(adult: pd.DataFrame) -> None:
    out, report = _frame(adult, seed=4)
    dp = report.result.extra["dp"]
    k = dp["k"]
    assert dp["epsilon"] == 1.0 and dp["delta"] == 1e-6 and dp["beta"] == pytest.approx(1 - math.exp(-0.9))
    assert dp["budget"]["epsilon_spent"] == pytest.approx(1.0) and dp["budget"]["delta_spent"] == pytest.approx(1e-6)
    assert dp["seeded"] is True and "not an optimum" in dp["selection"]
    # a sample: fewer rows, each an input row (index kept), about β of them
    assert out.index.isin(adult.index).all() and len(out) == dp["sampled_rows"]
    assert abs(len(out) / len(adult) - dp["beta"]) < 0.02
    assert (out["salary-class"] == adult.loc[out.index, "salary-class"]).all()
    # every released class holds at least k rows; suppressed rows have no QI left
    suppressed = report.suppressed
    released = out[~suppressed.to_numpy()]
    sizes = released.groupby(QIS, observed=True).size()
    assert sizes.min() >= k
    assert out[suppressed.to_numpy()][QIS].isna().all().all()


def test_the_same_seed_gives_the_same_release(adult: pd.DataFrame) -> None:
    one, r1 = _frame(adult, seed=21)
    two, r2 = _frame(adult, seed=21)
    other, r3 = _frame(adult, seed=22)
    pd.testing.assert_frame_equal(one, two)
    assert r1.transformation == r2.transformation
    assert not one.index.equals(other.index)


def test_final_last_releases_the_last_draw_and_best_the_best_scoring(adult: pd.DataFrame) -> None:
    _out, best = _frame(adult, seed=8)
    _out, last = _frame(adult, seed=8, final="last")
    drawn_best, drawn_last = best.result.extra["dp"]["search"], last.result.extra["dp"]["search"]
    assert drawn_best["drawn"] == drawn_last["drawn"]        # same seed: same draws
    assert list(last.transformation.values()) == drawn_last["drawn"][-1]
    assert drawn_best["chosen_score"] >= drawn_last["chosen_score"]
    assert last.result.extra["dp"]["final"] == "last"


def test_without_a_seed_opendp_draws_and_the_release_says_so(adult: pd.DataFrame) -> None:
    out, report = _frame(adult)
    dp = report.result.extra["dp"]
    assert dp["randomness"] == "opendp" and dp["seeded"] is False
    assert dp["search"]["steps_taken"] == 20


def test_bad_settings_are_one_line_errors() -> None:
    dp = model_type("dp")
    for text, message in [("1", "expected EPSILON,DELTA"), ("-1,1e-6", "epsilon must be a positive"),
                          ("1,0", "delta must be in (0, 1)"), ("x,1e-6", "not a number")]:
        with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            dp.parse(text, ParseContext())
    with pytest.raises(InputError, match="--dp-search-budget"):
        dp.parse("1,1e-6", ParseContext(options={"search_budget": "2"}))
    with pytest.raises(InputError, match="--dp-steps"):
        dp.parse({"epsilon": 1, "delta": 1e-6, "steps": 0}, ParseContext(source="run.toml"))
    with pytest.raises(InputError, match="--dp-final"):
        dp.parse("1,1e-6", ParseContext(options={"final": "worst"}))


def test_the_model_refuses_every_path_but_the_sampled_release() -> None:
    """An optimal search with the derived k alone would carry no differential privacy."""
    config = AnonymizationConfig(QIS, models=[model_type("dp").parse("1,1e-6", ParseContext())])
    with pytest.raises(InputError, match="by `fedanon anonymize` and `anonymize_frame` only"):
        build_criteria(config)


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fedanon", *args], cwd=cwd, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=600)


def test_flag_and_toml_give_the_same_seeded_release(tmp_path: Path) -> None:
    qi_flags = [f for q in QIS for f in ("--qi", f"{q}={ADULT / f'adult_hierarchy_{q}.csv'}")]
    flags = _cli("anonymize", str(ADULT / "adult.csv"), *qi_flags, "--dp", "2,1e-6", "--dp-steps", "10",
                 "--dp-search-budget", "0.5", "--seed", "3", "-o", "flags.csv", "--report", "flags.json", "-q",
                 cwd=tmp_path)
    assert flags.returncode == 0, flags.stderr
    qi_table = "\n".join(f'{q} = "{ADULT / f"adult_hierarchy_{q}.csv"}"' for q in QIS)
    (tmp_path / "run.toml").write_text(
        f'input = "{ADULT / "adult.csv"}"\noutput = "toml.csv"\n'
        'dp = {epsilon = 2, delta = 1e-6, steps = 10, search_budget = 0.5, seed = 3}\n'
        f"[qi]\n{qi_table}\n", encoding="utf-8")
    toml = _cli("anonymize", "--config", "run.toml", "-q", cwd=tmp_path)
    assert toml.returncode == 0, toml.stderr
    assert (tmp_path / "flags.csv").read_bytes() == (tmp_path / "toml.csv").read_bytes()
    import json

    report = json.loads((tmp_path / "flags.json").read_text())
    assert report["dp"]["epsilon_search"] == 0.5 and report["dp"]["steps"] == 10
    assert report["rows_written"] == report["dp"]["sampled_rows"] < 30162
    bad = _cli("anonymize", str(ADULT / "adult.csv"), *qi_flags, "--dp", "1,1e-6", "--dp-steps", "x",
               "-o", "x.csv", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--dp-steps" in bad.stderr
