"""RBF-kernel logistic regression and Zhang's cost-sensitive β/Δ decision rule."""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.kernel_approximation import Nystroem
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from costlib._messages import plain
from costlib.estimators._common import check_positive, encode_classes, resolve_groups


class KernelLogisticRegression(ClassifierMixin, BaseEstimator):
    """Multinomial logistic regression in an RBF-kernel feature space (cost-blind).

    Fits ``P(y = c | x) ∝ exp(f_c(x))`` with ``f_c`` in the RKHS of
    ``k(x, x') = exp(-γ ‖x - x'‖²)``, penalised by ``½ Σ_c ‖f_c‖²_H`` (times ``1/C`` against the
    summed log-loss, as scikit-learn's ``LogisticRegression``).

    It is computed as ``LogisticRegression`` on the Nystroem feature map
    ``φ(x) = k(x, Z) K_ZZ^{-1/2}`` over landmark points ``Z``. When ``n_samples <=
    n_components`` every training point is a landmark, so ``φ(x_i)ᵀφ(x_j) = k(x_i, x_j)`` on the
    training set and ``‖w‖² = αᵀKα = ‖f‖²_H``: this is **exact** kernel logistic regression
    (representer theorem). With more samples, ``n_components`` random landmarks give the
    Nystroem approximation (``exact_`` tells which happened).

    Parameters
    ----------
    C : float, default=1.0
        Inverse regularisation strength.
    gamma : float or "scale", default="scale"
        RBF width ``γ``; "scale" uses ``1 / (n_features · X.var())`` as ``SVC`` does
        (samples weighted by ``sample_weight``).
    n_components : int, default=100
        Maximum number of Nystroem landmarks.
    max_iter : int, default=100
    tol : float, default=1e-4
    random_state : int, RandomState instance or None, default=None
        Landmark sampling (irrelevant when exact).

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
    gamma_ : float
    feature_map_ : Nystroem
    logistic_ : LogisticRegression
    exact_ : bool
        True when every training sample is a landmark (exact kernel LR).
    n_iter_ : ndarray of shape (1,)
        Solver iterations.
    """

    # Fitted attributes (scikit-learn objects are untyped: Any).
    classes_: np.ndarray
    feature_map_: Any
    logistic_: Any

    def __init__(
        self,
        *,
        C: float = 1.0,
        gamma: float | str = "scale",
        n_components: int = 100,
        max_iter: int = 100,
        tol: float = 1e-4,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.C = C
        self.gamma = gamma
        self.n_components = n_components
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state

    def _fit_kernel_lr(
        self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None
    ) -> tuple[np.ndarray, np.ndarray]:
        X, y = validate_data(self, X, y, dtype=np.float64)
        classes, _ = encode_classes(y)
        if not isinstance(self.n_components, Integral) or self.n_components < 1:
            raise ValueError(f"n_components must be a positive int, got {plain(self.n_components)}")
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if isinstance(self.gamma, str):
            if self.gamma != "scale":
                raise ValueError(
                    f"gamma must be 'scale' or a positive float, got {plain(self.gamma)}"
                )
            # Variance of all entries of X, samples weighted by sample_weight.
            mean = np.average(X.mean(axis=1), weights=sw)
            var = float(np.average(((X - mean) ** 2).mean(axis=1), weights=sw))
            gamma = 1.0 / (X.shape[1] * var) if var > 0 else 1.0
        elif isinstance(self.gamma, Real):
            gamma = check_positive("gamma", self.gamma)
        else:
            raise ValueError(f"gamma must be 'scale' or a positive float, got {plain(self.gamma)}")
        n_comp = min(int(self.n_components), X.shape[0])
        self.classes_ = classes
        self.gamma_ = gamma
        self.exact_ = X.shape[0] <= self.n_components
        self.feature_map_ = Nystroem(
            kernel="rbf", gamma=gamma, n_components=n_comp, random_state=self.random_state
        ).fit(X)
        self.logistic_ = LogisticRegression(C=self.C, max_iter=self.max_iter, tol=self.tol).fit(
            self.feature_map_.transform(X), y, sample_weight=sw
        )
        self.n_iter_ = self.logistic_.n_iter_
        return y, sw

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the kernel logistic regression.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        self._fit_kernel_lr(X, y, sample_weight)
        return self

    def _features(self, X: ArrayLike) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.feature_map_.transform(X)

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Posteriors ``P(y = c | x)``, columns in ``classes_`` order."""
        features = self._features(X)
        return self.logistic_.predict_proba(features)

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log posteriors."""
        features = self._features(X)
        return self.logistic_.predict_log_proba(features)

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """Logits ``f_c(x)`` (binary: ``f_1 - f_0``, shape (n,))."""
        features = self._features(X)
        return self.logistic_.decision_function(features)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Most probable class."""
        features = self._features(X)
        return self.logistic_.predict(features)


def beta_delta(c_hd: float, c_dh: float, c_dd: float) -> tuple[float, float]:
    """Zhang's constants ``β = (C_DH + C_HD - C_DD) / C_DD`` and ``Δ = (C_DH - C_DD) / C_DD``.

    ``C_HD``: majority (H) predicted as minority (D); ``C_DH``: minority predicted as majority;
    ``C_DD``: a minority class predicted as another minority class (``C_DD > 0``).
    """
    c_hd = check_positive("c_hd", c_hd)
    c_dh = check_positive("c_dh", c_dh)
    c_dd = check_positive("c_dd", c_dd)
    return (c_dh + c_hd - c_dd) / c_dd, (c_dh - c_dd) / c_dd


def beta_delta_scores(
    proba: np.ndarray, majority: np.ndarray, beta: float, delta: float
) -> np.ndarray:
    """Scores whose argmax is Zhang's minimum-expected-cost class.

    Minority class ``D_ν`` scores ``P(D_ν|x)``; the majority group scores ``β P(H|x) - Δ`` with
    ``P(H|x) = Σ_m P(H_m|x)``. With several majority classes (no cost between them) that group
    score goes to the most probable one and the others score lower by their probability gap.
    """
    scores = np.array(proba, dtype=np.float64, copy=True)
    p_major = proba[:, majority]
    p_h = p_major.sum(axis=1)
    group = beta * p_h - delta
    scores[:, majority] = group[:, None] - (p_major.max(axis=1, keepdims=True) - p_major)
    return scores


class CostSensitiveKernelLogisticRegression(KernelLogisticRegression):
    """Kernel LR with Zhang's cost-sensitive β/Δ decision rule (flat, K minority + majority).

    Training is the cost-blind :class:`KernelLogisticRegression`. At prediction, with minority
    classes ``D_1..D_K`` and majority group ``H``, Xu's expected losses

    .. math::
        loss(x, D_ν) = C_{DD} + P(H|x)(C_{HD} - C_{DD}) - P(D_ν|x) C_{DD},\\qquad
        loss(x, H) = P(D|x) C_{DH}

    are minimised by taking the maximum of
    ``{P(D_1|x), ..., P(D_K|x), β P(H|x) - Δ}`` with

    .. math:: β = \\frac{C_{DH} + C_{HD} - C_{DD}}{C_{DD}},\\qquad
              Δ = \\frac{C_{DH} - C_{DD}}{C_{DD}}

    (subtract ``C_DD + P(H|x)(C_HD - C_DD)`` from every loss and divide by ``-C_DD``). With
    equal costs ``β = 1, Δ = 0``: plain argmax. The seed also writes the rule on Zhu's log
    scale, ``f_ν = ln(P(D_ν|x)/P(H|x))`` against ``f_h* = ln((β P(H|x) - Δ)/P(H|x))``; that is
    the same argmax but undefined when ``β P(H|x) <= Δ``, so :meth:`decision_function` returns
    the linear scores. With several majority classes the group ``H``
    wins or loses as one (its members cost nothing among themselves) and the most probable
    member is predicted.

    Parameters
    ----------
    c_hd : float, default=1.0
        Cost of classifying a majority-group sample as a minority class.
    c_dh : float, default=1.0
        Cost of classifying a minority sample as majority.
    c_dd : float, default=1.0
        Cost of classifying a minority sample as another minority class.
    majority_classes : array-like or None, default=None
        Labels of the majority group; None = the (weighted) most frequent training class.
        Every other class is a minority class.
    C, gamma, n_components, max_iter, tol, random_state
        As in :class:`KernelLogisticRegression`.

    Attributes
    ----------
    beta_, delta_ : float
    majority_mask_ : ndarray of shape (K,), bool
        Which of ``classes_`` form the majority group.
    """

    def __init__(
        self,
        *,
        c_hd: float = 1.0,
        c_dh: float = 1.0,
        c_dd: float = 1.0,
        majority_classes: ArrayLike | None = None,
        C: float = 1.0,
        gamma: float | str = "scale",
        n_components: int = 100,
        max_iter: int = 100,
        tol: float = 1e-4,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        super().__init__(
            C=C,
            gamma=gamma,
            n_components=n_components,
            max_iter=max_iter,
            tol=tol,
            random_state=random_state,
        )
        self.c_hd = c_hd
        self.c_dh = c_dh
        self.c_dd = c_dd
        self.majority_classes = majority_classes

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit the cost-blind kernel LR and resolve β, Δ and the majority group.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        beta, delta = beta_delta(self.c_hd, self.c_dh, self.c_dd)
        y, sw = self._fit_kernel_lr(X, y, sample_weight)
        totals = np.array([sw[y == c].sum() for c in self.classes_])
        _, majority = resolve_groups(self.classes_, totals, None, self.majority_classes)
        self.beta_, self.delta_ = beta, delta
        self.majority_mask_ = majority
        return self

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """β/Δ scores (binary: score of ``classes_[1]`` minus that of ``classes_[0]``)."""
        scores = beta_delta_scores(
            self.predict_proba(X), self.majority_mask_, self.beta_, self.delta_
        )
        if scores.shape[1] == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    def predict(self, X: ArrayLike) -> np.ndarray:
        """The class maximising the β/Δ scores, i.e. of minimum expected cost."""
        scores = beta_delta_scores(
            self.predict_proba(X), self.majority_mask_, self.beta_, self.delta_
        )
        return self.classes_[np.argmax(scores, axis=1)]
