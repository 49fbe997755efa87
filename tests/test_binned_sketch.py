"""Binning and sketching in one pass (costlib.thresholds.binning._binned_sketch) equals each done
alone."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.thresholds.binning._binned_sketch import SketchingBinner, bin_and_sketch
from costlib.thresholds.binning._edges import decision_edges, uniform_edges
from costlib.thresholds.binning._score_sketch import EdgeSketch


def _alone(scores, labels, weights, unrated, edges):
    bins = [np.searchsorted(e, scores[:, j], side="right") for j, e in enumerate(edges)]
    sketches = [EdgeSketch.from_rows(scores[:, j], labels, weights, unrated)
                for j in range(scores.shape[1])]
    return bins, sketches


def _check(scores, labels, weights, unrated, edges):
    got_bins, got_sketches = bin_and_sketch(scores, labels, weights, unrated, edges)
    bins, sketches = _alone(scores, labels, weights, unrated, edges)
    for got, want in zip(got_bins, bins, strict=True):
        assert np.array_equal(got, want)
    assert got_sketches == sketches


@pytest.mark.parametrize("family", ["spread", "near0", "near1"])
@pytest.mark.parametrize("weighted", [False, True])
def test_equals_locator_and_sketch_on_rare_event_streams(family, weighted):
    rng = np.random.default_rng(5)
    n = 30_000
    y = rng.random(n) < 0.01
    if family == "spread":
        s = rng.random((n, 2)) ** 2
    elif family == "near0":
        s = rng.beta(0.5, 30, (n, 2))
    else:
        s = 1 - rng.beta(0.5, 30, (n, 2))
    s[rng.random((n, 2)) < 0.05] = -np.inf  # did not score
    unrated = rng.random(n) < 0.7
    weights = np.where(rng.random(n) < 0.1, 0.0, rng.choice([1.0, 2.5, 1 / 3], n)) if weighted \
        else None
    edges = decision_edges(s, np.where(unrated, None, y).astype(object), n_edges=64)
    _check(s, y, weights, unrated, edges)
    _check(s, y, weights, None, edges)  # every row rated
    _check(s, y, weights, unrated, [uniform_edges(0, 1, 16), uniform_edges(0, 1, 16)])


def test_wide_edges_and_wide_scores_fall_back_exactly():
    rng = np.random.default_rng(2)
    s = rng.standard_cauchy((5000, 1)) * 1e6  # keys over thousands of binades
    y = rng.random(5000) < 0.1
    _check(s, y, None, rng.random(5000) < 0.5, [np.array([-1e300, -1.0, 0.0, 1e-300, 1e300])])
    _check(s, y, None, None, [np.array([0.1, 0.2])])


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.one_of(st.floats(-10, 10), st.just(-np.inf), st.just(0.0),
                              st.just(-0.0)), min_size=0, max_size=80),
    edges=st.lists(st.floats(-10, 10), min_size=1, max_size=12, unique=True),
    seed=st.integers(0, 2**16),
)
def test_equals_each_alone_on_any_rows(values, edges, seed):
    rng = np.random.default_rng(seed)
    s = np.array(values, dtype=np.float64).reshape(-1, 1)
    n = s.shape[0]
    y = rng.random(n) < 0.3
    weights = rng.choice([0.0, 1.0, 2.0, 0.3], n) if seed % 2 else None
    e = np.unique(np.array(edges) + 0.0)
    _check(s, y, weights, rng.random(n) < 0.5 if seed % 3 else None, [e])


def _family_scores(rng, family, n):
    if family == "near0":
        return rng.beta(0.5, 30, (n, 2))
    if family == "near1":
        return 1 - rng.beta(0.5, 30, (n, 2))
    if family == "wide":
        return rng.standard_cauchy((n, 2)) * 1e6
    return rng.random((n, 2))  # spread (and empty, n = 0)


@pytest.mark.parametrize("max_buckets", [1 << 18, 40_000, 64])
def test_binner_over_batches_equals_the_sketch_of_all_rows(max_buckets):
    """Batch after batch (ranges that widen the held counts, batches off the shared path, a
    flush when the held range would pass ``MAX_BUCKETS``): the bins of each batch and the
    sketch of all rows, as from each batch alone and from every row at once."""
    rng = np.random.default_rng(11)
    edges = [decision_edges(rng.beta(0.5, 30, (4000, 1)), rng.random(4000) < 0.02,
                            n_edges=32)[0], uniform_edges(0, 1, 8)]
    batches = []
    for i, family in enumerate(["near0", "spread", "near1", "wide", "near0", "empty"]):
        n = 0 if family == "empty" else int(rng.integers(500, 3000))
        s = _family_scores(rng, family, n)
        s[rng.random((n, 2)) < 0.05] = -np.inf
        y = rng.random(n) < 0.05
        weights = rng.choice([0.0, 1.0, 2.5], n) if i % 2 else None
        unrated = rng.random(n) < 0.6 if i != 2 else None
        batches.append((s, y, weights, unrated))
    binner = SketchingBinner(edges)
    binner.MAX_BUCKETS = max_buckets
    assert binner.sketches() is None  # no batch yet
    for s, y, weights, unrated in batches:
        got = binner(s, y, weights, unrated)
        for j, e in enumerate(edges):
            assert np.array_equal(got[j], np.searchsorted(e, s[:, j], side="right"))
    every = [np.concatenate([b[i] if b[i] is not None else default(b)
                             for b in batches])
             for i, default in [(0, None), (1, None),
                                (2, lambda b: np.ones(b[1].size)),
                                (3, lambda b: np.zeros(b[1].size, dtype=bool))]]
    s, y, weights, unrated = every
    want = [EdgeSketch.from_rows(s[:, j], y, weights, unrated) for j in range(2)]
    per_batch = [[EdgeSketch.from_rows(b[0][:, j], b[1], b[2], b[3]) for j in range(2)]
                 for b in batches]
    assert binner.sketches() == want
    assert [EdgeSketch.sum(p[j] for p in per_batch) for j in range(2)] == want


@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.one_of(st.floats(0, 1), st.just(0.0), st.just(-0.0),
                                 st.just(-np.inf), st.just(5e-324)), min_size=1, max_size=60),
       edges=st.lists(st.floats(0, 1), min_size=1, max_size=8, unique=True),
       seed=st.integers(0, 2**16))
def test_non_negative_scores_with_signed_zeros_take_the_fast_path_exactly(values, edges, seed):
    """Probabilities (the usual case: keys from the bits, ``-0.0`` as ``+0.0``)."""
    rng = np.random.default_rng(seed)
    s = np.array(values, dtype=np.float64).reshape(-1, 1)
    y = rng.random(s.shape[0]) < 0.5
    e = np.unique(np.array(edges) + 0.0)
    _check(s, y, None, rng.random(s.shape[0]) < 0.5 if seed % 2 else None, [e])
