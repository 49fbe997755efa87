"""``sorted_distinct`` against ``np.unique``: the same values, dtype and order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from costlib.arrays import sorted_distinct


@settings(max_examples=300, deadline=None)
@given(values=hnp.arrays(st.sampled_from([np.int64, np.uint64, np.int32, np.int8]),
                         st.integers(0, 300), elements=st.integers(0, 120)))
def test_sorted_distinct_is_what_np_unique_returns(values):
    got = sorted_distinct(values)
    want = np.unique(values)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_sorted_distinct_of_many_distinct_ids_and_repeats():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 2**63, 200_000, dtype=np.uint64)
    values = np.concatenate([ids, ids[:50_000]])
    rng.shuffle(values)
    np.testing.assert_array_equal(sorted_distinct(values), np.unique(ids))
