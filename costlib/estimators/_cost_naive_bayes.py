"""Multiclass cost-based naive Bayes (Sooklal et al.) from scikit-learn's parts."""

from __future__ import annotations

from numbers import Integral
from typing import Any, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.naive_bayes import CategoricalNB
from sklearn.preprocessing import KBinsDiscretizer
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from costlib._messages import plain
from costlib.costs._matrices import CostMatrix
from costlib.estimators._common import (
    BinaryClasses,
    aligned_cost_matrix,
    checked_labels,
    cost_decision_function,
    encode_classes,
    min_expected_cost_index,
)


class CostSensitiveNaiveBayes(ClassifierMixin, BaseEstimator):
    """Categorical naive Bayes with Bayes minimum-expected-cost decisions.

    Continuous attributes are clustered into categories (1-d k-means per attribute by default,
    ``KBinsDiscretizer(strategy="kmeans")``); categorical attributes (non-negative integer
    codes) are used as they are. ``CategoricalNB`` then gives, in log space,

    .. math:: \\log p(C_q) + \\sum_{i=1}^{M} \\log p(x_i | C_q)

    (``p(x_i | C_q)`` = smoothed frequency of category ``x_i`` in class ``C_q``). The expected
    cost of predicting ``C_k`` with cost matrix ``V`` (rows = true, columns = predicted) is
    ``F(C_k) = Σ_q p(C_q|x) V_qk``, and the seed's decision is

    .. math:: C_{k*} = \\arg\\min_k \\sum_{q} V_{qk}\\, p(C_q) \\prod_{i=1}^{M} p(x_i | C_q),

    the same argmin because ``p(x)`` is a common positive factor. It is evaluated stably as
    ``exp(jll_q - max_q jll_q) @ V`` from the joint log-likelihoods ``jll``. With 0/1 costs it
    is ``argmax_q p(C_q | x)``.

    (The seed's first display, ``p(C_k|x) = Π_i p(x_i|C_k) p(C_k) / p(x_i)``, puts the prior
    inside the product; its decision formula above, which this class implements, has the
    prior once, as naive Bayes does.)

    Parameters
    ----------
    cost_matrix : array-like of shape (K, K) or CostMatrix, default=None
        Rows = true class, columns = predicted class, in ``classes_`` order unless a
        :class:`~costlib.costs.CostMatrix` with labels is given. None = 0/1 costs.
    pos_label : label, default=None
        Two classes only: the positive class, row/column 1 of a plain 2x2 cost matrix. Needed
        when the classes are not 0/1, bool or -1/1 (e.g. ``"fraud"``/``"ok"``), where a
        plain matrix is otherwise refused rather than read in sorted-label order; a
        labelled matrix says it itself.
    n_bins : int, default=5
        Maximum number of categories per continuous attribute (fewer when an attribute has
        fewer distinct values).
    strategy : {"kmeans", "quantile", "uniform"}, default="kmeans"
        How continuous attributes are cut (``KBinsDiscretizer``); "kmeans" clusters.
    categorical_features : array-like of int or bool, default=None
        Columns that already hold categories (integer codes >= 0); None = all continuous.
    alpha : float, default=1.0
        Additive (Laplace) smoothing of ``CategoricalNB``.

    Attributes
    ----------
    classes_ : ndarray of shape (K,)
    cost_matrix_ : ndarray of shape (K, K)
    discretizer_ : KBinsDiscretizer or None
    naive_bayes_ : CategoricalNB
    continuous_features_, categorical_features_ : ndarray of int
    """

    # Fitted attributes (scikit-learn objects are untyped: Any).
    classes_: np.ndarray
    pos_label_: Any
    cost_matrix_: np.ndarray
    continuous_features_: np.ndarray
    categorical_features_: np.ndarray
    discretizer_: Any
    n_continuous_bins_: np.ndarray
    n_categories_: np.ndarray
    naive_bayes_: Any

    def __init__(
        self,
        cost_matrix: ArrayLike | CostMatrix | None = None,
        *,
        n_bins: int = 5,
        strategy: str = "kmeans",
        categorical_features: ArrayLike | None = None,
        alpha: float = 1.0,
        pos_label: object = None,
    ) -> None:
        self.cost_matrix = cost_matrix
        self.pos_label = pos_label
        self.n_bins = n_bins
        self.strategy = strategy
        self.categorical_features = categorical_features
        self.alpha = alpha

    def _split_columns(self, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        if self.categorical_features is None:
            return np.arange(n_features), np.array([], dtype=np.intp)
        cat = np.asarray(self.categorical_features)
        if cat.dtype == bool:
            if cat.shape != (n_features,):
                raise ValueError(
                    f"categorical_features mask must have {n_features} entries, got {cat.shape}"
                )
            mask = cat
        else:
            if cat.ndim != 1 or not np.issubdtype(cat.dtype, np.integer):
                raise ValueError("categorical_features must be column indices or a bool mask")
            if ((cat < 0) | (cat >= n_features)).any():
                raise ValueError(
                    f"categorical_features {cat.tolist()} out of range for {n_features} features"
                )
            mask = np.zeros(n_features, dtype=bool)
            mask[cat] = True
        return np.flatnonzero(~mask), np.flatnonzero(mask)

    def _categorical_codes(self, X: np.ndarray, *, fitting: bool) -> np.ndarray:
        codes = X[:, self.categorical_features_]
        if codes.size and ((codes < 0).any() or (codes != np.round(codes)).any()):
            raise ValueError("categorical features must hold integer category codes >= 0")
        if not fitting and codes.size:
            limit = self.n_categories_[self.n_continuous_bins_.shape[0] :]
            unseen = codes >= limit
            if unseen.any():
                col = self.categorical_features_[np.flatnonzero(unseen.any(axis=0))[0]]
                raise ValueError(
                    f"categorical feature {int(col)} has a category code not seen in training"
                )
        return codes

    def _encode(self, X: np.ndarray, *, fitting: bool = False) -> np.ndarray:
        parts = []
        if self.continuous_features_.size:
            parts.append(self.discretizer_.transform(X[:, self.continuous_features_]))
        parts.append(self._categorical_codes(X, fitting=fitting))
        return np.hstack(parts).astype(np.intp)

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Discretise continuous attributes, fit ``CategoricalNB``, align the cost matrix.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None
            Used by the discretiser (k-means / quantiles) and the naive Bayes counts.

        Returns
        -------
        self : object
        """
        if not isinstance(self.n_bins, Integral) or self.n_bins < 2:
            raise ValueError(f"n_bins must be an int >= 2, got {plain(self.n_bins)}")
        y = checked_labels(y, type(self).__name__)
        X, y = validate_data(self, X, y, dtype=np.float64)
        classes, _ = encode_classes(y)
        self.classes_ = classes
        self.cost_matrix_ = aligned_cost_matrix(self.cost_matrix, classes, self.pos_label)
        self.pos_label_ = None
        if classes.shape[0] == 2:
            self.pos_label_ = classes[BinaryClasses(classes, self.pos_label, needed=False).positive]
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
        self.continuous_features_, self.categorical_features_ = self._split_columns(X.shape[1])
        cont = X[:, self.continuous_features_]
        if self.continuous_features_.size:
            # Zero-weight rows are left out entirely (as if removed); at most as many
            # categories per attribute as it has distinct values.
            distinct = np.array([np.unique(col).shape[0] for col in cont[sw > 0].T])
            bins = np.clip(distinct, 2, self.n_bins)
            self.discretizer_ = KBinsDiscretizer(
                n_bins=bins, encode="ordinal", strategy=self.strategy, subsample=None
            ).fit(cont[sw > 0], sample_weight=sw[sw > 0])
            self.n_continuous_bins_ = np.asarray(self.discretizer_.n_bins_)
        else:
            self.discretizer_ = None
            self.n_continuous_bins_ = np.array([], dtype=np.intp)
        cat_codes = self._categorical_codes(X, fitting=True)
        cat_sizes = (
            cat_codes.max(axis=0).astype(np.intp) + 1
            if cat_codes.size
            else np.array([], dtype=np.intp)
        )
        self.n_categories_ = np.concatenate((self.n_continuous_bins_, cat_sizes)).astype(np.intp)
        self.naive_bayes_ = CategoricalNB(alpha=self.alpha, min_categories=self.n_categories_)
        self.naive_bayes_.fit(self._encode(X, fitting=True), y, sample_weight=sw)
        return self

    def predict_joint_log_proba(self, X: ArrayLike) -> np.ndarray:
        """``log p(C_q) + Σ_i log p(x_i | C_q)`` per sample and class, shape (n, K)."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self.naive_bayes_.predict_joint_log_proba(self._encode(X))

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Naive Bayes posteriors ``p(C_q | x)``."""
        jll = self.predict_joint_log_proba(X)
        p = np.exp(jll - jll.max(axis=1, keepdims=True))
        return p / p.sum(axis=1, keepdims=True)

    def predict_log_proba(self, X: ArrayLike) -> np.ndarray:
        """Log posteriors."""
        jll = self.predict_joint_log_proba(X)
        m = jll.max(axis=1, keepdims=True)
        return jll - (m + np.log(np.exp(jll - m).sum(axis=1, keepdims=True)))

    def _scaled_joint(self, X: ArrayLike) -> np.ndarray:
        # p(C_q) Π_i p(x_i | C_q) up to a positive per-row factor (does not move the argmin).
        jll = self.predict_joint_log_proba(X)
        return np.exp(jll - jll.max(axis=1, keepdims=True))

    def expected_costs(self, X: ArrayLike) -> np.ndarray:
        """``F(C_k) = Σ_q p(C_q | x) V_qk``, shape (n, K)."""
        return self.predict_proba(X) @ self.cost_matrix_

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        """``-F(C_k)`` (binary: ``F(C_0) - F(C_1)``)."""
        return cost_decision_function(self.predict_proba(X), self.cost_matrix_)

    def predict(self, X: ArrayLike) -> np.ndarray:
        """``argmin_k Σ_q V_qk p(C_q) Π_i p(x_i | C_q)``."""
        joint = self._scaled_joint(X)
        if self.classes_.shape[0] == 2:
            # A tie keeps the negative class, whatever the labels' sort order.
            binary = BinaryClasses(self.classes_, self.pos_label_, needed=False)
            order = binary.order
            idx = min_expected_cost_index(joint[:, order], self.cost_matrix_[np.ix_(order, order)])
            return binary.decode(idx == 1)
        idx = min_expected_cost_index(joint, self.cost_matrix_)
        return self.classes_[idx]
