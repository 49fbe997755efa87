"""Grids: weighted counts of rated positives, negatives and unrated rows on a lattice.

A grid holds, for every tuple of candidate thresholds, what that tuple would flag; sparse
partials are the form in which shards count rows and add up. Public face of the wing:

ThresholdGrid
    The dense lattice of counts (:mod:`._grid`): ``TP``, ``FP``, volume and unrated rows of
    every threshold tuple under either rule, exact at the candidate thresholds.
SparseGrid, SparseCounts, GRID_CHANNELS, census_partials, grouped_histograms, merge_sparse,
stack_partials, sum_sparse
    Sparse partial grids per group (:mod:`._sparse`): histograms of the occupied cells, added
    exactly in any order and on any sharding.
GridAccumulator, lattice_shape, is_lattice_shape
    One group's running sum of partial grids (:mod:`._accumulator`): sparse, dense or compact,
    merged in any order; what a distributed combiner holds per key.
RECALL_BOUNDS, RecallBounds, recall_bounds, total_positives_bounds
    Intervals of recall ``C / (C + M)`` and of all positives from an audited grid, valid with
    few or no audit events (:mod:`._recall_bounds`); regions flagged by one rule but not the
    other are in :mod:`._lattice_regions`.
"""

from costlib.thresholds.grid._accumulator import GridAccumulator, is_lattice_shape, lattice_shape
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._recall_bounds import (
    RECALL_BOUNDS,
    RecallBounds,
    recall_bounds,
    total_positives_bounds,
)
from costlib.thresholds.grid._sparse import (
    GRID_CHANNELS,
    SparseCounts,
    SparseGrid,
    census_partials,
    grouped_histograms,
    merge_sparse,
    stack_partials,
    sum_sparse,
)

__all__ = [
    "GRID_CHANNELS", "RECALL_BOUNDS", "GridAccumulator", "RecallBounds", "SparseCounts",
    "SparseGrid", "ThresholdGrid", "census_partials", "grouped_histograms", "is_lattice_shape",
    "lattice_shape", "merge_sparse", "recall_bounds", "stack_partials", "sum_sparse",
    "total_positives_bounds",
]
