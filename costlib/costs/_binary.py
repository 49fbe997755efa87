"""Binary benefit matrices: the cost ratio η, the target marginal precision, one-vs-rest.

A 2x2 benefit matrix follows the convention of :mod:`costlib.costs._matrices` (rows = true
class, columns = predicted class; class 1 is the positive class). ``B`` is the expected benefit
of :mod:`costlib.costs._benefit`.

Bridge to threshold grids. Up to a constant, ``N·B = TP (b11 - b10) - FP (b00 - b01)``, so the
benefit-optimal operating point maximises ``TP - η·FP`` with the target slope

.. math:: η = dTP/dFP = \\frac{b_{00} - b_{01}}{b_{11} - b_{10}},

equivalently the target marginal precision ``m = η / (1 + η)`` (see
:mod:`costlib.thresholds.point._target`).

A K x K matrix becomes a 2x2 one per class ``k`` ("class k vs the rest",
:func:`one_vs_rest_benefit`).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from costlib.costs._matrices import BenefitMatrix, _SquareMatrix

__all__ = ["eta", "one_vs_rest_benefit", "target_marginal_precision"]

Combination = Literal["paper", "normalized"]


def _binary_values(benefit_matrix: ArrayLike | BenefitMatrix) -> np.ndarray:
    if isinstance(benefit_matrix, BenefitMatrix):
        b = benefit_matrix.values
    else:
        b = np.asarray(benefit_matrix, dtype=np.float64)
    if b.shape != (2, 2) or not np.isfinite(b).all():
        raise ValueError(
            f"eta needs a finite 2x2 benefit matrix, got shape {b.shape}; for K classes use "
            "one_vs_rest_benefit first"
        )
    return b


def eta(benefit_matrix: ArrayLike | BenefitMatrix) -> float:
    """Cost ratio ``η = (b00 - b01) / (b11 - b10)`` of a 2x2 benefit matrix.

    Rows = true class, columns = predicted class; class 1 is the positive class. ``η`` weights
    the class-0 errors in benefit-based logistic regression and is the target slope ``dTP/dFP``
    of the benefit-optimal operating point (maximise ``TP - η FP``).

    Raises
    ------
    ValueError
        Unless ``b00 > b01`` and ``b11 > b10`` (correct decisions must be worth more).
    """
    b = _binary_values(benefit_matrix)
    num, den = b[0, 0] - b[0, 1], b[1, 1] - b[1, 0]
    if not (num > 0 and den > 0):
        raise ValueError(
            "eta needs b00 > b01 and b11 > b10 (rows = true class, columns = predicted), got "
            f"b00-b01={num:g}, b11-b10={den:g}"
        )
    return float(num / den)


def target_marginal_precision(benefit_matrix: ArrayLike | BenefitMatrix) -> float:
    """Target marginal precision ``m = η / (1 + η)`` of a 2x2 benefit matrix.

    Letting in items whose precision is at least ``m`` raises the benefit: an extra flagged
    item that is positive with probability ``p`` gains ``p (b11 - b10) - (1 - p)(b00 - b01)``,
    which is ``>= 0`` exactly when ``p >= m``.
    """
    e = eta(benefit_matrix)
    return e / (1.0 + e)


def one_vs_rest_benefit(
    benefit_matrix: ArrayLike | BenefitMatrix,
    priors: ArrayLike,
    k: int,
    *,
    combination: Combination = "paper",
) -> np.ndarray:
    """2x2 benefit matrix of the one-vs-rest problem "class k (1) vs the rest (0)".

    ``combination="paper"`` implements the seed's formulas as written (sums over ``i != k``)::

        b00 = Σ_{i≠k} π_i b_ii,   b01 = Σ_{i≠k} π_i b_ik,   b10 = Σ_{i≠k} π_i b_ki,
        b11 = b_kk.

    Note these mix scales: ``b00``, ``b01``, ``b10`` are prior-weighted *sums* over the rest
    (total weight ``1 - π_k``) while ``b11`` is a single unweighted entry.

    ``combination="normalized"`` divides the three sums by ``Σ_{i≠k} π_i = 1 - π_k``, so every
    entry is a per-sample benefit: ``b00``/``b01`` are the mean benefits of a rest sample
    classified correctly/as ``k`` and ``b10`` the prior-weighted mean benefit of a class-``k``
    sample classified into the rest. Then ``η_k = (b00 - b01) / (b11 - b10)`` compares like
    with like.

    Parameters
    ----------
    benefit_matrix : array-like of shape (K, K) or BenefitMatrix
        Rows = true class, columns = predicted class.
    priors : array-like of shape (K,)
        Class priors ``π``, same order as the rows.
    k : int
        Row index of the "one" class.
    combination : {"paper", "normalized"}, default="paper"

    Returns
    -------
    ndarray of shape (2, 2)
        ``[[b00, b01], [b10, b11]]``; row/column 0 = rest, 1 = class ``k``.
    """
    b = benefit_matrix.values if isinstance(benefit_matrix, _SquareMatrix) else np.asarray(
        benefit_matrix, dtype=np.float64
    )
    pri = np.asarray(priors, dtype=np.float64)
    n = b.shape[0]
    if b.ndim != 2 or b.shape != (n, n) or pri.shape != (n,):
        raise ValueError(f"need a KxK matrix and K priors, got {b.shape} and {pri.shape}")
    if not (0 <= k < n):
        raise ValueError(f"k must be in [0, {n}), got {k}")
    if combination not in ("paper", "normalized"):
        raise ValueError(f"combination must be 'paper' or 'normalized', got {combination!r}")
    rest = np.arange(n) != k
    w = pri[rest]
    b00 = float(w @ np.diag(b)[rest])
    b01 = float(w @ b[rest, k])
    b10 = float(w @ b[k, rest])
    if combination == "normalized":
        mass = w.sum()
        if mass <= 0:
            raise ValueError(f"the rest of class {k} has zero prior mass")
        b00, b01, b10 = b00 / mass, b01 / mass, b10 / mass
    return np.array([[b00, b01], [b10, b[k, k]]])
