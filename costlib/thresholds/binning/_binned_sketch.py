"""Binning rows against candidate thresholds and sketching their scores in one pass.

A run that places its edges from the previous run's sketch (carried auto edges) must bin every
row against those edges *and* sketch the rows for the next run. Both start from the same
per-row work, the order-preserving key of the score
(:func:`costlib.thresholds.binning._score_sketch.sortable_keys`) at the sketch's coarse level
:data:`~costlib.thresholds.binning._score_sketch.COARSE_LEVEL`:

- the bin is read from a bracket table over the key cells of that level
  (:class:`costlib.thresholds.binning._bin_locator.KeyLevelLocator`; a binary search only in cells
  that hold an edge);
- the scored and rated channels of the sketch are one ``bincount`` over
  ``2 (key - low) + rated`` (:class:`costlib.thresholds.EdgeSketch`).

The results are exactly those of :meth:`costlib.thresholds.binning._bin_locator.BinLocator.__call__`
and :meth:`costlib.thresholds.EdgeSketch.from_rows` on the same rows; where the shared
path does not apply (the edges or the scores span too many key cells at the coarse level) each is
computed on its own.

A pipeline bins batch after batch against the same edges: :class:`SketchingBinner` keeps the
scored and rated channels of all its batches as one dense count per key bucket (the batch's
``bincount`` added into it; a batch with few rows over a wide key range is added where its
rows fall, ``np.add.at``) and makes sketches of them once, at the end, instead of a sketch per
batch and their merges (sketch sums are exact: same result).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning._bin_locator import KeyLevelLocator, locator_for
from costlib.thresholds.binning._rows import quantize_weights
from costlib.thresholds.binning._score_sketch import (
    COARSE_LEVEL,
    DEFAULT_CAPACITY,
    EdgeSketch,
    ScoreSketch,
    short_span,
    sketches_from_counts,
    sortable_keys,
)

__all__ = ["SketchingBinner", "bin_and_sketch"]


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
    binner = SketchingBinner(edges, capacity=capacity, weight_bits=weight_bits)
    bins = binner(scores, labels, weights, unrated)
    sketches = binner.sketches()
    assert sketches is not None  # one batch was added
    return bins, sketches


class SketchingBinner:
    """Bins batches against fixed edges and accumulates the edge sketches of their rows.

    Calling it on batch after batch, then :meth:`sketches`, gives the bins of
    :func:`bin_and_sketch` for each batch and the :meth:`EdgeSketch.sum` of its sketches,
    exactly. Per classifier it keeps one dense array over the key buckets (at
    :data:`~costlib.thresholds.binning._score_sketch.COARSE_LEVEL`) seen so far, ``2 b`` holding the
    unrated
    and ``2 b + 1`` the rated weight of bucket ``b``, widened when a batch reaches past it (up to
    :attr:`MAX_BUCKETS` buckets, 4 MiB; beyond, it is made a sketch and restarted); batches
    off the shared path are sketched on their own and summed in.

    Parameters
    ----------
    edges : sequence of k ndarrays
        Candidate thresholds per classifier.
    capacity, weight_bits
        As for :class:`~costlib.thresholds.ScoreSketch`.
    """

    MAX_BUCKETS = 1 << 18
    _MERGE_EVERY = 16  # sketches kept aside (batches off the shared path) per sum
    _POSITIVES = 1 << 16  # positives' scores collected before they are made a sketch

    def __init__(self, edges: Sequence[NDArray[np.float64]], *,
                 capacity: int = DEFAULT_CAPACITY, weight_bits: int = 16) -> None:
        self.edges = tuple(edges)
        self.capacity, self.weight_bits = capacity, weight_bits
        k = len(self.edges)
        self._low: list[int] = [0] * k
        self._counts: list[NDArray[np.float64] | None] = [None] * k
        self._aside: list[list[EdgeSketch]] = [[] for _ in range(k)]  # sketches to sum in
        # the rated positives' scores (and weights) as read, made a sketch every so often
        self._positive_rows: list[list[tuple[NDArray[np.float64], NDArray[np.float64] | None]]]
        self._positive_rows = [[] for _ in range(k)]
        self._positives: list[ScoreSketch | None] = [None] * k
        self._batches = 0

    def __call__(self, scores: NDArray[np.float64], labels: NDArray[np.bool_],
                 weights: NDArray[np.float64] | None,
                 unrated: NDArray[np.bool_] | None) -> list[NDArray[np.intp]]:
        """The bins of one batch per classifier (arguments as for :func:`bin_and_sketch`);
        its rows join the sketches."""

        rated = None if unrated is None else ~np.asarray(unrated, dtype=bool)
        y = np.asarray(labels, dtype=bool)
        w = None if weights is None else quantize_weights(
            np.asarray(weights, dtype=np.float64), self.weight_bits)
        positive_rows = np.flatnonzero(y if rated is None else rated & y)
        self._batches += 1
        bins = []
        for j, edges in enumerate(self.edges):
            values = np.ascontiguousarray(scores[:, j])
            self._add_positives(j, values[positive_rows],
                                None if w is None else w[positive_rows])
            shared = _shared(values, rated, edges, self.MAX_BUCKETS)
            if shared is None:  # each on its own
                bins.append(locator_for(edges)(values))
                self._set_aside(j, EdgeSketch.from_rows(values, y, weights, unrated,
                                                        capacity=self.capacity,
                                                        weight_bits=self.weight_bits))
                continue
            located, slots, low, span, dropped = shared
            bins.append(located)
            self._count(j, slots, w, low, span, dropped)
        return bins

    def sketches(self) -> list[EdgeSketch] | None:
        """The sketch of every row added so far, per classifier (None before any batch)."""
        if not self._batches:
            return None
        out = []
        for j in range(len(self.edges)):
            parts = list(self._aside[j])
            held = self._held_sketch(j)
            if held is not None:
                parts.append(held)
            merged = EdgeSketch.sum(parts) if parts else EdgeSketch.empty(capacity=self.capacity)
            self._fold_positives(j)
            positives = self._positives[j]
            assert positives is not None  # one batch was added
            out.append(EdgeSketch(scored=merged.scored, rated=merged.rated,
                                  positives=positives))
        return out

    def _set_aside(self, j: int, sketch: EdgeSketch) -> None:
        """Keep a sketch to sum in at the end, summing every :attr:`_MERGE_EVERY` (bounded
        memory)."""
        self._aside[j].append(sketch)
        if len(self._aside[j]) >= self._MERGE_EVERY:
            self._aside[j] = [EdgeSketch.sum(self._aside[j])]

    def _add_positives(self, j: int, values: NDArray[np.float64],
                       weights: NDArray[np.float64] | None) -> None:
        self._positive_rows[j].append((values, weights))
        if sum(v.size for v, _ in self._positive_rows[j]) >= self._POSITIVES:
            self._fold_positives(j)

    def _fold_positives(self, j: int) -> None:
        """The collected positives made a sketch (level 0) and summed into the held one."""
        rows = self._positive_rows[j]
        if not rows:
            return
        values = np.concatenate([v for v, _ in rows])
        weights = (None if all(w is None for _, w in rows) else np.concatenate(
            [np.ones(v.size) if w is None else w for v, w in rows]))
        sketch = ScoreSketch.from_values(values, weights, level=0, capacity=self.capacity,
                                         weight_bits=self.weight_bits)
        held = self._positives[j]
        self._positives[j] = sketch if held is None else ScoreSketch.sum([held, sketch])
        self._positive_rows[j] = []

    def _held_sketch(self, j: int) -> EdgeSketch | None:
        """The held counts as a sketch (positives left empty: they are kept apart)."""
        counts = self._counts[j]
        if counts is None:
            return None
        scored, rated = sketches_from_counts(counts, self._low[j], 2, COARSE_LEVEL,
                                             self.capacity)
        return EdgeSketch(scored=scored, rated=rated,
                          positives=ScoreSketch.empty(capacity=self.capacity))

    def _count(self, j: int, slots: NDArray[np.intp], weights: NDArray[np.float64] | None,
               low: int, span: int, dropped: NDArray[np.bool_] | None) -> None:
        """Add a batch's rows to the held counts: ``slots`` are ``2 (key - low) + rated``
        over ``span`` buckets from key ``low`` (``dropped`` rows: did not score)."""
        held = self._counts[j]
        if held is not None:
            start = min(self._low[j], low)
            stop = max(self._low[j] + held.size // 2, low + span)
            if stop - start > self.MAX_BUCKETS:  # too wide to hold: sketch what is held
                sketch = self._held_sketch(j)
                assert sketch is not None
                self._set_aside(j, sketch)
                held = None
            elif start < self._low[j] or stop > self._low[j] + held.size // 2:
                wider = np.zeros(2 * (stop - start))
                offset = 2 * (self._low[j] - start)
                wider[offset:offset + held.size] = held
                self._low[j], self._counts[j] = start, wider
                held = wider
        if held is None:
            self._low[j] = low
            self._counts[j] = held = np.zeros(2 * span)
        offset = 2 * (low - self._low[j])
        if short_span(span, slots.size):  # one count over the batch's range, added in
            if dropped is not None:
                np.putmask(slots, dropped, 2 * span)  # past the end: left out
            counts = np.bincount(slots, weights=weights, minlength=2 * span + 1)
            held[offset:offset + 2 * span] += counts[:2 * span]
        else:  # few rows over a wide range: add them where they fall
            if dropped is not None:
                keep = ~dropped
                slots = slots[keep]
                weights = None if weights is None else weights[keep]
            slots += offset
            np.add.at(held, slots, 1.0 if weights is None else weights)


def _shared(values: NDArray[np.float64], rated: NDArray[np.bool_] | None,
            edges: NDArray[np.float64], max_buckets: int,
            ) -> tuple[NDArray[np.intp], NDArray[np.intp], int, int,
                       NDArray[np.bool_] | None] | None:
    """Bins and each row's sketch slot ``2 (key - low) + rated`` from the keys at the coarse
    level: ``(bins, slots, low, span, dropped)`` (``dropped``: rows that did not score, None
    when every row did). None: no finite score, or the keys span more than ``max_buckets``
    buckets, or the edges too many key cells."""
    if values.size == 0:
        return None
    try:
        locator = locator_for(edges, COARSE_LEVEL)
    except ValueError:
        return None
    assert isinstance(locator, KeyLevelLocator)
    smallest, largest = float(values.min()), float(values.max())
    dropped = None
    if smallest == -np.inf:
        finite = values > -np.inf
        if not finite.any():
            return None
        dropped = ~finite
        # "did not score" rows take the lowest finite score for the key arithmetic (so that
        # the keys of non-negative scores stay on the fast path); bin 0 is set for them below
        smallest = float(values.min(where=finite, initial=np.inf))
        values = np.where(finite, values, smallest)
    low, high = (int(k) >> COARSE_LEVEL for k in sortable_keys([smallest, largest]))
    span = high - low + 1
    if span > max_buckets:
        return None
    if smallest >= 0:  # the usual case: the key is the bits with the sign bit set (-0.0 too)
        coarse = np.right_shift(values.view(np.uint64), np.uint64(COARSE_LEVEL)).view(np.int64)
        coarse |= 1 << (63 - COARSE_LEVEL)
    else:
        keys = sortable_keys(values)
        keys >>= np.uint64(COARSE_LEVEL)
        coarse = keys.view(np.int64)  # the top bit is clear after the shift
    located = locator.locate_keys(coarse, values, (low, high))
    if dropped is not None:
        np.putmask(located, dropped, 0)  # -inf is below every edge
    slots = coarse  # reused in place: the keys are not needed after this
    slots -= low
    slots <<= 1
    if rated is None:
        slots |= 1
    else:
        slots += rated
    return located, slots.view(np.intp), low, span, dropped
