"""Audit samples: Horvitz–Thompson grids against the full-label truth of a known population.

The population has every label; flagging (thresholds in force) and a Bernoulli audit of the
unflagged rows with a known π per score stratum are simulated, and the grids built from the
observed ratings only are compared with the grid of the whole labelled population.
"""

from __future__ import annotations

import numpy as np
import pytest

from costlib.audit._weights import audit_weights
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._bootstrap import BootstrapGrids, confidence_intervals
from costlib.thresholds.point._optimize import optimize

EDGES = [np.linspace(0.05, 0.95, 19), np.linspace(0.05, 0.95, 19)]
IN_FORCE = 0.7  # either score >= 0.7 is flagged (rule "any"), and rated
N_SEEDS = 200


def population(n: int = 20_000, seed: int = 123):
    """Scores of two classifiers, every label known, and the inclusion probability per row.

    Flagged rows (a score >= IN_FORCE) have π = 1; unflagged rows are audited with π = 0.2 in
    the band just below the flagged region (max score >= 0.4) and π = 0.02 below it.
    """
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.05
    latent = 1.8 * y[:, None] + rng.standard_normal((n, 2))
    scores = 1.0 / (1.0 + np.exp(-(latent - 1.5)))
    weights = np.where(np.arange(n) % 4 == 0, 2.0, 1.0)
    top = scores.max(axis=1)
    flagged = top >= IN_FORCE
    pi = np.where(flagged, 1.0, np.where(top >= 0.4, 0.2, 0.02))
    return scores, y, weights, pi, flagged


def observed_labels(y, pi, rng):
    """Labels as the raters return them: a Bernoulli(π) draw per row, null where not rated."""
    rated = rng.random(y.size) < pi
    return np.where(rated, y.astype(object), None), rated


def test_audit_design_rows_enter_the_grid_as_documented():
    unrated = np.array([False, False, True, True, True, True])
    pi = np.array([1.0, 0.25, 1.0, 0.25, 0.0, np.nan])
    design = audit_weights(unrated, pi, np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))
    np.testing.assert_array_equal(design.keep, [True, True, True, False, True, True])
    np.testing.assert_array_equal(design.weights, [1.0, 8.0, 3.0, 0.0, 5.0, 6.0])
    np.testing.assert_array_equal(design.unrated, [False, False, True, False, True, True])
    assert design.audited_rows == 1
    for bad_pi, unrated_row in ((np.nan, False), (0.0, False), (1.5, False), (-0.1, True),
                                (1.01, True)):
        with pytest.raises(ValueError, match=r"π\[0\]"):
            audit_weights(np.array([unrated_row]), np.array([bad_pi]))


def test_audit_weighted_cells_are_unbiased_for_the_full_population():
    scores, y, w, pi, _ = population()
    truth = ThresholdGrid.from_scores(scores, y, EDGES, w)
    tp_true, fp_true = truth.counts("any")
    # Cells in the flagged region, in the high-π band and in the low-π band (below in force).
    cells = [(13, 13), (13, 19), (9, 9), (7, 12), (4, 4), (0, 19), (2, 6)]
    rng = np.random.default_rng(2026)
    est = np.empty((N_SEEDS, len(cells), 2))
    totals = np.empty(N_SEEDS)
    for seed in range(N_SEEDS):
        labels, _ = observed_labels(y, pi, rng)
        grid = ThresholdGrid.from_scores(scores, labels, EDGES, w, audit_probabilities=pi)
        assert grid.has_audit and not grid.has_unrated
        tp, fp = grid.counts("any")
        est[seed] = [(tp[c], fp[c]) for c in cells]
        totals[seed] = grid.total_positives
    mean = est.mean(axis=0)
    se = est.std(axis=0, ddof=1) / np.sqrt(N_SEEDS)
    true = np.array([(tp_true[c], fp_true[c]) for c in cells])
    # Cells inside the flagged region (π = 1 everywhere) are exact in every draw.
    np.testing.assert_array_equal(est[:, :2], np.broadcast_to(true[:2], (N_SEEDS, 2, 2)))
    assert (se[2:] > 0).all()  # the others hold audit rows: the check is not vacuous
    z = (mean[2:] - true[2:]) / se[2:]
    assert np.all(np.abs(z) < 2), f"z-scores {z.round(2).tolist()}"
    p_true = float((w * y).sum())
    assert abs(totals.mean() - p_true) < 2 * totals.std(ddof=1) / np.sqrt(N_SEEDS)
    # Without the 1/π weights the same rows grossly undercount the low cells: the test bites.
    labels, _ = observed_labels(y, pi, rng)
    naive = ThresholdGrid.from_scores(scores, labels, EDGES, w)
    assert naive.counts("any")[1][4, 4] < 0.5 * fp_true[4, 4]


def _interval_width(scale: float) -> float:
    scores, y, w, pi, flagged = population()
    pi = np.where(flagged, 1.0, pi * scale)
    labels, _ = observed_labels(y, pi, np.random.default_rng(7))
    boot = BootstrapGrids.from_scores(scores, labels, EDGES, np.arange(y.size), w,
                                      n_replicates=60, audit_probabilities=pi)
    result = confidence_intervals(boot, target_marginal_precision=0.3, method="hull")
    lo, hi = result.estimated_total_positives
    assert lo <= hi and result.estimated_recall is not None
    return hi - lo


def test_bootstrap_intervals_widen_as_the_audit_shrinks():
    widths = [_interval_width(scale) for scale in (2.0, 0.5, 0.1)]  # π up to 0.4 .. 0.02
    assert widths[0] < widths[1] < widths[2], widths


def _observed_grid(with_audit: bool, rng) -> ThresholdGrid:
    scores, y, w, pi, flagged = population()
    labels, _ = observed_labels(y, np.where(flagged, 1.0, pi if with_audit else 0.0), rng)
    # Without an audit the score stream carries no π: unflagged rows are unrated gaps.
    return ThresholdGrid.from_scores(scores, labels, EDGES, w,
                                     audit_probabilities=pi if with_audit else None)


def test_optimize_moves_below_the_flagged_region_only_with_audit_data():
    rng = np.random.default_rng(11)
    in_force = int(np.searchsorted(EDGES[0], IN_FORCE))  # lattice index of 0.7
    without = optimize(_observed_grid(False, rng), target_marginal_precision=0.2, method="hull")
    with_audit = optimize(_observed_grid(True, rng), target_marginal_precision=0.2,
                          method="hull")
    assert min(without.index) >= in_force and without.status == "coverage_limited"
    assert without.estimated_recall is None and without.total_positives_source == "rated"
    assert min(with_audit.index) < in_force and with_audit.status == "ok"
    assert with_audit.total_positives_source == "horvitz_thompson"
    assert with_audit.coverage == 1.0
    # The estimated recall is close to the point's true recall on the full population.
    scores, y, w, _, _ = population()
    flags = with_audit.apply(scores)
    true_recall = float((w * (flags & y)).sum() / (w * y).sum())
    assert abs(with_audit.estimated_recall - true_recall) < 0.1
    assert with_audit.summary()["estimated_recall"] == with_audit.estimated_recall


def test_flagged_unrated_rows_still_count_as_unrated_with_audit_data():
    scores, y, w, pi, flagged = population()
    labels, _ = observed_labels(y, pi, np.random.default_rng(3))
    pending = flagged & (np.arange(y.size) % 10 == 0)  # flagged, rating not back yet
    labels = np.where(pending, None, labels)
    grid = ThresholdGrid.from_scores(scores, labels, EDGES, w, audit_probabilities=pi)
    assert grid.total_unrated == pytest.approx(float(w[pending].sum()))
    no_pi = np.where(flagged, pi, np.nan)  # unflagged rows without π: gaps again
    gaps = ThresholdGrid.from_scores(scores, np.where(flagged, labels, None), EDGES, w,
                                     audit_probabilities=no_pi)
    assert gaps.total_unrated == pytest.approx(float(w[pending | ~flagged].sum()))
    merged = grid + grid
    assert merged.audited_rows == 2 * grid.audited_rows and merged == grid + grid
