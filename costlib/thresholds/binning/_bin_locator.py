"""Binning scores against candidate thresholds: ``b(s) = #{i : e_i <= s}``, exact and fast.

:class:`BinLocator` always returns ``np.searchsorted(edges, s, side="right")``. A binary search
costs ``log2(B)`` dependent comparisons per value; the locator replaces it by arithmetic and one
table lookup per value, and checks its answer against the true edges:

- **Evenly spaced edges** (``uniform`` recipes): the bin is ``floor((s - e_0) / step) + 1``,
  clipped, then corrected against the true edges (rounding can be off by one).
- **Any other edges** (quantiles, the default ``decision_edges``): a *bracket table* over
  ``C <= 65,536`` cells, built once per edge set. A value's cell comes from arithmetic; the
  table holds, per cell, the lowest and the highest bin any value in the cell can have
  (``lo[c] = b(x)`` at the cell's lowest point, ``hi[c] = b(x')`` at its highest: ``b`` is
  monotone). Where ``lo[c] == hi[c]`` (no edge inside the cell) that is the bin; the few
  values in cells holding an edge get a binary search. Two kinds of cells:

  * *value cells*: ``C`` equal cells over ``[e_0, e_{B-1}]``, cell ``floor((s - e_0 + h) /
    h)``; the bracket of a cell spans its neighbours too, so the rounding of that division
    (far below one cell) can never put a value outside its bracket;
  * *key cells*: the order-preserving integer keys of the floats
    (:func:`costlib.thresholds.binning._score_sketch.sortable_keys`) with their ``L`` lowest bits
    dropped,
    i.e. cells of equal *relative* width: exact integer arithmetic, and as fine near ``1e-6`` as
    near ``1`` (scores concentrated near 0, log-spaced tail edges).

  The locator takes the kind under which the fewest gaps between consecutive edges are
  narrower than a few cells (edges placed at quantiles hold about equal shares of the rows, so
  that is the share of values that would need the binary search).

Values must be finite or ``-inf`` (callers validate once per batch).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning._score_sketch import key_values, sortable_keys

__all__ = ["BinLocator", "KeyLevelLocator", "bin_indices", "locator_for"]

# Relative tolerance under which edges count as evenly spaced for the arithmetic binning path.
# The path is exact whatever the tolerance: it corrects each estimate against the true edges.
_UNIFORM_RTOL = 1e-9
#: Most cells of a bracket table (two tables of this many small integers per classifier).
TABLE_CELLS = 1 << 15


def _is_uniform(edges: NDArray[np.float64]) -> bool:
    if edges.size < 3:
        return edges.size == 2
    steps = np.diff(edges)
    span = edges[-1] - edges[0]
    return bool(np.max(np.abs(steps - span / (edges.size - 1))) <= _UNIFORM_RTOL * span)


def _bracket_table(lo: NDArray[np.intp], hi: NDArray[np.intp]) -> NDArray[np.integer]:
    """Per cell its bin where the bracket is closed (``lo == hi``), else the dtype's largest
    value (an *open* cell: a binary search decides), in the smallest unsigned dtype that holds
    every bin below that sentinel (tables that fit in cache gather faster)."""
    top = int(lo.max()) if lo.size else 0
    dtypes: list[type[np.unsignedinteger[Any]]] = [np.uint8, np.uint16, np.uint32, np.uint64]
    dtype = next(d for d in dtypes if top < np.iinfo(d).max)
    return np.where(lo == hi, lo, np.iinfo(dtype).max).astype(dtype)


class _ValueCells:
    """``cells`` equal cells over ``[e_0, e_{B-1}]``; index 0 below, ``cells + 1`` above."""

    def __init__(self, edges: NDArray[np.float64], cells: int) -> None:
        self.low, self.cells = edges[0], cells
        self.step = (edges[-1] - edges[0]) / cells
        # x_j = e_0 + j h for j = -2 .. cells + 2 (x_-2 -> -inf, x_cells+2 -> +inf)
        grid = np.concatenate(([-np.inf], edges[0] + self.step * np.arange(-1, cells + 2),
                               [np.inf]))
        at = np.searchsorted(edges, grid, side="right")
        # index i holds values in [x_(i-1), x_i) up to rounding: bracket [b(x_(i-2)), b(x_(i+1))]
        self.lo, self.hi = at[:-3], at[3:]

    def index(self, values: NDArray[np.floating]) -> NDArray[np.intp]:
        estimate = values - (self.low - self.step)
        estimate *= 1.0 / self.step
        np.clip(estimate, 0.0, self.cells + 1, out=estimate)
        return estimate.astype(np.intp)

    def crowding(self, edges: NDArray[np.float64]) -> float:
        """Share of edge gaps narrower than the bracket (3 cells)."""
        return float(np.mean(np.diff(edges) < 3 * self.step)) if edges.size > 1 else 0.0


class _KeyCells:
    """Cells of the float keys at ``level`` (low bits dropped); index 0 below, ``cells + 1``
    above the edges' cells."""

    def __init__(self, edges: NDArray[np.float64], level: int | None = None,
                 max_cells: int = TABLE_CELLS) -> None:
        first, last = (int(k) for k in sortable_keys(edges[[0, -1]]))
        if level is None:
            level = 1
            while (last >> level) - (first >> level) + 1 > max_cells:
                level += 1
        elif not 1 <= level <= 63 or (last >> level) - (first >> level) + 1 > max_cells:
            raise ValueError(f"edges span more than {max_cells} key cells at level {level}")
        self.level, self.base = level, (first >> level) - 1
        self.cells = (last >> level) - (first >> level) + 1
        buckets = np.arange(first >> level, (last >> level) + 1, dtype=np.uint64)
        shift = np.uint64(level)
        # bit patterns past the finite floats (the outermost buckets) bound nothing: +-inf
        lowest = key_values(buckets << shift)
        lowest[np.isnan(lowest)] = -np.inf
        highest = key_values(((buckets + np.uint64(1)) << shift) - np.uint64(1))
        highest[np.isnan(highest)] = np.inf
        self.widths = highest - lowest
        inner_lo = np.searchsorted(edges, lowest, side="right")
        inner_hi = np.searchsorted(edges, highest, side="right")
        self.lo = np.concatenate(([0], inner_lo, [edges.size]))
        self.hi = np.concatenate(([0], inner_hi, [edges.size]))

    def index(self, values: NDArray[np.floating]) -> NDArray[np.intp]:
        keys = sortable_keys(values)
        keys >>= np.uint64(self.level)
        # level >= 1: the top bit is clear; the fresh keys become the cells in place
        return self.index_keys(keys.view(np.int64), overwrite=True)

    def index_keys(self, keys: NDArray[np.int64], *, overwrite: bool = False) -> NDArray[np.intp]:
        """Cell index of keys already at :attr:`level` (in ``keys`` with ``overwrite``, else
        a new array)."""
        cells = np.clip(keys, self.base, self.base + self.cells + 1,
                        out=keys if overwrite else None)
        cells -= self.base
        return cells.view(np.intp)

    def crowding(self, edges: NDArray[np.float64]) -> float:
        """Share of edge gaps narrower than the cell holding their lower edge."""
        if edges.size < 2:
            return 0.0
        bucket = (sortable_keys(edges[:-1]) >> np.uint64(self.level)).astype(np.int64)
        width = self.widths[bucket - (self.base + 1)]
        return float(np.mean(np.diff(edges) < width))


class BinLocator:
    """Maps scores to bins ``b(s) = #{i : edges[i] <= s}``, exactly and fast.

    The result always equals ``np.searchsorted(edges, s, side="right")`` (including values on an
    edge and ``-inf``); see the module docstring for how.
    """

    _MAX_STEPS = 3

    def __init__(self, edges: NDArray[np.float64]) -> None:
        self.edges = edges
        self.n_edges = edges.size
        padded = np.concatenate(([-np.inf], edges, [np.inf]))
        self._lower = padded[:-1]  # bin b holds lower[b] <= s < upper[b]
        self._upper = padded[1:]
        self._cells: _ValueCells | _KeyCells | None = None
        with np.errstate(over="ignore", divide="ignore"):  # the overflow is what we test for
            span = edges[-1] - edges[0]
            # arithmetic needs the span, its inverse per cell and one span past either end
            extreme = edges.size > 1 and not (
                np.isfinite(edges[0] - span) and np.isfinite(edges[-1] + span)
                and np.isfinite(TABLE_CELLS / span) and np.isfinite(edges.size / span))
        self._uniform = not extreme and (edges.size == 1 or _is_uniform(edges))
        if self._uniform:
            self._low = edges[0]
            self._step = 1.0 if edges.size == 1 else span / (edges.size - 1)
            self._top = edges.size - 1
            return
        candidates: list[_ValueCells | _KeyCells] = [_KeyCells(edges)]
        if not extreme:
            candidates.insert(0, _ValueCells(edges, TABLE_CELLS))
        crowding = [c.crowding(edges) for c in candidates]
        self._cells = candidates[int(np.argmin(crowding))]
        self._table = _bracket_table(self._cells.lo, self._cells.hi)

    def __call__(self, values: NDArray[np.floating]) -> NDArray[np.intp]:
        """Bin index of every value (values must be finite or -inf; not validated here)."""
        if self._cells is not None:
            return self._bracketed(values)
        # Estimate (may be off by one through rounding; corrected below): grid cell + 1, so
        # that below-range values land on 0 and the cell count maps to the last bin.
        estimate = values - (self._low - self._step)
        estimate *= 1.0 / self._step
        np.clip(estimate, 0.0, self._top + 1, out=estimate)
        bins: NDArray[np.intp] = estimate.astype(np.intp)
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

    def _bracketed(self, values: NDArray[np.floating]) -> NDArray[np.intp]:
        assert self._cells is not None
        return self._from_cells(self._cells.index(values), values)

    def _from_cells(self, cells: NDArray[np.intp],
                    values: NDArray[np.floating]) -> NDArray[np.intp]:
        """Bins from each value's cell: the table's bracket, a binary search where open."""
        table = self._table
        found = table[cells]
        open_cells = np.flatnonzero(found == table.dtype.type(np.iinfo(table.dtype).max))
        bins = found.astype(np.intp)
        if open_cells.size:
            bins[open_cells] = np.searchsorted(self.edges, values[open_cells], side="right")
        return bins


class KeyLevelLocator(BinLocator):
    """A :class:`BinLocator` over key cells of a fixed ``level``, for callers that already hold
    each value's key at that level (:func:`costlib.thresholds.binning._binned_sketch.bin_and_sketch`
    shares them with a score sketch): :meth:`locate_keys` skips the key computation.

    Raises
    ------
    ValueError
        The edges span more than ``max_cells`` cells at ``level``.
    """

    def __init__(self, edges: NDArray[np.float64], level: int,
                 max_cells: int = 1 << 18) -> None:
        cells = _KeyCells(edges, level=level, max_cells=max_cells)  # may refuse: first
        super().__init__(edges)
        self._cells = self._key_cells = cells
        self._table = _bracket_table(cells.lo, cells.hi)

    def locate_keys(self, keys: NDArray[np.int64], values: NDArray[np.floating],
                    key_range: tuple[int, int] | None = None) -> NDArray[np.intp]:
        """Bins of ``values`` given their keys at the locator's level (``key_range``: the
        smallest and largest of them, when known: keys inside the table's cells need no
        clipping)."""
        cells = self._key_cells
        if key_range is not None and cells.base < key_range[0] \
                and key_range[1] <= cells.base + cells.cells:
            index = np.subtract(keys, cells.base)
            return self._from_cells(index.view(np.intp), values)
        return self._from_cells(cells.index_keys(keys), values)


_CACHE: OrderedDict[bytes, BinLocator] = OrderedDict()
_CACHE_SIZE = 32


def locator_for(edges: NDArray[np.float64], level: int | None = None) -> BinLocator:
    """The :class:`BinLocator` of ``edges`` (a :class:`KeyLevelLocator` at ``level`` when
    given), reused across calls with equal edges.

    A pipeline bins every batch against the same few edge arrays; a bracket table costs about
    a millisecond to build, as much as binning tens of thousands of values, so the last
    :data:`_CACHE_SIZE` locators are kept, keyed by the edges' bytes (locators are read-only).
    """
    key = np.ascontiguousarray(edges, dtype=np.float64).tobytes() + bytes([level or 0])
    locator = _CACHE.get(key)
    if locator is None:
        copy = np.array(edges, dtype=np.float64)
        made = BinLocator(copy) if level is None else KeyLevelLocator(copy, level)
        locator = _CACHE[key] = made
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return locator


def bin_indices(values: NDArray[np.floating], edges: NDArray[np.float64]) -> NDArray[np.intp]:
    """Bin of each score: ``b(s) = #{i : edges[i] <= s}`` (see :class:`BinLocator`).

    Parameters
    ----------
    values : ndarray of float
        Scores, finite or ``-inf`` (not validated here: callers validate once per batch).
    edges : ndarray of float64
        Strictly ascending candidate thresholds (see
        :func:`costlib.thresholds.binning._edges.check_edges`).
    """
    return locator_for(edges)(np.asarray(values, dtype=np.float64))
