"""GridAccumulator without an engine: any split, order, merge tree and form gives the same sum.

Truth is independent of the accumulator: every partial's counts added into one dense array by
``np.add.at`` (exact: counts are multiples of 1/8), and the row tallies summed directly.
"""

import itertools
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.thresholds.grid import (
    GridAccumulator,
    SparseCounts,
    SparseGrid,
    ThresholdGrid,
    is_lattice_shape,
    lattice_shape,
)

EDGES = (np.linspace(0.1, 0.9, 5), np.linspace(0.2, 0.8, 4))
SHAPE = (6, 5)
CELLS = 6 * 5


def _partial(rng, channels, density):
    """A random partial: strictly increasing cells, counts multiples of 1/8 (some negative)."""
    n_cells = channels * CELLS
    cells = np.flatnonzero(rng.random(n_cells) < density).astype(np.int64)
    counts = rng.integers(-3, 40, size=cells.size) / 8.0
    counts[counts == 0] = 0.125
    return SparseCounts(cells=cells, counts=counts, channels=channels)


def _inputs(seed, n_parts, channel_choice, with_rows):
    rng = np.random.default_rng(seed)
    inputs = []
    for _ in range(n_parts):
        channels = int(rng.choice(channel_choice))
        counts = _partial(rng, channels, float(rng.choice([0.0, 0.05, 0.3, 0.9])))
        rows = (int(rng.integers(0, 50)), int(rng.integers(0, 50))) if with_rows else None
        inputs.append((counts, int(rng.integers(0, 30)), int(rng.integers(0, 5)), rows))
    return inputs


def _truth(inputs):
    channels = max(2, *(c.channels for c, *_ in inputs))
    dense = np.zeros(channels * CELLS)
    for counts, *_ in inputs:
        np.add.at(dense, counts.cells, counts.counts)
    return dense.reshape(channels, *SHAPE)


def _accumulate(inputs, plan, order, compacts, lattice, fraction, work):
    """Add ``inputs`` into one accumulator per chunk of ``plan``, compact some, merge them."""
    accs = []
    for k, chunk in enumerate(plan):
        acc = GridAccumulator.empty(lattice)
        for i in chunk:
            counts, rated, audited, rows = inputs[i]
            acc = acc.add(counts, rated, audited, rows, dense_fraction=fraction,
                          dense_work=work)
        accs.append(acc.compact() if compacts >> k & 1 else acc)
    while len(accs) > 1:  # merge two or three neighbours at a time, where ``order`` says
        k = order % (len(accs) - 1)
        width = 3 if order % 3 == 0 and k + 3 <= len(accs) else 2
        merged = GridAccumulator.merge(accs[k:k + width], dense_fraction=fraction,
                                       dense_work=work)
        accs = [*accs[:k], merged, *accs[k + width:]]
    return accs[0]


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_parts=st.integers(1, 9),
       channel_choice=st.sampled_from([(2,), (3,), (2, 3), (2, 11)]),
       with_rows=st.sampled_from([True, False, None]), order=st.integers(0, 11),
       compacts=st.integers(0, 7), fraction=st.sampled_from([0.0, 0.05, 0.125, 2.0]),
       work=st.sampled_from([0.05, 0.5, np.inf]), data=st.data())
def test_sum_does_not_depend_on_split_order_merge_tree_or_form(
        seed, n_parts, channel_choice, with_rows, order, compacts, fraction, work, data):
    inputs = _inputs(seed, n_parts, channel_choice, with_rows is not False)
    if with_rows is None and n_parts > 1:  # one partial without row tallies: unknown
        counts, rated, audited, _ = inputs[-1]
        inputs[-1] = (counts, rated, audited, None)
    indices = data.draw(st.permutations(range(n_parts)))
    cuts = sorted(data.draw(st.lists(st.integers(0, n_parts), max_size=3)))
    bounds = [0, *cuts, n_parts]
    plan = [indices[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    acc = _accumulate(inputs, plan, order, compacts, SHAPE, fraction, work)

    truth = _truth(inputs)
    assert np.array_equal(acc.dense(truth.shape[0]), truth)
    assert acc.rated_rows == sum(i[1] for i in inputs)
    assert acc.audited_rows == sum(i[2] for i in inputs)
    rows = [i[3] for i in inputs]
    expected_rows = None if None in rows else (sum(r[0] for r in rows), sum(r[1] for r in rows))
    assert acc.row_counts == expected_rows
    # the compact grid: exactly the occupied cells of the truth, whatever form came before
    grid = acc.to_sparse_grid(("a", "b"))
    flat = truth.reshape(-1)
    assert np.array_equal(grid.counts.cells, np.flatnonzero(flat != 0))
    assert np.array_equal(grid.counts.counts, flat[flat != 0])
    assert grid.counts.channels == truth.shape[0] or not any(c.nnz for c, *_ in inputs)
    assert grid.edges == SHAPE and grid.audited_rows == acc.audited_rows
    assert (grid.positive_rows, grid.negative_rows) == (expected_rows or (None, None))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_parts=st.integers(1, 6), order=st.integers(0, 5))
def test_dense_grid_is_the_grid_of_the_summed_partials(seed, n_parts, order):
    inputs = [(c.with_channels(3) if c.channels < 3 else c, *rest)
              for c, *rest in _inputs(seed, n_parts, (2, 3), True)]
    plan = [list(range(0, n_parts, 2)), list(range(1, n_parts, 2))]
    acc = _accumulate(inputs, [p for p in plan if p], order, order, EDGES, 0.125, 0.5)
    truth = _truth(inputs)
    grid = acc.to_grid(("a", "b"))
    expected = ThresholdGrid(edges=EDGES, pos=truth[1], neg=truth[0], names=("a", "b"),
                             unrated=truth[2], audited_rows=acc.audited_rows,
                             positive_rows=acc.row_counts[0],
                             negative_rows=acc.row_counts[1])
    assert grid == expected
    assert acc.to_sparse_grid(("a", "b")).to_grid() == expected


@given(seed=st.integers(0, 2**32 - 1), fraction=st.sampled_from([0.0, 0.125, 2.0]))
@settings(max_examples=30, deadline=None)
def test_merge_and_compact_leave_their_inputs_unchanged(seed, fraction):
    inputs = _inputs(seed, 4, (2, 3), True)
    left = GridAccumulator.empty(SHAPE)
    right = GridAccumulator.empty(SHAPE)
    for i, (counts, rated, audited, rows) in enumerate(inputs):
        (left if i % 2 else right).add(counts, rated, audited, rows, dense_fraction=fraction)
    before = [pickle.dumps((a.dense(3), a.rated_rows, a.row_counts)) for a in (left, right)]
    GridAccumulator.merge([left, right], dense_fraction=fraction).add(
        *inputs[0], dense_fraction=fraction)
    left.compact()
    right.compact()
    after = [pickle.dumps((a.dense(3), a.rated_rows, a.row_counts)) for a in (left, right)]
    assert after == before


@pytest.mark.parametrize("fraction", [0.0, 0.125, 2.0])
def test_every_form_pickles_to_the_same_sum(fraction):
    inputs = _inputs(7, 5, (2, 3), True)
    acc = GridAccumulator.empty(SHAPE)
    for counts, rated, audited, rows in inputs:
        acc.add(counts, rated, audited, rows, dense_fraction=fraction)
    for form in (acc, acc.compact()):
        back = pickle.loads(pickle.dumps(form))
        assert type(back.counts) is type(form.counts)
        assert np.array_equal(back.dense(3), _truth(inputs))
        assert (back.rated_rows, back.audited_rows, back.row_counts) == (
            form.rated_rows, form.audited_rows, form.row_counts)
    compact = acc.compact()
    assert compact.compact() is compact
    # compact is what crosses a shuffle: its pickle is the packed counts plus a few fields
    assert len(pickle.dumps(compact)) < len(pickle.dumps(compact.counts)) + 400


def test_forms_follow_the_dense_thresholds():
    inputs = _inputs(3, 6, (2,), True)
    sparse = GridAccumulator.empty(SHAPE)
    dense = GridAccumulator.empty(SHAPE)
    for counts, rated, audited, rows in inputs:
        sparse.add(counts, rated, audited, rows, dense_fraction=np.inf, dense_work=np.inf)
        dense.add(counts, rated, audited, rows, dense_fraction=0.0)
    assert isinstance(sparse.counts, list) and isinstance(dense.counts, np.ndarray)
    assert np.array_equal(sparse.dense(), dense.dense())
    assert isinstance(GridAccumulator.merge([sparse, dense]).counts, np.ndarray)


def test_lattice_shape_and_a_dense_grid_needs_edges():
    assert lattice_shape(EDGES) == SHAPE and lattice_shape(SHAPE) == SHAPE
    assert is_lattice_shape(SHAPE) and not is_lattice_shape(EDGES)
    acc = GridAccumulator.empty(SHAPE).add(_partial(np.random.default_rng(0), 2, 0.3), 4)
    with pytest.raises(ValueError, match="needs its edges"):
        acc.to_grid()
    sparse = acc.to_sparse_grid()
    assert isinstance(sparse, SparseGrid) and sparse.with_edges(EDGES).to_grid().shape == SHAPE
