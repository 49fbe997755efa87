"""Multiclass set prediction: one true class per instance, predict a set of classes.

With class probabilities :math:`π_1 \\ge \\dots \\ge π_K` (a multinomial: exactly one class is
true), predicting the top ``k`` classes gives TP = 1 with probability :math:`Π_k = \\sum_{j \\le k}
π_j` and TP = 0 otherwise, so (Natarajan et al., 2016, Theorem 2 and Section 4.1)

.. math::

    L_k = Π_k\\, L(1,\\, k - 1,\\, 0,\\, K - k) + (1 - Π_k)\\, L(0,\\, k,\\, 1,\\, K - k - 1),

with :math:`1 - Π_k` taken as the suffix sum :math:`\\sum_{j > k} π_j`. One sort and two prefix
sums per instance: :math:`O(K \\log K)`, vectorised over instances.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain

from ._losses import CountFunction, SetLoss, get_loss
from ._validation import check_probabilities, sorted_descending, top_k_mask


@dataclass(frozen=True)
class ClassSets:
    """Result of :func:`optimal_classes` (leading axis = instances; absent for 1-D input).

    Attributes
    ----------
    k : ndarray of int
        Number of classes predicted per instance.
    selected : ndarray of bool, shape (..., K)
        Predicted classes (the ``k`` most probable; ties by lower class index).
    expected_loss : ndarray of float
        Minimum expected loss per instance.
    expected_losses : ndarray, shape (..., K + 1)
        :math:`L_k` for ``k = 0..K``.
    """

    k: NDArray[np.intp]
    selected: NDArray[np.bool_]
    expected_loss: NDArray[np.float64]
    expected_losses: NDArray[np.float64]


def optimal_classes(
    class_probabilities: ArrayLike,
    loss: str | SetLoss | CountFunction = "f1",
    *,
    atol: float = 1e-6,
    **loss_params: Any,
) -> ClassSets:
    """Set of classes minimising the expected loss, for each instance.

    Parameters
    ----------
    class_probabilities : array_like, shape (K,) or (N, K)
        :math:`P(Y = c \\mid x)` per instance; entries in ``[0, 1]``, rows summing to 1
        within ``atol``.
    loss : str, SetLoss or callable
        See :func:`costlib.decoding._losses.get_loss`; ``**loss_params`` are passed to it.
    atol : float
        Tolerance on the row sums.

    Returns
    -------
    ClassSets
        Ties in :math:`L_k` resolve to the smallest ``k``.
    """
    probs = np.asarray(class_probabilities, dtype=np.float64)
    single = probs.ndim == 1
    if single:
        probs = probs[None, :]
    if probs.ndim != 2 or probs.shape[1] == 0:
        raise ValueError(f"class_probabilities must have shape (K,) or (N, K) with K >= 1; "
                         f"got {np.shape(class_probabilities)}")
    check_probabilities(probs, "class_probabilities")
    sums = probs.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > atol)
    if bad.size:
        raise ValueError(f"class_probabilities row {int(bad[0])} sums to {plain(sums[bad[0]])}; "
                         f"each row must sum to 1 (within atol={atol})")
    loss_obj = get_loss(loss, **loss_params)
    n_rows, n_classes = probs.shape
    sorted_p = sorted_descending(probs)
    covered = np.zeros((n_rows, n_classes + 1))
    np.cumsum(sorted_p, axis=1, out=covered[:, 1:])
    missed = np.zeros((n_rows, n_classes + 1))
    np.cumsum(sorted_p[:, ::-1], axis=1, out=missed[:, -2::-1])
    k = np.arange(n_classes + 1, dtype=np.float64)
    hit = np.zeros(n_classes + 1)
    hit[1:] = loss_obj(1.0, k[1:] - 1.0, 0.0, n_classes - k[1:])
    miss = np.zeros(n_classes + 1)
    miss[:-1] = loss_obj(0.0, k[:-1], 1.0, n_classes - k[:-1] - 1.0)
    expected = covered * hit + missed * miss
    best = np.argmin(expected, axis=1)
    selected = top_k_mask(probs, sorted_p, best)
    best_loss = np.take_along_axis(expected, best[:, None], axis=1)[:, 0]
    if single:
        return ClassSets(best[0], selected[0], best_loss[0], expected[0])
    return ClassSets(best, selected, best_loss, expected)
