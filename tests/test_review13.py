"""Review of the batched graph paths, packed sparse counts, group batches and window shards:
edge cases the first tests did not reach."""

import numpy as np
import pytest

from costlib import operating_point
from costlib.grid import ThresholdGrid
from costlib.lattice_path import max_area_path, max_area_paths
from costlib.operating_point import optimize, optimize_each


def _grid(seed, widths=(12, 9), n=2_000):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.25
    scores = rng.normal(size=(n, len(widths))) + y[:, None] * rng.uniform(0.3, 2.0)
    edges = [np.linspace(-2.5, 2.5, w) for w in widths]
    return ThresholdGrid.from_scores(scores, y, edges)


@pytest.mark.parametrize("shape", [(0, 6, 5), (0, 1, 5), (0, 4), (0, 3, 4, 2)])
def test_an_empty_stack_has_no_paths(shape):
    assert max_area_paths(np.zeros(shape), np.zeros(shape)) == []


@pytest.mark.parametrize("shape", [(1, 6), (6, 1), (1, 1)])
def test_stacks_of_lattices_with_a_side_of_one_are_solved_like_each_alone(shape):
    rng = np.random.default_rng(3)
    tp = np.flip(np.cumsum(np.flip(rng.integers(0, 4, (9, *shape)), 2), 2), 2).astype(float)
    fp = np.flip(np.cumsum(np.flip(rng.integers(0, 4, (9, *shape)), 2), 2), 2).astype(float)
    for (path, area), t, f in zip(max_area_paths(tp, fp), tp, fp, strict=True):
        alone_path, alone_area = max_area_path(t, f)
        np.testing.assert_array_equal(path, alone_path)
        assert area == alone_area


@pytest.mark.parametrize("method", ["graph", "hull"])
def test_optimize_each_does_not_stop_at_a_none_in_the_middle(method, monkeypatch):
    """A None among the grids is an error, as for ``optimize(None)``, never the end of the
    grids (the grids after it would be silently dropped)."""
    monkeypatch.setattr(operating_point, "GRAPH_BATCH_CELLS", 1)  # batches of one grid
    with pytest.raises((TypeError, AttributeError)):
        list(optimize_each([_grid(0), None, _grid(1)], target_marginal_precision=0.3,
                           method=method))


def test_optimize_each_holds_one_shape_batch_when_shapes_change(monkeypatch):
    """A batch is sized for the first grid's lattice: a small first lattice must not make it
    take (and hold) as many big lattices."""
    monkeypatch.setattr(operating_point, "GRAPH_BATCH_CELLS", 8 * 4 * 4)  # 8 of 4 x 4
    shapes = [(3, 3)] + [(30, 30)] * 12
    pulled = []

    def grids():
        for seed, widths in enumerate(shapes):
            pulled.append(seed)
            yield _grid(seed, widths)

    points = optimize_each(grids(), target_marginal_precision=0.3)
    next(points)
    held = [shapes[i] for i in pulled]
    big = sum(1 for s in held if s == (30, 30))
    # at most the one grid that showed the shape changed, not 7 lattices of 31 x 31
    assert big <= 1
    rest = list(points)
    assert len(rest) == len(shapes) - 1
    for point, (seed, widths) in zip(rest, list(enumerate(shapes))[1:], strict=True):
        alone = optimize(_grid(seed, widths), target_marginal_precision=0.3)
        assert point.index == alone.index and point.thresholds == alone.thresholds


def _suffix_sums(a):
    for axis in range(a.ndim):
        a = np.flip(np.cumsum(np.flip(a, axis), axis), axis)
    return a


@pytest.mark.parametrize("g", [1, 16])  # 16 x 40 columns: the wide-row forward pass
def test_integer_counts_are_solved_as_float64(g):
    """Integer counts (e.g. unweighted tallies) give the paths and areas of the same counts
    as float64, alone and stacked: no int64 overflow in the step weights, and the same
    arithmetic whichever forward pass the stack width picks."""
    rng = np.random.default_rng(5)
    tp = np.stack([_suffix_sums(rng.integers(0, 2**26, (4, 40))) for _ in range(g)])
    fp = np.stack([_suffix_sums(rng.integers(0, 2**26, (4, 40))) for _ in range(g)])
    as_float = max_area_paths(tp.astype(np.float64), fp.astype(np.float64))
    for (path, area), (fpath, farea), t, f in zip(max_area_paths(tp, fp), as_float, tp, fp,
                                                  strict=True):
        np.testing.assert_array_equal(path, fpath)
        assert area == farea
        alone_path, alone_area = max_area_path(t, f)
        np.testing.assert_array_equal(alone_path, fpath)
        assert alone_area == farea
