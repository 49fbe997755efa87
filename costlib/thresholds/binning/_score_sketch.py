"""Mergeable sketches of score distributions: weighted counts over the bit patterns of scores.

A float64 score ``s`` maps to an unsigned 64-bit *key* that sorts as the scores do
(:func:`sortable_keys`: the IEEE-754 bits with the sign bit flipped for ``s >= 0`` and every bit
flipped for ``s < 0``; ``-0.0`` counts as ``+0.0``). Dropping the ``L`` lowest bits of a key
(its *level*) puts the score in a bucket of relative width at most ``2**(L - 52)`` in its
binade: level 0 is the exact score; level 40 keeps 12 mantissa bits (4,096 buckets between
any power of two and the next). The resolution is relative, so the tail of a score distribution
concentrated near 0 (``1e-4``, ``1e-6``) is resolved as finely as the body.

A :class:`ScoreSketch` holds the summed weight of each occupied bucket at one level, with at
most ``capacity`` buckets. Two sketches merge by moving both to the higher level, adding the
weights of equal keys and, while more than ``capacity`` buckets remain, raising the level by
one. The merged level is therefore the smallest level ``>=`` every input's starting level at
which the union has at most ``capacity`` buckets: it does not depend on how the rows were split
or in which order sketches were merged. Weights are quantised to multiples of
``2**-weight_bits`` (as :class:`~costlib.thresholds.ThresholdGrid` does), so their sums are
exact and the merged sketch is bit-identical under any split.

:class:`EdgeSketch` keeps three such channels per classifier (every row that enters a grid,
rated rows, rated positives): the sufficient statistic from which
:func:`costlib.thresholds.decision_edges_from_sketch` places candidate thresholds.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib.thresholds.binning._rows import quantize_weights, rated_labels

__all__ = [
    "EdgeSketch",
    "ScoreSketch",
    "key_values",
    "sortable_keys",
]

_SIGN = np.uint64(1 << 63)
#: Buckets a sketch keeps at most (per channel and classifier): 1 MiB of keys and weights.
DEFAULT_CAPACITY = 1 << 16
#: Starting level of the population and rated channels: 12 mantissa bits (4,096 buckets per
#: binade, relative width 2.4e-4).
COARSE_LEVEL = 40
#: Key ranges below this are counted with one ``bincount`` instead of a sort.
_BINCOUNT_RANGE = 1 << 20


def sortable_keys(values: ArrayLike) -> NDArray[np.uint64]:
    """Order-preserving unsigned keys of float64 values (``-0.0`` maps to ``+0.0``).

    ``a < b`` exactly when ``key(a) < key(b)`` for non-NaN ``a``, ``b``.
    """
    v = np.array(values, dtype=np.float64)  # a copy, worked on in place (one allocation)
    v += 0.0  # -0.0 + 0.0 is +0.0
    bits = v.view(np.uint64)
    if v.size and v.min() >= 0:  # the usual case: one pass
        bits |= _SIGN
        return bits
    return np.where(bits >= _SIGN, ~bits, bits | _SIGN)


def key_values(keys: ArrayLike) -> NDArray[np.float64]:
    """The float64 values of keys (the inverse of :func:`sortable_keys`)."""
    k = np.asarray(keys, dtype=np.uint64)
    bits = np.where(k >= _SIGN, k ^ _SIGN, ~k)
    return bits.view(np.float64)


def _counted_rows(
    values: ArrayLike, weights: ArrayLike | None, weight_bits: int
) -> tuple[NDArray[np.intp] | None, NDArray[np.float64], NDArray[np.float64] | None]:
    """The rows a sketch counts: ``(rows, values, weights)`` of the finite values with a
    positive weight, weights quantised as :class:`~costlib.thresholds.ThresholdGrid` quantises
    them (``rows`` None when every row counts). NaN, ``+inf`` and mismatched weights are refused."""

    v = np.asarray(values, dtype=np.float64).ravel()
    if np.isnan(v).any() or (v == np.inf).any():
        raise ValueError("score sketch: values must be finite or -inf (not NaN or +inf)")
    keep = v > -np.inf
    w = None
    if weights is not None:
        w = quantize_weights(np.asarray(weights, dtype=np.float64).ravel(), weight_bits)
        if w.shape != v.shape:
            raise ValueError(f"score sketch: {w.size} weights for {v.size} values")
        keep &= w > 0
    if keep.all():
        return None, v, w
    rows = np.flatnonzero(keep)
    return rows, v[rows], None if w is None else w[rows]


def _collapse(keys: NDArray[np.uint64],
              weights: NDArray[np.float64]) -> tuple[NDArray[np.uint64], NDArray[np.float64]]:
    """Sum the weights of equal keys in a *sorted* key array."""
    if keys.size == 0:
        return keys, weights
    starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    return keys[starts], np.add.reduceat(weights, starts)


@dataclass(frozen=True, eq=False)
class ScoreSketch:
    """Weighted bucket counts of scores at one level (see the module docstring).

    Attributes
    ----------
    keys : ndarray of uint64, shape (m,)
        Occupied buckets (keys shifted right by ``level``), strictly ascending.
    weights : ndarray of float64, shape (m,)
        Summed (quantised) weight per bucket, all positive.
    level : int
        Low key bits dropped, 0 (exact scores) to 63.
    capacity : int
        Most buckets kept; above it the level rises.
    """

    keys: NDArray[np.uint64]
    weights: NDArray[np.float64]
    level: int = 0
    capacity: int = DEFAULT_CAPACITY

    @classmethod
    def empty(cls, *, level: int = 0, capacity: int = DEFAULT_CAPACITY) -> ScoreSketch:
        """A sketch of no rows: the identity of :meth:`merge`."""
        return cls(np.zeros(0, dtype=np.uint64), np.zeros(0), level, capacity)

    @classmethod
    def from_values(
        cls,
        values: ArrayLike,
        weights: ArrayLike | None = None,
        *,
        level: int = 0,
        capacity: int = DEFAULT_CAPACITY,
        weight_bits: int = 16,
    ) -> ScoreSketch:
        """Sketch of finite values (``-inf`` and zero weights are left out; NaN refused).

        Parameters
        ----------
        values : array-like of float
            Scores, finite or ``-inf`` ("did not score": not counted).
        weights : array-like of float, optional
            Non-negative row weights, default 1; quantised to ``2**-weight_bits``.
        level : int, default 0
            Starting level (0: exact scores).
        capacity : int
            Most buckets kept.
        """
        if not 0 <= int(level) <= 63 or int(capacity) < 1:
            raise ValueError(f"need 0 <= level <= 63 and capacity >= 1, got {level}, {capacity}")
        _, v, w = _counted_rows(values, weights, weight_bits)
        keys = sortable_keys(v) >> np.uint64(level)
        return cls._from_keys(keys, w, int(level), int(capacity))

    @classmethod
    def _from_keys(cls, keys: NDArray[np.uint64], weights: NDArray[np.float64] | None,
                   level: int, capacity: int) -> ScoreSketch:
        """Sketch of keys already shifted to ``level`` (weights quantised, all positive)."""
        if keys.size == 0:
            return cls.empty(level=level, capacity=capacity)
        low, span = key_span(keys)
        if short_span(span, keys.size):
            slots = (keys - np.uint64(low)).astype(np.intp)
            return bucket_sketches(slots, weights, None, low, span, level, capacity)[0]
        order = np.argsort(keys, kind="stable")
        out_keys, out_weights = _collapse(
            keys[order], np.ones(keys.size) if weights is None else weights[order])
        return cls(out_keys, out_weights, level, capacity)._fit()

    def _fit(self) -> ScoreSketch:
        """Raise the level until at most ``capacity`` buckets remain."""
        keys, weights, level = self.keys, self.weights, self.level
        while keys.size > self.capacity:
            keys, weights = _collapse(keys >> np.uint64(1), weights)
            level += 1
        if level == self.level:
            return self
        return ScoreSketch(keys, weights, level, self.capacity)

    def at_level(self, level: int) -> ScoreSketch:
        """The same counts at a level at least as coarse."""
        if level < self.level:
            raise ValueError(f"cannot refine a sketch from level {self.level} to {level}")
        if level == self.level:
            return self
        keys, weights = _collapse(self.keys >> np.uint64(level - self.level), self.weights)
        return ScoreSketch(keys, weights, level, self.capacity)

    def merge(self, other: ScoreSketch) -> ScoreSketch:
        """The sketch of both sets of rows (independent of order and grouping)."""
        return ScoreSketch.sum([self, other])

    @staticmethod
    def sum(sketches: Iterable[ScoreSketch]) -> ScoreSketch:
        """Merge many sketches at once (same result as merging them pairwise)."""
        parts = list(sketches)
        if not parts:
            raise ValueError("no sketch to sum")
        capacity = parts[0].capacity
        if any(p.capacity != capacity for p in parts):
            raise ValueError("cannot merge score sketches of different capacities")
        level = max(p.level for p in parts)
        moved = [p.at_level(level) for p in parts if p.size]
        if not moved:
            return ScoreSketch.empty(level=level, capacity=capacity)
        keys = np.concatenate([p.keys for p in moved])
        weights = np.concatenate([p.weights for p in moved])
        low = min(int(p.keys[0]) for p in moved)
        span = max(int(p.keys[-1]) for p in moved) - low + 1
        if short_span(span, keys.size):
            # one count over the key range (linear; adds each bucket's weights in input order,
            # as the sort below does, so the sums are the same bits)
            slots = (keys - np.uint64(low)).astype(np.intp)
            return bucket_sketches(slots, weights, None, low, span, level, capacity)[0]
        order = np.argsort(keys, kind="stable")
        keys, weights = _collapse(keys[order], weights[order])
        return ScoreSketch(keys, weights, level, capacity)._fit()

    def __add__(self, other: ScoreSketch) -> ScoreSketch:
        return self.merge(other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScoreSketch):
            return NotImplemented
        return (self.level == other.level and self.capacity == other.capacity
                and np.array_equal(self.keys, other.keys)
                and np.array_equal(self.weights, other.weights))

    __hash__ = None  # type: ignore[assignment]

    @property
    def total(self) -> float:
        """Summed weight of every bucket."""
        return float(self.weights.sum())

    @property
    def size(self) -> int:
        """Occupied buckets."""
        return int(self.keys.size)

    def lower_bounds(self) -> NDArray[np.float64]:
        """Smallest score of every bucket (a threshold there flags the whole bucket).

        At level 0 these are the scores themselves. A bucket whose lowest bit pattern is not a
        finite number (the most negative binade at a coarse level) gives the most negative
        finite float, which is still below every score in it.
        """
        values = key_values(self.keys << np.uint64(self.level))
        return np.where(np.isfinite(values), values, np.finfo(np.float64).min)

    def quantiles(self, levels: ArrayLike) -> NDArray[np.float64]:
        """Lower quantiles at ``levels`` in [0, 1), as bucket lower bounds, sorted and unique.

        The quantile at level ``q`` is the bucket of highest key with at most ``q`` of the
        total weight strictly below it (level 0 gives the lowest bucket): for ``n`` distinct
        unit-weight scores at level 0, the ``floor(q n)``-th smallest (0-based), as
        :func:`costlib.thresholds.binning._edges.quantile_edges_from_histogram` takes quantiles.
        """
        q = np.asarray(levels, dtype=np.float64).ravel()
        if q.size and ((q < 0).any() or (q >= 1).any() or np.isnan(q).any()):
            raise ValueError("quantile levels must be in [0, 1)")
        if self.size == 0 or q.size == 0:
            return np.zeros(0)
        below = np.concatenate(([0.0], np.cumsum(self.weights)[:-1]))
        index = np.searchsorted(below, q * self.total, side="right") - 1
        return np.unique(self.lower_bounds()[np.clip(index, 0, self.size - 1)])


@dataclass(frozen=True, eq=False)
class EdgeSketch:
    """What candidate thresholds of one classifier are placed from: three score sketches.

    Attributes
    ----------
    scored : ScoreSketch
        Every row that enters a grid with a finite score of this classifier, at its grid weight
        (rated rows ``w`` or ``w / π``, unrated rows ``w``): the flagged-volume distribution.
    rated : ScoreSketch
        The rated rows among them.
    positives : ScoreSketch
        The rated positives, exact scores (level 0) while at most ``capacity`` are distinct.
    """

    scored: ScoreSketch
    rated: ScoreSketch
    positives: ScoreSketch

    @classmethod
    def from_rows(
        cls,
        scores: ArrayLike,
        labels: ArrayLike,
        weights: ArrayLike | None = None,
        unrated: ArrayLike | None = None,
        *,
        capacity: int = DEFAULT_CAPACITY,
        weight_bits: int = 16,
    ) -> EdgeSketch:
        """Sketch of one classifier's scores of the rows entering a grid.

        Parameters
        ----------
        scores : array-like of shape (n,)
            Finite, or ``-inf`` (did not score).
        labels : array-like of bool or 0/1, shape (n,)
            Read where rated (anything, e.g. NaN, where unrated); other labels (strings, -1)
            raise ``ValueError`` naming the fix.
        weights : array-like of shape (n,), optional
            Grid weights (default 1).
        unrated : array-like of bool, shape (n,), optional
            Rows scored but not rated (default: every row is rated).
        """
        s = np.asarray(scores, dtype=np.float64).ravel()
        w = None if weights is None else np.asarray(weights, dtype=np.float64).ravel()
        rated = (np.ones(s.size, dtype=bool) if unrated is None
                 else ~np.asarray(unrated, dtype=bool).ravel())
        y = rated_labels(labels, rated)
        positive_rows = np.flatnonzero(rated & y)
        positives = ScoreSketch.from_values(
            s[positive_rows], None if w is None else w[positive_rows], level=0,
            capacity=capacity, weight_bits=weight_bits)
        # The coarse channels share one key computation (rated rows are a subset).
        rows, values, row_weights = _counted_rows(s, w, weight_bits)
        keys = sortable_keys(values)
        keys >>= np.uint64(COARSE_LEVEL)
        kept_rated = rated if rows is None else rated[rows]
        if kept_rated.all():
            scored = _coarse_channels(keys, row_weights, None, capacity)[0]
            return cls(scored=scored, rated=scored, positives=positives)
        scored, rated_sketch = _coarse_channels(keys, row_weights, kept_rated, capacity)
        assert rated_sketch is not None  # a rated mask gives both channels
        return cls(scored=scored, rated=rated_sketch, positives=positives)

    @classmethod
    def empty(cls, *, capacity: int = DEFAULT_CAPACITY) -> EdgeSketch:
        """A sketch of no rows."""
        return cls(ScoreSketch.empty(level=COARSE_LEVEL, capacity=capacity),
                   ScoreSketch.empty(level=COARSE_LEVEL, capacity=capacity),
                   ScoreSketch.empty(level=0, capacity=capacity))

    @staticmethod
    def sum(sketches: Iterable[EdgeSketch]) -> EdgeSketch:
        """Merge sketches of disjoint row sets (any order, any grouping: same result)."""
        parts = list(sketches)
        if not parts:
            raise ValueError("no sketch to sum")
        return EdgeSketch(
            scored=ScoreSketch.sum(p.scored for p in parts),
            rated=ScoreSketch.sum(p.rated for p in parts),
            positives=ScoreSketch.sum(p.positives for p in parts),
        )

    def __add__(self, other: EdgeSketch) -> EdgeSketch:
        return EdgeSketch.sum([self, other])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EdgeSketch):
            return NotImplemented
        return (self.scored == other.scored and self.rated == other.rated
                and self.positives == other.positives)

    __hash__ = None  # type: ignore[assignment]


def short_span(span: int, rows: int) -> bool:
    """Whether keys spanning ``span`` buckets are counted with one ``bincount`` (a short range,
    not much longer than the rows) rather than sorted."""
    return span <= _BINCOUNT_RANGE and span <= 8 * rows + 1024


def key_span(keys: NDArray[Any]) -> tuple[int, int]:
    """``(low, span)``: the smallest key and the number of buckets up to the largest
    (non-empty)."""
    low, high = int(keys.min()), int(keys.max())
    return low, high - low + 1


def bucket_sketches(slots: NDArray[np.intp], weights: NDArray[np.float64] | None,
                    rated: NDArray[np.bool_] | None, low: int, span: int, level: int,
                    capacity: int) -> list[ScoreSketch]:
    """Sketches at ``level`` from one ``bincount``: ``slots`` are the keys minus ``low`` (all
    in ``[0, span)``; overwritten).

    Without ``rated``: ``[every row]``. With it: ``[every row, rated rows]`` from one count
    over ``2 slot + rated`` (the rated weight per bucket in the odd slots). Buckets whose
    weights sum to 0 are left out.
    """
    width = 1 if rated is None else 2
    if rated is not None:
        slots <<= 1
        slots += rated
    counts = np.bincount(slots, weights=weights, minlength=width * span)
    return sketches_from_counts(counts, low, width, level, capacity)


def sketches_from_counts(counts: NDArray[Any], low: int, width: int, level: int,
                         capacity: int) -> list[ScoreSketch]:
    """Sketches at ``level`` of dense bucket counts: bucket ``low + i`` holds ``counts[i]``
    (``width`` 1: ``[every row]``), or ``counts[2 i]`` unrated and ``counts[2 i + 1]`` rated
    weight (``width`` 2: ``[every row, rated rows]``). Empty buckets are left out."""
    if width == 1:
        per_bucket = [counts]
    else:
        pairs = counts.reshape(-1, 2)
        per_bucket = [pairs[:, 0] + pairs[:, 1], np.ascontiguousarray(pairs[:, 1])]
    out = []
    for count in per_bucket:
        occupied = np.flatnonzero(count != 0)
        out.append(ScoreSketch(occupied.astype(np.uint64) + np.uint64(low),
                               count[occupied].astype(np.float64), level, capacity)._fit())
    return out


def _coarse_channels(keys: NDArray[np.uint64], weights: NDArray[np.float64] | None,
                     rated: NDArray[np.bool_] | None,
                     capacity: int) -> tuple[ScoreSketch, ScoreSketch | None]:
    """The scored and rated channels at :data:`COARSE_LEVEL` from one count (rated None: the
    scored channel only). ``keys`` (at the coarse level) is overwritten.

    When the keys span a short range, one ``bincount`` over ``2 (key - low) + rated`` gives
    both (:func:`bucket_sketches`), worked in place in ``keys`` (fresh arrays of a batch's
    size cost page faults, more than the arithmetic). Otherwise each channel is counted alone.
    """
    if keys.size:
        low, span = key_span(keys)
        if short_span(span, keys.size):
            keys -= np.uint64(low)
            channels = bucket_sketches(keys.view(np.intp), weights, rated, low, span,
                                       COARSE_LEVEL, capacity)
            return channels[0], channels[1] if rated is not None else None
    scored = ScoreSketch._from_keys(keys, weights, COARSE_LEVEL, capacity)
    if rated is None:
        return scored, None
    rated_weights = None if weights is None else weights[rated]
    return scored, ScoreSketch._from_keys(keys[rated], rated_weights, COARSE_LEVEL, capacity)
