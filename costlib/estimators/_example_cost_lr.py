"""Logistic regression that minimises the expected example-dependent cost."""

from __future__ import annotations

from typing import Any, Literal, Self

import numpy as np
import numpy.typing as npt
from numpy.typing import ArrayLike
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LogisticRegression
from sklearn.utils.extmath import safe_sparse_dot
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from costlib.costs._example_costs import as_example_costs
from costlib.costs._matrices import CostMatrix
from costlib.estimators._common import (
    BinaryClasses,
    CostFallbackWarning,
    check_positive,
    checked_labels,
    encode_classes,
    warn_every_time,
)

FloatArray = npt.NDArray[np.float64]


class ExampleCostLogisticRegression(ClassifierMixin, BaseEstimator):
    """Binary logistic regression trained on per-example cost matrices.

    With ``h_i = σ(wᵀx_i + b)`` read as a soft decision "flag example ``i``", the expected cost
    of example ``i`` (true class ``y_i``, cost matrix ``C_i``, rows = true class, columns =
    predicted class) is

    .. math:: E_i = (1 - h_i) C_i[y_i, 0] + h_i C_i[y_i, 1] = C_i[y_i, 0] + h_i d_i,
              \\qquad d_i = C_i[y_i, 1] - C_i[y_i, 0],

    (for the usual zero-cost correct decisions: ``y_i = 1`` gives ``(1 - h_i) C^{FN}_i``,
    ``y_i = 0`` gives ``h_i C^{FP}_i``, the objective of Correa Bahnsen et al., 2014). The
    estimator minimises the smooth, L2-penalised total

    .. math:: J(w, b) = \\frac{C}{\\bar d} \\sum_i s_i d_i σ(z_i) + \\frac{1}{2}(\\lVert w
              \\rVert^2 + b^2), \\qquad \\frac{∂J}{∂z_i} = \\frac{C}{\\bar d} s_i d_i σ(z_i)(1 -
              σ(z_i)),

    with sample weights ``s_i`` and ``\\bar d = Σ s_i |d_i| / Σ s_i`` (so ``C`` means what it
    means in ``LogisticRegression`` whatever the currency of the costs), by L-BFGS-B with the
    analytic gradient. Unlike the log loss, the expected cost is bounded, so an unpenalised
    intercept could run off to infinity ("flag everything" as a limit, never attained) and the
    stopping point would be arbitrary; the intercept is therefore penalised like the weights,
    which makes ``J`` coercive (a minimiser exists). With many rows the penalty is negligible.

    ``J`` is not convex. The default start is ``w = 0``, where the gradient
    ``(C/d̄) Σ_i s_i d_i x_i / 4`` already points along the cost-weighted class difference; ``init=
    "logistic"`` starts instead from the minimiser of the convex surrogate, the logistic loss
    with target "the cheaper decision" (``d_i < 0``) and weights ``s_i |d_i|`` (for zero-cost
    correct decisions: target ``y_i``, weights ``C^{FN}_i`` / ``C^{FP}_i``) fitted by
    ``LogisticRegression`` (slower with heavy-tailed costs, which make it ill-conditioned).

    The prediction is the cheaper soft decision, class 1 iff ``h > 1/2``; costs are not needed
    at prediction time (they are learnt into ``w``). For decisions that use each example's
    costs at prediction time, see :class:`BayesMinimumRiskClassifier`.

    Parameters
    ----------
    C : float, default=1.0
        Inverse L2 strength (on the weights and the intercept).
    fit_intercept : bool, default=True
    init : {"zero", "logistic"}, default="zero"
        Start of the optimiser: ``w = 0`` or the cost-weighted logistic fit (above).
    max_iter : int, default=200
        L-BFGS-B iterations (also the surrogate fit's ``max_iter``).
    tol : float, default=1e-6
        L-BFGS-B ``gtol`` on the projected gradient of ``J / (C n)``.
    pos_label : label, default=None
        The positive class, row/column 1 of the per-example costs. Needed when the classes
        are not 0/1, bool or -1/1 (e.g. ``"fraud"``/``"ok"``): such costs are otherwise
        refused rather than read in sorted-label order.

    Attributes
    ----------
    classes_ : ndarray of shape (2,)
        Sorted labels. The positive class (row/column 1 of the costs) is ``pos_label``, else
        ``1``/``True``; ``coef_`` and ``decision_function`` score ``classes_[1]`` as in
        scikit-learn (the negated positive-class score when the positive class sorts first).
    pos_label_ : label
        The positive class.
    coef_ : ndarray of shape (1, n_features)
    intercept_ : ndarray of shape (1,)
    n_iter_ : int
        L-BFGS-B iterations of the final optimisation.
    objective_ : float
        Expected cost per unit weight ``Σ s_i E_i / Σ s_i`` of the soft decisions at the
        solution (without the penalty).

    Examples
    --------
    >>> import numpy as np
    >>> from costlib.costs import binary_example_costs
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2)); y = (X[:, 0] + rng.normal(size=200) > 1).astype(int)
    >>> costs = binary_example_costs(fn=rng.uniform(10, 100, 200), fp=5.0)
    >>> clf = ExampleCostLogisticRegression().fit(X, y, cost_matrix=costs)
    >>> clf.predict(X[:3]).shape
    (3,)
    """

    def __init__(
        self,
        C: float = 1.0,
        *,
        fit_intercept: bool = True,
        init: Literal["zero", "logistic"] = "zero",
        max_iter: int = 200,
        tol: float = 1e-6,
        pos_label: object = None,
    ) -> None:
        self.pos_label = pos_label
        self.C = C
        self.fit_intercept = fit_intercept
        self.init = init
        self.max_iter = max_iter
        self.tol = tol

    def fit(
        self,
        X: ArrayLike,
        y: ArrayLike,
        sample_weight: ArrayLike | None = None,
        cost_matrix: ArrayLike | CostMatrix | None = None,
    ) -> Self:
        """Minimise the expected example-dependent cost.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Two classes.
        sample_weight : array-like of shape (n_samples,), default=None
        cost_matrix : array-like of shape (n_samples, 2, 2) or (2, 2), default=None
            Per-example costs, rows = true class, columns = predicted class, (negative,
            positive) (see :func:`costlib.costs.binary_example_costs` and ``pos_label``).
            None means 0/1 costs (then ``J`` is the smoothed error count) and warns
            (:class:`CostFallbackWarning`) on every fit: route the costs through a
            ``Pipeline``, ``GridSearchCV`` or ``cross_val_score`` with
            ``set_fit_request(cost_matrix=True)``.

        Returns
        -------
        self : object
        """
        c_reg = check_positive("C", self.C)
        if self.init not in ("zero", "logistic"):
            raise ValueError(f"init must be 'zero' or 'logistic', got {self.init!r}")
        if not (isinstance(self.max_iter, int | np.integer) and self.max_iter > 0):
            raise ValueError(f"max_iter must be a positive int, got {self.max_iter!r}")
        tol = check_positive("tol", self.tol)
        Xv: Any
        y = checked_labels(y, type(self).__name__)
        Xv, yv = validate_data(self, X, y, accept_sparse=("csr", "csc"), dtype=np.float64)
        y_type = type_of_target(yv, input_name="y", raise_unknown=True)
        if y_type not in ("binary", "unknown") and np.unique(yv).shape[0] > 2:
            raise ValueError(
                "Only binary classification is supported. The type of the target is "
                f"{y_type} (classes {np.unique(yv).tolist()[:10]})."
            )
        classes, _ = encode_classes(yv)
        labelled = isinstance(cost_matrix, CostMatrix) and cost_matrix.labels is not None
        binary = BinaryClasses(classes, self.pos_label,
                               needed=cost_matrix is not None and not labelled)
        y_idx = binary.encode(yv)  # 1 = positive: row/column 1 of the costs
        self.classes_ = classes
        n = Xv.shape[0]
        sw = _check_sample_weight(sample_weight, Xv, dtype=np.float64)
        if isinstance(cost_matrix, CostMatrix) and cost_matrix.labels is not None:
            costs = as_example_costs(cost_matrix.aligned_to(classes[binary.order]), n)
        elif cost_matrix is not None:
            costs = as_example_costs(cost_matrix, n, n_classes=2)
        else:
            warn_every_time(
                "ExampleCostLogisticRegression.fit got no cost_matrix: training on 0/1 costs "
                "(the smoothed error count). Pass cost_matrix= to fit; through a Pipeline or "
                "cross_val_score request it with set_fit_request(cost_matrix=True)",
                CostFallbackWarning)
            costs = np.broadcast_to(1.0 - np.eye(2), (n, 2, 2))
        rows = np.arange(n)
        d = costs[rows, y_idx, 1] - costs[rows, y_idx, 0]
        scale = float(sw @ np.abs(d) / sw.sum()) if sw.sum() > 0 else 0.0
        if scale == 0.0:
            raise ValueError("every example costs the same whichever class is predicted "
                             "(d_i = 0 for all weighted rows): nothing to learn")
        a = c_reg * sw * d / scale  # dJ/dh_i
        w0 = self._start(Xv, d, sw, scale, c_reg)
        result = minimize(
            _objective, w0, args=(Xv, a, self.fit_intercept), jac=True, method="L-BFGS-B",
            options={"maxiter": int(self.max_iter), "gtol": tol * c_reg * n,
                     "ftol": 1e-12},
        )
        w = np.asarray(result.x, dtype=np.float64)
        # The optimiser's w scores the positive class; coef_ scores classes_[1].
        self.pos_label_ = classes[binary.positive]
        self.coef_ = binary.sign * w[None, : Xv.shape[1]]
        self.intercept_ = binary.sign * np.array([w[-1] if self.fit_intercept else 0.0])
        self.n_iter_ = int(result.nit)
        h = expit(safe_sparse_dot(Xv, w[: Xv.shape[1]]) + (w[-1] if self.fit_intercept else 0.0))
        c0 = costs[rows, y_idx, 0]
        self.objective_ = float(sw @ (c0 + h * d) / sw.sum())
        return self

    def _start(
        self, X: Any, d: FloatArray, sw: FloatArray, scale: float, c_reg: float
    ) -> FloatArray:
        size = X.shape[1] + (1 if self.fit_intercept else 0)
        target = (d < 0).astype(np.int64)
        weight = sw * np.abs(d) / scale
        informative = weight > 0
        if self.init == "zero" or np.unique(target[informative]).shape[0] < 2:
            return np.zeros(size)
        surrogate = LogisticRegression(C=c_reg, fit_intercept=self.fit_intercept,
                                       max_iter=int(self.max_iter))
        surrogate.fit(X, target, sample_weight=weight)
        w0 = surrogate.coef_[0]
        if self.fit_intercept:
            w0 = np.append(w0, surrogate.intercept_[0])
        return np.asarray(w0, dtype=np.float64)

    def decision_function(self, X: ArrayLike) -> FloatArray:
        """``coef_ᵀx + intercept_``: positive where ``classes_[1]`` is the cheaper decision."""
        check_is_fitted(self, "coef_")
        Xv = validate_data(self, X, accept_sparse=("csr", "csc"), dtype=np.float64,
                           reset=False)
        z: FloatArray = safe_sparse_dot(Xv, self.coef_[0]) + self.intercept_[0]
        return z

    def _positive_score(self, X: ArrayLike) -> FloatArray:
        """``z`` of the positive class (``decision_function`` is that of ``classes_[1]``)."""
        out: FloatArray = self._sign() * self.decision_function(X)
        return out

    def _sign(self) -> float:
        check_is_fitted(self, "coef_")
        return 1.0 if self.classes_[1] == self.pos_label_ else -1.0

    def predict_proba(self, X: ArrayLike) -> FloatArray:
        """``h = σ(z)`` for the positive class, ``1 - h`` for the other, in ``classes_`` order.

        The soft decision, not a calibrated probability.
        """
        h = expit(self._positive_score(X))
        internal = np.column_stack((1.0 - h, h))
        out: FloatArray = internal if self._sign() > 0 else internal[:, ::-1]
        return out

    def predict(self, X: ArrayLike) -> npt.NDArray[Any]:
        """The positive class where ``h > 1/2`` (``z > 0``), else the negative class."""
        positive = self._positive_score(X) > 0
        pos = 1 if self._sign() > 0 else 0
        out: npt.NDArray[Any] = self.classes_[np.where(positive, pos, 1 - pos)]
        return out

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.classifier_tags.multi_class = False
        return tags


def _objective(
    w: FloatArray, X: Any, a: FloatArray, fit_intercept: bool
) -> tuple[float, FloatArray]:
    """``J`` up to a constant and its gradient; ``a_i = C s_i d_i / d̄``."""
    n_features = X.shape[1]
    z = safe_sparse_dot(X, w[:n_features])
    if fit_intercept:
        z = z + w[-1]
    h = expit(z)
    coef = w[:n_features]
    value = float(a @ h) + 0.5 * float(w @ w)
    g_z = a * h * (1.0 - h)
    grad = np.empty_like(w)
    grad[:n_features] = safe_sparse_dot(g_z, X) + coef
    if fit_intercept:
        grad[-1] = g_z.sum() + w[-1]
    return value, grad
