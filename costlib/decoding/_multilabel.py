"""Many small sets at once (multilabel decoding: per instance, the labels are the items).

For sets of ``n`` items the exact Algorithm 1 is vectorised across sets: the Poisson-binomial
distributions of positives among the top ``k`` (forward) and the rest (backward) are built for a
chunk of sets in ``n`` array updates each, and since the loss table
:math:`L(a, k - a, b, n - k - b)` is the same for every set of size ``n``, the expected losses are
``n + 1`` matrix products: :math:`O(N n^3 / 6)` flops with no Python loop over sets. Sets larger
than :data:`MAX_VECTORISED_SIZE` are decoded one by one with :func:`optimal_topk`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..losses import CountFunction, SetLoss, get_loss
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


def _loss_tables(loss: SetLoss, n: int) -> list[NDArray[np.float64]]:
    """``tables[k][a, b] = L(a, k - a, b, n - k - b)`` for ``a <= k``, ``b <= n - k``."""
    tables = []
    for k in range(n + 1):
        a = np.arange(k + 1, dtype=np.float64)[:, None]
        b = np.arange(n - k + 1, dtype=np.float64)[None, :]
        tables.append(loss(a, k - a, b, (n - k) - b))
    return tables


def _expected_losses_exact(sorted_p: NDArray[np.float64], tables: list[NDArray[np.float64]]
                           ) -> NDArray[np.float64]:
    """Exact :math:`L_k` for each row of ``sorted_p`` (shape (c, n)); returns (c, n + 1)."""
    rows, n = sorted_p.shape
    top = np.zeros((n + 1, rows, n + 1))
    top[0, :, 0] = 1.0
    for k in range(1, n + 1):
        p = sorted_p[:, k - 1:k]
        prev = top[k - 1, :, :k]
        top[k, :, :k] = (1.0 - p) * prev
        top[k, :, 1:k + 1] += p * prev
    rest = np.zeros((n + 1, rows, n + 1))
    rest[n, :, 0] = 1.0
    for k in range(n - 1, -1, -1):
        p = sorted_p[:, k:k + 1]
        width = n - k
        prev = rest[k + 1, :, :width]
        rest[k, :, :width] = (1.0 - p) * prev
        rest[k, :, 1:width + 1] += p * prev
    out = np.empty((rows, n + 1))
    for k in range(n + 1):
        partial = top[k, :, :k + 1] @ tables[k]
        out[:, k] = np.einsum("ij,ij->i", partial, rest[k, :, :n - k + 1])
    return out


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
        Any loss (see :func:`costlib.losses.get_loss`); ``**loss_params`` are passed to it.
    chunk_size : int
        Sets processed per vectorised step (memory ~ ``chunk_size * (n + 1)**2 * 16`` bytes).

    Returns
    -------
    BatchTopK
        Exact (untruncated) expected losses; ties in :math:`L_k` go to the smallest ``k``.
    """
    probs = np.asarray(probabilities, dtype=np.float64)
    if probs.ndim != 2:
        raise ValueError(f"probabilities must be 2-D (sets x items); got shape {probs.shape}")
    check_probabilities(probs)
    loss_obj = get_loss(loss, **loss_params)
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
    sorted_p = np.ascontiguousarray(sorted_descending(probs))
    tables = _loss_tables(loss_obj, n)
    expected = np.empty((n_sets, n + 1))
    for start in range(0, n_sets, chunk_size):
        stop = min(start + chunk_size, n_sets)
        expected[start:stop] = _expected_losses_exact(sorted_p[start:stop], tables)
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
        See :func:`costlib.losses.get_loss`.

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
        index = offs[sets][:, None] + np.arange(size)[None, :]
        result = optimal_topk_batch(vals[index], loss_obj)
        k[sets] = result.k
        best_loss[sets] = result.expected_loss
        selected[index] = result.selected
    return RaggedTopK(k, selected, best_loss)
