import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threshold_data import make_rows

from costlib.thresholds.binning._rows import quantize_weights
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._bootstrap import (
    BootstrapGrids,
    confidence_intervals,
    hash_item_ids,
    poisson_counts,
)
from costlib.thresholds.point._optimize import optimize


def test_poisson_counts_have_poisson_one_moments():
    hashed = hash_item_ids(np.arange(400_000))
    counts = poisson_counts(hashed, replicate=3, seed=11)
    # Poisson(1): mean 1, variance 1, P(0) = e^-1. Standard errors ~0.002 at this n.
    assert counts.mean() == pytest.approx(1.0, abs=0.01)
    assert counts.var() == pytest.approx(1.0, abs=0.02)
    assert np.mean(counts == 0) == pytest.approx(np.exp(-1), abs=0.005)
    # Replicates are (nearly) uncorrelated.
    other = poisson_counts(hashed, replicate=4, seed=11)
    assert abs(np.corrcoef(counts, other)[0, 1]) < 0.01


def test_hash_is_stable_for_ints_and_strings():
    ids = np.array(["a", "b", "item-3"])
    assert np.array_equal(hash_item_ids(ids), hash_item_ids(ids.astype(object)))
    assert hash_item_ids(np.array([1, 2, 3]))[0] != hash_item_ids(np.array([2]))[0]
    with pytest.raises(ValueError, match="integers or strings"):
        hash_item_ids(np.array([1.5]))


@settings(max_examples=25, deadline=None)
@given(cut=st.integers(min_value=0, max_value=300), seed=st.integers(0, 1000))
def test_bootstrap_grids_do_not_depend_on_sharding(cut, seed):
    scores, y, w, edges = make_rows(300, 2, seed=seed, weighted=True)
    ids = np.arange(300) * 7 + 13
    order = np.random.default_rng(seed).permutation(300)
    whole = BootstrapGrids.from_scores(scores, y, edges, ids, w, n_replicates=4, seed=5)
    s, yy, ww, ii = scores[order], y[order], w[order], ids[order]
    a = BootstrapGrids.from_scores(s[:cut], yy[:cut], edges, ii[:cut], ww[:cut], n_replicates=4,
                                   seed=5)
    b = BootstrapGrids.from_scores(s[cut:], yy[cut:], edges, ii[cut:], ww[cut:], n_replicates=4,
                                   seed=5)
    merged = b + a
    assert np.array_equal(merged.pos, whole.pos) and np.array_equal(merged.neg, whole.neg)


def test_replicate_is_the_grid_of_the_reweighted_rows():
    scores, y, w, edges = make_rows(500, 2, seed=3, weighted=True)
    ids = np.arange(500)
    boot = BootstrapGrids.from_scores(scores, y, edges, ids, w, n_replicates=3, seed=1)
    for r in range(3):
        mult = poisson_counts(hash_item_ids(ids), r, seed=1)
        direct = ThresholdGrid.from_scores(scores, y, edges, quantize_weights(w, 16) * mult)
        assert boot.replicate(r) == direct


def test_confidence_intervals_cover_the_point_estimate_and_shrink_with_data():
    rng = np.random.default_rng(0)

    def intervals(n):
        y = rng.random(n) < 0.1
        scores = rng.normal(size=(n, 2)) + 1.5 * y[:, None]
        edges = [np.linspace(-1, 3, 21)] * 2
        boot = BootstrapGrids.from_scores(scores, y, edges, np.arange(n), n_replicates=40)
        point = optimize(ThresholdGrid.from_scores(scores, y, edges),
                         target_marginal_precision=0.5, method="hull")
        return point, confidence_intervals(boot, level=0.9, target_marginal_precision=0.5,
                                           method="hull")

    point, small = intervals(4_000)
    assert small.tp[0] <= point.tp <= small.tp[1]
    assert small.precision[0] <= point.precision <= small.precision[1]
    assert small.thresholds.shape == (2, 2)
    assert (small.thresholds[0] <= small.thresholds[1]).all()
    _, large = intervals(64_000)
    width = lambda iv: iv[1] - iv[0]  # noqa: E731
    # Relative width of the precision interval shrinks ~ 1/sqrt(n): 16x data -> ~4x narrower.
    assert width(large.precision) < width(small.precision) / 2


def test_bootstrap_bad_input():
    scores, y, _, edges = make_rows(10, 2, seed=0)
    with pytest.raises(ValueError, match="item_ids has 3 entries for 10 rows"):
        BootstrapGrids.from_scores(scores, y, edges, np.arange(3))
    with pytest.raises(ValueError, match="n_replicates"):
        BootstrapGrids.from_scores(scores, y, edges, np.arange(10), n_replicates=0)
    a = BootstrapGrids.from_scores(scores, y, edges, np.arange(10), n_replicates=2, seed=1)
    b = BootstrapGrids.from_scores(scores, y, edges, np.arange(10), n_replicates=2, seed=2)
    with pytest.raises(ValueError, match="different seeds"):
        a + b


def test_bootstrap_checks_edges_against_the_score_columns_like_the_grid():
    scores, y, _, edges = make_rows(50, 2, seed=1)
    with pytest.raises(ValueError, match="got 1 edge arrays for 2 classifiers"):
        BootstrapGrids.from_scores(scores, y, edges[:1], np.arange(50))
    one = BootstrapGrids.from_scores(scores[:, 0], y, edges[0], np.arange(50), n_replicates=2)
    assert one.pos.shape == (2, len(edges[0]) + 1)  # a 1-D edge array for k = 1, as the grid
