"""Max-area paths of many lattices solved together: identical to one lattice at a time."""

import numpy as np
import pytest
from threshold_data import exhaustive_path_area, random_grid

from costlib.thresholds.point import _lattice_path as lattice_path
from costlib.thresholds.point import _optimize as optimizing
from costlib.thresholds.point._lattice_path import max_area_path, max_area_paths, path_area
from costlib.thresholds.point._optimize import optimize, optimize_each, prepare_graph_paths

_grid = random_grid


def _stack(grids, rule="any"):
    counts = [g.counts(rule) for g in grids]
    return np.stack([c[0] for c in counts]), np.stack([c[1] for c in counts])


@pytest.mark.parametrize("n_grids", [1, 3, 8, 20])  # both backtracks: row slices and all at once
@pytest.mark.parametrize("widths", [(6, 5), (5, 700), (40, 30)])  # narrow blocks and wide rows
def test_stacked_paths_are_the_single_lattice_paths(n_grids, widths):
    grids = [_grid(seed, widths) for seed in range(n_grids)]
    for rule in ("any", "all"):
        tp, fp = _stack(grids, rule)
        together = max_area_paths(tp, fp)
        assert len(together) == n_grids
        for g, (path, area) in zip(grids, together, strict=True):
            alone_path, alone_area = max_area_path(*g.counts(rule))
            np.testing.assert_array_equal(path, alone_path)
            assert area == alone_area  # bit for bit: the same arithmetic per lattice
            assert path_area(*g.counts(rule), path) == pytest.approx(area, rel=1e-12)


def test_stacked_paths_reach_the_brute_force_optimum_on_small_lattices():
    grids = [_grid(seed, (5, 6), n=400) for seed in range(10)]
    tp, fp = _stack(grids)
    for (path, area), t, f in zip(max_area_paths(tp, fp), tp, fp, strict=True):
        assert area == pytest.approx(exhaustive_path_area(t, f), rel=1e-12)
        assert tuple(path[0]) == (0, 0) and tuple(path[-1]) == (t.shape[0] - 1, t.shape[1] - 1)
        assert (np.diff(path, axis=0).sum(axis=1) == 1).all()  # one unit step at a time


def test_both_backtracks_give_the_same_columns(monkeypatch):
    grids = [_grid(seed, (30, 25)) for seed in range(9)]
    tp, fp = _stack(grids)
    vectorised = max_area_paths(tp, fp)
    monkeypatch.setattr(lattice_path, "_VECTOR_BACKTRACK", 10**9)  # force the row-slice search
    sliced = max_area_paths(tp, fp)
    for (p1, a1), (p2, a2) in zip(vectorised, sliced, strict=True):
        np.testing.assert_array_equal(p1, p2)
        assert a1 == a2


@pytest.mark.parametrize("widths", [(15,), (5, 4, 6)])
def test_other_dimensions_are_solved_one_by_one_with_the_same_result(widths):
    grids = [_grid(seed, widths) for seed in range(4)]
    tp, fp = _stack(grids)
    for g, (path, area) in zip(grids, max_area_paths(tp, fp), strict=True):
        alone_path, alone_area = max_area_path(*g.counts("any"))
        np.testing.assert_array_equal(path, alone_path)
        assert area == alone_area


def test_stacks_of_different_shapes_are_refused():
    with pytest.raises(ValueError, match="stacks of one shape"):
        max_area_paths(np.zeros((2, 3, 3)), np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="stacks of one shape"):
        max_area_paths(np.zeros(3), np.zeros(3))


def _same_point(a, b):
    assert a.index == b.index
    assert a.thresholds == b.thresholds
    assert (a.tp, a.fp, a.objective) == (b.tp, b.fp, b.objective)
    assert a.status == b.status
    np.testing.assert_array_equal(a.curve_tp, b.curve_tp)
    np.testing.assert_array_equal(a.curve_fp, b.curve_fp)


def test_prepared_paths_give_the_points_of_grids_optimised_alone(monkeypatch):
    # Mixed shapes and a batch smaller than the grids of one shape: several stacks per shape.
    monkeypatch.setattr(optimizing, "GRAPH_BATCH_CELLS", 3 * 13 * 10)
    shapes = [(12, 9), (7, 7), (12, 9)]
    grids = [_grid(seed, shapes[seed % 3]) for seed in range(11)]
    fresh = [_grid(seed, shapes[seed % 3]) for seed in range(11)]
    prepare_graph_paths(grids, rule="or")  # an alias of "any"
    for prepared, alone in zip(grids, fresh, strict=True):
        kwargs = {"target_marginal_precision": 0.4, "method": "graph", "rule": "any"}
        _same_point(optimize(prepared, **kwargs), optimize(alone, **kwargs))


@pytest.mark.parametrize("method", ["graph", "hull"])
def test_optimize_each_equals_optimize_on_each_grid(method, monkeypatch):
    monkeypatch.setattr(optimizing, "GRAPH_BATCH_CELLS", 4 * 13 * 10)  # batches of 4
    grids = [_grid(seed) for seed in range(10)]
    kwargs = {"target_marginal_precision": 0.3, "method": method, "rule": "all"}
    together = list(optimize_each(iter(grids), **kwargs))
    for point, grid in zip(together, [_grid(seed) for seed in range(10)], strict=True):
        _same_point(point, optimize(grid, **kwargs))


def test_optimize_each_holds_at_most_one_batch(monkeypatch):
    monkeypatch.setattr(optimizing, "GRAPH_BATCH_CELLS", 4 * 13 * 10)  # batches of 4
    pulled = []

    def grids():
        for seed in range(10):
            pulled.append(seed)
            yield _grid(seed)

    points = optimize_each(grids(), target_marginal_precision=0.3)
    next(points)
    assert pulled == [0, 1, 2, 3]
    assert len(list(points)) == 9
    assert pulled == list(range(10))


def test_prepare_refuses_what_is_not_a_grid():
    with pytest.raises(TypeError, match="ThresholdGrid"):
        prepare_graph_paths([_grid(0), np.zeros((3, 3))])


def test_prepare_leaves_paths_already_solved(monkeypatch):
    grids = [_grid(seed) for seed in range(5)]
    prepare_graph_paths(grids[:2])
    stacked = []
    real = optimizing.max_area_paths

    def counting(tp, fp):
        stacked.append(tp.shape[0])
        return real(tp, fp)

    monkeypatch.setattr(optimizing, "max_area_paths", counting)
    prepare_graph_paths(grids, rule="any")
    assert stacked == [3]  # only the three unsolved grids
    for prepared, seed in zip(grids, range(5), strict=True):
        _same_point(optimize(prepared, target_marginal_precision=0.4),
                    optimize(_grid(seed), target_marginal_precision=0.4))
