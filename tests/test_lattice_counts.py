"""``lattice_counts`` against its definition, cell by cell (costlib.thresholds.grid._grid)."""

import itertools

import numpy as np
import pytest

from costlib.thresholds.grid._grid import lattice_counts


def _by_definition(hist, rule, k):
    """``any``: total minus the sum over ``b <= t``; ``all``: the sum over ``b > t`` (every
    lattice axis), for each leading index and each tuple ``t``, summed cell by cell."""
    lead, lattice = hist.shape[: hist.ndim - k], hist.shape[hist.ndim - k:]
    out = np.zeros(hist.shape)
    for index in itertools.product(*(range(n) for n in lead)):
        h = hist[index]
        for t in itertools.product(*(range(n) for n in lattice)):
            total = 0.0
            for b in itertools.product(*(range(n) for n in lattice)):
                below = all(bj <= tj for bj, tj in zip(b, t, strict=True))
                above = all(bj > tj for bj, tj in zip(b, t, strict=True))
                if (rule == "any" and not below) or (rule == "all" and above):
                    total += h[b]
            out[index + t] = total
    return out


@pytest.mark.parametrize("shape,k", [((6,), 1), ((4, 5), 2), ((3, 4, 3), 3), ((2, 4, 5), 2),
                                     ((3, 1, 4), 2), ((1, 1), 2), ((2, 2, 3, 2), 3)])
@pytest.mark.parametrize("rule", ["any", "all", "or", "and"])
def test_lattice_counts_equal_the_definition(shape, k, rule):
    rng = np.random.default_rng(len(shape) * 10 + k)
    hist = rng.integers(0, 7, shape).astype(float)  # whole counts: every sum order is exact
    before = hist.copy()
    got = lattice_counts(hist, rule, k)
    expected = _by_definition(hist, {"or": "any", "and": "all"}.get(rule, rule), k)
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(hist, before)  # the histogram is not written to
    assert not np.shares_memory(got, hist)


def test_lattice_counts_sum_in_cumsum_order():
    """Fractional weights: the same bits as summing with ``np.cumsum`` along each axis."""
    hist = np.random.default_rng(0).random((9, 11)) * 0.3
    prefix = np.cumsum(np.cumsum(hist, axis=0), axis=1)
    assert lattice_counts(hist, "any").tobytes() == (prefix[-1:, -1:] - prefix).tobytes()
    suffix = np.flip(np.cumsum(np.flip(hist, 0), 0), 0)
    suffix = np.flip(np.cumsum(np.flip(np.vstack([suffix[1:], np.zeros((1, 11))]), 1), 1), 1)
    expected = np.hstack([suffix[:, 1:], np.zeros((9, 1))])
    assert lattice_counts(hist, "all").tobytes() == expected.tobytes()
