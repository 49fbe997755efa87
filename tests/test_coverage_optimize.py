"""optimize() under coverage, objectives and constraints, against brute force (issue 10)."""

import itertools

import numpy as np
import pytest
from coverage_data import brute_cell, make_selective_rows

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._operating_point import METHODS
from costlib.thresholds.point._optimize import optimize

OBJECTIVE_SETS = [
    ({"target_marginal_precision": 0.3}, 0.0),
    ({"target_marginal_precision": 0.3}, 0.2),
    ({"objective": "f1"}, 0.0),
    ({"objective": "fbeta", "beta": 2.0}, 0.1),
    ({"objective": "precision_at_volume", "volume": "median"}, 0.0),
    ({"target_marginal_precision": 0.5, "min_precision": 0.6}, 0.0),
    ({"objective": "f1", "max_volume": "median"}, 0.0),
    ({"target_marginal_precision": 0.2, "max_false_positives": 20.0}, 0.0),
    ({"objective": "f1", "min_precision": 0.5, "max_false_positives": 40.0}, 0.3),
]


def _table(grid, scores, truth, rated, w, rule):
    """Direct counts at every tuple: (index, thresholds, tp, fp, unrated, volume)."""
    rows = []
    for cell in itertools.product(*(range(n) for n in grid.shape)):
        th = grid.threshold_values(cell)
        rows.append((cell, th, *brute_cell(scores, truth, rated, w, th, rule)))
    return rows


def _brute_value(kwargs, tp, fp, vol, positives):
    name = kwargs.get("objective", "linear")
    if name == "linear":
        m = kwargs["target_marginal_precision"]
        return tp - m / (1 - m) * fp
    if name == "precision_at_volume":
        return tp / kwargs["volume"]
    b2 = 1.0 if name == "f1" else kwargs["beta"] ** 2
    den = (1 + b2) * tp + b2 * (positives - tp) + fp
    return 1.0 if den == 0 else (1 + b2) * tp / den


def _brute_feasible(kwargs, tp, fp, vol):
    ok = True
    if "min_precision" in kwargs:
        ok &= tp + fp > 0 and tp >= kwargs["min_precision"] * (tp + fp)
    if "max_volume" in kwargs:
        ok &= vol <= kwargs["max_volume"]
    if "max_false_positives" in kwargs:
        ok &= fp <= kwargs["max_false_positives"]
    if kwargs.get("objective") == "precision_at_volume":
        ok &= vol <= kwargs["volume"]
    return ok


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("rule", ["any", "all"])
@pytest.mark.parametrize("seed", [0, 1])
def test_every_method_stays_covered_and_hull_is_the_brute_force_optimum(k, rule, seed):
    scores, labels, w, edges, truth, rated = make_selective_rows(
        300, k, seed=100 * k + seed, weighted=bool(seed)
    )
    grid = ThresholdGrid.from_scores(scores, labels, edges, w)
    table = _table(grid, scores, truth, rated, w, rule)
    positives = grid.total_positives
    median = float(np.median([v for *_, v in table if v > 0]))
    for spec, share in OBJECTIVE_SETS:
        kwargs = {key: (median if val == "median" else val) for key, val in spec.items()}
        covered = [row for row in table if row[4] <= share * row[5]]
        feasible = [r for r in covered if _brute_feasible(kwargs, r[2], r[3], r[5])]
        informative = [r for r in feasible if r[5] > 0]
        constrained = any(c in kwargs for c in ("min_precision", "max_volume",
                                                "max_false_positives", "volume"))
        for method in METHODS:
            # The truth here is the lattice: resolution (finer lattices) is tested apart.
            point = optimize(grid, rule=rule, method=method, max_unrated_share=share,
                             check_resolution=False, **kwargs)
            checked = optimize(grid, rule=rule, method=method, max_unrated_share=share, **kwargs)
            assert checked.thresholds == point.thresholds
            assert checked.status == point.status or (
                point.status == "ok" and checked.status == "resolution_limited")
            # Direct counts at the returned tuple: the reported volume/unrated/coverage match,
            # and no method flags more unrated weight than allowed.
            tp, fp, unr, vol = brute_cell(scores, truth, rated, w, point.thresholds, rule)
            assert (point.tp, point.fp, point.unrated, point.volume) == (tp, fp, unr, vol)
            assert point.coverage == (1.0 if vol == 0 else (tp + fp) / vol)
            assert unr <= share * vol, (method, spec)
            if point.status != "infeasible":
                assert _brute_feasible(kwargs, tp, fp, vol), (method, spec)
            if method != "hull":
                continue
            if constrained and not informative:
                assert point.status == "infeasible", spec
                continue
            best = max(_brute_value(kwargs, r[2], r[3], r[5], positives) for r in feasible)
            assert point.objective == pytest.approx(best, rel=1e-12, abs=1e-12), spec
            free = [r for r in table if _brute_feasible(kwargs, r[2], r[3], r[5])]
            free_best = max(_brute_value(kwargs, r[2], r[3], r[5], positives) for r in free)
            if free_best > best + 1e-9:
                assert point.status == "coverage_limited", spec
                assert point.unrestricted["objective"] == pytest.approx(free_best, rel=1e-12)
                assert point.unrestricted["unrated"] > share * point.unrestricted["volume"]
                assert point.reason
            else:
                assert point.status == "ok", spec


def test_infeasible_capacity_returns_the_nearest_point_and_names_the_constraint():
    scores, labels, w, edges, _, _ = make_selective_rows(300, 2, seed=4)
    grid = ThresholdGrid.from_scores(scores, labels, edges, w)
    vol, covered = grid.volume("any"), grid.covered("any")
    smallest = vol[covered & (vol > 0)].min()
    for method in METHODS:
        point = optimize(grid, objective="f1", max_volume=smallest / 2, method=method)
        assert point.status == "infeasible", method
        assert point.volume > 0 and "max_volume" in point.reason
    hull = optimize(grid, objective="f1", max_volume=smallest / 2, method="hull")
    assert hull.volume == smallest  # the covered cell closest to the capacity
    with pytest.raises(ValueError, match=r"min_precision must be in \(0, 1\]"):
        optimize(grid, objective="f1", min_precision=1.5)
    with pytest.raises(ValueError, match="needs volume > 0"):
        optimize(grid, objective="precision_at_volume")
    with pytest.raises(ValueError, match="exactly one of"):
        optimize(grid)


def test_defaults_without_unrated_weight_give_todays_points():
    scores, labels, _, edges, truth, rated = make_selective_rows(300, 2, seed=9)
    rated_only = ThresholdGrid.from_scores(scores[rated], truth[rated], edges)
    for method in METHODS:
        point = optimize(rated_only, target_marginal_precision=0.3, method=method)
        assert point.status == "ok" and point.unrated == 0.0
        assert point.volume == point.tp + point.fp and point.coverage == 1.0
        summary = point.summary()
        assert summary["status"] == "ok" and summary["volume"] == point.volume
    # With the unrated rows the same grid counts are kept; only the coverage is new.
    full = ThresholdGrid.from_scores(scores, labels, edges)
    assert np.array_equal(full.counts("any")[0], rated_only.counts("any")[0])
