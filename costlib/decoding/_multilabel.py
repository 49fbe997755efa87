"""Many small sets at once (multilabel decoding: per instance, the labels are the items).

Sets of ``n <=`` :data:`MAX_VECTORISED_SIZE` items are decoded exactly by the vectorised
Algorithm 1 of :mod:`._small_sets` (one matrix product per ``k`` for a whole chunk of sets, no
Python loop over sets); larger sets one by one with :func:`optimal_topk`. Ragged sets (CSR
layout) are grouped by size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._losses import CountFunction, SetLoss, get_loss
from ._small_sets import expected_losses_exact, loss_tables
from ._topk import optimal_topk
from ._validation import check_probabilities, sorted_descending, top_k_mask

#: Largest set size decoded by the vectorised exact routine.
MAX_VECTORISED_SIZE = 64


@dataclass(frozen=True)
class BatchTopK:
    """Result of :func:`optimal_topk_batch` for ``N`` sets of ``n`` items.

    Attributes
    ----------
    k : ndarray of int, shape (N,)
    selected : ndarray of bool, shape (N, n)
        In the input order; ties in probability by lower index.
    expected_loss : ndarray, shape (N,)
    expected_losses : ndarray, shape (N, n + 1)
        :math:`L_k` for ``k = 0..n`` per set.
    """

    k: NDArray[np.intp]
    selected: NDArray[np.bool_]
    expected_loss: NDArray[np.float64]
    expected_losses: NDArray[np.float64]


@dataclass(frozen=True)
class RaggedTopK:
    """Result of :func:`optimal_topk_ragged` for ``N`` sets stored back to back.

    Attributes
    ----------
    k : ndarray of int, shape (N,)
    selected : ndarray of bool, shape (len(values),)
        Aligned with ``values``.
    expected_loss : ndarray, shape (N,)
    """

    k: NDArray[np.intp]
    selected: NDArray[np.bool_]
    expected_loss: NDArray[np.float64]


def _is_ragged(rows: object) -> bool:
    """True for a sequence of sequences whose lengths differ (what numpy cannot stack)."""
    try:
        lengths = {len(row) for row in rows}  # type: ignore[attr-defined]
    except TypeError:
        return False
    return len(lengths) > 1


def optimal_topk_batch(
    probabilities: ArrayLike,
    loss: str | SetLoss | CountFunction = "f1",
    *,
    chunk_size: int = 2048,
    **loss_params: Any,
) -> BatchTopK:
    """Optimal top-k prediction for each row of a 2-D array (each row one set of items).

    Parameters
    ----------
    probabilities : array_like, shape (N, n)
        Row ``i`` holds :math:`P(Y_{ij} = 1)` for the ``n`` items (labels) of set ``i``.
    loss : str, SetLoss or callable
        Any loss (see :func:`costlib.decoding._losses.get_loss`); ``**loss_params`` are passed to
        it.
    chunk_size : int
        Sets processed per vectorised step (memory ~ ``chunk_size * (n + 1)**2 * 16`` bytes).

    Returns
    -------
    BatchTopK
        Exact (untruncated) expected losses; ties in :math:`L_k` go to the smallest ``k``.
    """
    try:
        probs = np.asarray(probabilities, dtype=np.float64)
    except ValueError as exc:
        if _is_ragged(probabilities):
            raise ValueError(
                "probabilities must be a 2-D array of equally sized sets; these sets have "
                "different sizes: use optimal_topk_ragged(values, offsets, loss) for sets of "
                "different sizes"
            ) from None
        raise ValueError(f"probabilities must be a 2-D array of numbers in [0, 1]: {exc}") from None
    if probs.ndim != 2:
        raise ValueError(f"probabilities must be 2-D (sets x items); got shape {probs.shape}")
    check_probabilities(probs)
    return _decode_batch(probs, get_loss(loss, **loss_params), chunk_size)


def _decode_batch(probs: NDArray[np.float64], loss_obj: SetLoss, chunk_size: int = 2048
                  ) -> BatchTopK:
    """:func:`optimal_topk_batch` of checked probabilities (shape (N, n)) and a loss."""
    n_sets, n = probs.shape
    if n > MAX_VECTORISED_SIZE:
        results = [optimal_topk(row, loss_obj) for row in probs]
        if not results:
            empty = np.zeros((0, n + 1))
            return BatchTopK(np.zeros(0, dtype=np.intp), np.zeros((0, n), bool),
                             np.zeros(0), empty)
        return BatchTopK(np.array([r.k for r in results], dtype=np.intp),
                         np.stack([r.selected for r in results]),
                         np.array([r.expected_loss for r in results]),
                         np.stack([r.expected_losses for r in results]))
    sorted_p = sorted_descending(probs)  # a reversed view: the decoder copies it anyway
    tables = loss_tables(loss_obj, n)
    expected = np.empty((n_sets, n + 1))
    for start in range(0, n_sets, chunk_size):
        stop = min(start + chunk_size, n_sets)
        expected_losses_exact(sorted_p[start:stop], tables, out=expected[start:stop])
    best = np.argmin(expected, axis=1) if n_sets else np.zeros(0, dtype=np.intp)
    selected = top_k_mask(probs, sorted_p, best)
    best_loss = np.take_along_axis(expected, best[:, None], axis=1)[:, 0]
    return BatchTopK(best, selected, best_loss, expected)


def optimal_topk_ragged(
    values: ArrayLike,
    offsets: ArrayLike,
    loss: str | SetLoss | CountFunction = "f1",
    **loss_params: Any,
) -> RaggedTopK:
    """Optimal top-k prediction for sets stored back to back (CSR layout).

    Parameters
    ----------
    values : array_like, shape (M,)
        Probabilities of all items of all sets, set after set.
    offsets : array_like of int, shape (N + 1,)
        Set ``i`` is ``values[offsets[i]:offsets[i + 1]]``; ``offsets[0] == 0``,
        non-decreasing, ``offsets[-1] == M``.
    loss : str, SetLoss or callable
        See :func:`costlib.decoding._losses.get_loss`.

    Returns
    -------
    RaggedTopK
        Sets of equal size are decoded together by :func:`optimal_topk_batch`.
    """
    vals = np.asarray(values, dtype=np.float64)
    offs = np.asarray(offsets)
    if vals.ndim != 1:
        raise ValueError(f"values must be 1-D; got shape {vals.shape}")
    if offs.ndim != 1 or offs.size < 1 or not np.issubdtype(offs.dtype, np.integer):
        raise ValueError("offsets must be a 1-D integer array of length N + 1")
    if offs[0] != 0 or offs[-1] != vals.size or np.any(np.diff(offs) < 0):
        raise ValueError(f"offsets must start at 0, be non-decreasing and end at len(values)="
                         f"{vals.size}; got offsets[0]={int(offs[0])}, "
                         f"offsets[-1]={int(offs[-1])}")
    check_probabilities(vals, "values")
    loss_obj = get_loss(loss, **loss_params)
    sizes = np.diff(offs)
    n_sets = sizes.size
    k = np.zeros(n_sets, dtype=np.intp)
    best_loss = np.zeros(n_sets)
    selected = np.zeros(vals.size, dtype=bool)
    for size in np.unique(sizes).tolist():
        sets = np.flatnonzero(sizes == size)
        if size == 0:
            best_loss[sets] = float(loss_obj(0.0, 0.0, 0.0, 0.0))
            continue
        if sets.size == n_sets:  # every set of this size: the values are the (N, size) array
            result = _decode_batch(vals.reshape(n_sets, size), loss_obj)
            k[:] = result.k
            best_loss[:] = result.expected_loss
            selected[:] = result.selected.ravel()
            continue
        index = offs[sets][:, None] + np.arange(size)[None, :]
        result = _decode_batch(vals[index], loss_obj)
        k[sets] = result.k
        best_loss[sets] = result.expected_loss
        selected[index] = result.selected
    return RaggedTopK(k, selected, best_loss)
