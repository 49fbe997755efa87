"""The audit figure: frontiers of the audit-weighted, rated-only and full-label grids."""

from __future__ import annotations

import numpy as np
from coverage_data import brute_flags

from costlib.audit._sampling import AuditDesign, audit_sample
from costlib.thresholds.binning._edges import uniform_edges
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.plots._audit_plots import audit_frontiers, plot_audit_pn_curves
from costlib.thresholds.point._target import resolve_target


def test_frontiers_end_where_each_grid_can_see(tmp_path):
    """Rated only: the frontier ends at the flagged positives (counted directly); audit
    weighted: it reaches the estimated positives of the whole population, which is within a
    few standard errors of the truth."""
    rng = np.random.default_rng(7)
    n = 40_000
    y = rng.random(n) < 0.02
    scores = 1 / (1 + np.exp(-(rng.standard_normal((n, 2)) + 3.0 * y[:, None] - 2.0)))
    edges = [uniform_edges(0, 1, 33)] * 2
    in_force = (edges[0][28], edges[1][28])
    flagged = brute_flags(scores, in_force, "any")
    design = AuditDesign(edges=(0.3,), weights=(1.0, 5.0), floor=0.01, budget_share=0.02)
    sample = audit_sample(np.arange(n), scores, flagged, "figure", design)
    p, audited = sample.audit_probability, sample.audit
    rated = flagged | audited
    labels = np.where(rated, y, None).astype(object)
    grids = {
        "audit-weighted": ThresholdGrid.from_scores(scores, labels, edges, audit_probabilities=p),
        "rated only": ThresholdGrid.from_scores(scores[flagged], y[flagged], edges),
        "all labels": ThresholdGrid.from_scores(scores, y, edges),
    }
    target = resolve_target(0.3)
    points = audit_frontiers(grids, target=target)
    assert np.max(points["rated only"].curve_tp) == np.sum(y & flagged)
    assert np.max(points["all labels"].curve_tp) == np.sum(y)
    estimate = grids["audit-weighted"].total_positives
    assert np.max(points["audit-weighted"].curve_tp) == estimate
    se = np.sqrt(np.sum(((1 - p) / p)[y]))  # Horvitz–Thompson variance of the positive count
    assert abs(estimate - np.sum(y)) < 4 * se
    path = tmp_path / "figure.png"
    plot_audit_pn_curves(grids, target=target, in_force=in_force, path=path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
