"""Coverage-aware grids: the unrated channel, volume, coverage, merges (issue 10)."""

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from coverage_data import brute_cell, make_selective_rows
from hypothesis import given, settings
from hypothesis import strategies as st
from threshold_data import make_rows

from costlib.thresholds.binning._rows import quantize_weights, split_labels
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._sparse import SparseCounts, grouped_histograms, sum_sparse


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("rule", ["any", "all"])
@pytest.mark.parametrize("weighted", [False, True])
def test_volume_unrated_and_coverage_equal_direct_counts_at_every_tuple(k, rule, weighted):
    scores, labels, w, edges, truth, rated = make_selective_rows(
        400, k, seed=7 * k, weighted=weighted
    )
    assert 0 < rated.sum() < rated.size
    grid = ThresholdGrid.from_scores(scores, labels, edges, w)
    tp, fp = grid.counts(rule)
    unr, vol, cov = grid.unrated_counts(rule), grid.volume(rule), grid.coverage(rule)
    for share in (0.0, 0.2):
        covered = grid.covered(rule, share)
        for cell in itertools.product(*(range(n) for n in grid.shape)):
            t, f, u, v = brute_cell(scores, truth, rated, w, grid.threshold_values(cell), rule)
            assert (tp[cell], fp[cell], unr[cell], vol[cell]) == (t, f, u, v), cell
            assert cov[cell] == (1.0 if v == 0 else (t + f) / v)
            assert covered[cell] == (u <= share * v)
    # With s = 0 the covered tuples are an up-set: raising a threshold keeps a tuple covered.
    covered = grid.covered(rule, 0.0)
    for axis in range(k):
        assert (np.diff(covered.astype(int), axis=axis) >= 0).all()
    assert covered[(-1,) * k]
    assert grid.total_unrated == float(np.sum((np.ones(400) if w is None else w)[~rated]))


def test_rated_labels_give_no_unrated_channel_and_todays_grid():
    scores, y, w, edges = make_rows(300, 2, seed=3, weighted=True)
    grid = ThresholdGrid.from_scores(scores, y, edges, w)
    assert not grid.has_unrated and grid.total_unrated == 0.0
    assert grid.covered("any").all() and grid.covered("all").all()
    same = ThresholdGrid.from_scores(scores, y.astype(object), edges, w)
    assert same == grid


@pytest.mark.parametrize(
    "make_labels",
    [
        lambda t, r: np.where(r, t, None).astype(object),
        lambda t, r: np.where(r, t.astype(float), np.nan),
        lambda t, r: pd.array(np.where(r, t, None).tolist(), dtype="boolean"),
        lambda t, r: pd.Series(pd.array(np.where(r, t, None).tolist(), dtype="boolean")),
        lambda t, r: np.where(r, t, pd.NA).astype(object),
    ],
    ids=["object-None", "float-NaN", "boolean-array", "boolean-series", "object-NA"],
)
def test_every_null_spelling_means_unrated(make_labels):
    scores, _, w, edges, truth, rated = make_selective_rows(200, 2, seed=5, weighted=True)
    expected = ThresholdGrid.from_scores(scores, np.where(rated, truth, None), edges, w)
    grid = ThresholdGrid.from_scores(scores, make_labels(truth, rated), edges, w)
    assert grid == expected
    wq = quantize_weights(w, grid.weight_bits)
    assert grid.total_unrated == math.fsum(wq[~rated])
    assert grid.total_positives == math.fsum(wq[rated & truth])


def test_bad_rated_labels_still_raise_and_all_unrated_is_fine():
    with pytest.raises(ValueError, match=r"bool or 0/1"):
        split_labels(np.array([True, None, 2], dtype=object), 3)
    y, unrated = split_labels([None, None], 2)
    assert unrated.tolist() == [True, True] and y.tolist() == [False, False]
    grid = ThresholdGrid.from_scores([[0.5], [0.7]], [None, np.nan], [[0.6]])
    assert grid.total_unrated == 2.0 and grid.total_positives == 0.0


def test_dataframe_scores_by_name_and_missing_scores_never_fire():
    frame = pd.DataFrame({"image": [0.9, np.nan, 0.2], "text": [0.1, 0.8, pd.NA]})
    frame["text"] = frame["text"].astype("Float64")
    grid = ThresholdGrid.from_scores(frame, [True, False, None], [[0.5], [0.5]],
                                     names=["text", "image"])
    assert grid.names == ("text", "image")
    direct = ThresholdGrid.from_scores(
        np.array([[0.1, 0.9], [0.8, -np.inf], [-np.inf, 0.2]]), [True, False, None],
        [[0.5], [0.5]], names=["text", "image"],
    )
    assert grid == direct
    with pytest.raises(ValueError, match=r"\['audio'\] not in the DataFrame"):
        ThresholdGrid.from_scores(frame, [True, False, None], [[0.5]], names=["audio"])


@settings(max_examples=30, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=4),
    seed=st.integers(min_value=0, max_value=10_000),
    k=st.integers(min_value=1, max_value=3),
)
def test_merge_with_unrated_channel_is_exact_and_order_independent(cuts, seed, k):
    scores, labels, w, edges, _, _ = make_selective_rows(300, k, seed=seed, weighted=True)
    w = w * np.random.default_rng(seed).uniform(0.1, 3.0, size=300)  # non-dyadic weights
    bounds = [0, *sorted(cuts), 300]
    shards = [
        ThresholdGrid.from_scores(scores[a:b], labels[a:b], edges, w[a:b])
        for a, b in itertools.pairwise(bounds)
    ]
    whole = ThresholdGrid.from_scores(scores, labels, edges, w)
    forward = sum(shards[1:], shards[0])
    backward = ThresholdGrid.empty(edges)
    for shard in shards:
        backward = shard + backward
    assert forward == whole and backward == whole
    assert np.array_equal(forward.unrated, whole.unrated)
    for rule in ("any", "all"):
        assert np.array_equal(backward.volume(rule), whole.volume(rule))


def test_grouped_histograms_with_unrated_channel_equal_from_scores():
    scores, labels, w, edges, _, rated = make_selective_rows(500, 2, seed=11, weighted=True)
    groups = np.random.default_rng(0).integers(0, 3, size=500)
    y = np.where(rated, labels, False).astype(bool)
    parts = grouped_histograms(groups, scores, y, w, edges, unrated=~rated)
    n_cells = 3 * int(np.prod([e.size + 1 for e in edges]))
    for g, part in parts.items():
        assert part.channels == 3
        rows = groups == g
        assert part.to_grid(edges) == ThresholdGrid.from_scores(
            scores[rows], labels[rows], edges, w[rows]
        )
    total = sum_sparse(list(parts.values()), n_cells)
    assert total.to_grid(edges) == ThresholdGrid.from_scores(scores, labels, edges, w)
    # The 2-channel layout the pipeline uses is unchanged.
    old = grouped_histograms(groups, scores, y, w, edges)
    assert all(p.channels == 2 for p in old.values())
    with pytest.raises(ValueError, match="different channels"):
        sum_sparse([parts[0], old[0]], n_cells)
    with pytest.raises(ValueError, match="3-channel counts into a 2-channel"):
        parts[0].add_to(np.zeros((2, *(e.size + 1 for e in edges))))
    assert isinstance(old[0], SparseCounts)


def test_max_unrated_share_is_checked():
    grid = ThresholdGrid.empty([[0.0]])
    with pytest.raises(ValueError, match=r"max_unrated_share must be in \[0, 1\]"):
        grid.covered("any", 1.5)
    assert grid.counts("or")[0].shape == (2,)
    with pytest.raises(ValueError, match="aliases 'or', 'and'"):
        grid.counts("xor")


def test_bootstrap_replicates_carry_the_unrated_channel():
    from costlib.thresholds.loop._bootstrap import BootstrapGrids, hash_item_ids, poisson_counts

    scores, labels, w, edges, _, rated = make_selective_rows(300, 2, seed=2, weighted=True)
    ids = np.arange(300)
    boot = BootstrapGrids.from_scores(scores, labels, edges, ids, w, n_replicates=3)
    halves = [
        BootstrapGrids.from_scores(scores[s], labels[s], edges, ids[s], w[s], n_replicates=3)
        for s in (slice(0, 120), slice(120, 300))
    ]
    merged = halves[1] + halves[0]
    for r in range(3):
        mult = poisson_counts(hash_item_ids(ids), r).astype(float) * quantize_weights(w, 16)
        expected = ThresholdGrid.from_scores(scores, labels, edges, mult)
        assert boot.replicate(r) == expected and merged.replicate(r) == expected
        assert boot.replicate(r).total_unrated == math.fsum(mult[~rated])
