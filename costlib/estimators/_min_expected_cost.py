"""Bayes minimum-expected-cost decisions on top of any probabilistic classifier."""

from __future__ import annotations

from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted

from costlib.costs._matrices import CostMatrix
from costlib.estimators._common import (
    BinaryClasses,
    aligned_cost_matrix,
    cost_decision_function,
    fit_posterior_model,
    internal_proba,
    min_expected_cost_index,
)


class MinimumExpectedCostClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Bayes minimum-expected-cost decisions from a probabilistic classifier's posteriors.

    With posteriors ``p(C_q | x)`` from ``estimator.predict_proba`` and a cost matrix ``V``
    (``V[q, k]`` = cost of predicting ``k`` when the truth is ``q``), the expected cost of
    predicting ``C_k`` is

    .. math:: F(C_k) = \\sum_{q} p(C_q | x) V_{qk},

    and the prediction is ``C_{k*} = argmin_k F(C_k)``. With 0/1 costs this is
    ``argmax_q p(C_q | x)`` (plain classification). Training is cost-blind: costs only act at
    decision time.

    Parameters
    ----------
    estimator : classifier with ``predict_proba``, default=None
        Cloned and fitted in :meth:`fit`; None means ``LogisticRegression()``. To use an
        already fitted model, wrap it in :class:`sklearn.frozen.FrozenEstimator`: fitting is
        then a no-op and ``classes_`` are the prefit model's.
    cost_matrix : array-like of shape (K, K) or CostMatrix, default=None
        Rows = true class, columns = predicted class, in the order of ``classes_`` (sorted
        labels) unless a :class:`~costlib.costs.CostMatrix` with labels is given. None
        means 0/1 costs. A benefit matrix ``b`` is used as ``BenefitMatrix(b).regret_costs()``.
    pos_label : label, default=None
        Two classes only: the positive class, row/column 1 of a plain 2x2 cost matrix. Needed
        when the classes are not 0/1, bool or -1/1 (e.g. ``"fraud"``/``"ok"``), where a
        plain matrix is otherwise refused rather than read in sorted-label order; a
        labelled matrix says it itself.

    Attributes
    ----------
    estimator_ : classifier
        The fitted probabilistic classifier.
    classes_ : ndarray of shape (K,)
        Sorted labels. Two classes are fitted as 0/1 targets (1 = the positive class), so any
        label convention gives the same model.
    pos_label_ : label or None
        The positive class of two; None for K > 2.
    cost_matrix_ : ndarray of shape (K, K)
        The costs aligned to ``classes_``.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> from sklearn.linear_model import LogisticRegression
    >>> clf = MinimumExpectedCostClassifier(LogisticRegression(max_iter=5000), [[0, 1], [10, 0]])
    >>> clf.fit(X[:, :5], y).predict(X[:3, :5]).shape
    (3,)
    """

    def __init__(
        self,
        estimator: object | None = None,
        cost_matrix: ArrayLike | CostMatrix | None = None,
        *,
        pos_label: object = None,
    ) -> None:
        self.estimator = estimator
        self.cost_matrix = cost_matrix
        self.pos_label = pos_label

    def _base_estimator(self) -> Any:
        return LogisticRegression() if self.estimator is None else self.estimator

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None, **fit_params: Any
    ) -> Self:
        """Fit the probabilistic classifier (cost-blind) and align the cost matrix.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to ``estimator.fit`` when given.
        **fit_params : dict
            Passed to ``estimator.fit``.

        Returns
        -------
        self : object
        """
        base = self._base_estimator()
        if not hasattr(base, "predict_proba"):
            raise ValueError(
                f"estimator must implement predict_proba, got {type(base).__name__}"
            )
        if sample_weight is not None:
            fit_params["sample_weight"] = sample_weight
        frozen = type(base).__name__ == "FrozenEstimator"
        self.estimator_, classes, binary, self._encoded = fit_posterior_model(
            clone(base), X, y, self.pos_label, frozen=frozen, fit_params=fit_params)
        self.classes_ = classes
        self.pos_label_ = None if binary is None else classes[binary.positive]
        self.cost_matrix_ = aligned_cost_matrix(self.cost_matrix, classes, self.pos_label)
        return self

    def _internal(self, X: ArrayLike) -> tuple[np.ndarray, np.ndarray, BinaryClasses | None]:
        """Posteriors and costs: (negative, positive) order for two classes, else ``classes_``."""
        check_is_fitted(self, "estimator_")
        binary = None
        cost = self.cost_matrix_
        if self.classes_.shape[0] == 2:
            binary = BinaryClasses(self.classes_, self.pos_label_, needed=False)
            cost = cost[np.ix_(binary.order, binary.order)]
        return internal_proba(self.estimator_, X, binary, self._encoded), cost, binary

    @property
    def n_features_in_(self) -> int:
        """Number of features seen by the fitted estimator."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.n_features_in_

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Posteriors ``p(C_q | x)`` of the underlying estimator, ``classes_`` order."""
        proba, _, binary = self._internal(X)
        return proba if binary is None else binary.columns(proba)

    def expected_costs(self, X: ArrayLike) -> np.ndarray:
        """``F(C_k) = Σ_q p(C_q|x) V_qk`` for every sample and class, shape (n, K)."""
        proba, cost, binary = self._internal(X)
        risk = proba @ cost
        return risk if binary is None else binary.columns(risk)

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Negated expected costs ``-F(C_k)`` (binary: ``F(C_0) - F(C_1)`` in ``classes_``
        order, shape (n,), > 0 where ``classes_[1]`` is cheaper)."""
        proba, cost, binary = self._internal(X)
        if binary is None:
            return cost_decision_function(proba, cost)
        return binary.sign * cost_decision_function(proba, cost)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """``argmin_k F(C_k)``: two classes, the positive one only where strictly cheaper;
        K classes, ties go to the first class of ``classes_``."""
        proba, cost, binary = self._internal(X)
        idx = min_expected_cost_index(proba, cost)
        if binary is None:
            return self.classes_[idx]
        return binary.decode(idx == 1)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        base_tags = get_tags(self._base_estimator())
        tags.input_tags.sparse = base_tags.input_tags.sparse
        tags.input_tags.allow_nan = base_tags.input_tags.allow_nan
        return tags
