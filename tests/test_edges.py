import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.thresholds.binning._bin_locator import bin_indices
from costlib.thresholds.binning._edges import check_edges, quantile_edges, uniform_edges

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(
    edges=st.lists(finite, min_size=1, max_size=40, unique=True),
    values=st.lists(finite, min_size=0, max_size=60),
    uniform=st.booleans(),
)
def test_bin_indices_equal_searchsorted(edges, values, uniform):
    e = np.sort(np.array(edges))
    if uniform and e.size > 1 and e[-1] > e[0]:
        e = np.linspace(e[0], e[-1], e.size)
        e = np.unique(e)
    # Values exactly on edges, one ulp either side, and -inf are the cases that matter.
    v = np.concatenate([values, e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf), [-np.inf]])
    assert np.array_equal(bin_indices(v, e), np.searchsorted(e, v, side="right"))


def test_bin_indices_crowded_edges_fall_back_exactly():
    # Many edges inside one fine grid cell: exercises the binary-search fallback.
    e = np.concatenate([np.linspace(0, 1e-9, 50), [1e6]])
    v = np.concatenate([np.linspace(-1e-9, 2e-9, 1000), e, [5e5, 1e6, 2e6]])
    assert np.array_equal(bin_indices(v, e), np.searchsorted(e, v, side="right"))


def test_uniform_edges():
    e = uniform_edges(0.0, 1.0, 5)
    assert np.allclose(e, [0, 0.25, 0.5, 0.75, 1.0])
    assert uniform_edges(0.3, 0.3, 1).tolist() == [0.3]
    with pytest.raises(ValueError, match="low < high"):
        uniform_edges(1.0, 0.0, 3)
    with pytest.raises(ValueError, match="positive integer"):
        uniform_edges(0.0, 1.0, 0)
    with pytest.raises(ValueError, match="finite"):
        uniform_edges(0.0, np.inf, 3)


def test_quantile_edges_are_sample_quantiles_and_ignore_minus_inf():
    sample = np.concatenate([np.arange(100.0), [-np.inf] * 10])
    e = quantile_edges(sample, 4)
    # The i/4 quantiles as lower order statistics of 0..99: floor(i/4 * 99).
    assert e.tolist() == [0.0, 24.0, 49.0, 74.0]
    # Ties collapse.
    assert quantile_edges([1.0] * 10 + [2.0], 4).tolist() == [1.0]
    with pytest.raises(ValueError, match="NaN"):
        quantile_edges([1.0, np.nan], 3)
    with pytest.raises(ValueError, match="no finite"):
        quantile_edges([-np.inf], 3)


def test_check_edges_messages():
    with pytest.raises(ValueError, match=r"ascending; edges\[1\]=2.0 >= edges\[2\]=1.0"):
        check_edges([0.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="strictly ascending"):
        check_edges([0.0, 0.0])
    with pytest.raises(ValueError, match="non-empty 1-D"):
        check_edges([])
    with pytest.raises(ValueError, match="finite"):
        check_edges([0.0, np.inf])


@pytest.mark.parametrize(
    ("edges", "values"),
    [
        ([-1e308, 0.0, 1e308], [0.5, -1e308, 1e308, -np.inf, 1.7e308]),  # span overflows
        ([0.0, 5e-324, 1e-323], [-5e-324, 0.0, 5e-324, 1e-323, 1.0]),  # subnormal steps
        ([0.0, 5e-324, 1.0, 2.0], [-5e-324, 2.5e-324, 0.5, 2.0]),  # non-uniform, tiny gap
    ],
)
def test_bin_indices_on_extreme_edges(edges, values):
    e = np.array(edges)
    v = np.array(values)
    assert np.array_equal(bin_indices(v, e), np.searchsorted(e, v, side="right"))


any_float = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=300, deadline=None)
@given(
    edges=st.lists(any_float, min_size=2, max_size=30, unique=True),
    values=st.lists(any_float, min_size=0, max_size=60),
)
def test_bracket_tables_bound_the_true_bin(edges, values):
    """The invariant the bracket tables rest on, for both kinds of cells over any floats:
    every value's cell brackets its true bin, ``lo <= b(s) <= hi``."""
    from costlib.thresholds.binning._bin_locator import _KeyCells, _ValueCells

    e = np.unique(np.array(edges) + 0.0)
    if e.size < 2:
        return
    v = np.concatenate([values, e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf),
                        [-np.inf, 0.0, -0.0]])
    truth = np.searchsorted(e, v, side="right")
    kinds = [_KeyCells(e)]
    with np.errstate(over="ignore", divide="ignore"):
        span = e[-1] - e[0]
        if (np.isfinite(e[0] - span) and np.isfinite(e[-1] + span)
                and np.isfinite((1 << 16) / span) and np.isfinite(e.size / span)):
            kinds.append(_ValueCells(e, 1 << 16))
    for cells in kinds:
        index = cells.index(v.copy())
        assert (cells.lo[index] <= truth).all() and (truth <= cells.hi[index]).all()
    assert np.array_equal(bin_indices(v, e), truth)


@pytest.mark.parametrize("where", ["near0", "near1", "signed"])
def test_bin_indices_on_log_spaced_edges(where):
    """Edges of the default recipe's shape (log-spaced tails, crowded where rows are rare)."""
    rng = np.random.default_rng(7)
    if where == "near0":
        e = np.unique(np.concatenate([np.geomspace(1e-9, 1e-2, 100), np.linspace(0.02, 1, 28)]))
        v = rng.beta(0.5, 30, 20_000)
    elif where == "near1":
        e = np.unique(np.concatenate([np.linspace(0, 0.9, 64), 1 - np.geomspace(1e-1, 1e-7, 64)]))
        v = 1 - rng.beta(0.5, 30, 20_000)
    else:
        e = np.unique(np.concatenate([-np.geomspace(1e-6, 10, 60), np.geomspace(1e-6, 10, 60)]))
        v = rng.standard_cauchy(20_000)
    v = np.concatenate([v, e, np.nextafter(e, -np.inf), np.nextafter(e, np.inf), [-np.inf]])
    assert np.array_equal(bin_indices(v, e), np.searchsorted(e, v, side="right"))


@pytest.mark.parametrize("n_edges", [1, 2, 254, 255, 256, 300, 65_535, 65_536])
def test_bin_indices_at_the_bracket_tables_dtype_limits(n_edges):
    """The tables hold bins in the smallest dtype with room for the "open cell" sentinel
    above them: edge counts around 2^8 and 2^16 must not collide with it."""
    rng = np.random.default_rng(n_edges)
    e = np.unique(rng.beta(0.5, 30, n_edges + 50))[:n_edges]
    v = np.concatenate([rng.beta(0.5, 30, 50_000), e, np.nextafter(e, np.inf), [-np.inf, 1.0]])
    assert np.array_equal(bin_indices(v, e), np.searchsorted(e, v, side="right"))
