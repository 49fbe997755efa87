"""Candidate thresholds ("edges") per classifier, and binning scores against them.

A classifier with edges ``e[0] < e[1] < ... < e[B-1]`` has ``B + 1`` threshold choices: ``e[t]``
for ``t < B`` and "off" (``+inf``) for ``t = B``. A score ``s`` falls in bin

.. math:: b(s) = \\#\\{i : e_i \\le s\\} \\in \\{0, \\dots, B\\},

so bin 0 is the underflow bin (scores below ``e[0]``, and ``-inf`` for "did not score"), and the
classifier fires at threshold index ``t`` exactly when ``s >= e[t]``, i.e. when ``b(s) > t``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BinLocator",
    "bin_indices",
    "check_edges",
    "fine_histogram",
    "quantile_edges",
    "quantile_edges_from_histogram",
    "uniform_edges",
    "with_thresholds",
]

# Relative tolerance under which edges count as evenly spaced for the arithmetic binning path.
# The path is exact whatever the tolerance: it corrects each estimate against the true edges.
_UNIFORM_RTOL = 1e-9


def uniform_edges(low: float, high: float, n_edges: int) -> NDArray[np.float64]:
    """Evenly spaced candidate thresholds ``low, ..., high`` (both included).

    Parameters
    ----------
    low, high : float
        Lowest and highest candidate threshold, ``low < high``, both finite.
    n_edges : int
        Number of candidate thresholds, at least 1 (``n_edges == 1`` gives ``[low]``).

    Returns
    -------
    ndarray of shape (n_edges,)
    """
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError(f"uniform_edges: low and high must be finite, got {low!r}, {high!r}")
    if int(n_edges) != n_edges or n_edges < 1:
        raise ValueError(f"uniform_edges: n_edges must be a positive integer, got {n_edges!r}")
    if n_edges == 1:
        return np.array([float(low)])
    if not low < high:
        raise ValueError(f"uniform_edges: need low < high, got low={low!r}, high={high!r}")
    return np.linspace(float(low), float(high), int(n_edges))


def quantile_edges(sample: ArrayLike, n_edges: int) -> NDArray[np.float64]:
    """Candidate thresholds at evenly spaced quantiles of a sample of scores.

    The edges are the ``i / n_edges`` quantiles, ``i = 0 .. n_edges - 1`` (the minimum is the
    first edge; the maximum is left out because "off" follows it), with duplicates removed, so
    the result may be shorter than ``n_edges`` when the sample has ties. ``-inf`` entries (items
    the classifier did not score) are ignored.

    Take the sample from *every scored row*, rated or not, and build the grid from the same rows
    (null labels go to its unrated channel): then candidates span the whole score range and
    :func:`costlib.operating_point.optimize` refuses the tuples whose flagged rows were not
    rated (``max_unrated_share``). Quantiles of rated rows alone reach below the rating floor
    wherever another classifier flagged a row, and a grid of rated rows alone cannot tell
    those candidates from well-rated ones.

    Parameters
    ----------
    sample : array-like of shape (n,)
        Scores; finite or ``-inf``. NaN raises ``ValueError``.
    n_edges : int
        Requested number of candidate thresholds.
    """
    values = np.asarray(sample, dtype=np.float64).ravel()
    if np.isnan(values).any():
        raise ValueError("quantile_edges: sample contains NaN")
    if int(n_edges) != n_edges or n_edges < 1:
        raise ValueError(f"quantile_edges: n_edges must be a positive integer, got {n_edges!r}")
    values = values[np.isfinite(values)]
    if values.size == 0:
        raise ValueError("quantile_edges: sample has no finite score")
    edges = np.quantile(values, np.arange(int(n_edges)) / int(n_edges), method="lower")
    return np.unique(edges)


def check_edges(edges: ArrayLike, name: str = "edges") -> NDArray[np.float64]:
    """Validate one axis of candidate thresholds: 1-D, non-empty, finite, strictly ascending."""
    arr = np.asarray(edges, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite (the 'off' threshold +inf is implicit)")
    if arr.size > 1 and not (np.diff(arr) > 0).all():
        bad = int(np.flatnonzero(np.diff(arr) <= 0)[0])
        raise ValueError(
            f"{name} must be strictly ascending; {name}[{bad}]={arr[bad].item()!r} "
            f">= {name}[{bad + 1}]={arr[bad + 1].item()!r}"
        )
    return arr


def with_thresholds(
    edges: ArrayLike, thresholds: ArrayLike, name: str = "edges"
) -> NDArray[np.float64]:
    """Edges with further candidate thresholds added: ``sorted(set(edges) | finite thresholds)``.

    Used to put the thresholds in force on the lattice, so that "keep what is applied" is a
    candidate of the optimiser exactly (a threshold between two edges could otherwise only be
    approximated by the next edge above it, which flags fewer rows). ``+inf`` ("off") is
    dropped: it is always a choice. Scores binned against the result count the same rows above
    every old edge, so grids built on ``edges`` and on the result agree at the old thresholds.

    Parameters
    ----------
    edges : array_like of shape (B,)
        Strictly ascending finite candidate thresholds.
    thresholds : array_like
        Thresholds to add; ``+inf`` entries are ignored, NaN and ``-inf`` are refused.

    Returns
    -------
    ndarray of shape (B',), B' >= B
    """
    base = check_edges(edges, name=name)
    extra = np.asarray(thresholds, dtype=np.float64).ravel()
    if np.isnan(extra).any() or (extra == -np.inf).any():
        raise ValueError(f"{name}: thresholds to add must be finite or +inf, got "
                         f"{[float(v) for v in extra]}")
    extra = extra[np.isfinite(extra)]
    if extra.size == 0:
        return base
    return check_edges(np.union1d(base, extra), name=name)


def _is_uniform(edges: NDArray[np.float64]) -> bool:
    if edges.size < 3:
        return edges.size == 2
    steps = np.diff(edges)
    span = edges[-1] - edges[0]
    return bool(np.max(np.abs(steps - span / (edges.size - 1))) <= _UNIFORM_RTOL * span)


class BinLocator:
    """Maps scores to bins ``b(s) = #{i : edges[i] <= s}``, exactly and fast.

    The result always equals ``np.searchsorted(edges, s, side="right")`` (including values on an
    edge and ``-inf``). A first estimate comes from arithmetic on a uniform grid: for evenly
    spaced edges the grid *is* the edges; otherwise a fine uniform grid of ``8 * B`` cells (at
    most 65536) over ``[edges[0], edges[-1]]`` with a lookup table of the bin at each grid
    point. The estimate is then corrected against the true edges, one step at a time, which
    converges in one or two steps unless many edges crowd into one fine cell; values still
    unresolved after a few steps fall back to a binary search.
    """

    _MAX_STEPS = 3

    def __init__(self, edges: NDArray[np.float64]) -> None:
        self.edges = edges
        self.n_edges = edges.size
        padded = np.concatenate(([-np.inf], edges, [np.inf]))
        self._lower = padded[:-1]  # bin b holds lower[b] <= s < upper[b]
        self._upper = padded[1:]
        with np.errstate(over="ignore", divide="ignore"):  # the overflow is what we test for
            span = edges[-1] - edges[0]
            extreme = edges.size > 1 and not (np.isfinite(span) and np.isfinite(edges.size / span))
        if extreme:
            # A span that overflows, or a step so small that its inverse does: no arithmetic
            # estimate can be trusted, so every value goes to the binary search.
            self._arithmetic = False
            return
        self._arithmetic = True
        if edges.size == 1:
            self._table = None
            self._low, self._step, self._cells = edges[0], 1.0, 0
        elif _is_uniform(edges):
            self._table = None
            self._low = edges[0]
            self._step = (edges[-1] - edges[0]) / (edges.size - 1)
            self._cells = edges.size - 1
        else:
            cells = min(8 * edges.size, 1 << 16)
            grid = np.linspace(edges[0], edges[-1], cells + 1)
            self._low = edges[0]
            self._step = (edges[-1] - edges[0]) / cells
            self._cells = cells
            # Estimate index i (grid cell i - 1, see __call__) -> bin at that cell's left end.
            left_bins = np.searchsorted(edges, grid, side="right")
            self._table = np.concatenate(([0], left_bins))

    def __call__(self, values: NDArray[np.floating]) -> NDArray[np.intp]:
        """Bin index of every value (values must be finite or -inf; not validated here)."""
        if not self._arithmetic:
            return np.searchsorted(self.edges, values, side="right")
        # Estimate (may be off by one through rounding; corrected below): grid cell + 1, so
        # that below-range values land on 0 and the cell count maps to the last bin.
        estimate = values - (self._low - self._step)
        estimate *= 1.0 / self._step
        np.clip(estimate, 0.0, self._cells + 1, out=estimate)
        bins = estimate.astype(np.intp)
        if self._table is not None:
            bins = self._table[bins]
        lower, upper = self._lower, self._upper
        for _ in range(self._MAX_STEPS):
            too_high = values < lower[bins]
            too_low = values >= upper[bins]
            if not (too_high.any() or too_low.any()):
                return bins
            bins -= too_high
            bins += too_low
        wrong = (values < lower[bins]) | (values >= upper[bins])
        if wrong.any():
            bins[wrong] = np.searchsorted(self.edges, values[wrong], side="right")
        return bins


def bin_indices(values: NDArray[np.floating], edges: NDArray[np.float64]) -> NDArray[np.intp]:
    """Bin of each score: ``b(s) = #{i : edges[i] <= s}`` (see :class:`BinLocator`).

    Parameters
    ----------
    values : ndarray of float
        Scores, finite or ``-inf`` (not validated here: callers validate once per batch).
    edges : ndarray of float64
        Strictly ascending candidate thresholds (see :func:`check_edges`).
    """
    return BinLocator(edges)(np.asarray(values, dtype=np.float64))


def fine_histogram(values: ArrayLike, low: float, high: float, resolution: int) -> NDArray:
    """Counts of values in ``resolution`` equal cells over ``[low, high]`` (int64, mergeable).

    Values below ``low`` count in the first cell and values above ``high`` in the last; ``-inf``
    ("did not score") is not counted. The sufficient statistic for
    :func:`quantile_edges_from_histogram`: it adds across shards, so quantile edges computed
    from it do not depend on how the data was split.
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    cell = np.floor((v - low) * (resolution / (high - low)))
    np.clip(cell, 0, resolution - 1, out=cell)
    return np.bincount(cell.astype(np.intp), minlength=resolution)


def quantile_edges_from_histogram(
    counts: ArrayLike, low: float, high: float, n_edges: int
) -> NDArray[np.float64]:
    """Quantile edges snapped to the boundaries of a :func:`fine_histogram`.

    Edge ``j`` (``j = 0 .. n_edges - 1``) is the highest cell boundary ``g_i = low + i * step``
    with at most a fraction ``j / n_edges`` of the counted values below it; duplicates are
    removed. With a fine enough histogram these approach :func:`quantile_edges` of the raw
    values, and they are exactly reproducible from the merged counts.
    """
    c = np.asarray(counts)
    if c.ndim != 1 or c.size == 0:
        raise ValueError("counts must be a non-empty 1-D histogram")
    total = c.sum()
    if total == 0:
        raise ValueError("the histogram is empty: no finite score to take quantiles of")
    below = np.concatenate(([0], np.cumsum(c)))
    targets = np.arange(int(n_edges)) * total / int(n_edges)
    index = np.searchsorted(below, targets, side="right") - 1
    step = (high - low) / c.size
    return np.unique(low + index * step)
