"""Per-example Bayes minimum-risk decisions on top of any probabilistic classifier."""

from __future__ import annotations

from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.calibration import CalibratedClassifierCV
from sklearn.linear_model import LogisticRegression
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted

from costlib.costs._example_costs import as_example_costs
from costlib.costs._labels import standard_positive
from costlib.costs._matrices import CostMatrix
from costlib.estimators._common import (
    BinaryClasses,
    CostFallbackWarning,
    aligned_cost_matrix,
    binary_costs_internal,
    fit_posterior_model,
    internal_proba,
    warn_every_time,
)

FloatArray = npt.NDArray[np.float64]


class BayesMinimumRiskClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Decide each example by minimum expected cost under its own cost matrix.

    With posteriors ``p(q | x_i)`` of the (optionally calibrated) classifier and the example's
    cost matrix ``C_i`` (rows = true class, columns = predicted class), predict

    .. math:: \\hat y_i = \\arg\\min_k \\sum_q p(q | x_i) C_i[q, k]

    (binary: flag iff ``p(1|x_i) > t_i = (C^{FP}_i - C^{TN}_i) / (C^{FP}_i - C^{TN}_i + C^{FN}_i
    - C^{TP}_i)``). Training is cost-blind; the costs are given to :meth:`predict` (scikit-learn
    metadata ``cost_matrix``, request it with ``set_predict_request(cost_matrix=True)``) or,
    for class-level costs, to the constructor. The rule is only as good as the probabilities,
    hence the optional calibration step.

    Parameters
    ----------
    estimator : classifier with ``predict_proba``, default=None
        Cloned and fitted; None means ``LogisticRegression()``. A prefit model wrapped in
        :class:`sklearn.frozen.FrozenEstimator` is used as is (then ``fit`` only calibrates,
        if asked to, like ``TunedThresholdClassifierCV`` with a frozen estimator).
    calibration : {None, "sigmoid", "isotonic"}, default=None
        Wrap the estimator in ``CalibratedClassifierCV(method=calibration, cv=cv)``.
    cv : int or cross-validation generator, default=5
        Passed to ``CalibratedClassifierCV``.
    cost_matrix : array-like of shape (K, K) or CostMatrix, default=None
        Costs used when :meth:`predict` gets none. If both are None the decision falls back
        to 0/1 costs (the most probable class) with a :class:`CostFallbackWarning` on every
        call: in cross-validation, score with :func:`make_cost_scorer`, which routes each
        fold's costs into :meth:`predict`.
    pos_label : label, default=None
        Two classes only: the positive class, row/column 1 of plain 2x2 costs (per example or
        shared). Needed when the classes are not 0/1, bool or -1/1 (e.g. ``"fraud"``/
        ``"ok"``), where plain costs are otherwise refused rather than read in sorted-label
        order.

    Attributes
    ----------
    estimator_ : classifier
        The fitted (calibrated) classifier.
    classes_ : ndarray of shape (K,)
        Sorted labels. With two classes the estimator is fitted on 0/1 targets (1 = the
        positive class), so any label convention gives the same model.
    pos_label_ : label or None
        The positive class of two (``pos_label``, else ``1``/``True``, else ``classes_[1]``
        when only 0/1 costs are used); None for K > 2.
    cost_matrix_ : ndarray of shape (K, K)
        The default costs aligned to ``classes_``.

    Examples
    --------
    >>> import numpy as np
    >>> from costlib.costs import binary_example_costs
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = (X[:, 0] + rng.normal(size=300) > 1).astype(int)
    >>> clf = BayesMinimumRiskClassifier(calibration="sigmoid").fit(X, y)
    >>> amounts = rng.uniform(1, 500, size=3)
    >>> clf.predict(X[:3], cost_matrix=binary_example_costs(fn=amounts, fp=10.0)).shape
    (3,)
    """

    def __init__(
        self,
        estimator: Any = None,
        *,
        calibration: Literal["sigmoid", "isotonic"] | None = None,
        cv: Any = 5,
        cost_matrix: ArrayLike | CostMatrix | None = None,
        pos_label: object = None,
    ) -> None:
        self.estimator = estimator
        self.calibration = calibration
        self.cv = cv
        self.cost_matrix = cost_matrix
        self.pos_label = pos_label

    def _base_estimator(self) -> Any:
        return LogisticRegression() if self.estimator is None else self.estimator

    def fit(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None,
        **fit_params: Any,
    ) -> Self:
        """Fit (and optionally calibrate) the probabilistic classifier; costs play no part.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Passed on when given.
        **fit_params : dict
            Passed to the estimator's (or the calibrator's) ``fit``.

        Returns
        -------
        self : object
        """
        if self.calibration not in (None, "sigmoid", "isotonic"):
            raise ValueError(
                f"calibration must be None, 'sigmoid' or 'isotonic', got {self.calibration!r}"
            )
        base = self._base_estimator()
        if not hasattr(base, "predict_proba"):
            raise ValueError(f"estimator must implement predict_proba, got "
                             f"{type(base).__name__}")
        model = clone(base)
        if self.calibration is not None:
            model = CalibratedClassifierCV(model, method=self.calibration, cv=self.cv)
        if sample_weight is not None:
            fit_params["sample_weight"] = sample_weight
        frozen = type(base).__name__ == "FrozenEstimator"
        self.estimator_, classes, binary, self._encoded = fit_posterior_model(
            model, X, y, self.pos_label, frozen=frozen, fit_params=fit_params)
        self.classes_ = classes
        self.pos_label_ = None if binary is None else classes[binary.positive]
        self.cost_matrix_ = aligned_cost_matrix(self.cost_matrix, classes, self.pos_label)
        return self

    def _binary(self) -> BinaryClasses | None:
        check_is_fitted(self, "estimator_")
        if self.classes_.shape[0] != 2:
            return None
        binary = BinaryClasses(self.classes_, self.pos_label_, needed=False)
        binary.known = self.pos_label is not None or standard_positive(self.classes_.tolist())
        return binary

    @property
    def n_features_in_(self) -> int:
        """Number of features seen by the fitted classifier."""
        check_is_fitted(self, "estimator_")
        return int(self.estimator_.n_features_in_)

    def predict_proba(self, X: ArrayLike) -> FloatArray:
        """Posteriors of the fitted (calibrated) classifier, shape (n, K), ``classes_`` order."""
        binary = self._binary()
        p = internal_proba(self.estimator_, X, binary, self._encoded)
        out: FloatArray = p if binary is None else binary.columns(p)
        return out

    def _internal_risk(
        self, X: ArrayLike, cost_matrix: ArrayLike | CostMatrix | None
    ) -> tuple[FloatArray, BinaryClasses | None]:
        """Expected costs, (negative, positive) columns for two classes, else ``classes_``."""
        binary = self._binary()
        proba = internal_proba(self.estimator_, X, binary, self._encoded)
        n, k = proba.shape
        if cost_matrix is None:
            if self.cost_matrix is None:
                warn_every_time(
                    f"{type(self).__name__} got no cost_matrix (neither in predict nor in the "
                    "constructor): deciding by 0/1 costs, i.e. the most probable class. Pass "
                    "cost_matrix= to predict; in cross-validation score with "
                    "costlib.estimators.make_cost_scorer(...), which routes the costs into "
                    "predict", CostFallbackWarning, stacklevel=3)
            shared = self.cost_matrix_
            if binary is not None:
                shared = shared[np.ix_(binary.order, binary.order)]
            costs = np.broadcast_to(shared, (n, k, k))
        elif isinstance(cost_matrix, CostMatrix) and cost_matrix.labels is not None:
            order = self.classes_ if binary is None else self.classes_[binary.order]
            costs = as_example_costs(cost_matrix.aligned_to(order), n, n_classes=k)
        else:
            costs = as_example_costs(cost_matrix, n, n_classes=k)
            if binary is not None:
                costs = binary_costs_internal(costs, binary, self.pos_label)
        out: FloatArray = np.einsum("iq,iqk->ik", proba, costs)
        return out, binary

    def expected_costs(
        self, X: ArrayLike, cost_matrix: ArrayLike | CostMatrix | None = None
    ) -> FloatArray:
        """``R_i(k) = Σ_q p(q|x_i) C_i[q, k]``, shape (n, K), columns in ``classes_`` order.

        ``cost_matrix`` of shape (n, K, K) or (K, K): two classes as (negative, positive)
        (see ``pos_label``), K > 2 in ``classes_`` order; a :class:`CostMatrix` with labels is
        aligned by them. None uses the constructor's ``cost_matrix``; if that is None too,
        0/1 costs with a :class:`CostFallbackWarning`.
        """
        risk, binary = self._internal_risk(X, cost_matrix)
        return risk if binary is None else binary.columns(risk)

    def decision_function(
        self, X: ArrayLike, cost_matrix: ArrayLike | CostMatrix | None = None
    ) -> FloatArray:
        """Negated expected costs (binary: ``R(classes_[0]) - R(classes_[1])``, > 0 where
        ``classes_[1]`` is cheaper)."""
        risk, binary = self._internal_risk(X, cost_matrix)
        if binary is not None:
            out: FloatArray = binary.sign * (risk[:, 0] - risk[:, 1])
            return out
        return -risk

    def predict(
        self, X: ArrayLike, cost_matrix: ArrayLike | CostMatrix | None = None
    ) -> npt.NDArray[Any]:
        """Minimum-risk class per example.

        Two classes: the positive class only where it is strictly cheaper (a tie keeps the
        negative one, whatever the labels); K classes: ties go to the first of ``classes_``.
        """
        risk, binary = self._internal_risk(X, cost_matrix)
        if binary is not None:
            return binary.decode(risk[:, 1] < risk[:, 0])
        out: npt.NDArray[Any] = self.classes_[np.argmin(risk, axis=1)]
        return out

    def score(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None,
        cost_matrix: ArrayLike | CostMatrix | None = None,
    ) -> float:
        """Mean accuracy of the minimum-risk decisions under ``cost_matrix``.

        The decisions use the costs (routed like :meth:`predict`'s); the score counts
        agreements. To score the cost itself, use :func:`make_cost_scorer`.
        """
        from sklearn.metrics import accuracy_score

        return float(accuracy_score(y, self.predict(X, cost_matrix=cost_matrix),
                                    sample_weight=sample_weight))

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        base_tags = get_tags(self._base_estimator())
        tags.input_tags.sparse = base_tags.input_tags.sparse
        tags.input_tags.allow_nan = base_tags.input_tags.allow_nan
        return tags
