import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from threshold_data import brute_counts, make_rows

from costlib.thresholds.binning._rows import quantize_weights
from costlib.thresholds.grid._grid import ThresholdGrid


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("rule", ["any", "all"])
@pytest.mark.parametrize("weighted", [False, True])
def test_counts_equal_brute_force_at_every_threshold_tuple(k, rule, weighted):
    scores, y, w, edges = make_rows(600, k, seed=k + 10 * weighted, weighted=weighted)
    grid = ThresholdGrid.from_scores(scores, y, edges, w)
    tp, fp = grid.counts(rule)
    assert tp.shape == tuple(len(e) + 1 for e in edges)
    rng = np.random.default_rng(0)
    cells = [tuple(int(rng.integers(0, n)) for n in tp.shape) for _ in range(60)]
    cells += [(0,) * k, tuple(n - 1 for n in tp.shape)]
    for cell in cells:
        thresholds = grid.threshold_values(cell)
        assert (tp[cell], fp[cell]) == brute_counts(scores, y, w, thresholds, rule), cell
    # All off flags nothing; lowering thresholds never removes flagged items.
    assert tp[(-1,) * k] == 0 and fp[(-1,) * k] == 0
    for axis in range(k):
        assert (np.diff(tp, axis=axis) <= 0).all() and (np.diff(fp, axis=axis) <= 0).all()


def test_weighted_counts_are_exact_sums_of_the_quantised_weights():
    rng = np.random.default_rng(3)
    n = 5000
    scores = rng.normal(size=(n, 2))
    y = rng.random(n) < 0.5
    w = 1.0 / rng.uniform(0.01, 1.0, size=n)  # inverse sampling probabilities
    grid = ThresholdGrid.from_scores(scores, y, [[0.0], [0.0]], w)
    wq = quantize_weights(w, grid.weight_bits)
    assert np.max(np.abs(wq - w)) <= 2.0 ** -(grid.weight_bits + 1)
    tp, _ = grid.counts("all")
    expected = math.fsum(wq[(scores[:, 0] >= 0) & (scores[:, 1] >= 0) & y])
    assert tp[0, 0] == expected
    assert grid.total_positives == math.fsum(wq[y])


@settings(max_examples=40, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=5),
    seed=st.integers(min_value=0, max_value=10_000),
    k=st.integers(min_value=1, max_value=3),
)
def test_merge_of_shards_equals_grid_of_the_whole(cuts, seed, k):
    scores, y, w, edges = make_rows(400, k, seed=seed, weighted=True)
    order = np.random.default_rng(seed).permutation(400)
    scores, y, w = scores[order], y[order], w[order]
    bounds = [0, *sorted(cuts), 400]
    shards = [
        ThresholdGrid.from_scores(scores[a:b], y[a:b], edges, w[a:b])
        for a, b in itertools.pairwise(bounds)
    ]
    whole = ThresholdGrid.from_scores(scores, y, edges, w)
    merged = ThresholdGrid.empty(edges)
    for shard in reversed(shards):
        merged = shard + merged
    assert merged == whole
    left_to_right = sum(shards[1:], shards[0])
    assert np.array_equal(left_to_right.pos, whole.pos)
    assert np.array_equal(left_to_right.neg, whole.neg)
    for rule in ("any", "all"):
        assert np.array_equal(merged.counts(rule)[0], whole.counts(rule)[0])


def test_merge_does_not_alias_inputs_and_checks_compatibility():
    scores, y, _, edges = make_rows(100, 2, seed=1)
    a = ThresholdGrid.from_scores(scores, y, edges)
    b = ThresholdGrid.from_scores(scores, y, edges)
    c = a + b
    assert c.pos is not a.pos and c.pos is not b.pos
    assert np.array_equal(c.pos, 2 * a.pos)
    other_edges = [edges[0], edges[1] + 0.5]
    with pytest.raises(ValueError, match="different edges"):
        a + ThresholdGrid.from_scores(scores, y, other_edges)
    with pytest.raises(TypeError):
        a + 1


def test_thresholds_include_off():
    grid = ThresholdGrid.empty([[0.1, 0.5], [1.0]])
    assert [t.tolist() for t in grid.thresholds] == [[0.1, 0.5, math.inf], [1.0, math.inf]]
    assert grid.shape == (3, 2)


def test_single_classifier_accepts_1d_scores():
    s = np.array([0.1, 0.4, 0.6, 0.9])
    y = np.array([0, 0, 1, 1])
    grid = ThresholdGrid.from_scores(s, y, [np.array([0.5])])
    tp, fp = grid.counts("any")
    assert tp.tolist() == [2.0, 0.0] and fp.tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scores": [[0.1, np.nan]]}, r"score column 1 \('b'\) has NaN at row 0"),
        ({"scores": [[0.1, np.inf]]}, r"\+inf at row 0"),
        ({"scores": np.zeros((1, 2, 2))}, r"shape \(n, k\)"),
        ({"scores": [["a", "b"]]}, "real numbers"),
        ({"labels": [2]}, r"labels\[0\] = 2"),
        ({"labels": ["yes"]}, "bool or 0/1"),
        ({"labels": [1, 0]}, r"labels must have shape \(1,\)"),
        ({"weights": [-1.0]}, r"weights\[0\] = -1.0"),
        ({"weights": [np.nan]}, "finite and >= 0"),
        ({"weights": [1.0, 2.0]}, r"weights must have shape \(1,\)"),
        ({"edges": [[0.0]]}, "got 1 edge arrays for 2 classifiers"),
        ({"edges": [[0.0, 1.0], [1.0, 0.0]]}, r"edges\[1\] must be strictly ascending"),
    ],
)
def test_invalid_input_raises_clear_value_error(kwargs, message):
    args = {
        "scores": [[0.1, 0.2]],
        "labels": [True],
        "edges": [[0.0, 1.0], [0.0, 1.0]],
        "weights": None,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ThresholdGrid.from_scores(
            args["scores"], args["labels"], args["edges"], args["weights"], names=("a", "b")
        )


def test_total_weight_beyond_exact_range_is_refused():
    with pytest.raises(ValueError, match="not exact"):
        ThresholdGrid.from_scores([[0.0]], [True], [[0.0]], [2.0**40])
    grid = ThresholdGrid.from_scores([[0.0]], [True], [[0.0]], [2.0**40], weight_bits=8)
    assert grid.total_positives == 2.0**40


def test_rule_must_be_known():
    grid = ThresholdGrid.empty([[0.0]])
    with pytest.raises(ValueError, match="rule must be one of"):
        grid.counts("xor")


@pytest.mark.parametrize("largest_group", [3, 120_000])
def test_grouped_histograms_sorted_keys_of_either_width_give_each_groups_grid(largest_group):
    """Sorted runs with int32 keys (every code below 2^31) and int64 keys (group codes so large
    that codes pass 2^31: 120,000 groups x 2 channels x 102^2 cells) equal each group's grid."""
    from costlib.thresholds.grid._sparse import grouped_histograms

    rng = np.random.default_rng(11)
    n = 2000
    scores = rng.random((n, 2))
    labels = rng.random(n) < 0.3
    groups = rng.choice([0, 1, 2, largest_group], n)
    edges = [np.linspace(0, 1, 101), np.linspace(0, 1, 101)]
    partials = grouped_histograms(groups, scores, labels, None, edges)
    assert sorted(partials) == sorted(set(groups.tolist()))
    for g, part in partials.items():
        assert part.cells.dtype == np.int64
        rows = groups == g
        truth = ThresholdGrid.from_scores(scores[rows], labels[rows], edges)
        grid = part.to_grid(edges)
        np.testing.assert_array_equal(grid.pos, truth.pos)
        np.testing.assert_array_equal(grid.neg, truth.neg)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("layout", ["rated", "unrated", "variances"])
def test_grouped_histograms_dense_count_equals_sorted_runs(monkeypatch, weighted, layout):
    """The dense bincount path (small lattices) gives the very arrays of the sort path, and
    both equal each group's grid from scores; zero weights keep the sort path (a cell with
    rows of weight 0 stays stored)."""
    from costlib.thresholds.grid import _sparse as sparse_module
    from costlib.thresholds.grid._sparse import grouped_histograms

    rng = np.random.default_rng(5)
    n = 3000
    scores = rng.random((n, 2))
    scores[rng.random(n) < 0.1, 1] = -np.inf
    labels = rng.random(n) < 0.3
    groups = rng.integers(0, 4, n)
    weights = rng.integers(1, 5, n) * 0.25 if weighted else None
    unrated = rng.random(n) < 0.4 if layout != "rated" else None
    variances = rng.random(n) * (rng.random(n) < 0.5) if layout == "variances" else None
    edges = [np.linspace(0, 1, 9), np.linspace(0, 1, 5)]
    dense = grouped_histograms(groups, scores, labels, weights, edges, unrated=unrated,
                               variances=variances)
    monkeypatch.setattr(sparse_module, "DENSE_CODES_PER_ROW", 0)
    runs = grouped_histograms(groups, scores, labels, weights, edges, unrated=unrated,
                              variances=variances)
    assert list(dense) == list(runs) == sorted(runs)
    for g in runs:
        assert dense[g].cells.dtype == runs[g].cells.dtype == np.int64
        np.testing.assert_array_equal(dense[g].cells, runs[g].cells)
        np.testing.assert_array_equal(dense[g].counts, runs[g].counts)
        assert dense[g].channels == runs[g].channels
    if variances is None:
        for g in runs:
            rows = groups == g
            truth = ThresholdGrid.from_scores(
                scores[rows], labels[rows], edges, None if weights is None else weights[rows])
            if unrated is None:
                grid = dense[g].to_grid(edges)
                np.testing.assert_array_equal(grid.pos, truth.pos)
                np.testing.assert_array_equal(grid.neg, truth.neg)
