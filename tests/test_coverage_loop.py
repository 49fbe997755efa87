"""The selective-labels story closed-loop, and OperatingPoint.apply/evaluate (issue 10)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from costlib.thresholds.binning._edges import uniform_edges
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._optimize import optimize


def _population(n, seed, prevalence=0.01, separation=(3.2, 2.8), rho=0.3):
    """Two correlated classifiers over a rare-event population with known labels."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < prevalence
    shared = rng.standard_normal(n)
    scores = np.empty((n, 2))
    for j in range(2):
        z = separation[j] * y + np.sqrt(rho) * shared + np.sqrt(1 - rho) * rng.standard_normal(n)
        scores[:, j] = 1 / (1 + np.exp(-(z - 2.0)))
    return scores, y


@pytest.mark.parametrize("start_at", [(0.9, 0.9), (0.9, np.inf)],
                         ids=["both-too-high", "image-model-off"])
@pytest.mark.parametrize("slope", [1.0, 4.0])
def test_recalibrating_on_own_ratings_never_loses_real_utility(slope, start_at):
    edges = [uniform_edges(0.01, 0.99, 99)] * 2
    truth_scores, truth = _population(400_000, seed=999)

    def real_utility(point):
        counts = point.evaluate(truth_scores, truth)
        return counts["tp"] - slope * counts["fp"]

    def run(share):
        start = optimize(ThresholdGrid.empty(edges), target_slope=slope, method="hull")
        start = _with_thresholds(start, start_at)
        points, grid, point, seen = [], ThresholdGrid.empty(edges), start, []
        for day in range(10):
            scores, y = _population(50_000, seed=day)
            rated = point.apply(scores)  # only flagged rows get rated
            seen.append((scores, rated))
            grid = grid + ThresholdGrid.from_scores(scores, np.where(rated, y, None), edges)
            point = optimize(grid, target_slope=slope, method="hull", max_unrated_share=share)
            # counted directly: the rows of every day so far that it flags and nobody rated
            unrated = sum(int(np.sum(point.apply(x) & ~r)) for x, r in seen)
            points.append((point, unrated))
        return real_utility(start), points

    base, points = run(0.0)
    for point, unrated in points:
        assert real_utility(point) >= base
        assert point.unrated == unrated == 0  # it flags only rows someone rated
        if point.status == "coverage_limited":
            free = point.unrestricted
            assert free["unrated"] > 0 and free["objective"] > point.objective
            assert any(t < s for t, s in zip(free["thresholds"], start_at, strict=True))
    assert any(p.status == "coverage_limited" for p, _ in points)
    # Without the guard the same loop jumps to a point that floods false positives: the test
    # would fail for an optimiser that ignores coverage.
    _, unguarded = run(1.0)
    first, unrated = unguarded[0]
    assert real_utility(first) < base and unrated > 0
    assert min(first.thresholds) < 0.5


def _with_thresholds(point, thresholds):
    """The thresholds in force on day 0 (only apply/evaluate read them)."""
    return replace(point, thresholds=tuple(float(t) for t in thresholds))


def test_apply_and_evaluate_by_direct_counting():
    scores, y = _population(20_000, seed=3)
    scores[::7, 0] = -np.inf
    scores[::11, 1] = np.nan
    missing_as_inf = np.where(np.isnan(scores), -np.inf, scores)
    grid = ThresholdGrid.from_scores(missing_as_inf, y,
                                     [uniform_edges(0.05, 0.95, 19)] * 2, names=["a", "b"])
    for rule in ("any", "and"):
        point = optimize(grid, target_marginal_precision=0.5, method="hull", rule=rule)
        th = np.asarray(point.thresholds)
        fires = missing_as_inf >= th
        expected = fires.any(axis=1) if rule == "any" else fires.all(axis=1)
        assert np.array_equal(point.apply(scores), expected)
        frame = pd.DataFrame({"b": scores[:, 1], "a": scores[:, 0], "other": 1.0})
        assert np.array_equal(point.apply(frame), expected)  # columns by name
        got = point.evaluate(frame, y, beta=2.0)
        tp, fp = float(np.sum(expected & y)), float(np.sum(expected & ~y))
        fn = float(np.sum(~expected & y))
        assert (got["tp"], got["fp"], got["fn"]) == (tp, fp, fn)
        assert got["precision"] == tp / (tp + fp) and got["recall"] == tp / (tp + fn)
        assert got["fbeta"] == pytest.approx(5 * tp / (5 * tp + 4 * fn + fp), rel=1e-15)
        # The grid was built from these rows, so the hold-out counts are the grid's.
        assert (point.tp, point.fp) == (tp, fp)
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        point.apply(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="aliases 'or', 'and'"):
        optimize(grid, target_marginal_precision=0.5, rule="xor")
