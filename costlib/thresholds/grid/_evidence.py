"""Rows of evidence of a grid: its rated rows counted one each, whatever they weigh.

A grid's histograms hold weights: audit weights ``w / π`` make one audited row an estimate of
``1 / π`` rows, and cost weights make it an amount of money. How much evidence a grid holds is
still its number of rated rows; ``min_positives``/``min_negatives`` of
:func:`costlib.thresholds.recalibrate_grids` count these
(:attr:`~costlib.thresholds.ThresholdGrid.positive_rows`, ``negative_rows``).
"""

from __future__ import annotations

from typing import Protocol, TypedDict

import numpy as np
from numpy.typing import NDArray

__all__ = ["RowCounts", "evidence_rows", "summed_rows"]


class RowCounts(TypedDict):
    """A grid's rows of evidence, as its keyword arguments."""

    positive_rows: int | None
    negative_rows: int | None


class _Counted(Protocol):
    @property
    def positive_rows(self) -> int | None: ...

    @property
    def negative_rows(self) -> int | None: ...


def evidence_rows(labels: NDArray[np.bool_], weights: NDArray[np.float64] | None,
                  unrated: NDArray[np.bool_] | None) -> RowCounts:
    """``positive_rows`` and ``negative_rows`` of rows entering a grid: the rated rows (not
    ``unrated``) with a positive weight (all rated rows when ``weights`` is None)."""
    entered = np.ones(labels.shape[0], dtype=bool) if unrated is None else ~unrated
    if weights is not None:
        entered &= weights > 0
    return RowCounts(positive_rows=int(np.count_nonzero(entered & labels)),
                     negative_rows=int(np.count_nonzero(entered & ~labels)))


def summed_rows(a: _Counted, b: _Counted) -> RowCounts:
    """The row counts of the union of two grids' rows (None where either does not know)."""
    pos = (None if a.positive_rows is None or b.positive_rows is None
           else a.positive_rows + b.positive_rows)
    neg = (None if a.negative_rows is None or b.negative_rows is None
           else a.negative_rows + b.negative_rows)
    return RowCounts(positive_rows=pos, negative_rows=neg)
