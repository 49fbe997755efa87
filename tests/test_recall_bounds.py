"""Recall and total-positive intervals from an audit that finds few or no missed positives.

Truth: Garwood's exact Poisson bounds computed by hand (``-ln α / π`` when nothing is found,
chi-square quantiles otherwise), the recall of a fully labelled population, and a simulation
of the audit for the power calculation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import chi2

from costlib.audit import audit_for_recall_width, recall_interval, weighted_poisson_interval
from costlib.thresholds import (
    ThresholdGrid,
    optimize,
    point_at,
    recall_bounds,
    total_positives_bounds,
)
from costlib.thresholds.grid._recall_bounds import cell_probabilities

EDGES = [np.linspace(0.05, 0.95, 19)]


def population(n: int, prevalence: float, threshold: float, pi: float, seed: int):
    """One classifier; rows at or above ``threshold`` flagged (rated, π = 1), the rest audited
    with probability ``pi``. Returns ``scores, labels, probabilities, truth, flagged``."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < prevalence
    scores = np.where(truth, rng.beta(5, 2, n), rng.beta(1, 8, n))
    flagged = scores >= threshold
    probabilities = np.where(flagged, 1.0, pi)
    audited = flagged | (rng.random(n) < probabilities)
    labels = np.where(audited, truth.astype(float), np.nan)
    return scores[:, None], labels, probabilities, truth, flagged


def grid_of(scores, labels, probabilities):
    return ThresholdGrid.from_scores(scores, labels, EDGES, audit_probabilities=probabilities)


def test_an_audit_that_finds_no_missed_positive_gives_the_exact_upper_bound():
    # seed 0: the 1% audit of 59,880 unflagged rows finds none of the 22 missed positives
    scores, labels, pi, truth, flagged = population(60_000, 0.0015, 0.6, 0.01, seed=0)
    assert not np.any(truth & ~flagged & ~np.isnan(labels))
    grid = grid_of(scores, labels, pi)
    caught = float(np.sum(truth & flagged))
    assert grid.total_positives == caught  # P̂ sees no missed positive
    # Garwood by hand: P(X = 0 | mean μ) = exp(-μ) = α gives μ_U = -ln α, scaled by 1/π.
    by_hand = caught - math.log(0.05) / 0.01
    low, high = total_positives_bounds(grid, level=0.9)
    assert low == caught
    assert high == pytest.approx(by_hand, rel=1e-5)  # π is stored to 2**-16 / 256
    index = (int(np.searchsorted(EDGES[0], 0.6)),)
    bounds = recall_bounds(grid, index)
    assert bounds is not None
    assert bounds.recall_high == 1.0
    assert bounds.recall_low == pytest.approx(caught / by_hand, rel=1e-5)
    assert bounds.recall_low < float(np.sum(truth & flagged)) / truth.sum() < 1.0  # truth inside
    assert bounds.positives_missed_found == 0.0
    (stratum,) = bounds.strata
    assert stratum["pi"] == pytest.approx(0.01, rel=1e-6)
    assert stratum["rows"] == pytest.approx(np.sum(~flagged), rel=1e-5)
    assert stratum["audited"] == pytest.approx(np.sum(~flagged & ~np.isnan(labels)), rel=1e-5)


@pytest.mark.parametrize("found", [1, 2, 7])
def test_one_stratum_is_garwood_scaled_by_one_over_pi(found):
    pi, alpha = 0.02, 0.05
    y, v = found / pi, found / pi**2
    low, high = weighted_poisson_interval(y, v, 1 / pi, alpha)
    assert float(low) == pytest.approx(chi2.ppf(alpha, 2 * found) / 2 / pi, rel=1e-10)
    assert float(high) == pytest.approx(chi2.ppf(1 - alpha, 2 * found + 2) / 2 / pi, rel=1e-10)


def test_cell_probabilities_recover_the_design():
    scores, labels, pi, _, _ = population(20_000, 0.01, 0.6, 0.05, seed=3)
    grid = grid_of(scores, labels, pi)
    cells = cell_probabilities(grid)
    below = np.searchsorted(EDGES[0], 0.6) + 1  # bins 0 .. below-1 hold unflagged rows
    assert np.allclose(cells[:below], 0.05, rtol=1e-5)


def test_min_recall_refuses_a_point_whose_lower_bound_is_below_it():
    scores, labels, pi, _, _ = population(60_000, 0.0015, 0.6, 0.01, seed=0)
    grid = grid_of(scores, labels, pi)
    spec = {"target_marginal_precision": 0.3, "method": "hull", "min_recall": 0.8}
    at = point_at(grid, [0.6], target_marginal_precision=0.3)
    assert at.estimated_recall == 1.0  # the estimate: every positive caught
    assert at.recall_bounds is not None and at.recall_bounds.recall_low < 0.8
    refused = optimize(grid, **spec)  # default: the lower bound
    assert refused.status == "infeasible" and "min_recall" in refused.reason
    assert refused.recall_bounds is not None and refused.recall_bounds.recall_low < 0.8
    # in plain words, 4 significant digits, the estimate labelled as one
    bound = refused.recall_bounds.total_positives_high
    assert (f"recall is counted against {bound:,.4g} positives: the upper end of the 90% "
            f"interval of the total positives, estimated at {grid.total_positives:,.4g};"
            in refused.reason), refused.reason
    taken = optimize(grid, recall_bound="point", **spec)  # the estimate meets it
    assert taken.status == "ok" and taken.estimated_recall >= 0.8
    with pytest.raises(ValueError, match="recall_bound"):
        optimize(grid, recall_bound="upper", **spec)


def test_min_recall_on_the_lower_bound_is_met_when_the_audit_supports_it():
    scores, labels, pi, _, _ = population(60_000, 0.02, 0.3, 0.2, seed=4)
    grid = grid_of(scores, labels, pi)
    point = optimize(grid, target_marginal_precision=0.3, method="hull", min_recall=0.7)
    assert point.status in ("ok", "resolution_limited")
    assert point.recall_bounds is not None and point.recall_bounds.recall_low >= 0.7 - 1e-9


def test_recall_interval_covers_the_truth_with_rare_positives():
    """300 audits of one population (0.15% positives, 1% audit): the 90% interval covers the
    true recall at least 88% of the time (the bootstrap covered 18% in this regime)."""
    rng = np.random.default_rng(11)
    n = 60_000
    truth = rng.random(n) < 0.0015
    scores = np.where(truth, rng.beta(5, 2, n), rng.beta(1, 8, n))[:, None]
    flagged = scores[:, 0] >= 0.6
    pi = np.where(flagged, 1.0, 0.01)
    recall = np.sum(truth & flagged) / truth.sum()
    index = (int(np.searchsorted(EDGES[0], 0.6)),)
    hits = 0
    for _ in range(300):
        audited = flagged | (rng.random(n) < pi)
        labels = np.where(audited, truth.astype(float), np.nan)
        bounds = recall_bounds(grid_of(scores, labels, pi), index)
        assert bounds is not None and bounds.recall_low is not None
        hits += bounds.recall_low <= recall <= bounds.recall_high
    assert hits / 300 >= 0.88


def test_recall_interval_splits_alpha_when_both_parts_are_sampled():
    caught, missed = (10.0, 0.0, 0.0, 0.0), (5.0, 0.0, 0.0, 100.0)
    low, high = recall_interval(caught, missed, level=0.9)
    assert high == 1.0 * 10 / 15
    assert low == pytest.approx(10 / (15 - 100 * math.log(0.05)))
    both = recall_interval((10.0, 0.0, 0.0, 50.0), missed, level=0.9)
    assert both[0] == pytest.approx(10 / (15 - 100 * math.log(0.025)))


def test_the_audit_a_width_needs_matches_a_simulation():
    """The power calculation predicts the half-width at the design it recommends, averaged over
    its posterior of the missed positives; 2,000 audits simulated at that design, each from
    missed positives drawn from that posterior (``Gamma(x_h + ½ n_h / n, scale 1 / π_h)``, by
    scipy.stats rather than the module's quantiles) with Poisson finds, have a mean half-width
    within 20% of it."""
    from scipy.stats import gamma

    rows = np.array([2_000.0, 10_000.0, 48_000.0])  # near, middle, far strata
    pi = np.array([0.05, 0.01, 0.002])  # the last run's design
    audited = np.array([100.0, 100.0, 96.0])
    found = np.array([3.0, 1.0, 0.0])
    shape = found + 0.5 * audited / audited.sum()
    caught = 70.0
    rng = np.random.default_rng(5)
    for half_width in (0.05, 0.1):
        plan = audit_for_recall_width(caught, rows, pi, audited, found, half_width=half_width)
        assert plan.reachable and plan.half_width <= half_width + 1e-9
        assert plan.half_width == pytest.approx(half_width, rel=1e-6)
        p = np.asarray(plan.probabilities)
        assert plan.audited == pytest.approx(float((rows * p).sum()))
        assert plan.share == pytest.approx(plan.audited / rows.sum())
        assert plan.expected_missed == pytest.approx(float((shape / pi).sum()), rel=0.02)
        missed = gamma.rvs(shape, scale=1 / pi, size=(2_000, 3), random_state=rng)
        widths = []
        for m in missed:
            census = p >= 1
            x = rng.poisson(m * p).astype(float)
            known = float(m[census].sum())
            w = 1 / p[~census]
            xs = x[~census]
            low, high = recall_interval((caught, 0.0, 0.0, 0.0),
                                        (known, float((xs * w).sum()), float((xs * w * w).sum()),
                                         float(w.max()) if w.size else 0.0))
            widths.append((high - low) / 2)
        assert np.mean(widths) == pytest.approx(plan.half_width, rel=0.2), half_width
    wide = audit_for_recall_width(caught, rows, pi, audited, found, half_width=0.2)
    assert wide.audited < plan.audited
