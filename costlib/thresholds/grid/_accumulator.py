"""The running sum of one group's partial grids: a typed accumulator that any combiner wraps.

:class:`GridAccumulator` adds sparse partial grids (:class:`SparseCounts`) and their row tallies
and turns the sum into a grid. A distributed combiner (the pipelines' ``SumGrids``) only holds
one per key and calls :meth:`GridAccumulator.add`, :meth:`GridAccumulator.merge`,
:meth:`GridAccumulator.compact` and :meth:`GridAccumulator.to_sparse_grid`; the library never
imports an engine, so the sums are tested here without one.

Counts are sums of multiples of the weight resolution, so float64 additions do not round: every
form of the accumulator (pending sparse partials, a dense array, one compact partial) holds the
same exact sums, and the grid does not depend on the order of adds and merges nor on how the
rows were split into partials.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._sparse import GRID_CHANNELS, SparseCounts, SparseGrid, merge_sparse

__all__ = ["GridAccumulator", "Lattice", "is_lattice_shape", "lattice_shape"]

#: The bin lattice of a grid: its edges per classifier, or only its shape (ints per axis).
Lattice = tuple[int, ...] | Sequence[NDArray[np.float64]]

def is_lattice_shape(lattice: Any) -> bool:
    """Whether ``lattice`` is a shape (ints per axis) rather than edges per classifier."""
    return all(isinstance(n, (int, np.integer)) for n in lattice)


def lattice_shape(lattice: Any) -> tuple[int, ...]:
    """The bin lattice's shape ``(B_1 + 1, ..., B_k + 1)`` from the edges per classifier
    (``B_j`` edges each), or the shape itself (ints)."""
    if is_lattice_shape(lattice):
        return tuple(int(n) for n in lattice)
    return tuple(e.size + 1 for e in lattice)


def _channels_of(part: SparseCounts | NDArray[np.float64]) -> int:
    return part.channels if isinstance(part, SparseCounts) else int(part.shape[0])


def _sum_rows(a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
    """``(positive_rows, negative_rows)`` of two sums (None when either is unknown)."""
    return None if a is None or b is None else (a[0] + b[0], a[1] + b[1])


@dataclass
class GridAccumulator:
    """One group's sum of partial grids, and the rows behind it.

    The sum is held in one of three forms (``counts``), all exact:

    - a list of :class:`SparseCounts` partials (*sparse*: memory proportional to the occupied
      cells, so a worker can hold the sums of 100,000 small groups), merged by
      :func:`merge_sparse` whenever the pending partials hold more entries than the merged one;
    - a dense ``(channels, *shape)`` array once the stored entries reach ``dense_fraction`` of
      the lattice's ``channels * prod(shape)`` cells (dense is then no larger than sparse, and
      adding into it is the fastest), or once the entries of all partials added reach
      ``dense_work`` times the cells: a group that keeps receiving partials whose cells mostly
      coincide would otherwise merge its whole union every few adds, while adding into a dense
      array costs one pass over the entries (at 0.5 the array, 8 bytes a cell, is no larger
      than the entries it was sent, 16 bytes each);
    - a single :class:`SparseCounts` after :meth:`compact` (what crosses a shuffle: most cells
      of a group's grid are empty; pickled packed, see :meth:`SparseCounts.__reduce__`).

    A 2-channel partial widens to more channels by adding empty channels (exact).

    Attributes
    ----------
    counts : list of SparseCounts, ndarray or SparseCounts
        The summed channels, in one of the forms above.
    lattice : tuple of int, or sequence of ndarray
        The edges per classifier, or only the lattice's shape (then the grid gets its edges
        later, :meth:`SparseGrid.with_edges`).
    rated_rows : int
        Valid rated rows in the partials: :math:`\\sum_i r_i`.
    audited_rows : int
        Rated audit rows (``p < 1``) in the partials, the grid's ``audited_rows``.
    entries_added : int
        Stored entries of the partials added while sparse (the work that decides going dense).
    row_counts : (int, int) or None
        Rated positive and negative rows with a positive weight, unweighted; None once any
        partial came without them (the grid's weighted totals then stand in).
    """

    counts: list[SparseCounts] | NDArray[np.float64] | SparseCounts
    lattice: Lattice
    rated_rows: int = 0
    audited_rows: int = 0
    entries_added: int = 0
    row_counts: tuple[int, int] | None = (0, 0)

    #: Default share of the cells at which the stored entries make the sum dense.
    DENSE_FRACTION: ClassVar[float] = 0.125
    #: Default multiple of the cells at which the entries added make the sum dense.
    DENSE_WORK: ClassVar[float] = 0.5

    def fields(self) -> tuple[Any, ...]:
        """The fields in order: ``GridAccumulator(*acc.fields())`` is ``acc`` again (a
        combiner may send this plain tuple through a shuffle instead of the object)."""
        return (self.counts, self.lattice, self.rated_rows, self.audited_rows,
                self.entries_added, self.row_counts)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as the fields alone (no field names; the counts packed by
        :meth:`SparseCounts.__reduce__`)."""
        return (GridAccumulator, self.fields())

    @classmethod
    def empty(cls, lattice: Lattice) -> GridAccumulator:
        """An accumulator of no partials on ``lattice`` (sparse, row counts zero)."""
        return cls(counts=[], lattice=lattice)

    @property
    def channels(self) -> int:
        """Channels of the sum (2 when no partial was added)."""
        counts = self.counts
        if isinstance(counts, list):
            return max((c.channels for c in counts), default=2)
        return _channels_of(counts)

    def cells(self, channels: int) -> int:
        """Cells of a ``(channels, *shape)`` array on this lattice."""
        return channels * math.prod(lattice_shape(self.lattice))

    def _parts(self) -> list[SparseCounts | NDArray[np.float64]]:
        counts = self.counts
        return list(counts) if isinstance(counts, list) else [counts]

    def dense(self, channels: int = 2) -> NDArray[np.float64]:
        """The sum as a new dense ``(c, *shape)`` array, ``c`` at least ``channels`` (the
        accumulator is not changed)."""
        parts = self._parts()
        channels = max([channels, *(_channels_of(p) for p in parts)])
        array = np.zeros((channels, *lattice_shape(self.lattice)))
        for part in parts:
            if isinstance(part, SparseCounts):
                part.add_to(array)
            else:
                array[: part.shape[0]] += part
        return array

    def _settle(self, dense_fraction: float | None, dense_work: float | None) -> None:
        """Merge the pending partials, or go dense (see the class doc; the thresholds default
        to :attr:`DENSE_FRACTION` and :attr:`DENSE_WORK`)."""
        fraction = self.DENSE_FRACTION if dense_fraction is None else dense_fraction
        work = self.DENSE_WORK if dense_work is None else dense_work
        counts = self.counts
        if not isinstance(counts, list) or len(counts) < 2:
            return
        total = sum(c.nnz for c in counts)
        channels = self.channels
        cells = self.cells(channels)
        if total >= fraction * cells or self.entries_added >= work * cells:
            self.counts = self.dense(channels)
        elif total - counts[0].nnz > counts[0].nnz:  # pending outweigh the merged: merge
            self.counts = [merge_sparse(counts)]

    def add(self, counts: SparseCounts, rated_rows: int, audited_rows: int = 0,
            row_counts: tuple[int, int] | None = None, *,
            dense_fraction: float | None = None,
            dense_work: float | None = None) -> GridAccumulator:
        """Add one partial grid in place; returns ``self``.

        ``counts`` is the partial's cells (never modified), ``rated_rows`` and
        ``audited_rows`` its rated and rated audit rows, ``row_counts`` its
        ``(positive_rows, negative_rows)`` or None when unknown.
        """
        self.row_counts = _sum_rows(self.row_counts, row_counts)
        if isinstance(self.counts, SparseCounts):
            self.counts = [self.counts]
        if isinstance(self.counts, list):
            self.counts.append(counts)
            self.entries_added += counts.nnz
            self._settle(dense_fraction, dense_work)
        else:
            if self.counts.shape[0] < counts.channels:
                self.counts = self.dense(counts.channels)
            counts.add_to(self.counts)
        self.rated_rows += int(rated_rows)
        self.audited_rows += int(audited_rows)
        return self

    @staticmethod
    def merge(accumulators: Sequence[GridAccumulator], *,
              dense_fraction: float | None = None,
              dense_work: float | None = None) -> GridAccumulator:
        """A new accumulator holding the sum of ``accumulators`` (at least one; none of them is
        changed). Dense when any of them is dense, else sparse and settled."""
        first = accumulators[0]
        row_counts = first.row_counts
        for acc in accumulators[1:]:
            row_counts = _sum_rows(row_counts, acc.row_counts)
        parts = [part for acc in accumulators for part in acc._parts()]
        merged = GridAccumulator(
            counts=parts,  # type: ignore[arg-type]  # settled to one form just below
            lattice=first.lattice,
            rated_rows=sum(acc.rated_rows for acc in accumulators),
            audited_rows=sum(acc.audited_rows for acc in accumulators),
            entries_added=sum(acc.entries_added for acc in accumulators),
            row_counts=row_counts,
        )
        if any(isinstance(p, np.ndarray) for p in parts):  # a new array: inputs stay untouched
            merged.counts = merged.dense(2)
        else:
            merged._settle(dense_fraction, dense_work)
        return merged

    def compact(self) -> GridAccumulator:
        """The same sum as one :class:`SparseCounts` (``self`` when it is one already; a new
        accumulator otherwise, ``self`` unchanged)."""
        counts = self.counts
        if isinstance(counts, SparseCounts):
            return self
        if isinstance(counts, list):
            compact = merge_sparse(counts)
        else:
            flat = counts.reshape(-1)
            cells = np.flatnonzero(flat != 0)  # a bool mask's nonzero is several times faster
            compact = SparseCounts(cells=cells.astype(np.int64), counts=flat[cells],
                                   channels=int(counts.shape[0]))
        return GridAccumulator(counts=compact, lattice=self.lattice,
                               rated_rows=self.rated_rows, audited_rows=self.audited_rows,
                               entries_added=self.entries_added, row_counts=self.row_counts)

    @property
    def positive_rows(self) -> int | None:
        """Rated positive rows with a positive weight (None when unknown)."""
        return None if self.row_counts is None else int(self.row_counts[0])

    @property
    def negative_rows(self) -> int | None:
        """Rated negative rows with a positive weight (None when unknown)."""
        return None if self.row_counts is None else int(self.row_counts[1])

    def to_sparse_grid(self, names: Sequence[str] | None = None) -> SparseGrid:
        """The sum as a compact :class:`SparseGrid` (with the lattice as it is: edges, or only
        the shape)."""
        compact = self.compact().counts
        assert isinstance(compact, SparseCounts)
        return SparseGrid(edges=tuple(self.lattice),  # type: ignore[arg-type]
                          counts=compact, names=None if names is None else tuple(names),
                          audited_rows=self.audited_rows, positive_rows=self.positive_rows,
                          negative_rows=self.negative_rows)

    def to_grid(self, names: Sequence[str] | None = None) -> ThresholdGrid:
        """The sum as a dense :class:`ThresholdGrid` (needs the edges, not only the shape).

        Channels 0-1 are the negatives and positives; 2 the unrated weight, 3-4 the variance,
        5-6 the audit design and 7-10 the census, when the partials carry them.
        """
        if is_lattice_shape(self.lattice):
            raise ValueError("a grid summed on a lattice shape needs its edges: make the "
                             "compact grid (to_sparse_grid) and attach them (with_edges)")
        dense = self.dense(2)
        return ThresholdGrid(
            edges=tuple(self.lattice),  # type: ignore[arg-type]
            pos=dense[1], neg=dense[0],
            names=None if names is None else tuple(names),
            unrated=dense[2] if dense.shape[0] >= 3 else None,
            audited_rows=self.audited_rows,
            variance=dense[3:5] if dense.shape[0] >= 5 else None,
            design=dense[5:7] if dense.shape[0] >= 7 else None,
            census=dense[7:11] if dense.shape[0] == GRID_CHANNELS else None,
            positive_rows=self.positive_rows, negative_rows=self.negative_rows,
        )
