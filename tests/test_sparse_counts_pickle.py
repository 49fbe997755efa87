"""Sparse counts cross a shuffle packed (``SparseCounts.__reduce__``): exactly the same arrays
back, in a few bytes a cell."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from costlib.thresholds.grid._sparse import SparseCounts

_counts = st.one_of(
    st.integers(0, 2**33).map(float),  # whole numbers, some beyond uint32
    st.floats(0, 1e12, allow_nan=False, allow_infinity=False),  # weighted counts
)


@settings(max_examples=200, deadline=None)
@given(
    cells=hnp.arrays(np.int64, st.integers(0, 300), elements=st.integers(0, 2**40),
                     unique=True),
    counts=st.data(),
    channels=st.sampled_from([2, 3]),
)
def test_pickle_round_trip_is_exact(cells, counts, channels):
    cells = np.sort(cells)
    values = np.array(counts.draw(st.lists(_counts, min_size=cells.size, max_size=cells.size)),
                      dtype=np.float64)
    sparse = SparseCounts(cells=cells, counts=values, channels=channels)
    back = pickle.loads(pickle.dumps(sparse, protocol=pickle.HIGHEST_PROTOCOL))
    assert back.channels == channels
    assert back.cells.dtype == np.int64 and back.counts.dtype == np.float64
    np.testing.assert_array_equal(back.cells, cells)
    # bit for bit, including -0.0 vs 0.0 and fractional weights
    assert back.counts.tobytes() == values.tobytes()


def test_dense_whole_counts_pack_to_a_few_bytes_a_cell():
    rng = np.random.default_rng(0)
    cells = np.unique(rng.integers(0, 3 * 257 * 257, 150_000)).astype(np.int64)
    counts = rng.integers(1, 500, cells.size).astype(np.float64)
    packed = len(pickle.dumps(SparseCounts(cells, counts, 3), protocol=5))
    plain = cells.nbytes + counts.nbytes
    assert packed < 0.25 * plain  # gaps in one byte, counts in two: 3 bytes a cell, not 16


@pytest.mark.parametrize("counts", [[-0.0, 1.0, 2.0], [0.5, 1.0, 2.0], [1.0, 2.0, 2.0**32]])
def test_what_integers_cannot_hold_exactly_stays_float(counts):
    counts = np.array(counts)
    back = pickle.loads(pickle.dumps(SparseCounts(np.array([1, 5, 9]), counts)))
    assert back.counts.tobytes() == counts.tobytes()
