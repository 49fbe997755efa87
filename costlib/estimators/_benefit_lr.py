"""Benefit-based logistic regression (Sooklal et al.), binary and one-vs-rest multiclass."""

from __future__ import annotations

from typing import Any, Literal, Self

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from costlib._messages import plain
from costlib.costs._benefit import class_priors
from costlib.costs._binary import eta, one_vs_rest_benefit
from costlib.costs._matrices import BenefitMatrix
from costlib.estimators._common import (
    BinaryClasses,
    aligned_benefit_matrix,
    checked_labels,
    encode_classes,
)


class BenefitLogisticRegression(ClassifierMixin, BaseEstimator):
    """Logistic regression trained to maximise a benefit matrix (Sooklal et al.).

    **Binary.** Maximising the expected benefit of the soft decision ``h = g(θᵀx)``,

    .. math:: J^B_i = y_i[h b_{11} + (1-h) b_{10}] + (1-y_i)[h b_{01} + (1-h) b_{00}],

    and dropping constants and the positive factor ``b11 - b10`` leaves the class-0 errors
    scaled by ``η = (b00 - b01) / (b11 - b10)``; the seed trains the correspondingly weighted
    logistic loss

    .. math:: J_i(θ) = -y_i \\log h_θ(x_i) - η (1 - y_i) \\log(1 - h_θ(x_i)).

    This is exactly scikit-learn's ``LogisticRegression`` (L2-penalised, objective
    ``C Σ_i s_i J_i + ½‖θ‖²``) fitted with sample weights ``s_i = η`` on class 0 and 1 on
    class 1 (times any ``sample_weight``), which is how it is computed.

    **Multiclass (one-vs-rest).** One binary benefit LR per class ``k`` ("k" = 1 vs the rest
    = 0), each with its own ``η_k`` from the 2x2 matrix that
    :func:`costlib.costs.one_vs_rest_benefit` combines from the K x K matrix and the class
    priors ``π``. Side by side (sums over ``i != k``):

    ==========  =============================  ===========================================
    entry       ``combination="paper"``        ``combination="normalized"``
    ==========  =============================  ===========================================
    ``b00``     ``Σ π_i b_ii``                 ``Σ π_i b_ii / (1 - π_k)``
    ``b01``     ``Σ π_i b_ik``                 ``Σ π_i b_ik / (1 - π_k)``
    ``b10``     ``Σ π_i b_ki``                 ``Σ π_i b_ki / (1 - π_k)``
    ``b11``     ``b_kk``                       ``b_kk``
    ==========  =============================  ===========================================

    The seed's formulas ("paper") mix prior-weighted sums over the rest with the unweighted
    ``b_kk``; "normalized" turns the sums into prior-weighted means so all four entries are
    per-sample benefits. The prediction is the class whose classifier scores highest (the
    seed's rule); ``predict_proba`` normalises the K one-vs-rest probabilities to sum to 1.

    Parameters
    ----------
    benefit_matrix : array-like of shape (K, K) or BenefitMatrix, default=None
        Rows = true class, columns = predicted class, in the order of ``classes_`` (sorted
        labels) unless a :class:`~costlib.costs.BenefitMatrix` with labels is given. None
        means ``b_ii = 1``, ``b_ij = -1`` (η = 1: plain logistic regression).
    pos_label : label, default=None
        Two classes only: the positive class, row/column 1 of a plain 2x2 benefit matrix. Needed
        when the classes are not 0/1, bool or -1/1 (e.g. ``"fraud"``/``"ok"``), where a
        plain matrix is otherwise refused rather than read in sorted-label order; a
        labelled matrix says it itself.
    combination : {"paper", "normalized"}, default="paper"
        How the K x K matrix is combined for each one-vs-rest problem (see above). Unused for
        two classes.
    priors : array-like of shape (K,), default=None
        Class priors ``π`` for the combination; None = (weighted) training class frequencies.
    C : float, default=1.0
        Inverse L2 regularisation strength, as in ``LogisticRegression``.
    fit_intercept : bool, default=True
    max_iter : int, default=100
    tol : float, default=1e-4
    solver : str, default="lbfgs"
        Any ``LogisticRegression`` solver that supports ``sample_weight`` and L2.

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
    benefit_matrix_ : ndarray of shape (K, K)
        The benefit matrix aligned to ``classes_``.
    class_priors_ : ndarray of shape (K,)
    binary_benefit_matrices_ : ndarray of shape (n_models, 2, 2)
        The 2x2 matrix of each binary model (``n_models`` = 1 for two classes, else K), rows
        (negative, positive): for two classes the positive class is ``pos_label_``.
    pos_label_ : label or None
        Two classes: the positive class (``pos_label``, else ``1``/``True``, else
        ``classes_[1]`` for the default cost-blind matrix); None for K > 2.
    etas_ : ndarray of shape (n_models,)
        ``η`` of each binary model.
    coef_ : ndarray of shape (n_models, n_features)
    intercept_ : ndarray of shape (n_models,)
    n_iter_ : ndarray of shape (n_models,)

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> clf = BenefitLogisticRegression([[1.0, -1.0], [-10.0, 5.0]], max_iter=500)
    >>> clf.fit(X[:, :3], y).etas_
    array([0.13333333])
    """

    def __init__(
        self,
        benefit_matrix: ArrayLike | BenefitMatrix | None = None,
        *,
        combination: Literal["paper", "normalized"] = "paper",
        priors: ArrayLike | None = None,
        C: float = 1.0,
        fit_intercept: bool = True,
        max_iter: int = 100,
        tol: float = 1e-4,
        solver: str = "lbfgs",
        pos_label: object = None,
    ) -> None:
        self.benefit_matrix = benefit_matrix
        self.pos_label = pos_label
        self.combination = combination
        self.priors = priors
        self.C = C
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.solver = solver

    def _binary_model(self) -> LogisticRegression:
        return LogisticRegression(
            C=self.C,
            fit_intercept=self.fit_intercept,
            max_iter=self.max_iter,
            tol=self.tol,
            solver=self.solver,
        )

    def _priors(self, y_idx: np.ndarray, classes: np.ndarray, sw: np.ndarray) -> np.ndarray:
        if self.priors is None:
            return class_priors(classes[y_idx], classes, sw)
        pri = np.asarray(self.priors, dtype=np.float64)
        if pri.shape != classes.shape or not np.isfinite(pri).all() or (pri < 0).any():
            raise ValueError(
                f"priors must be {classes.shape[0]} finite non-negative numbers, got {plain(pri)}"
            )
        if pri.sum() <= 0:
            raise ValueError("priors must not all be zero")
        return pri / pri.sum()

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the benefit-weighted logistic regression(s).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Multiplies the benefit weights.

        Returns
        -------
        self : object
        """
        if self.combination not in ("paper", "normalized"):
            raise ValueError(
                f"combination must be 'paper' or 'normalized', got {self.combination!r}"
            )
        y = checked_labels(y, type(self).__name__)
        X, y = validate_data(
            self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32], y_numeric=False
        )
        classes, y_idx = encode_classes(y)
        b = aligned_benefit_matrix(self.benefit_matrix, classes, self.pos_label)
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
        self.classes_ = classes
        self.benefit_matrix_ = b
        self.class_priors_ = self._priors(y_idx, classes, sw)
        k = classes.shape[0]
        sign = 1.0
        self.pos_label_ = None
        if k == 2:
            # Fitted on 1 = positive (row 1 of the matrix), whatever the labels: the same bits
            # for 0/1, bool or string labels with pos_label.
            plain = self.benefit_matrix is not None and getattr(
                self.benefit_matrix, "labels", None) is None
            binary = BinaryClasses(classes, self.pos_label, needed=plain)
            self.pos_label_ = classes[binary.positive]
            sign = binary.sign
            binaries = [b[np.ix_(binary.order, binary.order)]]
            targets = [binary.encode(y)]
        else:
            binaries = [
                one_vs_rest_benefit(b, self.class_priors_, j, combination=self.combination)
                for j in range(k)
            ]
            targets = [(y_idx == j).astype(np.intp) for j in range(k)]
        self.binary_benefit_matrices_ = np.stack(binaries)
        self.etas_ = np.array([eta(m) for m in binaries])
        coefs, intercepts, n_iter = [], [], []
        for target, e in zip(targets, self.etas_, strict=True):
            # J_i = -y log h - η (1 - y) log(1 - h): class-0 samples weigh η.
            weights = sw * np.where(target == 1, 1.0, e)
            model = self._binary_model().fit(X, target, sample_weight=weights)
            coefs.append(model.coef_[0])
            intercepts.append(model.intercept_[0])
            n_iter.append(int(np.max(model.n_iter_)))
        self.coef_ = sign * np.vstack(coefs)
        self.intercept_ = sign * np.asarray(intercepts, dtype=np.float64)
        self.n_iter_ = np.asarray(n_iter)
        return self

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Logits ``θ_kᵀx`` of the binary model(s); shape (n,) for two classes, else (n, K)."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
        scores = safe_sparse_dot(X, self.coef_.T, dense_output=True) + self.intercept_
        return scores.ravel() if self.classes_.shape[0] == 2 else scores

    def _sign(self) -> float:
        """+1 if the positive class is ``classes_[1]``, else -1."""
        return 1.0 if self.classes_[1] == self.pos_label_ else -1.0

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities; one-vs-rest sigmoids normalised to sum to 1 for K > 2."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            sign = self._sign()
            p1 = expit(sign * scores)  # the positive class
            internal = np.column_stack((1.0 - p1, p1))
            return internal if sign > 0 else internal[:, ::-1]
        p = expit(scores)
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log of :meth:`predict_proba`."""
        return np.log(self.predict_proba(X))

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The class whose (binary benefit) classifier scores highest."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            sign = self._sign()
            pos = 1 if sign > 0 else 0
            return self.classes_[np.where(sign * scores > 0, pos, 1 - pos)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
