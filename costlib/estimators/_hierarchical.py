"""Xu's hierarchical cost-sensitive classifier, with a kernel-LR or benefit-LR first stage."""

from __future__ import annotations

from typing import Literal, Self

import numpy as np
from numpy.typing import ArrayLike
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from costlib.estimators._benefit_lr import BenefitLogisticRegression
from costlib.estimators._common import check_positive, encode_classes, resolve_groups
from costlib.estimators._kernel_lr import KernelLogisticRegression


class HierarchicalCostSensitiveClassifier(ClassifierMixin, BaseEstimator):
    """Two-stage cost-sensitive classifier for a rare minority group (Xu; Sooklal et al.).

    **Stage 1** separates the minority group ``D`` (classes ``D_1..D_K``) from the majority
    group ``H`` under costs ``C_HD`` (majority classified as minority) and ``C_DH`` (minority
    classified as majority):

    - ``stage1="kernel"`` (Xu): a cost-blind :class:`KernelLogisticRegression` estimates
      ``P(D|x)`` and a sample is minority iff ``P(D|x) >= p*`` with
      ``p* = C_HD / (C_HD + C_DH)`` (the Bayes threshold of the binary cost problem);
    - ``stage1="benefit"`` (the seed's last section): a :class:`BenefitLogisticRegression`
      with benefit matrix ``[[0, -C_HD], [-C_DH, 0]]`` (rows/columns: majority, minority), i.e.
      the logistic loss with majority errors weighted by ``η = C_HD / C_DH``, predicting at its
      own argmax. (The seed's list of steps for this variant is missing from the extraction;
      this is the direct reading: benefit LR replaces stage 1, stage 2 stays cost-blind LR.)

    **Stage 2** is cost-blind multiclass classification among the minority classes (all
    confusions among them cost the same ``C_DD``), trained on minority samples only. With
    several majority classes (one group ``H`` in Xu's setting, no cost among them) a cost-blind
    model trained on majority samples picks the majority class.

    With ``C_HD = C_DH`` and one minority and one majority class this is the plain cost-blind
    stage-1 classifier. With several minority classes the two-stage rule is not the flat
    argmax even for equal costs (it decides the group first: with ``P(H|x) = 0.4`` and
    ``P(D_1|x) = P(D_2|x) = 0.3`` it predicts ``D_1`` although ``H`` is most probable); it is
    then the plain cost-blind two-stage classifier. Use
    :class:`CostSensitiveKernelLogisticRegression` for the flat β/Δ rule.

    Parameters
    ----------
    stage1 : {"kernel", "benefit"}, default="kernel"
    minority_classes, majority_classes : array-like or None, default=None
        The two groups (labels may be strings). Give either or both; with neither, the
        (weighted) most frequent training class is the majority group.
    c_hd : float, default=1.0
        Cost of classifying a majority sample as minority.
    c_dh : float, default=1.0
        Cost of classifying a minority sample as majority.
    stage1_estimator : classifier or None, default=None
        Stage-1 model template. "kernel": any classifier with ``predict_proba`` (default
        ``KernelLogisticRegression()``). "benefit": a :class:`BenefitLogisticRegression`
        (default ``BenefitLogisticRegression()``) whose ``benefit_matrix`` is replaced by
        ``[[0, -c_hd], [-c_dh, 0]]``.
    stage2_estimator : classifier or None, default=None
        Cost-blind model among the minority (and among the majority) classes; default
        ``KernelLogisticRegression()`` for "kernel" and ``LogisticRegression()`` for "benefit".
    random_state : int, RandomState instance or None, default=None
        Passed to the default kernel models (Nystroem landmark sampling).

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    minority_mask_ : ndarray of shape (n_classes,), bool
    threshold_ : float
        ``p*`` (used by ``stage1="kernel"``).
    stage1_ : fitted classifier
        Trained on the group labels 0 = majority, 1 = minority.
    minority_estimator_, majority_estimator_ : fitted classifier or None
        None when the group has a single class.
    """

    def __init__(
        self,
        stage1: Literal["kernel", "benefit"] = "kernel",
        *,
        minority_classes: ArrayLike | None = None,
        majority_classes: ArrayLike | None = None,
        c_hd: float = 1.0,
        c_dh: float = 1.0,
        stage1_estimator: object | None = None,
        stage2_estimator: object | None = None,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.stage1 = stage1
        self.minority_classes = minority_classes
        self.majority_classes = majority_classes
        self.c_hd = c_hd
        self.c_dh = c_dh
        self.stage1_estimator = stage1_estimator
        self.stage2_estimator = stage2_estimator
        self.random_state = random_state

    def _stage_models(self, c_hd: float, c_dh: float):
        if self.stage1 == "kernel":
            first = self.stage1_estimator
            if first is None:
                first = KernelLogisticRegression(random_state=self.random_state)
            if not hasattr(first, "predict_proba"):
                raise ValueError("stage1='kernel' needs a stage1_estimator with predict_proba")
            first = clone(first)
            second = self.stage2_estimator
            if second is None:
                second = KernelLogisticRegression(random_state=self.random_state)
        elif self.stage1 == "benefit":
            first = self.stage1_estimator
            if first is None:
                first = BenefitLogisticRegression()
            if not isinstance(first, BenefitLogisticRegression):
                raise ValueError(
                    "stage1='benefit' needs a BenefitLogisticRegression as stage1_estimator, "
                    f"got {type(first).__name__}"
                )
            first = clone(first).set_params(benefit_matrix=[[0.0, -c_hd], [-c_dh, 0.0]])
            second = self.stage2_estimator
            if second is None:
                second = LogisticRegression()
        else:
            raise ValueError(f"stage1 must be 'kernel' or 'benefit', got {self.stage1!r}")
        return first, second

    @staticmethod
    def _fit_group(template, X, y_idx, sw, members: np.ndarray):
        """Cost-blind model among ``members`` (class indices); None if there is only one."""
        if members.shape[0] == 1:
            return None
        rows = np.isin(y_idx, members)
        return clone(template).fit(X[rows], y_idx[rows], sample_weight=sw[rows])

    def fit(self, X: ArrayLike, y: ArrayLike, sample_weight: ArrayLike | None = None) -> Self:
        """Fit stage 1 on group labels and the cost-blind stage-2 model(s).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), default=None

        Returns
        -------
        self : object
        """
        c_hd = check_positive("c_hd", self.c_hd)
        c_dh = check_positive("c_dh", self.c_dh)
        first, second = self._stage_models(c_hd, c_dh)
        X, y = validate_data(self, X, y, dtype=np.float64)
        classes, y_idx = encode_classes(y)
        sw = _check_sample_weight(sample_weight, X, dtype=np.float64)
        totals = np.bincount(y_idx, weights=sw, minlength=classes.shape[0])
        minority, majority = resolve_groups(
            classes, totals, self.minority_classes, self.majority_classes
        )
        self.classes_ = classes
        self.minority_mask_ = minority
        self.threshold_ = c_hd / (c_hd + c_dh)
        group = minority[y_idx].astype(np.intp)  # 1 = minority group D, 0 = majority H
        self.stage1_ = first.fit(X, group, sample_weight=sw)
        self.minority_estimator_ = self._fit_group(second, X, y_idx, sw, np.flatnonzero(minority))
        self.majority_estimator_ = self._fit_group(second, X, y_idx, sw, np.flatnonzero(majority))
        return self

    def predict_minority_group(self, X: ArrayLike) -> np.ndarray:
        """Stage-1 decision: True where a sample is assigned to the minority group."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        return self._stage1_decision(X)

    def _stage1_decision(self, X: np.ndarray) -> np.ndarray:
        if self.stage1 == "kernel":
            proba = self.stage1_.predict_proba(X)
            col = int(np.flatnonzero(np.asarray(self.stage1_.classes_) == 1)[0])
            return proba[:, col] >= self.threshold_
        return np.asarray(self.stage1_.predict(X)) == 1

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Group by stage 1, then the class within the group by the cost-blind model."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        is_minority = self._stage1_decision(X)
        out = np.empty(X.shape[0], dtype=np.intp)
        for mask, members, model in (
            (is_minority, np.flatnonzero(self.minority_mask_), self.minority_estimator_),
            (~is_minority, np.flatnonzero(~self.minority_mask_), self.majority_estimator_),
        ):
            if not mask.any():
                continue
            out[mask] = members[0] if model is None else model.predict(X[mask])
        return self.classes_[out]
