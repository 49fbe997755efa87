"""Grids per group: the rows that enter them, and the combiners that add partial grids.

:class:`SumGrids` is the combining accumulator of the partial grids
(:class:`~costlib_pipelines.recalibrate.aggregating.AggregateBatches`; adds partials in place
into a dense array it owns; compacts to sparse before the shuffle); :class:`SumBootstrapGrids`
adds bootstrap replicate grids. :func:`grid_rows` (:func:`audit_rows`) are the rows of a
validated batch as they enter the grids; :func:`dense_grid` makes a compact grid dense.
"""

from __future__ import annotations

import apache_beam as beam
import numpy as np

from costlib.audit import audit_weights
from costlib.thresholds.grid import (
    GridAccumulator,
    SparseGrid,
    ThresholdGrid,
    is_lattice_shape,
    lattice_shape,
)
from costlib.thresholds.loop import SparseBootstrapGrids
from costlib_pipelines.config import RunConfig

__all__ = [
    "SumBootstrapGrids",
    "SumGrids",
    "audit_rows",
    "dense_grid",
    "grid_rows",
    "lattice_shape",
]


class SumGrids(beam.CombineFn):
    """Adds sparse partial grids per group: a Beam shell over
    :class:`costlib.thresholds.grid.GridAccumulator` (inputs never modified).

    Elements are ``(lattice, SparseCounts, rated_rows)``: a partial grid (2 channels, negatives
    and positives; or 3 with the unrated weight as channel 2) and how many valid rated rows it
    holds; ``lattice`` is the edges per classifier or, as the pipeline sends them, only the
    lattice's shape (a tuple of ints: 2 bytes a group instead of the edges' kilobytes; the
    optimiser attaches the edges, :func:`optimize_one`). With ``columns.audit_probability``
    they are ``(lattice, SparseCounts, rated_rows, audited_rows)``, the last the rated audit
    rows (p < 1), which the grid's
    ``audited_rows`` sums. The pipeline sends ``(lattice, SparseCounts, rated_rows,
    audited_rows, positive_rows, negative_rows)``: the last two the rated positive and negative
    rows with a positive weight, unweighted, which the grid's ``positive_rows``/``negative_rows``
    sum (``min_rated`` counts them; the channels hold weights: estimated rows or money). A group
    any of whose partials lacks them gets ``None`` there (the weighted totals stand in).
    The output is ``None`` when the key had no rated row at all (only
    unrated rows: like a group without rows, it gets no operating point); otherwise a
    :class:`costlib.thresholds.ThresholdGrid`, or with ``compact_output=True`` (what the
    pipeline uses) a :class:`costlib.thresholds.grid.SparseGrid` that the optimising stage
    makes dense, one group at a time.

    The accumulator is ``None`` (no partial yet) or a :class:`GridAccumulator`, sparse while
    the group is small and dense once :attr:`DENSE_FRACTION` / :attr:`DENSE_WORK` say so (see
    its doc; on 5M rows in 100 groups, auto edges, a fraction of 0.125 saved 22 ms of 65 and
    held 40 MB instead of 6.5). :meth:`compact` makes it one sparse partial before Beam
    encodes it for the shuffle.
    """

    #: A group's accumulator becomes dense when its stored entries reach this share of cells.
    DENSE_FRACTION = GridAccumulator.DENSE_FRACTION
    #: ... or when the entries of the partials added to it reach this many times its cells.
    DENSE_WORK = GridAccumulator.DENSE_WORK

    def __init__(self, config: RunConfig, *, compact_output: bool = False):
        self.names = config.classifiers
        self.compact_output = compact_output

    def create_accumulator(self):
        return None

    def get_accumulator_coder(self):
        return _AccumulatorCoder()

    def add_input(self, acc, partial):
        edges, counts, rated, *rest = partial
        row_counts = (int(rest[1]), int(rest[2])) if len(rest) >= 3 else None
        if acc is None:
            acc = GridAccumulator.empty(edges)
        return acc.add(counts, rated, int(rest[0]) if rest else 0, row_counts,
                       dense_fraction=self.DENSE_FRACTION, dense_work=self.DENSE_WORK)

    def merge_accumulators(self, accs):
        accs = [acc for acc in accs if acc is not None]
        if not accs:
            return None
        return GridAccumulator.merge(accs, dense_fraction=self.DENSE_FRACTION,
                                     dense_work=self.DENSE_WORK)

    def compact(self, acc):
        return None if acc is None else acc.compact()

    def extract_output(self, acc):
        if acc is None or acc.rated_rows == 0:
            return None
        if self.compact_output:
            return acc.to_sparse_grid(self.names)
        if is_lattice_shape(acc.lattice):
            raise ValueError("SumGrids: partials keyed by lattice shape need compact_output=True "
                             "(the optimiser attaches the edges)")
        return acc.to_grid(self.names)


class _AccumulatorCoder(beam.coders.Coder):
    """A :class:`GridAccumulator` (or None) as the plain tuple of its fields in Beam's
    ``FastPrimitivesCoder``: what a lifted combine shuffles once per group and bundle, without
    the class path a pickled object would repeat (60 bytes on a 0.3 KB small group)."""

    def __init__(self):
        self._fields = beam.coders.FastPrimitivesCoder()

    def encode(self, value):
        return self._fields.encode(None if value is None else value.fields())

    def decode(self, encoded):
        fields = self._fields.decode(encoded)
        return None if fields is None else GridAccumulator(*fields)

    def is_deterministic(self):
        return False


class SumBootstrapGrids(beam.CombineFn):
    """Adds replicate grids by occupied cell
    (:class:`~costlib.thresholds.loop._bootstrap.SparseBootstrapGrids`; exact, like
    :class:`SumGrids`). Partials are held in a list and merged in one step once :attr:`PENDING`
    of them have arrived, and on compacting and output, so merging ``n`` partials costs one sort
    of their cells rather than ``n`` pairwise unions."""

    PENDING = 64

    def create_accumulator(self):
        return []

    def _settle(self, acc):
        return [SparseBootstrapGrids.sum(acc)] if len(acc) > 1 else acc

    def add_input(self, acc, grids: SparseBootstrapGrids):
        acc.append(grids)
        return self._settle(acc) if len(acc) >= self.PENDING else acc

    def merge_accumulators(self, accs):
        merged = [part for acc in accs for part in acc]
        return self._settle(merged) if len(merged) >= self.PENDING else merged

    def compact(self, acc):
        return self._settle(acc)

    def extract_output(self, acc):
        return SparseBootstrapGrids.sum(acc) if acc else None


def grid_rows(batch):
    """Rows of a validated batch as they enter the grids, in :func:`audit_rows`' form.

    With audit probabilities, :func:`audit_rows`; without, every valid row (no copies: ``rows``
    and ``audited`` are None), unrated ones masked by ``unrated`` (None when there is none).
    """
    if batch.audit_probabilities is not None:
        return audit_rows(batch)
    unrated = None if batch.rated.all() else ~batch.rated
    return (None, batch.group_codes, batch.scores, batch.labels, batch.weights, unrated, None)


def audit_rows(batch):
    """Rows of a validated batch with audit probabilities as they enter the grids.

    Returns ``(rows, group_codes, scores, labels, weights, unrated, audited)`` over the rows
    that enter (:func:`costlib.audit.audit_weights`: unrated rows with ``0 < p < 1`` are
    represented by the audit sample and left out), with weights ``w / p`` on rated rows,
    ``unrated`` the gap mask (``None`` when there is no gap) and ``audited`` the rated audit
    rows (p < 1).
    """
    design = audit_weights(None if batch.rated.all() else ~batch.rated,
                          batch.audit_probabilities, batch.weights)
    rows = np.flatnonzero(design.keep)
    unrated = design.unrated.take(rows)
    return (rows, batch.group_codes.take(rows), batch.scores.take(rows, axis=0),
            batch.labels.take(rows), design.weights.take(rows),
            unrated if unrated.any() else None, design.audited.take(rows))


def dense_grid(grid, edges=None) -> ThresholdGrid:
    """A compact grid made dense (with ``edges`` when it carries only its lattice shape); a
    dense grid as it is."""
    if isinstance(grid, SparseGrid):
        if edges is not None and is_lattice_shape(grid.edges):
            grid = grid.with_edges(edges)
        grid = grid.to_grid()
    return grid
