"""Sparse cell counts: the non-zero cells of a grid's histograms, as partials that add up.

A batch of ``n`` rows occupies at most ``n`` cells of a ``(channels, *shape)`` label-by-cell
histogram (the flat codes of :mod:`costlib.thresholds.binning._cells`), where the dense histogram
has ``channels * prod(shape)`` cells. :class:`SparseCounts` keeps only those: strictly increasing
flat cells and their weighted counts. :func:`grouped_histograms` makes one partial per group of
validated rows by coding every row once by ``(group, channel, cell)`` and summing each run of
equal codes (after a sort, or through one dense ``bincount`` when the codes are few); a
partial's :meth:`SparseCounts.to_grid` is exactly the
:class:`costlib.thresholds.grid._grid.ThresholdGrid` of the same rows.

Partials add cell by cell (:func:`sum_sparse` through a lattice-sized array,
:func:`merge_sparse` in memory ``O(nnz)``). Counts are sums of multiples of ``2**-weight_bits``
(:func:`costlib.thresholds.binning._rows.quantize_weights`), so float64 sums do not round: the sum
of partials does not depend on how the rows were split or in which order they are added. Pickled,
a partial packs its cells as gaps and its counts as the narrowest exact dtype.
:class:`SparseGrid` is a compact grid: the partial of all rows with its edges.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning._bin_locator import locator_for
from costlib.thresholds.binning._cells import ROW_CHUNK, _channel_codes
from costlib.thresholds.binning._rows import DEFAULT_WEIGHT_BITS, quantize_weights
from costlib.thresholds.grid._grid import ThresholdGrid

__all__ = [
    "GRID_CHANNELS",
    "SparseCounts",
    "SparseGrid",
    "census_partials",
    "grouped_histograms",
    "merge_sparse",
    "stack_partials",
    "sum_sparse",
]


def _narrowest(values: NDArray[Any]) -> NDArray[Any]:
    """Non-negative integers in the narrowest unsigned dtype that holds them."""
    top = int(values.max()) if values.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return values.astype(dtype)
    return values


def _whole_or_float(counts: NDArray[np.float64]) -> NDArray[Any]:
    """Counts as the narrowest unsigned integers when that is exact, else as they are."""
    if counts.size == 0 or not (counts.min() >= 0 and counts.max() < 2**32):
        return counts
    if np.signbit(counts).any():  # -0.0 would come back as 0.0
        return counts
    whole = counts.astype(np.uint32)
    if not np.array_equal(whole, counts):
        return counts
    return _narrowest(whole)


def _unpack_counts(gaps: NDArray[Any], counts: NDArray[Any], channels: int) -> SparseCounts:
    """The inverse of :meth:`SparseCounts.__reduce__`."""
    return SparseCounts(cells=np.cumsum(gaps, dtype=np.int64),
                        counts=counts.astype(np.float64), channels=channels)


@dataclass(frozen=True)
class SparseCounts:
    """Non-zero cells of a ``(channels, *shape)`` label-by-cell histogram: a compact partial grid.

    ``cells`` are flat indices into the ``(channels, *shape)`` array (channel 0 = negatives,
    1 = positives, 2 = unrated when ``channels == 3``), strictly increasing; ``counts`` their
    weighted counts. Partials of a batch are this small (at most one entry per row) where a
    dense histogram would be ``channels * prod(shape)`` cells. ``channels`` defaults to 2, the
    rated-only layout.
    """

    cells: NDArray[np.int64]
    counts: NDArray[np.float64]
    channels: int = 2

    def add_to(self, dense: NDArray[np.float64]) -> None:
        """Add into a dense ``(channels, *shape)`` accumulator in place (cells are unique).

        A 2-channel partial may be added into a 3-channel accumulator (its cells are the first
        two channels); a 3-channel partial needs a 3-channel accumulator.
        """
        if dense.shape[0] < self.channels:
            raise ValueError(
                f"cannot add {self.channels}-channel counts into a {dense.shape[0]}-channel "
                "accumulator"
            )
        flat = dense.reshape(-1)
        flat[self.cells] += self.counts

    @property
    def nnz(self) -> int:
        """Number of stored (non-zero) cells."""
        return int(self.cells.size)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle packed (what crosses a shuffle): the increasing cells as the first cell and
        the gaps, and the counts, each in the narrowest dtype that holds them exactly (counts
        as unsigned integers when every count is a whole number below 2**32, else float64).
        Unpickling restores the same arrays exactly; a partial of 1M cells takes about 3-6
        bytes a cell instead of 16."""
        gaps = np.diff(self.cells, prepend=np.int64(0))
        return (_unpack_counts, (_narrowest(gaps), _whole_or_float(self.counts), self.channels))

    def with_channels(self, channels: int) -> SparseCounts:
        """The same counts in a layout of at least ``channels`` channels (no copy).

        Flat cell indices of channel ``c`` are ``c * size + cell`` in every layout, so widening
        a 2-channel partial to the 3-channel layout (an empty unrated channel) keeps its cells.
        """
        if channels <= self.channels:
            return self
        return SparseCounts(cells=self.cells, counts=self.counts, channels=channels)

    def to_grid(
        self,
        edges: Sequence[NDArray[np.float64]],
        *,
        names: Sequence[str] | None = None,
        weight_bits: int = DEFAULT_WEIGHT_BITS,
        audited_rows: int = 0,
        positive_rows: int | None = None,
        negative_rows: int | None = None,
    ) -> ThresholdGrid:
        shape = tuple(e.size + 1 for e in edges)
        dense = np.zeros((self.channels, *shape))
        self.add_to(dense)
        return ThresholdGrid(
            edges=tuple(edges), pos=dense[1], neg=dense[0],
            names=tuple(names) if names is not None else None, weight_bits=weight_bits,
            unrated=dense[2] if self.channels >= 3 else None, audited_rows=audited_rows,
            variance=dense[3:5] if self.channels >= 5 else None,
            design=dense[5:7] if self.channels >= 7 else None,
            census=dense[7:11] if self.channels == GRID_CHANNELS else None,
            positive_rows=positive_rows, negative_rows=negative_rows,
        )


#: Channels of a partial grid with audit data: negatives, positives, unrated (0-2), the
#: Horvitz–Thompson variance (3-4), the audit design (5-6) and the census (7-10) of
#: :class:`ThresholdGrid`.
GRID_CHANNELS = 11


def census_partials(
    group_codes: NDArray[np.intp],
    scores: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64] | None,
    edges: Sequence[NDArray[np.float64]],
    *,
    weight_bits: int = DEFAULT_WEIGHT_BITS,
) -> dict[int, SparseCounts]:
    """The census channels (:attr:`ThresholdGrid.census`) of rows rated with certainty, per
    group, as 4-channel partials: ``sum w`` of negatives and positives, then ``sum w²``
    (``w`` rounded to the weight resolution before squaring, as :meth:`ThresholdGrid.
    from_scores` does)."""
    n = scores.shape[0]
    w = quantize_weights(np.ones(n) if weights is None else np.asarray(weights, np.float64),
                         weight_bits)
    size = int(np.prod([e.size + 1 for e in edges]))
    first = grouped_histograms(group_codes, scores, labels, w, edges, weight_bits=weight_bits)
    second = grouped_histograms(group_codes, scores, labels,
                                quantize_weights(w * w, weight_bits), edges,
                                weight_bits=weight_bits)
    return stack_partials([(first, 0), (second, 2 * size)], 4)


def stack_partials(layers: Sequence[tuple[Mapping[int, SparseCounts], int]], channels: int
                   ) -> dict[int, SparseCounts]:
    """Per group code, the sum of ``layers`` of partials, each moved ``offset`` flat cells up
    (``offset = first channel * cells per channel``), as ``channels``-channel partials."""
    out = {}
    for code in sorted({c for partials, _ in layers for c in partials}):
        out[code] = merge_sparse([
            SparseCounts(cells=partials[code].cells + offset, counts=partials[code].counts,
                         channels=channels)
            for partials, offset in layers if code in partials])
    return out


def grouped_histograms(
    group_codes: NDArray[np.intp],
    scores: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64] | None,
    edges: Sequence[NDArray[np.float64]],
    *,
    weight_bits: int = DEFAULT_WEIGHT_BITS,
    unrated: NDArray[np.bool_] | None = None,
    variances: NDArray[np.float64] | None = None,
    bins: Sequence[NDArray[np.intp]] | None = None,
) -> dict[int, SparseCounts]:
    """Histograms of already validated rows per group, as sparse partials.

    Exactly the counts :meth:`ThresholdGrid.from_scores` computes for each group's rows (same
    binning, same weight rounding): ``partials[g].to_grid(edges)`` equals the grid of group
    ``g``'s rows. Rows are coded once by (group, channel, cell) and sorted; each run of equal
    codes is one non-zero cell. Without ``unrated`` the partials have the 2-channel layout (as
    before); with an ``unrated`` row mask they have 3 channels, channel 2 = unrated weight.
    With ``variances`` (per row, :func:`~costlib.thresholds.binning._rows.ht_variance_weights`;
    rated rows with a positive value count) they have 5: channels 3 and 4 hold the Horvitz–Thompson
    variance weights of the rated negatives and positives (:attr:`ThresholdGrid.variance`).
    ``bins``: each classifier's bin per row
    (:func:`costlib.thresholds.binning._binned_sketch.bin_and_sketch` locates them while it sketches
    the rows), else located here.
    """
    locators = [locator_for(e) for e in edges]
    shape = tuple(e.size + 1 for e in edges)
    size = int(np.prod(shape))
    channels = 5 if variances is not None else (2 if unrated is None else 3)
    n = scores.shape[0]
    keys = np.empty(n, dtype=np.int64)
    for start in range(0, n, ROW_CHUNK):
        stop = start + ROW_CHUNK
        keys[start:stop] = _channel_codes(
            scores[start:stop], labels[start:stop],
            None if unrated is None else unrated[start:stop], locators, shape,
            None if bins is None else [b[start:stop] for b in bins],
        )
    keys += np.asarray(group_codes, dtype=np.int64) * (channels * size)
    if variances is not None:
        counted = np.asarray(variances) > 0
        if unrated is not None:
            counted &= ~unrated
        extra = np.flatnonzero(counted)
        keys = np.concatenate([keys, keys[extra] + 3 * size])  # rated channel c -> 3 + c
        base = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
        weights = np.concatenate([base, np.asarray(variances, dtype=np.float64)[extra]])
        n = keys.size
    if n == 0:
        return {}
    quantized = None if weights is None else quantize_weights(weights, weight_bits)
    n_codes = (int(np.max(group_codes)) + 1) * channels * size
    if n_codes <= DENSE_CODES_PER_ROW * n and (quantized is None or (quantized > 0).all()):
        return _dense_partials(keys, quantized, n_codes, channels, size)
    if quantized is None:
        if n_codes <= np.iinfo(np.int32).max:  # int32 keys sort about twice as fast
            keys = keys.astype(np.int32)
        keys.sort()
        run_weights = None
    else:
        order = np.argsort(keys)
        keys = keys[order]
        run_weights = quantized[order]
    starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))
    unique = keys[starts].astype(np.int64, copy=False)
    if run_weights is None:
        counts = np.diff(np.append(starts, n)).astype(np.float64)
    else:
        counts = np.add.reduceat(run_weights, starts)
    return _per_group(unique, counts, channels, size)


def _per_group(codes: NDArray[np.int64], counts: NDArray[np.float64], channels: int,
               size: int) -> dict[int, SparseCounts]:
    """Ascending (group, channel, cell) codes with their counts, split into each group's
    sparse partial."""
    groups = codes // (channels * size)
    cells = codes - groups * (channels * size)
    bounds = np.concatenate(([0], np.flatnonzero(groups[1:] != groups[:-1]) + 1, [groups.size]))
    return {
        int(groups[a]): SparseCounts(cells=cells[a:b], counts=counts[a:b], channels=channels)
        for a, b in itertools.pairwise(bounds.tolist())
    }


#: :func:`grouped_histograms` counts through one dense ``bincount`` over every (group, channel,
#: cell) code when there are at most this many codes per row (else it sorts the rows' codes).
DENSE_CODES_PER_ROW = 16


def _dense_partials(keys: NDArray[np.int64], weights: NDArray[np.float64] | None, n_codes: int,
                    channels: int, size: int) -> dict[int, SparseCounts]:
    """:func:`grouped_histograms`' partials from one ``bincount`` (no sort): the same arrays.

    Only called when every weight is positive, so a code has rows exactly when its sum is
    non-zero (the sort path keeps every code that has rows). Sums of quantised weights are
    exact in any order, so they equal the sorted runs' sums bit for bit.
    """
    dense: NDArray[np.float64]
    if weights is None:
        dense = np.bincount(keys, minlength=n_codes).astype(np.float64)
    else:
        dense = np.bincount(keys, weights=weights, minlength=n_codes).astype(np.float64, copy=False)
    occupied = np.flatnonzero(dense != 0).astype(np.int64, copy=False)  # (bool mask: fast)
    return _per_group(occupied, dense[occupied], channels, size)


def sum_sparse(partials: Sequence[SparseCounts], n_cells: int) -> SparseCounts:
    """The sum of sparse partials over the same lattice (``n_cells = channels * prod(shape)``).

    Exact: counts are multiples of the weight resolution, so float64 sums do not round. All
    partials must have the same number of channels (the result keeps it).
    """
    if not partials:
        return SparseCounts(cells=np.zeros(0, dtype=np.int64), counts=np.zeros(0))
    channels = {p.channels for p in partials}
    if len(channels) != 1:
        raise ValueError(f"cannot sum sparse partials with different channels {sorted(channels)}")
    dense = np.bincount(
        np.concatenate([p.cells for p in partials]),
        weights=np.concatenate([p.counts for p in partials]),
        minlength=n_cells,
    ).astype(np.float64, copy=False)  # weighted: already float64
    cells = np.flatnonzero(dense != 0)  # a bool mask's nonzero is several times faster
    return SparseCounts(cells=cells.astype(np.int64), counts=dense[cells],
                        channels=channels.pop())


#: :func:`merge_sparse` sums through a dense scratch array when the entries' cell span is at
#: most this many cells per entry (else it sorts them).
MERGE_SCRATCH_SPAN = 16


def merge_sparse(partials: Sequence[SparseCounts]) -> SparseCounts:
    """The sum of sparse partials without a lattice-sized array: memory ``O(nnz)``.

    Equal to :func:`sum_sparse` (exact for the same reason: counts are multiples of the weight
    resolution, so float64 sums do not round and the order of addition does not matter), but
    its memory is proportional to the stored cells, not to the lattice: the entries (``nnz``
    of them, sorted cells per partial) are summed by one ``bincount`` over their span when the
    span is at most :data:`MERGE_SCRATCH_SPAN` cells per entry, else merged by a stable sort of
    the concatenated sorted runs (``O(nnz log len(partials))``). Partials may mix 2 and
    3 channels (the result has the most; see :meth:`SparseCounts.with_channels`). Cells whose
    counts sum to zero are dropped, as :func:`sum_sparse` drops them.
    """
    channels = max((p.channels for p in partials), default=2)
    partials = [p for p in partials if p.nnz]
    if not partials:
        return SparseCounts(cells=np.zeros(0, dtype=np.int64), counts=np.zeros(0),
                            channels=channels)
    if len(partials) == 1:
        only = partials[0]
        keep = only.counts != 0
        return SparseCounts(cells=only.cells[keep], counts=only.counts[keep], channels=channels)
    cells = np.concatenate([p.cells for p in partials])
    counts = np.concatenate([p.counts for p in partials])
    span = int(max(p.cells[-1] for p in partials)) + 1
    if span <= MERGE_SCRATCH_SPAN * cells.size:
        # Entries are dense in their span: one bincount into a transient scratch array of
        # ``span`` cells (at most MERGE_SCRATCH_SPAN floats per entry) beats sorting them.
        sums = np.bincount(cells, weights=counts, minlength=span).astype(np.float64, copy=False)
        occupied = np.flatnonzero(sums != 0)
        return SparseCounts(cells=occupied.astype(np.int64, copy=False),
                            counts=sums[occupied], channels=channels)
    # Each partial's cells are sorted: a stable sort (timsort) of their concatenation merges
    # sorted runs in O(nnz log len(partials)), faster than np.unique's general sort.
    order = np.argsort(cells, kind="stable")
    cells = cells[order]
    starts = np.flatnonzero(np.concatenate(([True], cells[1:] != cells[:-1])))
    sums = np.add.reduceat(counts[order], starts)
    keep = sums != 0
    return SparseCounts(cells=cells[starts[keep]].astype(np.int64, copy=False),
                        counts=sums[keep], channels=channels)


@dataclass(frozen=True)
class SparseGrid:
    """A threshold grid kept compact: the occupied cells of its histograms, and its edges.

    What the pipeline hands from aggregation to optimisation: memory proportional to the
    occupied cells (at most one per row), where a :class:`ThresholdGrid` holds three dense
    arrays of ``prod(B_j + 1)`` cells. :meth:`to_grid` makes the dense grid when it is needed
    (exactly the grid of the same rows).
    """

    edges: tuple[NDArray[np.float64], ...]
    counts: SparseCounts
    names: tuple[str, ...] | None = None
    weight_bits: int = DEFAULT_WEIGHT_BITS
    audited_rows: int = 0
    #: rated positive / negative rows with a positive weight (``ThresholdGrid.positive_rows``)
    positive_rows: int | None = None
    negative_rows: int | None = None

    def with_edges(self, edges: Sequence[NDArray[np.float64]]) -> SparseGrid:
        """The same grid with its edges (a pipeline may carry only the lattice shape in
        ``edges`` until the edges are needed; they must give that shape)."""
        edges = tuple(np.asarray(e, dtype=np.float64) for e in edges)
        shape = tuple(int(n) for n in self.edges) if all(
            isinstance(n, (int, np.integer)) for n in self.edges) else None
        if shape is not None and shape != tuple(e.size + 1 for e in edges):
            raise ValueError(f"edges give lattice {tuple(e.size + 1 for e in edges)}, the "
                             f"counts were made on {shape}")
        return SparseGrid(edges=edges, counts=self.counts, names=self.names,
                          weight_bits=self.weight_bits, audited_rows=self.audited_rows,
                          positive_rows=self.positive_rows, negative_rows=self.negative_rows)

    def to_grid(self) -> ThresholdGrid:
        """The dense :class:`ThresholdGrid` (unrated channel zeros when there is none)."""
        return self.counts.to_grid(self.edges, names=self.names, weight_bits=self.weight_bits,
                                   audited_rows=self.audited_rows,
                                   positive_rows=self.positive_rows,
                                   negative_rows=self.negative_rows)
