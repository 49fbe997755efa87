"""Default candidate thresholds (issue 20): score sketches, the recipe, resolution status.

Truths used: numpy's sort order and ``np.quantile(method="lower")`` for the sketch; for the
recipe and the resolution bound, the exact optimum over *every* threshold tuple, found by
exhaustive search over all distinct scores per axis on small data.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.thresholds.binning._edges import (
    decision_edges,
    decision_edges_from_sketch,
    quantile_edges,
)
from costlib.thresholds.binning._score_sketch import (
    EdgeSketch,
    ScoreSketch,
    key_values,
    sortable_keys,
)
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._refine import refine, resolution_check
from costlib.thresholds.point._resolution import lattice_resolution

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=50))
def test_sortable_keys_sort_as_the_scores(values):
    v = np.array(values)
    keys = sortable_keys(v)
    order = np.argsort(v, kind="stable")
    assert np.all(np.diff(keys[order].astype(object)) >= 0)
    for a, b in itertools.combinations(range(v.size), 2):
        assert (v[a] < v[b]) == (keys[a] < keys[b])
        assert (v[a] == v[b]) == (keys[a] == keys[b])  # -0.0 and +0.0 share a key
    assert np.array_equal(key_values(keys), v + 0.0)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=0, max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=6),
    capacity=st.sampled_from([4, 16, 1 << 16]),
    level=st.sampled_from([0, 40]),
    seed=st.integers(0, 1000),
)
def test_score_sketch_merge_is_independent_of_split_and_order(values, cuts, capacity, level,
                                                              seed):
    v = np.array(values, dtype=np.float64)
    w = np.random.default_rng(seed).uniform(0.1, 3.0, v.size)
    whole = ScoreSketch.from_values(v, w, level=level, capacity=capacity)
    bounds = [0, *sorted(c for c in cuts if c <= v.size), v.size]
    parts = [ScoreSketch.from_values(v[a:b], w[a:b], level=level, capacity=capacity)
             for a, b in itertools.pairwise(bounds)]
    rng = np.random.default_rng(seed)
    shuffled = [parts[i] for i in rng.permutation(len(parts))]
    pairwise = shuffled[0]
    for p in shuffled[1:]:
        pairwise = pairwise + p
    assert ScoreSketch.sum(shuffled) == whole
    assert pairwise == whole
    assert whole.size <= capacity
    if v.size:
        assert whole.total == pytest.approx(np.sum(np.rint(w * 2**16) / 2**16))


def test_score_sketch_quantiles_at_level_zero_are_order_statistics():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.normal(size=999), [-np.inf] * 5])
    sketch = ScoreSketch.from_values(v)
    levels = np.arange(40) / 40
    ordered = np.sort(v[np.isfinite(v)])
    expected = np.unique(ordered[np.floor(levels * ordered.size).astype(int)])
    assert np.array_equal(sketch.quantiles(levels), expected)
    # A coarse level gives bucket lower bounds: never above the exact quantile, within 2^-12.
    positive = np.sort(np.abs(ordered) + 1e-3)
    coarse = ScoreSketch.from_values(positive, level=40)
    exact = positive[np.floor(levels * positive.size).astype(int)]
    got = coarse.quantiles(levels)
    assert got.size == np.unique(exact).size
    assert np.all(got <= np.unique(exact)) and np.all(got >= np.unique(exact) * (1 - 2**-11))


def test_score_sketch_bad_input():
    with pytest.raises(ValueError, match="finite or -inf"):
        ScoreSketch.from_values([0.1, np.nan])
    with pytest.raises(ValueError, match="weights"):
        ScoreSketch.from_values([0.1, 0.2], [1.0])
    with pytest.raises(ValueError, match="level"):
        ScoreSketch.from_values([0.1], level=64)
    with pytest.raises(ValueError, match="capacities"):
        ScoreSketch.from_values([0.1], capacity=4) + ScoreSketch.from_values([0.2])


def _exhaustive_best(scores, labels, slope, rule="any"):
    """max TP - slope FP over every threshold tuple (all distinct scores per axis, and off)."""
    k = scores.shape[1]
    axes = [np.append(np.unique(scores[:, j]), np.inf) for j in range(k)]
    best = 0.0
    for t in itertools.product(*axes):
        fires = scores >= np.asarray(t)
        flagged = fires.any(axis=1) if rule == "any" else fires.all(axis=1)
        best = max(best, labels[flagged].sum() - slope * (~labels[flagged]).sum())
    return best


@pytest.mark.parametrize("rule", ["any", "all"])
@pytest.mark.parametrize("seed", range(4))
def test_default_edges_hold_every_positive_and_the_exact_optimum(seed, rule):
    rng = np.random.default_rng(seed)
    n = 60
    y = rng.random(n) < 0.3
    scores = np.round(rng.random((n, 2)) + 0.35 * y[:, None], 3)
    edges = decision_edges(scores, y, n_edges=64)
    for j in range(2):
        assert set(scores[y, j]) <= set(edges[j])  # every positive's score is a candidate
        assert edges[j].size <= 64
    grid = ThresholdGrid.from_scores(scores, y, edges)
    point = optimize(grid, target_slope=1.5, rule=rule, method="hull")
    assert point.objective == pytest.approx(_exhaustive_best(scores, y, 1.5, rule))
    assert point.status == "ok"


def rare_stream(n=200_000, prevalence=0.002, seed=7):
    """Scores concentrated near 0 (beta(0.5, 30) negatives): the top candidate of 64
    quantiles of all rows sits near the 98.4th percentile, below where a precision of 0.2
    starts."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < prevalence
    cols = [np.where(y, rng.beta(2 + j, 20, n), rng.beta(0.5, 30, n)) for j in range(2)]
    return np.column_stack(cols), y


def test_default_edges_find_the_point_that_64_quantiles_of_all_rows_cannot_express():
    scores, y = rare_stream()
    kw = {"target_marginal_precision": 0.2, "method": "hull", "frontier": False}
    old = [quantile_edges(scores[:, j], 64) for j in range(2)]
    old_point = optimize(ThresholdGrid.from_scores(scores, y, old), **kw)
    assert old_point.tp == old_point.fp == 0  # "flag nothing" ...
    assert old_point.status == "resolution_limited"  # ... and it says why
    assert "from nothing" in old_point.reason
    fine = [np.unique(scores[y, j]) for j in range(2)]  # exact: every positive's score
    fine_point = optimize(ThresholdGrid.from_scores(scores, y, fine), **kw)
    assert fine_point.objective > 20
    edges = decision_edges(scores, y)
    assert max(e.size for e in edges) <= 128
    point = optimize(ThresholdGrid.from_scores(scores, y, edges), **kw)
    assert point.objective >= 0.98 * fine_point.objective
    # The library's resolution check says the same, on the rows.
    check = resolution_check(old_point, scores, y, **kw)
    assert check["share"] == 0 and check["fine_value"] >= point.objective
    # Refining the old lattice on the rows recovers the exact optimum.
    refined, _ = refine(old_point, ThresholdGrid.from_scores(scores, y, old), scores, y, **kw)
    assert refined.objective == pytest.approx(fine_point.objective, rel=0.02)


def test_a_point_on_an_exact_lattice_is_not_resolution_limited():
    scores, y = rare_stream(60_000, 0.002, seed=3)
    fine = [np.unique(scores[y, j]) for j in range(2)]
    point = optimize(ThresholdGrid.from_scores(scores, y, fine), target_marginal_precision=0.2,
                     method="hull")
    assert point.objective > 0
    assert point.status == "ok" and point.resolution["limited"] is False


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n_edges=st.integers(1, 6),
       rule=st.sampled_from(["any", "all"]))
def test_finer_bound_is_an_upper_bound_of_every_threshold_tuple(seed, n_edges, rule):
    rng = np.random.default_rng(seed)
    n = 40
    y = rng.random(n) < 0.4
    scores = np.round(rng.random((n, 2)) + 0.3 * y[:, None], 2)
    edges = [np.unique(np.quantile(scores[:, j], np.arange(n_edges) / n_edges)) for j in range(2)]
    grid = ThresholdGrid.from_scores(scores, y, edges)
    point = optimize(grid, target_slope=1.0, rule=rule, method="hull")
    # Thresholds below the lowest candidate are not boxes of the lattice (documented): the
    # exhaustive search runs over the tuples at or above the lowest edge on every axis.
    at_or_above = scores.copy()
    for j in range(2):
        at_or_above[at_or_above[:, j] < edges[j][0], j] = -1.0
    exact = _exhaustive_best(np.where(at_or_above < 0, -np.inf, at_or_above), y, 1.0, rule)
    assert point.resolution["finer_bound"] >= exact - 1e-9
    assert point.objective <= exact + 1e-9


def test_lattice_resolution_settings_are_checked():
    scores, y = rare_stream(5_000)
    grid = ThresholdGrid.from_scores(scores, y, decision_edges(scores, y))
    from costlib.thresholds.point._objectives import Objective
    with pytest.raises(ValueError, match="max_jump"):
        lattice_resolution(grid, 0.0, objective=Objective.make("linear", slope=1.0),
                           max_jump=1.0)


def test_decision_edges_bad_input():
    with pytest.raises(ValueError, match="n_edges"):
        decision_edges(np.ones((3, 1)), [True, False, True], n_edges=3)
    with pytest.raises(ValueError, match="no row has a finite score of 'b'"):
        decision_edges(np.array([[0.1, -np.inf], [0.2, -np.inf]]), [True, False],
                       names=["a", "b"])
    with pytest.raises(ValueError, match="NaN"):
        decision_edges(np.array([[0.1], [np.nan]]), [True, False])
    with pytest.raises(ValueError, match="n_edges"):
        decision_edges_from_sketch(EdgeSketch.empty(), 2.5)


def test_thresholds_in_force_are_candidates():
    scores, y = rare_stream(20_000)
    edges = decision_edges(scores, y, thresholds_in_force=[0.123456, np.inf])
    assert 0.123456 in edges[0]
    assert edges[1].size == decision_edges(scores, y)[1].size


def test_unrated_rows_and_weights_enter_as_the_grid_takes_them():
    rng = np.random.default_rng(5)
    n = 5_000
    scores = rng.random((n, 1))
    labels = np.where(rng.random(n) < 0.5, None, rng.random(n) < 0.1 + 0.5 * scores[:, 0])
    weights = rng.uniform(0.5, 2.0, n)
    rated = np.array([v is not None for v in labels])
    sketch = EdgeSketch.from_rows(scores[:, 0], labels.astype(bool), weights, ~rated)
    assert sketch.scored.total == pytest.approx(np.sum(np.rint(weights * 2**16) / 2**16))
    assert sketch.rated.total == pytest.approx(np.sum(np.rint(weights[rated] * 2**16) / 2**16))
    positives = rated & labels.astype(bool)
    assert np.array_equal(sketch.positives.lower_bounds(), np.unique(scores[positives, 0]))


def test_the_decision_band_ends_where_the_local_precision_falls_below_5_percent():
    from costlib.thresholds.binning._edges import _decision_band

    # 100 top positives, each with one negative just below it (precision 1/2), then 900
    # positives with 100 negatives each (precision ~1%): the band holds the top ~100.
    top = 10.0 + np.arange(100)[::-1]
    scores = [top, top - 0.5]
    labels = [np.ones(100, bool), np.zeros(100, bool)]
    low = np.linspace(1.0, 9.0, 900)
    scores += [low, np.repeat(low, 100) - 1e-3]
    labels += [np.ones(900, bool), np.zeros(90_000, bool)]
    sketch = EdgeSketch.from_rows(np.concatenate(scores), np.concatenate(labels))
    band = _decision_band(sketch)
    # A slab of 50 positives (5%) reaching k positives below the top 100 holds
    # 50 positives, 50 - k + 100 k rated negatives: precision >= 5% while k <= ~9.
    assert 100 <= band <= 110
    edges = decision_edges_from_sketch(sketch, 64)
    assert np.sum(edges >= 10.0) >= 30  # most candidates where decisions are made


@settings(max_examples=60, deadline=None)
@given(values=st.lists(finite, min_size=1, max_size=80),
       level=st.sampled_from([0, 10, 40, 52, 60, 63]))
def test_bucket_lower_bounds_are_below_every_score_of_their_bucket(values, level):
    v = np.array(values)
    sketch = ScoreSketch.from_values(v, level=level, capacity=1 << 20)
    bounds = sketch.lower_bounds()
    keys = sortable_keys(v) >> np.uint64(level)
    where = np.searchsorted(sketch.keys, keys)
    assert np.array_equal(sketch.keys[where], keys)
    assert np.all(v >= bounds[where]) and np.all(np.isfinite(bounds))
    same = (sortable_keys(bounds) >> np.uint64(level)) == sketch.keys
    assert np.all(same | (bounds == np.finfo(np.float64).min))
