"""The benefit-based performance metric (Sooklal et al., seed 000) and its optimal thresholds.

Matrices follow the convention of :mod:`costlib.costs._matrices`: rows are the true class,
columns the predicted class; for a binary problem class 1 is the positive class.

Metric. With class priors ``π_i`` and ``F_ij`` the fraction of class-``i`` samples predicted as
``j``, the expected (per-sample) benefit is

.. math:: B = \\sum_i \\sum_j π_i F_{ij} b_{ij},

which for a binary score thresholded at ``t`` (``s < t`` → class 0, ``s >= t`` → class 1, the
rule of scikit-learn's :class:`~sklearn.model_selection.TunedThresholdClassifierCV`) is

.. math:: B(t) = π_0 F_0(t) b_{00} + π_0 (1 - F_0(t)) b_{01} + π_1 F_1(t) b_{10}
                 + π_1 (1 - F_1(t)) b_{11},

with ``F_c`` the score CDF of class ``c``. Its upper bound (perfect separation) is
``Σ_i π_i b_ii``, so the normalised metric is ``μ = B / Σ_i π_i b_ii`` (``μ ≈ 1``: near optimal).

The slope ``η`` of the benefit-optimal operating point of a 2x2 matrix, and the one-vs-rest
reduction of a K x K matrix, are in :mod:`costlib.costs._binary`.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._sklearn import column_or_1d
from costlib.costs._labels import label_array, label_indices, score_order
from costlib.costs._matrices import BenefitMatrix, CostMatrix, _SquareMatrix, as_benefit_matrix

__all__ = [
    "benefit_curve",
    "benefit_optimal_threshold",
    "benefit_scorer",
    "class_priors",
    "expected_benefit",
    "normalized_benefit",
]


def _check_weights(sample_weight: ArrayLike | None, n: int) -> np.ndarray:
    if sample_weight is None:
        return np.ones(n)
    w = column_or_1d(np.asarray(sample_weight, dtype=np.float64))
    if w.shape[0] != n:
        raise ValueError(f"sample_weight has {w.shape[0]} entries, expected {n}")
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ValueError("sample_weight must be finite, >= 0 and not all zero")
    return w


def matrix_indices(
    bm: _SquareMatrix, labels: ArrayLike | None, pos_label: object, *ys: ArrayLike
) -> tuple[np.ndarray, ...]:
    """Row/column of ``bm`` of every label in ``ys`` (``y_true`` first, then ``y_pred``).

    The matrix's own labels win (``labels`` must then agree); else ``labels``; else the
    convention of :func:`costlib.costs._labels.label_indices` (binary: 0/1, bool, -1/1 or
    ``pos_label``). A label that is no row of the matrix is refused.
    """
    if bm.labels is not None:
        if labels is not None and not np.array_equal(np.asarray(labels), bm.labels):
            raise ValueError(
                f"labels={np.asarray(labels).tolist()} disagree with the matrix's own labels "
                f"{bm.labels.tolist()}"
            )
        labels = bm.labels
    lengths = {len(label_array(y, name)) for y, name in zip(ys, ("y_true", "y_pred"),
                                                            strict=False)}
    if len(lengths) > 1:
        raise ValueError("y_true and y_pred have different lengths")
    return label_indices(ys[0], bm.n_classes, labels, *ys[1:], pos_label=pos_label)


def _weighted_confusion(
    ti: np.ndarray, pi: np.ndarray, k: int, w: np.ndarray
) -> np.ndarray:
    cm: np.ndarray = np.bincount(ti * k + pi, weights=w, minlength=k * k).reshape(k, k)
    return cm


def class_priors(
    y: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
) -> np.ndarray:
    """Empirical (weighted) class priors ``π_i`` of ``y`` in the order of ``labels``.

    A missing label (NaN, None, ``<NA>``) is refused; every other label must be in ``labels``.
    """
    y = label_array(y, "y")
    labels = np.asarray(labels)
    w = _check_weights(sample_weight, y.shape[0])
    pos = {lab: i for i, lab in enumerate(labels.tolist())}
    try:
        idx = np.array([pos[v] for v in y.tolist()], dtype=np.intp)
    except KeyError as exc:
        raise ValueError(f"label {exc.args[0]!r} is not among {labels.tolist()}") from None
    counts = np.bincount(idx, weights=w, minlength=labels.shape[0]).astype(np.float64)
    priors: NDArray[np.float64] = counts / counts.sum()
    return priors


def expected_benefit(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Expected per-sample benefit ``B = Σ_i Σ_j π_i F_ij b_ij`` of hard predictions.

    ``π_i F_ij`` is the (weighted) fraction of samples of true class ``i`` predicted as ``j``,
    i.e. the normalised confusion matrix, so ``B`` is the mean benefit per sample.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
    benefit_matrix : array-like of shape (K, K) or BenefitMatrix
        Rows = true class, columns = predicted class.
    labels : array-like of shape (K,), default=None
        The class of each row/column when the matrix has no labels. By default a 2x2
        matrix needs labels 0/1, bool or -1/1 (or ``pos_label``); a K x K one labels
        ``0..K-1`` or K distinct labels in sorted order.
    pos_label : scalar, default=None
        2x2 matrices only: the label of the positive class (row/column 1), for labels such as
        ``"fraud"``/``"ok"``, which are refused without it.
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    float

    Examples
    --------
    >>> b = [[0.0, -5.0], [-100.0, 95.0]]
    >>> expected_benefit(["ok", "fraud"], ["ok", "fraud"], b, pos_label="fraud")
    47.5
    """
    bm = as_benefit_matrix(benefit_matrix)
    ti, pi = matrix_indices(bm, labels, pos_label, y_true, y_pred)
    if ti.shape[0] == 0:
        raise ValueError("y_true is empty")
    w = _check_weights(sample_weight, ti.shape[0])
    cm = _weighted_confusion(ti, pi, bm.n_classes, w)
    return float((cm * bm.values).sum() / cm.sum())


def normalized_benefit(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Normalised benefit ``μ = B / Σ_i π_i b_ii`` (1 = every sample correct).

    ``π_i`` are the (weighted) class priors of ``y_true``. See :func:`expected_benefit` for the
    parameters.

    Raises
    ------
    ValueError
        If ``Σ_i π_i b_ii == 0`` (e.g. a pure cost matrix with zero diagonal): μ is undefined.
    """
    bm = as_benefit_matrix(benefit_matrix)
    b = expected_benefit(
        y_true, y_pred, bm, labels=labels, pos_label=pos_label, sample_weight=sample_weight
    )
    ti, _ = matrix_indices(bm, labels, pos_label, y_true, y_pred)
    w = _check_weights(sample_weight, ti.shape[0])
    mass = np.bincount(ti, weights=w, minlength=bm.n_classes)
    pri = mass / mass.sum()
    bound = float(pri @ np.diag(bm.values))
    if bound == 0.0:
        raise ValueError(
            "normalized_benefit is undefined: the upper bound Σ_i π_i b_ii is 0 "
            "(the diagonal benefits of the classes present are all 0)"
        )
    return b / bound


def _binary_scores(
    y_true: ArrayLike,
    scores: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    labels: ArrayLike | None,
    pos_label: object,
    sample_weight: ArrayLike | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    bm = as_benefit_matrix(benefit_matrix)
    if bm.n_classes != 2:
        raise ValueError(
            f"the benefit curve over one score needs a 2x2 benefit matrix, got "
            f"{bm.n_classes}x{bm.n_classes}"
        )
    (ti,) = matrix_indices(bm, labels, pos_label, y_true)
    s = column_or_1d(np.asarray(scores))
    if s.shape[0] != ti.shape[0]:
        raise ValueError(f"scores has {s.shape[0]} entries, y_true {ti.shape[0]}")
    if ti.shape[0] == 0:
        raise ValueError("y_true is empty")
    try:
        s = s.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError("scores must be numeric") from None
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite (no NaN or inf)")
    lab = bm.labels if bm.labels is not None else labels
    order = score_order(lab, pos_label)
    is_pos = ti == order[1]
    w = _check_weights(sample_weight, ti.shape[0])
    return bm.values[np.ix_(order, order)], s, is_pos, w


def benefit_curve(
    y_true: ArrayLike,
    scores: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Expected benefit ``B(t)`` at every distinct decision threshold of a binary score.

    Decision rule: ``s < t`` → the negative class, ``s >= t`` → the positive class (row 1 of
    a plain matrix; with labels, ``pos_label`` or the label 1/True), expected to score higher.
    This is scikit-learn's rule (its
    :class:`~sklearn.model_selection.TunedThresholdClassifierCV` predicts the positive class
    when the score is ``>=`` the threshold), so a threshold from here can be set on a
    scikit-learn classifier as is. (The paper writes ``s > t``; for continuous scores the two
    coincide, on ties ``>=`` makes every threshold an observed score.) ``B(t)`` is

    .. math:: B(t) = π_0 F_0(t) b_{00} + π_0 (1 - F_0(t)) b_{01} + π_1 F_1(t) b_{10}
                     + π_1 (1 - F_1(t)) b_{11}

    with ``F_c(t)`` the empirical (weighted) share of class ``c`` scoring below ``t``. ``B``
    only changes at observed scores, so the candidate thresholds are every distinct score (the
    smallest: everything class 1) and ``+inf`` (everything class 0).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
    scores : array-like of shape (n_samples,)
        Finite scores, higher = more likely class 1.
    benefit_matrix : array-like of shape (2, 2) or BenefitMatrix
        Rows = true class, columns = predicted class.
    labels : array-like of shape (2,), default=None
        ``(class 0, class 1)``; by default the labels must be 0/1, bool or -1/1.
    pos_label : scalar, default=None
        The label of class 1 (the positive class), for other labels (e.g. strings).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    thresholds : ndarray of shape (n_thresholds,)
        Increasing; the last is ``+inf``.
    benefit : ndarray of shape (n_thresholds,)
        ``B(t)`` per threshold (per-sample benefit).
    """
    b, s, is_pos, w = _binary_scores(y_true, scores, benefit_matrix, labels, pos_label,
                                  sample_weight)
    uniq, inv = np.unique(s, return_inverse=True)
    w0 = np.bincount(inv, weights=np.where(is_pos, 0.0, w), minlength=uniq.shape[0])
    w1 = np.bincount(inv, weights=np.where(is_pos, w, 0.0), minlength=uniq.shape[0])
    # Weighted mass of each class strictly below each threshold: π_c F_c(t) · W.
    cum0 = np.concatenate(([0.0], np.cumsum(w0)))
    cum1 = np.concatenate(([0.0], np.cumsum(w1)))
    tot0, tot1 = cum0[-1], cum1[-1]
    total = tot0 + tot1
    benefit = (
        cum0 * b[0, 0] + (tot0 - cum0) * b[0, 1] + cum1 * b[1, 0] + (tot1 - cum1) * b[1, 1]
    ) / total
    thresholds = np.concatenate((uniq, [np.inf]))
    return thresholds, benefit


def benefit_optimal_threshold(
    y_true: ArrayLike,
    scores: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    sample_weight: ArrayLike | None = None,
) -> float:
    """Threshold ``t*`` maximising the empirical ``B(t)`` (rule: ``s >= t`` → class 1).

    The empirical counterpart of the paper's optimality condition
    ``f_0(t*) π_0 (b00 - b01) = f_1(t*) π_1 (b11 - b10)``. Among tied maximisers the smallest
    threshold is returned; ``+inf`` means "classify everything as class 0". Parameters as in
    :func:`benefit_curve`.

    This is an *in-sample* optimum on the scores given. To tune the threshold of a
    scikit-learn classifier out of sample (cross-validated), use scikit-learn's
    :class:`~sklearn.model_selection.TunedThresholdClassifierCV` with
    ``scoring=benefit_scorer(benefit_matrix)``; on the same scores and candidate thresholds
    both return the same threshold (tested).

    Returns
    -------
    float
    """
    thresholds, benefit = benefit_curve(
        y_true, scores, benefit_matrix, labels=labels, pos_label=pos_label,
        sample_weight=sample_weight
    )
    return float(thresholds[int(np.argmax(benefit))])


def benefit_scorer(
    matrix: ArrayLike | BenefitMatrix | CostMatrix,
    *,
    labels: ArrayLike | None = None,
    pos_label: object = None,
    normalize: bool = False,
) -> Any:
    """A scikit-learn scorer of the expected benefit (or, from costs, minus the expected cost).

    Use it wherever scikit-learn takes ``scoring=``: ``cross_val_score``, ``GridSearchCV`` and,
    to choose a cost- or benefit-optimal decision threshold for one classifier out of sample,
    :class:`~sklearn.model_selection.TunedThresholdClassifierCV`::

        TunedThresholdClassifierCV(LogisticRegression(), scoring=benefit_scorer(B))

    The scorer evaluates :func:`expected_benefit` (or :func:`normalized_benefit` with
    ``normalize=True``) on the hard predictions, so higher is better. A
    :class:`CostMatrix` ``V`` is turned into the benefit matrix ``-V``: the score is then minus
    the expected cost per sample, and maximising it minimises the cost.

    Parameters
    ----------
    matrix : array-like of shape (K, K), BenefitMatrix or CostMatrix
        Rows = true class, columns = predicted class; a plain array is read as benefits.
    labels : array-like of shape (K,), default=None
        The class of each row/column when the matrix carries no labels (by default the sorted
        labels seen by each call; pass them when a fold or a threshold may lack a class).
    pos_label : scalar, default=None
        2x2 matrices: the label of the positive class (row/column 1) when the labels are not
        0/1, bool or -1/1.
    normalize : bool, default=False
        Score with ``μ = B / Σ_i π_i b_ii`` instead of ``B``.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None) -> float`` from
        :func:`sklearn.metrics.make_scorer`.
    """
    from sklearn.metrics import make_scorer

    if isinstance(matrix, CostMatrix):
        # Any real costs define the metric; the paper's sign assumption is not needed here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            bm = BenefitMatrix(-matrix.values, matrix.labels, strict=False)
    else:
        bm = as_benefit_matrix(matrix)
    func = normalized_benefit if normalize else expected_benefit
    kwargs: dict[str, Any] = {"benefit_matrix": bm}
    if labels is not None:
        kwargs["labels"] = labels
    if pos_label is not None:
        kwargs["pos_label"] = pos_label
    return make_scorer(func, **kwargs)

