"""Binning rows against candidate thresholds and sketching their scores in one pass.

A run that places its edges from the previous run's sketch (carried auto edges) must bin every
row against those edges *and* sketch the rows for the next run. Both start from the same
per-row work, the order-preserving key of the score (:func:`costlib.score_sketch.sortable_keys`)
at the sketch's coarse level :data:`~costlib.score_sketch.COARSE_LEVEL`:

- the bin is read from a bracket table over the key cells of that level
  (:class:`costlib.bin_locator.KeyLevelLocator`; a binary search only in cells that hold an
  edge);
- the scored and rated channels of the sketch are one ``bincount`` over
  ``2 (key - low) + rated`` (:class:`costlib.score_sketch.EdgeSketch`).

The results are exactly those of :meth:`costlib.bin_locator.BinLocator.__call__` and
:meth:`costlib.score_sketch.EdgeSketch.from_rows` on the same rows; where the shared path does
not apply (the edges or the scores span too many key cells at the coarse level) each is
computed on its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from costlib.bin_locator import KeyLevelLocator, locator_for
from costlib.score_sketch import (
    COARSE_LEVEL,
    DEFAULT_CAPACITY,
    EdgeSketch,
    ScoreSketch,
    bucket_sketches,
    key_span,
    short_span,
    sortable_keys,
)

__all__ = ["bin_and_sketch"]


def bin_and_sketch(
    scores: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64] | None,
    unrated: NDArray[np.bool_] | None,
    edges: Sequence[NDArray[np.float64]],
    *,
    capacity: int = DEFAULT_CAPACITY,
    weight_bits: int = 16,
) -> tuple[list[NDArray[np.intp]], list[EdgeSketch]]:
    """Each classifier's bin per row and its edge sketch, from one key computation.

    Parameters
    ----------
    scores : ndarray of shape (n, k)
        Validated scores (finite, or ``-inf``: did not score).
    labels : ndarray of bool, shape (n,)
        Meaningful where rated.
    weights : ndarray of shape (n,), optional
        Non-negative row weights (default 1).
    unrated : ndarray of bool, shape (n,), optional
        Rows scored but not rated.
    edges : sequence of k ndarrays
        Candidate thresholds per classifier.

    Returns
    -------
    bins : list of k ndarrays of intp
        ``searchsorted(edges[j], scores[:, j], side="right")``.
    sketches : list of k EdgeSketch
        ``EdgeSketch.from_rows(scores[:, j], labels, weights, unrated)``.
    """
    from costlib.grid import quantize_weights

    k = scores.shape[1]
    rated = None if unrated is None else ~np.asarray(unrated, dtype=bool)
    y = np.asarray(labels, dtype=bool)
    w = None if weights is None else quantize_weights(
        np.asarray(weights, dtype=np.float64), weight_bits)
    positive_rows = np.flatnonzero(y if rated is None else rated & y)
    bins, sketches = [], []
    for j in range(k):
        values = np.ascontiguousarray(scores[:, j])
        positives = ScoreSketch.from_values(
            values[positive_rows], None if w is None else w[positive_rows], level=0,
            capacity=capacity, weight_bits=weight_bits)
        shared = _shared(values, rated, w, edges[j], capacity)
        if shared is None:  # each on its own
            bins.append(locator_for(edges[j])(values))
            sketches.append(EdgeSketch.from_rows(values, y, weights, unrated,
                                                 capacity=capacity, weight_bits=weight_bits))
            continue
        located, scored, rated_sketch = shared
        bins.append(located)
        sketches.append(EdgeSketch(scored=scored, rated=rated_sketch, positives=positives))
    return bins, sketches


def _shared(values: NDArray[np.float64], rated: NDArray[np.bool_] | None,
            weights: NDArray[np.float64] | None, edges: NDArray[np.float64],
            capacity: int) -> tuple[NDArray[np.intp], ScoreSketch, ScoreSketch] | None:
    """Bins, scored and rated channels from the keys at the coarse level (None: too wide, or
    no row)."""
    if values.size == 0:
        return None
    try:
        locator = locator_for(edges, COARSE_LEVEL)
    except ValueError:
        return None
    assert isinstance(locator, KeyLevelLocator)
    finite = values > -np.inf
    all_finite = bool(finite.all())
    if not all_finite:
        if not finite.any():
            return None
        # "did not score" rows take the lowest finite score for the key arithmetic (so that
        # the keys of non-negative scores stay on the fast path); bin 0 and the dropped
        # sketch slot are set for them below
        values = np.where(finite, values, values.min(where=finite, initial=np.inf))
    keys = sortable_keys(values)
    keys >>= np.uint64(COARSE_LEVEL)
    coarse = keys.view(np.int64)  # the top bit is clear after the shift
    low, span = key_span(coarse)
    if not short_span(span, values.size):
        return None
    located = locator.locate_keys(coarse, values)
    dropped = None if all_finite else ~finite
    if dropped is not None:
        np.putmask(located, dropped, 0)  # -inf is below every edge
    coarse -= low  # reused in place: the keys are not needed after this
    channels = bucket_sketches(coarse.view(np.intp), weights, rated, low, span, COARSE_LEVEL,
                               capacity, dropped)
    return located, channels[0], channels[-1]
