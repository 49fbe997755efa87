"""Algorithm 1 of Natarajan et al. (2016): expected loss of every top-k prediction.

Items are sorted by decreasing probability. Predicting the top ``k`` items positive, the loss
depends on the label vector only through :math:`A_k` = positives among the top ``k`` and
:math:`B_k` = positives among the other ``n - k`` items, which are independent Poisson-binomial
variables. Hence

.. math::

    L_k = \\sum_{a=0}^{k} \\sum_{b=0}^{n-k} P(A_k = a)\\, P(B_k = b)\\,
          L(TP = a,\\; FP = k - a,\\; FN = b,\\; TN = n - k - b).

:math:`A_k` is updated from :math:`A_{k-1}` by adding item ``k``; the :math:`B_k` are built once
from the end. Without truncation the double sums cost :math:`O(n^3)` in total; with tail
truncation (see :mod:`._poisson_binomial`) both supports are windows of width
:math:`O(\\sqrt{n})`, so the cost is about :math:`O(n^2)` loss evaluations.

The paper's *early stop* scans ``k = 1, 2, ...`` and stops at the first ``k`` with
:math:`L_{k+1} \\ge L_k` (we also keep :math:`L_0`, the all-negative start of the paper's
Algorithm 1). It is a heuristic: it returns the global minimum when :math:`L_1, \\dots, L_n` is
unimodal (non-increasing, then non-decreasing), which is common but not guaranteed for every
TP-monotonic loss (the tests show a Jaccard counterexample).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided
from numpy.typing import NDArray

from ._losses import SetLoss
from ._poisson_binomial import add_item, suffix_distributions, trim


def algorithm1_expected_losses(
    sorted_probabilities: NDArray[np.float64],
    loss: SetLoss,
    tol: float,
    early_stop: bool = False,
) -> NDArray[np.float64]:
    """Expected loss :math:`L_k` of predicting the top ``k`` items, ``k = 0..n``.

    Parameters
    ----------
    sorted_probabilities : ndarray, shape (n,)
        Probabilities sorted in decreasing order.
    loss : SetLoss
        Any loss on confusion counts.
    tol : float
        Tail mass dropped per Poisson-binomial update (0 for the untruncated algorithm).
    early_stop : bool
        Stop after the first ``k >= 1`` with :math:`L_{k+1} \\ge L_k`; later entries are nan.

    Returns
    -------
    ndarray, shape (n + 1,)
    """
    p = sorted_probabilities
    n = p.size
    rest = suffix_distributions(p, tol)
    out = np.full(n + 1, np.nan)
    rates = _RateGrids(n) if loss.of_rates is not None else None
    offset, pmf = 0, np.ones(1)
    for k in range(n + 1):
        if k > 0:
            offset, pmf = trim(offset, add_item(pmf, float(p[k - 1])), tol)
        other = rest[k]
        if rates is not None and loss.of_rates is not None:
            grid = loss.of_rates(*rates.grids(k, offset, pmf.size, other.offset, other.pmf.size))
        else:
            tp = np.arange(offset, offset + pmf.size, dtype=np.float64)[:, None]
            fn = other.support[None, :]
            grid = loss(tp, k - tp, fn, (n - k) - fn)
        out[k] = pmf @ grid @ other.pmf
        if early_stop and k >= 2 and out[k] >= out[k - 1]:
            break
    return out


class _RateGrids:
    """TPR and TNR on the window of (TP, FN) counts for one ``k``, without per-cell division.

    With :math:`S = TP + FN` positives, :math:`TPR = TP \\cdot (1/S)` and
    :math:`TNR = TN \\cdot (1/(n - S))`; the reciprocals are tabulated once, and on the window
    ``TP = a0 + i``, ``FN = b0 + j`` the table entry for ``S = a0 + b0 + i + j`` is a Hankel
    (constant anti-diagonal) strided view, so each rate costs one multiplication per cell. The
    zero-division cells (``S = 0``: TPR = 1; ``S = n``: TNR = 1) are set explicitly.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        counts = np.arange(n + 1, dtype=np.float64)
        with np.errstate(divide="ignore"):
            self.inv_pos = np.where(counts > 0, 1.0 / counts, 0.0)
            self.inv_neg = np.where(counts < n, 1.0 / (n - counts), 0.0)

    @staticmethod
    def _hankel(values: NDArray[np.float64], start: int, rows: int, cols: int
                ) -> NDArray[np.float64]:
        step = values.strides[0]
        return as_strided(values[start:], shape=(rows, cols), strides=(step, step),
                          writeable=False)

    def grids(self, k: int, a0: int, rows: int, b0: int, cols: int
              ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        n = self.n
        tp = np.arange(a0, a0 + rows, dtype=np.float64)[:, None]
        tn = (n - k - b0) - np.arange(cols, dtype=np.float64)[None, :]
        tpr = tp * self._hankel(self.inv_pos, a0 + b0, rows, cols)
        tnr = tn * self._hankel(self.inv_neg, a0 + b0, rows, cols)
        if a0 == 0 and b0 == 0:  # S = 0: no positives, TPR = 1
            tpr[0, 0] = 1.0
        i, j = k - a0, (n - k) - b0  # S = n: no negatives, TNR = 1
        if 0 <= i < rows and 0 <= j < cols:
            tnr[i, j] = 1.0
        return tpr, tnr

