"""The distributed discrete Laplace noise of Protocol C's statistics: do the shares add up right?

Chi-square tests on 200,000 draws against pmfs computed here from their definitions (not
from the sampler): every n − 1 shares must sum to discrete Laplace noise of the asked scale,
all n shares to the difference of two negative binomials NB(n/(n − 1)); and the same test
must reject shares drawn with a scale off by 20 %.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedanon.dp.randomness import SeededRandomness
from fedanon.dp.shares import discrete_laplace_pmf, noise_shares, share_generator, share_successes

DRAWS = 200_000


def _laplace_pmf(values: np.ndarray, scale: float) -> np.ndarray:
    """P[X = x] ∝ exp(−|x|/scale), normalized by its geometric series (independent of the module)."""
    q = math.exp(-1.0 / scale)
    return np.exp(-np.abs(values) / scale) / (1 + 2 * q / (1 - q))


def _nb_difference_pmf(values: np.ndarray, r: float, scale: float) -> np.ndarray:
    """P[A − B = x] for independent A, B ~ NB(r, 1 − e^(−1/scale)) (failures), by direct summation."""
    p = -math.expm1(-1.0 / scale)
    k = np.arange(0, 2000)
    nb = stats.nbinom.pmf(k, r, p)
    return np.array([float(np.sum(nb[max(0, -x):len(k) - max(0, x)] * nb[max(0, x):len(k) - max(0, -x)]))
                     if abs(x) < len(k) else 0.0 for x in values.tolist()])


def _chi_square_p(sample: np.ndarray, pmf) -> float:
    """p-value of the sample against `pmf`: one bin per value with ≥ 5 expected draws, plus one
    bin for everything outside them (its expectation is what the inner bins leave)."""
    n = len(sample)
    values = np.arange(int(sample.min()) - 50, int(sample.max()) + 51)
    inner = values[pmf(values) * n >= 5]
    low, high = int(inner.min()), int(inner.max())
    counts = np.bincount(sample[(sample >= low) & (sample <= high)] - low, minlength=high - low + 1)
    expected = pmf(np.arange(low, high + 1)) * n
    observed = np.append(counts, n - counts.sum()).astype(np.float64)
    expected = np.append(expected, max(n - expected.sum(), 1e-9))
    return float(stats.chisquare(observed, expected).pvalue)


def _sum_of_shares(primaries: int, how_many: int, scale: float, seed: int) -> np.ndarray:
    generators = [np.random.default_rng([seed, i]) for i in range(how_many)]
    return sum(noise_shares(g, DRAWS, scale, primaries) for g in generators)


@pytest.mark.parametrize("primaries,scale", [(3, 2.0), (4, 5.0), (2, 1.0)])
def test_every_n_minus_one_shares_sum_to_discrete_laplace(primaries: int, scale: float) -> None:
    sample = _sum_of_shares(primaries, primaries - 1, scale, seed=11)
    assert _chi_square_p(sample, lambda v: _laplace_pmf(v, scale)) > 1e-4


@pytest.mark.parametrize("primaries,scale", [(3, 2.0), (4, 5.0)])
def test_shares_of_a_scale_off_by_20_percent_are_rejected(primaries: int, scale: float) -> None:
    for wrong in (0.8 * scale, 1.2 * scale):
        sample = _sum_of_shares(primaries, primaries - 1, wrong, seed=12)
        assert _chi_square_p(sample, lambda v: _laplace_pmf(v, scale)) < 1e-6, wrong


def test_all_n_shares_sum_to_the_difference_of_two_negative_binomials() -> None:
    primaries, scale = 3, 2.0
    sample = _sum_of_shares(primaries, primaries, scale, seed=13)
    r = primaries / (primaries - 1)
    assert _chi_square_p(sample, lambda v: _nb_difference_pmf(v, r, scale)) > 1e-4
    # and it is not the plain discrete Laplace law: the extra share is real extra noise
    assert _chi_square_p(sample, lambda v: _laplace_pmf(v, scale)) < 1e-6
    q = math.exp(-1 / scale)
    assert np.var(sample) == pytest.approx(r * 2 * q / (1 - q) ** 2, rel=0.03)


def test_a_lone_primary_draws_the_whole_discrete_laplace_noise() -> None:
    assert share_successes(1) == 1.0
    sample = noise_shares(np.random.default_rng(5), DRAWS, 3.0, 1)
    assert _chi_square_p(sample, lambda v: _laplace_pmf(v, 3.0)) > 1e-4


def test_the_modules_pmf_is_the_definition() -> None:
    values = np.arange(-30, 31)
    assert np.allclose(discrete_laplace_pmf(values, 2.5), _laplace_pmf(values, 2.5), rtol=1e-12)
    assert discrete_laplace_pmf(np.arange(-400, 401), 2.5).sum() == pytest.approx(1.0, abs=1e-12)


def test_seeded_share_generators_repeat_and_differ_per_party() -> None:
    a = noise_shares(share_generator(SeededRandomness(9, "p1")), 50, 2.0, 3)
    again = noise_shares(share_generator(SeededRandomness(9, "p1")), 50, 2.0, 3)
    other = noise_shares(share_generator(SeededRandomness(9, "p2")), 50, 2.0, 3)
    assert np.array_equal(a, again) and not np.array_equal(a, other)


def test_unseeded_share_generators_are_fresh() -> None:
    from fedanon.dp.randomness import Randomness

    class Unseeded(Randomness):  # any source that is not the seeded test generator
        def bernoulli(self, n, p): raise AssertionError
        def exponential_mechanism(self, scores, epsilon, sensitivity=1.0): raise AssertionError
        def discrete_laplace(self, size, scale): raise AssertionError

    a = noise_shares(share_generator(Unseeded()), 50, 2.0, 3)
    b = noise_shares(share_generator(Unseeded()), 50, 2.0, 3)
    assert not np.array_equal(a, b)
