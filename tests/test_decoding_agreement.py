"""Every route to the top-k expected losses agrees with every other, to 1e-12, beyond n = 12.

Routes: Algorithm 1 untruncated (``tol=0``, exact up to rounding), Algorithm 1 with tail
truncation, Ye et al.'s F-beta recursion, and the exponential-sum route.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.decoding import optimal_topk
from costlib.decoding._exponential_sum import quadrature
from costlib.decoding._fbeta import rational_beta_squared
from costlib.decoding._losses import get_loss
from costlib.decoding._poisson_binomial import poisson_binomial, prefix_distributions
from costlib.decoding._topk import topk_expected_losses


def curves(p: np.ndarray, loss, methods) -> dict[str, np.ndarray]:
    sorted_p = np.sort(p)[::-1]
    out = {}
    for label, method, tol in methods:
        out[label] = topk_expected_losses(sorted_p, loss, method, tol)
    return out


def assert_all_agree(results: dict[str, np.ndarray], atol: float = 1e-12) -> None:
    labels = list(results)
    for other in labels[1:]:
        np.testing.assert_allclose(results[other], results[labels[0]], rtol=0, atol=atol,
                                   err_msg=f"{other} vs {labels[0]}")


def sample(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.random(n)
    if kind == "skewed":
        return rng.beta(0.5, 5.0, n)
    p = rng.choice([0.0, 0.02, 0.3, 0.3, 0.7, 1.0], n)
    return p


@pytest.mark.parametrize("kind", ["uniform", "skewed", "tied_with_0_and_1"])
@pytest.mark.parametrize("beta", [1.0, 0.5, 2.0, math.sqrt(3.0)])
def test_fbeta_routes_agree(kind: str, beta: float) -> None:
    p = sample(kind, 150, seed=int(beta * 100))
    loss = get_loss("fbeta", beta=beta)
    methods = [("alg1-exact", "algorithm1", 0.0), ("alg1-truncated", "algorithm1", 1e-18),
               ("exponential-sum", "exponential_sum", 0.0)]
    if rational_beta_squared(beta) is not None:
        methods += [("ye-dp", "fbeta_dp", 0.0), ("ye-dp-truncated", "fbeta_dp", 1e-18)]
    assert_all_agree(curves(p, loss, methods))


@pytest.mark.parametrize("kind", ["uniform", "skewed", "tied_with_0_and_1"])
@pytest.mark.parametrize("name", ["jaccard", "am", "g_tp_pr"])
def test_exponential_sum_agrees_with_algorithm1(kind: str, name: str) -> None:
    p = sample(kind, 150, seed=7)
    methods = [("alg1-exact", "algorithm1", 0.0), ("alg1-truncated", "algorithm1", 1e-18),
               ("exponential-sum", "exponential_sum", 0.0)]
    assert_all_agree(curves(p, get_loss(name), methods))


@pytest.mark.parametrize("name", ["g_mean", "h_mean", "auc"])
def test_truncated_algorithm1_agrees_with_untruncated(name: str) -> None:
    p = sample("uniform", 300, seed=3)
    methods = [("alg1-exact", "algorithm1", 0.0), ("alg1-truncated", "algorithm1", 1e-18)]
    assert_all_agree(curves(p, get_loss(name), methods))


def test_large_set_routes_agree() -> None:
    # n = 1,000: exponential sum vs the F1 recursion vs truncated Algorithm 1, whole curves.
    p = sample("uniform", 1000, seed=11)
    methods = [("exponential-sum", "exponential_sum", 0.0), ("ye-dp", "fbeta_dp", 1e-18),
               ("alg1-truncated", "algorithm1", 1e-18)]
    assert_all_agree(curves(p, get_loss("f1"), methods))
    p = sample("skewed", 1000, seed=12)
    assert_all_agree(curves(p, get_loss("jaccard"), methods[:1] + methods[2:]))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60),
       st.sampled_from(["f1", "jaccard", "am", "g_tp_pr"]))
def test_property_exponential_sum_equals_exact_algorithm1(values, name) -> None:
    p = np.array(values)
    methods = [("alg1-exact", "algorithm1", 0.0), ("exponential-sum", "exponential_sum", 0.0)]
    assert_all_agree(curves(p, get_loss(name), methods))
    auto = optimal_topk(p, name, method="exponential_sum")
    exact = optimal_topk(p, name, method="algorithm1", tol=0.0)
    assert auto.expected_loss == pytest.approx(exact.expected_loss, abs=1e-12)


@pytest.mark.parametrize("a", [1.0, 0.5])
def test_quadrature_reproduces_inverse_powers(a: float) -> None:
    nodes, weights = quadrature(1.0, 1e5, a)
    d = np.concatenate([np.linspace(1.0, 30.0, 2000), np.geomspace(1.0, 1e5, 2000)])
    approx = np.exp(-np.outer(d, nodes)) @ weights
    np.testing.assert_allclose(approx * d**a, 1.0, rtol=0, atol=2e-15)
    assert nodes.size < 300


def test_poisson_binomial_truncation_keeps_the_mass_it_promises() -> None:
    p = np.random.default_rng(4).random(3000)
    exact = poisson_binomial(p, tol=0.0)
    truncated = poisson_binomial(p, tol=1e-18)
    # Even tol=0 drops entries that are exactly 0.0 in float64 (underflow): that is exact.
    assert exact.offset > 0 and exact.offset + exact.pmf.size < 3001
    assert exact.pmf.sum() == pytest.approx(1.0, abs=1e-13)
    assert truncated.pmf.size < 0.3 * exact.pmf.size
    assert 1.0 - truncated.pmf.sum() <= 3000 * 1e-18 + 1e-13
    start = truncated.offset - exact.offset
    window = exact.pmf[start:start + truncated.pmf.size]
    # Dropped mass also shortchanges the entries next to the cut, by at most n * tol in total.
    assert np.abs(truncated.pmf - window).sum() <= 3000 * 1e-18 + 1e-15
    # The prefix distributions are the distributions of the prefixes.
    prefixes = prefix_distributions(p[:50], tol=0.0)
    for k in (0, 1, 17, 50):
        np.testing.assert_allclose(prefixes[k].pmf, poisson_binomial(p[:k]).pmf, atol=1e-16)


def test_poisson_binomial_matches_binomial_for_equal_probabilities() -> None:
    binomial = [math.comb(40, j) * 0.3**j * 0.7 ** (40 - j) for j in range(41)]
    dist = poisson_binomial(np.full(40, 0.3))
    assert dist.offset == 0
    np.testing.assert_allclose(dist.pmf, binomial, rtol=1e-12)


@pytest.mark.parametrize("name", ["f1", "jaccard", "am", "g_tp_pr"])
def test_exponential_sum_in_blocks_equals_one_block(name: str, monkeypatch) -> None:
    from costlib.decoding import _exponential_sum

    p = np.sort(sample("uniform", 300, seed=21))[::-1]
    loss = get_loss(name)
    whole = _exponential_sum.exponential_sum_expected_losses(p, loss)
    monkeypatch.setattr(_exponential_sum, "BLOCK", 37)  # 9 blocks, the last one partial
    blocked = _exponential_sum.exponential_sum_expected_losses(p, loss)
    np.testing.assert_allclose(blocked, whole, rtol=0, atol=1e-13)
    exact = topk_expected_losses(p, loss, "algorithm1", 0.0)
    np.testing.assert_allclose(blocked, exact, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["f1", "jaccard", "am", "g_tp_pr", "g_mean", "h_mean", "auc"])
def test_small_set_path_equals_algorithm1(name: str) -> None:
    # method="auto" decodes sets of up to 32 items with the vectorised exact routine.
    rng = np.random.default_rng(31)
    for n in (0, 1, 2, 7, 20, 32):
        for p in (rng.random(n), rng.beta(0.5, 5.0, n), rng.choice([0.0, 0.4, 1.0], n)):
            auto = optimal_topk(p, name)
            exact = optimal_topk(p, name, method="algorithm1", tol=0.0)
            assert auto.method == "algorithm1"
            np.testing.assert_allclose(auto.expected_losses, exact.expected_losses, atol=1e-13)
            assert auto.k == exact.k


def test_extreme_betas_and_near_certain_probabilities() -> None:
    rng = np.random.default_rng(2)
    p = np.concatenate([np.full(30, 1.0 - 1e-16), np.full(30, 1e-300), rng.random(60)])
    for loss in [get_loss("fbeta", beta=b) for b in (0.01, 100.0)] + [
            get_loss(name) for name in ("f1", "jaccard", "am", "g_tp_pr")]:
        methods = [("alg1-exact", "algorithm1", 0.0), ("exponential-sum", "exponential_sum", 0.0)]
        assert_all_agree(curves(p, loss, methods))
