"""costlib.audit._neyman: Neyman probabilities against brute force, the budget identity and
repeated audit draws."""

import itertools

import numpy as np
import pytest

from costlib.audit._neyman import (
    design_variance,
    gain_spreads,
    neyman_design,
    neyman_probabilities,
)
from costlib.audit._sampling import audit_sample


def brute_force(counts, spreads, budget, floor, steps=401):
    """Smallest V over a grid of (pi_0, pi_1) with pi_2 solved from the budget identity;
    twice refined around the best point (a box of +-2 steps, again ``steps`` a side)."""
    n, s2 = np.asarray(counts, float), np.asarray(spreads, float) ** 2
    lo0 = lo1 = floor
    hi0 = hi1 = 1.0
    for _ in range(3):
        p0, p1 = np.meshgrid(np.linspace(lo0, hi0, steps), np.linspace(lo1, hi1, steps),
                             indexing="ij")
        p2 = (budget - n[0] * p0 - n[1] * p1) / n[2]
        ok = (p2 >= floor) & (p2 <= 1.0)
        v = (n[0] * s2[0] * (1 / p0 - 1) + n[1] * s2[1] * (1 / p1 - 1)
             + n[2] * s2[2] * (1 / np.where(ok, p2, 1.0) - 1))
        v = np.where(ok, v, np.inf)
        i = np.unravel_index(np.argmin(v), v.shape)
        step0, step1 = 2 * (hi0 - lo0) / (steps - 1), 2 * (hi1 - lo1) / (steps - 1)
        lo0, hi0 = max(floor, p0[i] - step0), min(1.0, p0[i] + step0)
        lo1, hi1 = max(floor, p1[i] - step1), min(1.0, p1[i] + step1)
    return float(v[i]), np.array([p0[i], p1[i], p2[i]])


CASES = [
    # counts, spreads, budget, floor: interior; clipped at 1; clipped at the floor; both
    ([5000, 3000, 2000], [0.2, 0.5, 1.0], 300, 0.001),
    ([5000, 3000, 200], [0.05, 0.3, 1.0], 600, 0.001),
    ([9000, 900, 100], [0.001, 0.4, 0.9], 120, 0.005),
    ([8000, 1500, 500], [0.0, 0.2, 3.0], 700, 0.01),
]


@pytest.mark.parametrize(("counts", "spreads", "budget", "floor"), CASES)
def test_neyman_matches_brute_force_minimum(counts, spreads, budget, floor):
    got = neyman_probabilities(counts, spreads, budget, floor)
    best, at = brute_force(counts, spreads, budget, floor)
    # the optimum is at most the best grid point, and the refined grid gets within 1e-4 of it
    assert got.variance <= best * (1 + 1e-12)
    assert best <= got.variance * (1 + 1e-4) + 1e-9
    assert np.abs(got.probabilities - at).max() < 1e-3
    assert got.variance == pytest.approx(design_variance(counts, spreads, got.probabilities))


def test_unclipped_allocation_is_the_closed_form():
    counts, spreads, budget = np.array([4000, 2500, 1000]), np.array([0.1, 0.3, 0.6]), 200.0
    got = neyman_probabilities(counts, spreads, budget, 1e-4)
    want = budget * spreads / np.sum(counts * spreads)  # pi_h = B S_h / sum_k N_k S_k
    np.testing.assert_allclose(got.probabilities, want, rtol=1e-12)
    # V at the optimum: (sum N S)^2 / B - sum N S^2
    v = np.sum(counts * spreads) ** 2 / budget - np.sum(counts * spreads**2)
    assert got.variance == pytest.approx(v, rel=1e-12)


def test_budget_identity_and_kkt_after_clipping():
    rng = np.random.default_rng(4)
    for _ in range(300):
        m = int(rng.integers(1, 7))
        counts = rng.integers(0, 5000, m).astype(float)
        counts[rng.integers(m)] += 1  # at least one row
        spreads = rng.choice([0.0, 1.0], m, p=[0.15, 0.85]) * rng.lognormal(0, 1.5, m)
        floor = float(rng.choice([1e-4, 1e-3, 0.01]))
        low = floor * counts.sum()
        high = counts[spreads > 0].sum() + floor * counts[spreads == 0].sum()
        budget = float(rng.uniform(low, high))
        got = neyman_probabilities(counts, spreads, budget, floor)
        pi = got.probabilities
        assert np.sum(counts * pi) == pytest.approx(budget, rel=1e-9, abs=1e-9)
        assert got.expected == pytest.approx(budget, rel=1e-9, abs=1e-9)
        assert ((pi >= floor) & (pi <= 1.0)).all()
        # KKT: interior strata share one ratio pi / S; clipped ones are where c S says
        free = (pi > floor) & (pi < 1.0) & (counts > 0)
        if free.sum() >= 2:
            ratio = pi[free] / spreads[free]
            np.testing.assert_allclose(ratio, ratio[0], rtol=1e-9)
        c = got.scale
        np.testing.assert_allclose(pi, np.clip(c * spreads, floor, 1.0), rtol=1e-12)


def test_neyman_beats_every_other_small_allocation():
    """Exhaustive over allocations on a 1/200 lattice that meet the budget exactly."""
    counts, spreads, floor = np.array([400, 300, 100]), np.array([0.1, 0.4, 1.0]), 0.005
    budget = 60.0
    got = neyman_probabilities(counts, spreads, budget, floor)
    lattice = np.arange(1, 201) / 200
    for p0, p1 in itertools.product(lattice, lattice):
        p2 = (budget - counts[0] * p0 - counts[1] * p1) / counts[2]
        if floor <= p2 <= 1:
            v = design_variance(counts, spreads, [p0, p1, p2])
            assert got.variance <= v * (1 + 1e-12)


def test_gain_spreads_is_the_root_mean_square_of_the_contribution():
    rng = np.random.default_rng(1)
    r = 0.4
    y = [rng.uniform(size=n) < q for n, q in [(500, 0.01), (300, 0.1), (50, 0.5)]]
    d2 = [np.where(v, 1.0, r) ** 2 for v in y]  # d = 1 for positives, -r for negatives
    got = gain_spreads([v.sum() for v in y], [(~v).sum() for v in y], r)
    np.testing.assert_allclose(got, [np.sqrt(v.mean()) for v in d2], rtol=1e-12)
    # recall (r = 0): sqrt of the positive share; no evidence -> the largest seen spread
    np.testing.assert_allclose(gain_spreads([1, 0, 0], [3, 5, 0], 0.0), [0.5, 0.0, 0.5])
    assert gain_spreads([0, 0], [0, 0], 0.0).tolist() == [1.0, 1.0]


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="budget"):
        neyman_probabilities([100, 100], [1, 1], 0.05, 0.001)  # below the floor's share
    with pytest.raises(ValueError, match="budget"):
        neyman_probabilities([100, 100], [0, 1], 150, 0.001)  # S = 0 stratum stays at floor
    with pytest.raises(ValueError, match="spreads"):
        neyman_probabilities([100, 100], [1, -1], 10, 0.001)
    with pytest.raises(ValueError, match="counts"):
        neyman_probabilities([100], [1, 1], 10, 0.001)
    with pytest.raises(ValueError, match="budget_share"):
        neyman_design([100, 100], [1, 1], [0.5], 0.001, 0.01)
    with pytest.raises(ValueError, match="no unflagged row"):
        neyman_design([0, 0], [1, 1], [0.5], 0.01, 0.001)


def population(seed=0):
    """Three score strata of unflagged rows with rising prevalence."""
    rng = np.random.default_rng(seed)
    sizes, prevalence = [16000, 3000, 1000], [0.002, 0.03, 0.2]
    bands = [(0, .3), (.3, .6), (.6, 1)]
    scores = np.concatenate([rng.uniform(a, b, n) for n, (a, b) in zip(sizes, bands, strict=True)])
    y = np.concatenate([rng.uniform(size=n) < q for n, q in zip(sizes, prevalence, strict=True)])
    ids = rng.choice(10**12, size=scores.size, replace=False)
    return ids, scores[:, None], y


def test_repeated_draws_hit_the_budget_and_the_variance():
    """Monte Carlo over 120 salts: the audited count averages the budget, and the
    Horvitz-Thompson gain estimate has the variance V the allocation minimised."""
    ids, scores, y = population()
    edges, r, share, floor = [0.3, 0.6], 0.25, 0.01, 0.001
    strata = np.searchsorted(edges, scores[:, 0], side="right")
    counts = np.bincount(strata, minlength=3)
    pos = np.bincount(strata, weights=y, minlength=3)
    spreads = gain_spreads(pos, counts - pos, r)
    design, allocation = neyman_design(counts, spreads, edges, share, floor)
    budget = share * counts.sum()
    assert allocation.expected == pytest.approx(budget, rel=1e-12)
    d = np.where(y, 1.0, -r)
    audited, estimates = [], []
    for k in range(120):
        sample = audit_sample(ids, scores, np.zeros(y.size, bool), f"salt-{k}", design)
        audited.append(sample.audit.sum())
        estimates.append(np.sum(d[sample.audit] / sample.audit_probability[sample.audit]))
    audited, estimates = np.array(audited), np.array(estimates)
    pi = allocation.probabilities
    var_a = np.sum(counts * pi * (1 - pi))
    assert abs(audited.mean() - budget) < 4 * np.sqrt(var_a / audited.size)
    assert 0.6 < audited.var(ddof=1) / var_a < 1.5
    # exact V: per-stratum mean squares of d are what gain_spreads computed
    v = design_variance(counts, spreads, pi)
    assert v == pytest.approx(np.sum(d**2 * (1 - pi[strata]) / pi[strata]), rel=1e-9)
    assert abs(estimates.mean() - d.sum()) < 4 * np.sqrt(v / estimates.size)
    assert 0.6 < estimates.var(ddof=1) / v < 1.5
    # never worse than the same budget spread evenly; for recall (r = 0) much better, since
    # positives concentrate in the top stratum (for r = 0.25 the negatives' r^2 dominates the
    # mean squares everywhere and the gain is small)
    even = np.full(3, share)
    assert v <= design_variance(counts, spreads, even)
    recall = gain_spreads(pos, counts - pos, 0.0)
    _, for_recall = neyman_design(counts, recall, edges, share, floor)
    assert for_recall.variance < 0.5 * design_variance(counts, recall, even)
