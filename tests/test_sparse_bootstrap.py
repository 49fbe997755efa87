"""Sparse replicate grids: equal to the dense ones and to reweighted grids, whatever the split."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threshold_data import make_rows

from costlib.thresholds.binning._cells import ROW_CHUNK
from costlib.thresholds.binning._rows import quantize_weights
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._bootstrap import (
    BootstrapGrids,
    SparseBootstrapGrids,
    as_dense,
    hash_item_ids,
    poisson_counts,
)
from costlib_pipelines.recalibrate.grids import SumBootstrapGrids


def _with_unrated(y, seed, share=0.3):
    labels = y.astype(np.float64)
    labels[np.random.default_rng(seed).random(y.size) < share] = np.nan
    return labels


def _assert_same(dense: BootstrapGrids, other: BootstrapGrids) -> None:
    assert np.array_equal(dense.pos, other.pos)
    assert np.array_equal(dense.neg, other.neg)
    assert np.array_equal(dense.unrated, other.unrated)
    assert dense.audited_rows == other.audited_rows


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), parts=st.integers(1, 6), unrated=st.booleans(),
       data=st.data())
def test_any_split_and_merge_order_gives_the_whole(seed, parts, unrated, data):
    n = 200
    scores, y, w, edges = make_rows(n, 2, seed=seed, weighted=True)
    labels = _with_unrated(y, seed) if unrated else y
    ids = np.arange(n) * 3 + 1
    whole = SparseBootstrapGrids.from_scores(scores, labels, edges, ids, w, n_replicates=5,
                                             seed=9)
    cuts = sorted(data.draw(st.lists(st.integers(0, n), min_size=parts - 1,
                                     max_size=parts - 1)))
    bounds = [0, *cuts, n]
    pieces = [SparseBootstrapGrids.from_scores(scores[a:b], labels[a:b], edges, ids[a:b], w[a:b],
                                               n_replicates=5, seed=9)
              for a, b in itertools.pairwise(bounds)]
    order = data.draw(st.permutations(range(len(pieces))))
    merged = SparseBootstrapGrids.sum([pieces[i] for i in order])
    pairwise = pieces[order[0]]
    for i in order[1:]:
        pairwise = pairwise + pieces[i]
    assert np.array_equal(merged.cells, whole.cells)
    assert np.array_equal(merged.weights, whole.weights)
    _assert_same(pairwise.to_dense(), whole.to_dense())
    # only occupied cells are stored, and each exactly once
    assert np.all(np.diff(merged.cells) > 0)
    assert merged.cells.size <= n


def test_every_replicate_is_the_grid_of_the_reweighted_rows_across_chunks():
    """Independent truth: replicate r is the plain grid of the rows weighted by their Poisson
    multipliers; more rows than one chunk so that chunk partials are merged."""
    n = 2 * ROW_CHUNK + 1_000
    scores, y, w, edges = make_rows(n, 2, seed=4, weighted=True)
    labels = _with_unrated(y, 4)
    ids = np.arange(n)
    sparse = SparseBootstrapGrids.from_scores(scores, labels, edges, ids, w, n_replicates=3,
                                              seed=2)
    dense = sparse.to_dense()
    rated = ~np.isnan(labels)
    for r in range(3):
        mult = poisson_counts(hash_item_ids(ids), r, seed=2)
        direct = ThresholdGrid.from_scores(scores, labels, edges,
                                           quantize_weights(w, 16) * mult)
        assert dense.replicate(r) == direct
        assert direct.unrated.sum() > 0 and rated.sum() < n


def test_dense_constructor_is_the_sparse_one_made_dense():
    scores, y, w, edges = make_rows(500, 2, seed=8, weighted=True)
    ids = np.arange(500)
    _assert_same(BootstrapGrids.from_scores(scores, y, edges, ids, w, n_replicates=4, seed=3),
                 as_dense(SparseBootstrapGrids.from_scores(scores, y, edges, ids, w,
                                                           n_replicates=4, seed=3)))


def test_a_small_group_holds_its_rows_not_its_lattice():
    edges = [np.linspace(0, 1, 102)] * 2
    rng = np.random.default_rng(0)
    scores, y = rng.random((15, 2)), rng.random(15) < 0.3
    sparse = SparseBootstrapGrids.from_scores(scores, y, edges, np.arange(15), n_replicates=50)
    dense = sparse.to_dense()
    assert sparse.cells.size <= 15
    assert sparse.nbytes == sparse.cells.size * 8 * (1 + 50)
    assert dense.pos.nbytes + dense.neg.nbytes + dense.unrated.nbytes == 3 * 50 * 103**2 * 8
    assert sparse.nbytes < 7_000


def test_empty_rows_give_an_empty_partial_that_merges():
    scores, y, _, edges = make_rows(50, 2, seed=1, weighted=False)
    empty = SparseBootstrapGrids.from_scores(scores[:0], y[:0], edges, np.arange(0),
                                             n_replicates=2)
    full = SparseBootstrapGrids.from_scores(scores, y, edges, np.arange(50), n_replicates=2)
    assert empty.cells.size == 0 and empty.weights.shape == (2, 0)
    _assert_same((empty + full).to_dense(), full.to_dense())


def test_partials_that_do_not_match_are_refused():
    scores, y, _, edges = make_rows(40, 2, seed=1, weighted=False)
    ids = np.arange(40)
    base = SparseBootstrapGrids.from_scores(scores, y, edges, ids, n_replicates=3, seed=1)
    other_seed = SparseBootstrapGrids.from_scores(scores, y, edges, ids, n_replicates=3, seed=2)
    other_r = SparseBootstrapGrids.from_scores(scores, y, edges, ids, n_replicates=4, seed=1)
    other_edges = SparseBootstrapGrids.from_scores(
        scores, y, [np.linspace(0, 1, 7)] * 2, ids, n_replicates=3, seed=1)
    with pytest.raises(ValueError, match="seeds or replicates"):
        base + other_seed
    with pytest.raises(ValueError, match="seeds or replicates"):
        base + other_r
    with pytest.raises(ValueError, match="different edges"):
        base + other_edges
    with pytest.raises(TypeError, match="cannot combine"):
        SparseBootstrapGrids.sum([base, base.to_dense()])
    with pytest.raises(ValueError, match="nothing to sum"):
        SparseBootstrapGrids.sum([])
    with pytest.raises(ValueError, match="positive integer"):
        SparseBootstrapGrids.from_scores(scores, y, edges, ids, n_replicates=0)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 1000), data=st.data())
def test_the_beam_combiner_equals_one_sum_however_bundles_split(seed, data):
    """SumBootstrapGrids as a runner drives it: inputs spread over accumulators, compacted at
    random, accumulators merged in any order."""
    scores, y, w, edges = make_rows(240, 2, seed=seed, weighted=True)
    ids = np.arange(240)
    parts = [SparseBootstrapGrids.from_scores(scores[i:i + 8], y[i:i + 8], edges,
                                              ids[i:i + 8], w[i:i + 8], n_replicates=3, seed=4)
             for i in range(0, 240, 8)]
    fn = SumBootstrapGrids()
    n_accs = data.draw(st.integers(1, 4))
    accs = [fn.create_accumulator() for _ in range(n_accs)]
    for part in parts:
        i = data.draw(st.integers(0, n_accs - 1))
        accs[i] = fn.add_input(accs[i], part)
        if data.draw(st.booleans()):
            accs[i] = fn.compact(accs[i])
    order = data.draw(st.permutations(range(n_accs)))
    result = fn.extract_output(fn.merge_accumulators([accs[i] for i in order]))
    whole = SparseBootstrapGrids.from_scores(scores, y, edges, ids, w, n_replicates=3, seed=4)
    _assert_same(result.to_dense(), whole.to_dense())
    assert fn.extract_output(fn.create_accumulator()) is None
