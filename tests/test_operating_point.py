import itertools

import networkx as nx
import numpy as np
import pytest
from scipy.spatial import ConvexHull
from threshold_data import exhaustive_path_area

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._frontier import (
    best_cell,
    bucket_frontier,
    hull_neighbours,
    upper_hull,
)
from costlib.thresholds.point._lattice_path import max_area_path, path_area
from costlib.thresholds.point._operating_point import METHODS
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._target import Target


def _grid(k, seed=0, n=3000, rule_shift=1.0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.2
    scores = rng.normal(size=(n, k)) + rule_shift * y[:, None]
    edges = [np.linspace(-2, 2.5, 5 + 3 * j) for j in range(k)]
    return ThresholdGrid.from_scores(scores, y, edges)


def _bellman_ford_area(tp, fp):
    """The paper's construction: lattice graph, weight = -trapezoid area, Bellman-Ford."""
    graph = nx.DiGraph()
    for cell in itertools.product(*(range(n) for n in tp.shape)):
        for axis in range(tp.ndim):
            nxt = list(cell)
            nxt[axis] += 1
            nxt = tuple(nxt)
            if nxt[axis] < tp.shape[axis]:
                area = 0.5 * (fp[cell] - fp[nxt]) * (tp[cell] + tp[nxt])
                graph.add_edge(cell, nxt, weight=-area)
    source, target = (0,) * tp.ndim, tuple(n - 1 for n in tp.shape)
    path = nx.bellman_ford_path(graph, source, target, weight="weight")
    return -nx.path_weight(graph, path, weight="weight"), path


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("rule", ["any", "all"])
def test_graph_path_area_equals_bellman_ford(k, rule):
    grid = _grid(k, seed=k)
    tp, fp = grid.counts(rule)
    path, area = max_area_path(tp, fp)
    bf_area, bf_path = _bellman_ford_area(tp, fp)
    assert area == pytest.approx(bf_area, rel=1e-12)
    assert path_area(tp, fp, path) == pytest.approx(bf_area, rel=1e-12)
    # The path is monotone with unit steps from all-lowest to all-off.
    steps = np.diff(path, axis=0)
    assert (steps.sum(axis=1) == 1).all() and (steps >= 0).all()
    assert tuple(path[0]) == (0,) * k and tuple(path[-1]) == tuple(n - 1 for n in tp.shape)
    assert len(bf_path) == len(path)


def test_graph_path_beats_every_path_exhaustively():
    grid = _grid(2, seed=5)
    tp, fp = grid.counts("any")
    _, area = max_area_path(tp, fp)
    best = exhaustive_path_area(tp, fp)
    assert area == pytest.approx(best, rel=1e-12)


def _generic_recursion_area(tp, fp):
    """Max path area by the generic k-dimensional recursion (not the k = 2 fast path)."""
    from costlib.thresholds.point import _lattice_path as lattice_path

    values_in = np.full(tp.shape, -np.inf)
    values_in[0, 0] = 0.0
    source_in = np.full(tp.shape, -1, dtype=np.int8)
    values, _ = lattice_path._block(values_in, source_in, lattice_path.step_weights(tp, fp), 0)
    return values[-1, -1]


def test_2d_fast_path_agrees_with_generic_recursion():
    from costlib.thresholds.point import _lattice_path as lattice_path

    grid = _grid(2, seed=9)
    tp, fp = grid.counts("all")
    fast_path, fast_area = lattice_path._max_area_path_2d(tp, fp)
    assert fast_area == pytest.approx(_generic_recursion_area(tp, fp), rel=1e-12)
    assert path_area(tp, fp, fast_path) == pytest.approx(fast_area, rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("m", [0.2, 0.5, 0.8])
def test_hull_point_is_the_brute_force_argmax(k, m):
    grid = _grid(k, seed=10 + k)
    tp, fp = grid.counts("any")
    point = optimize(grid, target_marginal_precision=m, method="hull")
    r = m / (1 - m)
    objective = tp - r * fp
    assert point.objective == objective.max()
    assert objective[point.index] == objective.max()
    # Tie rule: fewest FP among the maximisers.
    assert point.fp == fp[objective == objective.max()].min()
    # Every method is bounded by the exact optimum.
    for method in METHODS:
        other = optimize(grid, target_marginal_precision=m, method=method)
        assert other.objective <= point.objective + 1e-9
        assert other.tp == tp[other.index] and other.fp == fp[other.index]
        assert other.thresholds == grid.threshold_values(other.index)


@pytest.mark.parametrize("rule", ["any", "all"])
def test_upper_hull_matches_scipy_convex_hull(rule):
    grid = _grid(2, seed=21)
    tp, fp = grid.counts(rule)
    hull = upper_hull(tp, fp)
    pts = np.column_stack([fp.ravel(), tp.ravel()])
    expected = {tuple(p) for p in pts[ConvexHull(pts).vertices]}
    top = tp.max()
    fp_at_top = fp.ravel()[tp.ravel() == top].min()
    # Upper part only: from (0, 0) to the max-TP point with the fewest FP, strictly concave.
    expected = {p for p in expected if p[0] <= fp_at_top and _on_upper_side(p, pts)}
    expected.add((0.0, 0.0))  # every PN curve ends at the origin (all classifiers off)
    got = [tuple(p) for p in pts[hull]]
    assert set(got) == expected
    assert [p[0] for p in got] == sorted((p[0] for p in got), reverse=True)


def _on_upper_side(p, pts):
    # A convex-hull vertex is on the upper chain iff no point lies strictly above it at its FP.
    same = pts[pts[:, 0] == p[0]]
    return p[1] >= same[:, 1].max()


def test_hull_neighbours_are_the_adjacent_hull_vertices():
    grid = _grid(2, seed=4)
    tp, fp = grid.counts("any")
    hull = upper_hull(tp, fp)
    flat_tp, flat_fp = tp.ravel(), fp.ravel()
    for pos in range(1, len(hull) - 1):
        cell = np.unravel_index(hull[pos], tp.shape)
        left, right = hull_neighbours(tp, fp, cell)
        assert (flat_fp[left], flat_tp[left]) == (flat_fp[hull[pos + 1]], flat_tp[hull[pos + 1]])
        assert (flat_fp[right], flat_tp[right]) == (flat_fp[hull[pos - 1]], flat_tp[hull[pos - 1]])


def test_hull_without_full_frontier_gives_the_same_point():
    grid = _grid(2, seed=8)
    for m in (0.1, 0.4, 0.7):
        full = optimize(grid, target_marginal_precision=m, method="hull")
        quick = optimize(grid, target_marginal_precision=m, method="hull", frontier=False)
        assert full.index == quick.index
        assert full.marginal_precision_left == quick.marginal_precision_left
        assert full.marginal_precision_right == quick.marginal_precision_right


def test_marginal_precisions_bracket_the_target_on_the_hull():
    grid = _grid(2, seed=2)
    for m in (0.15, 0.3, 0.5, 0.7):
        p = optimize(grid, target_marginal_precision=m, method="hull")
        assert p.marginal_precision_left >= m - 1e-12 or np.isnan(p.marginal_precision_left)
        assert p.marginal_precision_right <= m + 1e-12 or np.isnan(p.marginal_precision_right)


def test_marginal_precision_is_precision_of_the_items_in_between():
    # Hand-made single classifier: scores 4 > 3 > 2 > 1 with labels 1, 1, 0, 1.
    grid = ThresholdGrid.from_scores(
        [[4.0], [3.0], [2.0], [1.0]], [1, 1, 0, 1], [np.array([1.0, 2.0, 3.0, 4.0])]
    )
    p = optimize(grid, target_marginal_precision=0.6, method="graph")
    # Curve (threshold: TP, FP): 1: (3,1), 2: (2,1), 3: (2,0), 4: (1,0), off: (0,0).
    # TP - 1.5 FP is maximal (2) at threshold 3; left step to t=4 admits 1 TP, 0 FP.
    assert p.thresholds == (3.0,) and (p.tp, p.fp) == (2.0, 0.0)
    assert p.marginal_precision_left == 1.0
    assert p.marginal_precision_right == 0.0  # the next item let in (score 2) is negative


def test_bucket_frontier_is_highest_tp_per_bucket():
    grid = _grid(2, seed=6)
    tp, fp = grid.counts("any")
    n_buckets = 7
    frontier = bucket_frontier(tp, fp, n_buckets)
    flat_tp, flat_fp = tp.ravel(), fp.ravel()
    bucket = np.minimum((flat_fp / flat_fp.max() * n_buckets).astype(int), n_buckets - 1)
    best_per_bucket = {b: flat_tp[bucket == b].max() for b in np.unique(bucket)}
    for cell in frontier[:-1]:  # the last is the origin
        assert flat_tp[cell] == best_per_bucket[bucket[cell]]
    assert flat_tp[frontier[-1]] == 0 and flat_fp[frontier[-1]] == 0
    assert (np.diff(flat_fp[frontier]) < 0).all() and (np.diff(flat_tp[frontier]) < 0).all()


@pytest.mark.parametrize("k", [1, 2, 3])
def test_analytic_method_runs_for_every_k_and_reports_a_lattice_cell(k):
    grid = _grid(k, seed=30 + k)
    p = optimize(grid, target_marginal_precision=0.4, method="analytic")
    tp, fp = grid.counts("any")
    assert (p.tp, p.fp) == (tp[p.index], fp[p.index])
    assert len(p.details["exponents"]) == k and p.details["exponents"][0] == 1.0
    assert all(e > 0 for e in p.details["exponents"])
    assert np.isfinite(p.details["energy"])
    # The snapped path is monotone from the all-lowest to the all-off corner.
    assert (np.diff(p.path, axis=0) >= 0).all()
    assert tuple(p.path[0]) == (0,) * k and tuple(p.path[-1]) == tuple(n - 1 for n in tp.shape)


def test_analytic_recovers_the_diagonal_when_classifiers_are_symmetric():
    # Two exchangeable classifiers with identical edges: the best power path is close to p = 1.
    rng = np.random.default_rng(0)
    n = 40_000
    y = rng.random(n) < 0.1
    scores = rng.normal(size=(n, 2)) + 1.5 * y[:, None]
    edges = [np.linspace(-2, 3, 41)] * 2
    grid = ThresholdGrid.from_scores(scores, y, edges)
    p = optimize(grid, target_marginal_precision=0.5, method="analytic")
    assert p.details["exponents"][1] == pytest.approx(1.0, abs=0.15)
    # And its point is close to the exact optimum in objective.
    hull = optimize(grid, target_marginal_precision=0.5, method="hull")
    assert p.objective >= 0.97 * hull.objective


def test_target_forms_agree():
    grid = _grid(2, seed=1)
    by_m = optimize(grid, target_marginal_precision=0.25, method="graph")
    by_slope = optimize(grid, target_slope=1 / 3, method="graph")
    by_fp_per_tp = optimize(grid, target=Target.from_fp_per_tp(3), method="graph")
    # Benefit matrix rows = truth: TP worth 3, FP costs 1 -> eta = (0 - -1) / (3 - 0) = 1/3.
    by_benefit = optimize(grid, benefit_matrix=[[0, -1], [0, 3]], method="graph")
    for p in (by_slope, by_fp_per_tp, by_benefit):
        assert p.index == by_m.index
        assert p.target.slope == pytest.approx(1 / 3)
    assert by_m.target.marginal_precision == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of"),
        ({"target_marginal_precision": 0.5, "target_slope": 1.0}, "exactly one of"),
        ({"target_marginal_precision": 1.0}, r"in \(0, 1\)"),
        ({"target_slope": -1.0}, "> 0"),
        ({"benefit_matrix": [[1, 2, 3]]}, "2x2"),
        ({"benefit_matrix": [[0, 1], [0, 3]]}, "b00 > b01"),
        ({"target_marginal_precision": 0.5, "method": "magic"}, "method must be one of"),
        ({"target_marginal_precision": 0.5, "rule": "xor"}, "rule must be one of"),
    ],
)
def test_bad_optimize_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        optimize(_grid(2), **kwargs)


def test_empty_grid_gives_all_off():
    grid = ThresholdGrid.empty([[0.0, 1.0], [0.5]])
    for method in METHODS:
        p = optimize(grid, target_marginal_precision=0.5, method=method)
        assert (p.tp, p.fp) == (0.0, 0.0)
        assert np.isnan(p.precision)


def test_best_cell_tie_rule_prefers_fewest_false_positives():
    tp = np.array([[4.0, 2.0], [2.0, 0.0]])
    fp = np.array([[4.0, 0.0], [0.0, 0.0]])
    # slope 0.5: objectives 2, 2, 2, 0 -> fewest FP then fewest TP then row-major: (0, 1).
    assert best_cell(tp, fp, 0.5) == (0, 1)


@pytest.mark.parametrize("width", [40, 700])  # both forward passes: 2-D blocks and wide rows
def test_2d_forward_passes_agree_with_generic_recursion_on_narrow_and_wide_rows(width):
    from costlib.thresholds.point import _lattice_path as lattice_path

    rng = np.random.default_rng(width)
    n = 20_000
    y = rng.random(n) < 0.2
    scores = rng.normal(size=(n, 2)) + y[:, None]
    grid = ThresholdGrid.from_scores(scores, y, [np.linspace(-2, 2, 7), np.linspace(-3, 3, width)])
    tp, fp = grid.counts("any")
    path, area = lattice_path._max_area_path_2d(tp, fp)
    assert area == pytest.approx(_generic_recursion_area(tp, fp), rel=1e-12)
    assert path_area(tp, fp, path) == pytest.approx(area, rel=1e-12)


def test_analytic_never_returns_a_point_worse_than_flagging_nothing():
    from costlib.thresholds.point._analytic import fit_analytic_path

    # One classifier, thresholds 0..3 then off. With r = 1, TP - FP along the curve is
    # -10, -3, -6, -1, 0: the only turning point (+ then -) is at index 1 (worth -3), while the
    # all-off end is worth 0. The method must not stop at the turning point.
    tp = np.array([10.0, 9.0, 6.0, 5.0, 0.0])
    fp = np.array([20.0, 12.0, 12.0, 6.0, 0.0])
    fit = fit_analytic_path(tp, fp, slope=1.0, granularity=401)
    assert fit.cell == (4,)
    assert fit.fitted_tp - fit.fitted_fp == 0.0
    assert not fit.root_found


def test_hull_neighbours_give_the_same_marginal_precisions_as_the_full_hull():
    # The reviewer's case: the optimum sits at FP = 0 (left neighbour: the origin, precision 1)
    # and has nothing above it on the right (no flat tail on the hull: NaN).
    grid = ThresholdGrid.from_scores([[0.7], [0.2]], [1, 0], [np.array([0.1, 0.5])])
    for frontier in (True, False):
        p = optimize(grid, target_marginal_precision=0.5, method="hull", frontier=frontier)
        assert p.marginal_precision_left == 1.0 and np.isnan(p.marginal_precision_right)
    rng = np.random.default_rng(5)
    for trial in range(150):
        n = int(rng.integers(3, 60))
        y = rng.random(n) < rng.uniform(0.1, 0.9)
        scores = np.round(rng.normal(size=(n, 2)) + y[:, None], 1)
        g = ThresholdGrid.from_scores(scores, y, [np.linspace(-1, 2, 5)] * 2)
        m = float(rng.uniform(0.05, 0.95))
        full = optimize(g, target_marginal_precision=m, method="hull")
        quick = optimize(g, target_marginal_precision=m, method="hull", frontier=False)
        assert full.index == quick.index, trial
        np.testing.assert_equal(
            (full.marginal_precision_left, full.marginal_precision_right),
            (quick.marginal_precision_left, quick.marginal_precision_right),
        )
