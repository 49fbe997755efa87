"""Benefit matrices and the benefit-based performance metric (Sooklal et al., seed 000).

Convention used throughout (and by every estimator in :mod:`costlib.estimators`): in a benefit
matrix ``b`` (or a cost matrix ``V``) **rows are the true class and columns the predicted class**,
so ``b[i, j]`` is the benefit of classifying a sample of class ``i`` as class ``j``. For a binary
problem class 1 is the *positive* class (higher scores), so ``b11`` rewards a true positive,
``b10`` a false negative, ``b01`` a false positive and ``b00`` a true negative.

The paper assumes ``b_ii >= 0`` (a correct decision never costs) and ``b_ij < 0`` for ``i != j``
(an error always costs). :class:`BenefitMatrix` checks this and says which entries break it.

Metric. With class priors ``π_i`` and ``F_ij`` the fraction of class-``i`` samples predicted as
``j``, the expected (per-sample) benefit is

.. math:: B = \\sum_i \\sum_j π_i F_{ij} b_{ij},

which for a binary score thresholded at ``t`` (``s < t`` → class 0, ``s >= t`` → class 1, the
rule of scikit-learn's :class:`~sklearn.model_selection.TunedThresholdClassifierCV`) is

.. math:: B(t) = π_0 F_0(t) b_{00} + π_0 (1 - F_0(t)) b_{01} + π_1 F_1(t) b_{10}
                 + π_1 (1 - F_1(t)) b_{11},

with ``F_c`` the score CDF of class ``c``. Its upper bound (perfect separation) is
``Σ_i π_i b_ii``, so the normalised metric is ``μ = B / Σ_i π_i b_ii`` (``μ ≈ 1``: near optimal).

Bridge to threshold grids. Up to a constant, ``N·B = TP (b11 - b10) - FP (b00 - b01)``, so the
benefit-optimal operating point maximises ``TP - η·FP`` with the target slope

.. math:: η = dTP/dFP = \\frac{b_{00} - b_{01}}{b_{11} - b_{10}},

equivalently the target marginal precision ``m = η / (1 + η)`` (see
:mod:`costlib.thresholds._target`).
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, DTypeLike, NDArray

from costlib._sklearn import check_consistent_length, column_or_1d, confusion_matrix, unique_labels

__all__ = [
    "BenefitMatrix",
    "CostMatrix",
    "as_benefit_matrix",
    "as_cost_matrix",
    "benefit_curve",
    "benefit_optimal_threshold",
    "benefit_scorer",
    "class_priors",
    "eta",
    "expected_benefit",
    "normalized_benefit",
    "one_vs_rest_benefit",
    "target_marginal_precision",
]

Combination = Literal["paper", "normalized"]


class _SquareMatrix:
    """A finite, read-only K x K matrix (K >= 2), optionally with one label per row/column."""

    __slots__ = ("_labels", "_values")
    _kind = "matrix"

    def __init__(self, values: ArrayLike, labels: ArrayLike | None = None) -> None:
        if isinstance(values, _SquareMatrix):
            if type(values) is not type(self):
                raise ValueError(
                    f"got a {type(values).__name__} where a {self._kind} is expected; "
                    "convert explicitly (BenefitMatrix.from_costs / .to_costs())"
                )
            if labels is None:
                labels = values.labels
            values = values.values
        try:
            arr = np.array(values, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{self._kind} must be a numeric K x K array: {exc}") from None
        if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] < 2:
            raise ValueError(
                f"{self._kind} must be a square K x K array with K >= 2 "
                f"(rows = true class, columns = predicted class), got shape {arr.shape}"
            )
        if not np.isfinite(arr).all():
            bad = [tuple(int(v) for v in ij) for ij in np.argwhere(~np.isfinite(arr))]
            raise ValueError(f"{self._kind} must be finite; non-finite entries at {bad}")
        arr.setflags(write=False)
        lab = None
        if labels is not None:
            lab = np.asarray(labels)
            if lab.ndim != 1 or lab.shape[0] != arr.shape[0]:
                raise ValueError(
                    f"{self._kind} labels must be 1-d with one label per row ({arr.shape[0]}), "
                    f"got shape {lab.shape}"
                )
            if len(np.unique(lab)) != lab.shape[0]:
                raise ValueError(f"{self._kind} labels must be unique, got {lab.tolist()}")
            lab = lab.copy()
            lab.setflags(write=False)
        self._values = arr
        self._labels = lab

    @property
    def values(self) -> np.ndarray:
        """The K x K float64 array (read-only); rows = true class, columns = predicted class."""
        return self._values

    @property
    def labels(self) -> np.ndarray | None:
        """Class label of each row/column, or None (then rows follow the sorted class labels)."""
        return self._labels

    @property
    def n_classes(self) -> int:
        """K."""
        return int(self._values.shape[0])

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        return np.array(self._values, dtype=dtype, copy=True)

    def __repr__(self) -> str:
        vals = np.array2string(self._values, separator=", ").replace("\n", "")
        if self._labels is None:
            return f"{type(self).__name__}({vals})"
        return f"{type(self).__name__}({vals}, labels={self._labels.tolist()!r})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        same_labels = (self._labels is None and other._labels is None) or (
            self._labels is not None
            and other._labels is not None
            and np.array_equal(self._labels, other._labels)
        )
        return same_labels and np.array_equal(self._values, other._values)

    __hash__ = None  # type: ignore[assignment]  # value semantics with a mutable look: unhashable

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._values.copy(), self._labels))

    def aligned_to(self, classes: ArrayLike) -> np.ndarray:
        """Return the values with rows and columns in the order of ``classes``.

        Without labels, the matrix is taken to be in the order of ``classes`` already (which for
        the estimators is the sorted order of the training labels, ``classes_``).

        Raises
        ------
        ValueError
            If the size does not match, a class is not a label of the matrix, or a label of the
            matrix is not among ``classes``.
        """
        classes = np.asarray(classes)
        if self._labels is None:
            if classes.shape[0] != self.n_classes:
                raise ValueError(
                    f"{self._kind} is {self.n_classes}x{self.n_classes} but there are "
                    f"{classes.shape[0]} classes {classes.tolist()}; rows/columns must follow "
                    "the sorted class labels (or give the matrix labels)"
                )
            return self._values
        missing = [c for c in classes.tolist() if c not in set(self._labels.tolist())]
        if missing:
            raise ValueError(
                f"label(s) {missing} are not in the {self._kind} "
                f"(its labels are {self._labels.tolist()})"
            )
        extra = [c for c in self._labels.tolist() if c not in set(classes.tolist())]
        if extra:
            raise ValueError(
                f"{self._kind} label(s) {extra} do not occur among the classes "
                f"{classes.tolist()}"
            )
        pos = {lab: i for i, lab in enumerate(self._labels.tolist())}
        idx = np.array([pos[c] for c in classes.tolist()])
        aligned: np.ndarray = self._values[np.ix_(idx, idx)]
        return aligned


class BenefitMatrix(_SquareMatrix):
    """A validated benefit matrix ``b`` (rows = true class, columns = predicted class).

    ``b[i, j]`` is the benefit of classifying a sample of true class ``i`` as class ``j``. The
    paper assumes ``b_ii >= 0`` and ``b_ij < 0`` for ``i != j``.

    Parameters
    ----------
    values : array-like of shape (K, K)
        Finite benefits, K >= 2.
    labels : array-like of shape (K,), default=None
        The class of each row/column. Without labels, rows follow the sorted class labels (the
        estimators' ``classes_``).
    strict : bool, default=True
        If True, a matrix that breaks the paper's sign assumption raises ``ValueError`` naming
        the offending entries. If False it is accepted with a ``UserWarning`` saying the same;
        functions that need ``b_ii > b_ij`` (e.g. :func:`eta`) still check what they need.

    Examples
    --------
    >>> BenefitMatrix([[1.0, -1.0], [-5.0, 2.0]]).values[1, 0]
    np.float64(-5.0)
    """

    __slots__ = ()
    _kind = "benefit matrix"

    def __init__(
        self, values: ArrayLike, labels: ArrayLike | None = None, *, strict: bool = True
    ) -> None:
        super().__init__(values, labels)
        problems = self.sign_violations()
        if problems:
            msg = (
                "benefit matrix breaks the paper's assumption (diagonal b_ii >= 0, "
                "off-diagonal b_ij < 0; rows = true class, columns = predicted class): "
                + "; ".join(problems)
            )
            if strict:
                raise ValueError(msg + ". Pass strict=False to accept it anyway.")
            warnings.warn(msg, UserWarning, stacklevel=2)

    def sign_violations(self) -> list[str]:
        """Entries that break ``b_ii >= 0`` / ``b_ij < 0`` (i != j), as readable strings."""
        b = self._values
        out = [f"b[{i},{i}]={b[i, i]:g} < 0" for i in range(b.shape[0]) if b[i, i] < 0]
        out += [
            f"b[{i},{j}]={b[i, j]:g} >= 0"
            for i in range(b.shape[0])
            for j in range(b.shape[0])
            if i != j and b[i, j] >= 0
        ]
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_benefit, (self._values.copy(), self._labels))

    @classmethod
    def from_costs(cls, costs: ArrayLike, labels: ArrayLike | None = None) -> BenefitMatrix:
        """Benefit matrix ``b = -V`` of a cost matrix ``V`` (zero diagonal → ``b_ii = 0``)."""
        if isinstance(costs, CostMatrix):
            labels = costs.labels if labels is None else labels
            costs = costs.values
        return cls(-np.asarray(costs, dtype=np.float64), labels)

    def to_costs(self) -> CostMatrix:
        """Cost matrix ``V = -b`` with the same labels."""
        return CostMatrix(-self._values, self._labels)

    def regret_costs(self) -> CostMatrix:
        """Regret costs ``V_ij = b_ii - b_ij`` (zero diagonal).

        Decisions are unchanged: ``argmin_k Σ_q p_q V_qk = argmax_k Σ_q p_q b_qk`` because the
        two differ by ``Σ_q p_q b_qq``, which does not depend on ``k``.
        """
        b = self._values
        return CostMatrix(np.diag(b)[:, None] - b, self._labels)


def _rebuild_benefit(values: np.ndarray, labels: np.ndarray | None) -> BenefitMatrix:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return BenefitMatrix(values, labels, strict=False)


class CostMatrix(_SquareMatrix):
    """A validated cost matrix ``V`` (rows = true class, columns = predicted class).

    ``V[q, k]`` is the cost of predicting class ``k`` for a sample of true class ``q``; only
    finiteness and shape are checked (any real costs define a Bayes decision).

    Parameters
    ----------
    values : array-like of shape (K, K)
    labels : array-like of shape (K,), default=None
        The class of each row/column; without labels rows follow the sorted class labels.
    """

    __slots__ = ()
    _kind = "cost matrix"

    @classmethod
    def zero_one(cls, n_classes: int, labels: ArrayLike | None = None) -> CostMatrix:
        """The 0/1 cost matrix (minimising it maximises accuracy)."""
        return cls(1.0 - np.eye(n_classes), labels)


def as_benefit_matrix(
    benefit_matrix: ArrayLike | BenefitMatrix, *, strict: bool = True
) -> BenefitMatrix:
    """Return ``benefit_matrix`` as a :class:`BenefitMatrix` (no copy if it already is one)."""
    if isinstance(benefit_matrix, BenefitMatrix):
        return benefit_matrix
    if isinstance(benefit_matrix, CostMatrix):
        raise ValueError("got a CostMatrix where a benefit matrix is expected; use from_costs")
    return BenefitMatrix(benefit_matrix, strict=strict)


def as_cost_matrix(cost_matrix: ArrayLike | CostMatrix) -> CostMatrix:
    """Return ``cost_matrix`` as a :class:`CostMatrix` (no copy if it already is one)."""
    if isinstance(cost_matrix, CostMatrix):
        return cost_matrix
    if isinstance(cost_matrix, BenefitMatrix):
        raise ValueError("got a BenefitMatrix where a cost matrix is expected; use to_costs()")
    return CostMatrix(cost_matrix)


def _resolve_labels(
    bm: _SquareMatrix, labels: ArrayLike | None, *ys: np.ndarray
) -> np.ndarray:
    """Row/column labels of ``bm`` for the label vectors ``ys``; check every y is among them."""
    if bm.labels is not None:
        if labels is not None and not np.array_equal(np.asarray(labels), bm.labels):
            raise ValueError(
                f"labels={np.asarray(labels).tolist()} disagree with the matrix's own labels "
                f"{bm.labels.tolist()}"
            )
        lab = bm.labels
    elif labels is not None:
        lab = np.asarray(labels)
        if lab.ndim != 1 or lab.shape[0] != bm.n_classes or len(np.unique(lab)) != len(lab):
            raise ValueError(
                f"labels must be {bm.n_classes} distinct values (one per matrix row), "
                f"got {lab.tolist()}"
            )
    else:
        lab = unique_labels(*ys)
        if lab.shape[0] != bm.n_classes:
            raise ValueError(
                f"the data has {lab.shape[0]} distinct label(s) {lab.tolist()} but the "
                f"{bm._kind} is {bm.n_classes}x{bm.n_classes}; pass labels= to say which "
                "class each row/column is"
            )
        return lab
    known = set(lab.tolist())
    for name, y in zip(("y_true", "y_pred"), ys, strict=False):
        unknown = sorted({v for v in np.unique(y).tolist() if v not in known}, key=str)
        if unknown:
            raise ValueError(
                f"{name} has label(s) {unknown} that are not in the {bm._kind} "
                f"(labels {lab.tolist()})"
            )
    return lab


def _check_weights(sample_weight: ArrayLike | None, n: int) -> np.ndarray:
    if sample_weight is None:
        return np.ones(n)
    w = column_or_1d(np.asarray(sample_weight, dtype=np.float64))
    if w.shape[0] != n:
        raise ValueError(f"sample_weight has {w.shape[0]} entries, expected {n}")
    if not np.isfinite(w).all() or (w < 0).any() or w.sum() <= 0:
        raise ValueError("sample_weight must be finite, >= 0 and not all zero")
    return w


def class_priors(
    y: ArrayLike, labels: ArrayLike, sample_weight: ArrayLike | None = None
) -> np.ndarray:
    """Empirical (weighted) class priors ``π_i`` of ``y`` in the order of ``labels``."""
    y = column_or_1d(y)
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
        The class of each row/column when the matrix has no labels; by default the sorted
        distinct labels of ``y_true`` and ``y_pred``, which must then number exactly K.
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    float
    """
    bm = as_benefit_matrix(benefit_matrix)
    y_true = column_or_1d(y_true)
    y_pred = column_or_1d(y_pred)
    check_consistent_length(y_true, y_pred)
    if y_true.shape[0] == 0:
        raise ValueError("y_true is empty")
    lab = _resolve_labels(bm, labels, y_true, y_pred)
    w = _check_weights(sample_weight, y_true.shape[0])
    cm = confusion_matrix(y_true, y_pred, labels=lab, sample_weight=w)
    return float((cm * bm.values).sum() / cm.sum())


def normalized_benefit(
    y_true: ArrayLike,
    y_pred: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    *,
    labels: ArrayLike | None = None,
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
    y_true_arr = column_or_1d(y_true)
    y_pred_arr = column_or_1d(y_pred)
    b = expected_benefit(
        y_true_arr, y_pred_arr, bm, labels=labels, sample_weight=sample_weight
    )
    lab = _resolve_labels(bm, labels, y_true_arr, y_pred_arr)
    pri = class_priors(y_true_arr, lab, sample_weight)
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
    sample_weight: ArrayLike | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    bm = as_benefit_matrix(benefit_matrix)
    if bm.n_classes != 2:
        raise ValueError(
            f"the benefit curve over one score needs a 2x2 benefit matrix, got "
            f"{bm.n_classes}x{bm.n_classes}"
        )
    y_true = column_or_1d(y_true)
    s = column_or_1d(np.asarray(scores))
    check_consistent_length(y_true, s)
    if y_true.shape[0] == 0:
        raise ValueError("y_true is empty")
    try:
        s = s.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError("scores must be numeric") from None
    if not np.isfinite(s).all():
        raise ValueError("scores must be finite (no NaN or inf)")
    if bm.labels is None and labels is None:
        lab = unique_labels(y_true)
        if lab.shape[0] != 2:
            raise ValueError(
                f"y_true has {lab.shape[0]} distinct label(s) {lab.tolist()}; pass labels= "
                "(negative, positive) when one class is absent"
            )
    else:
        lab = _resolve_labels(bm, labels, y_true)
    is_pos = y_true == lab[1]
    w = _check_weights(sample_weight, y_true.shape[0])
    return bm.values, s, is_pos, w


def benefit_curve(
    y_true: ArrayLike,
    scores: ArrayLike,
    benefit_matrix: ArrayLike | BenefitMatrix,
    *,
    labels: ArrayLike | None = None,
    sample_weight: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Expected benefit ``B(t)`` at every distinct decision threshold of a binary score.

    Decision rule: ``s < t`` → class 0 (``labels[0]``), ``s >= t`` → class 1 (``labels[1]``,
    the positive class, expected to score higher). This is scikit-learn's rule (its
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
        ``(class 0, class 1)``; by default the sorted labels of ``y_true`` (must be two).
    sample_weight : array-like of shape (n_samples,), default=None

    Returns
    -------
    thresholds : ndarray of shape (n_thresholds,)
        Increasing; the last is ``+inf``.
    benefit : ndarray of shape (n_thresholds,)
        ``B(t)`` per threshold (per-sample benefit).
    """
    b, s, is_pos, w = _binary_scores(y_true, scores, benefit_matrix, labels, sample_weight)
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
        y_true, scores, benefit_matrix, labels=labels, sample_weight=sample_weight
    )
    return float(thresholds[int(np.argmax(benefit))])


def benefit_scorer(
    matrix: ArrayLike | BenefitMatrix | CostMatrix,
    *,
    labels: ArrayLike | None = None,
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
    return make_scorer(func, **kwargs)


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
