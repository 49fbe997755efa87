"""Xu's hierarchical cost-sensitive classifier, with a kernel-LR or benefit-LR first stage."""

from __future__ import annotations

from typing import Any, Literal, Self

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

    def _stage_models(self, c_hd: float, c_dh: float) -> tuple[Any, Any]:
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
    def _fit_group(
        template: Any, X: np.ndarray, y_idx: np.ndarray, sw: np.ndarray, members: np.ndarray
    ) -> Any:
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

    def _minority_probability(self, X: np.ndarray) -> np.ndarray:
        """Stage 1's ``P(D|x)``: its probability of the minority group."""
        proba = self.stage1_.predict_proba(X)
        col = int(np.flatnonzero(np.asarray(self.stage1_.classes_) == 1)[0])
        return np.asarray(proba[:, col], dtype=np.float64)

    def _within_group(self, X: np.ndarray, members: np.ndarray, model: Any) -> np.ndarray:
        """``P(c | group, x)`` for the classes of one group, shape (n_samples, len(members))."""
        if model is None:
            return np.ones((X.shape[0], 1))
        if not hasattr(model, "predict_proba"):
            raise AttributeError(
                "predict_proba and decision_function need a stage2_estimator with predict_proba, "
                f"got {type(model).__name__}"
            )
        proba = np.asarray(model.predict_proba(X), dtype=np.float64)
        out = np.zeros((X.shape[0], members.shape[0]))
        # Columns of the stage-2 model follow its classes_ (class indices of this group).
        position = {int(c): i for i, c in enumerate(members.tolist())}
        for j, c in enumerate(np.asarray(model.classes_).tolist()):
            out[:, position[int(c)]] = proba[:, j]
        return out

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """Class probabilities of the two-stage model, ``P(c|x) = P(g(c)|x) · P(c|g(c), x)``.

        ``P(D|x)`` is stage 1's probability of the minority group (for ``stage1="benefit"``
        that of the benefit-weighted logistic regression, so it leans towards the cheaper
        error), and ``P(c|g, x)`` the cost-blind stage-2 model's probability within the group
        (1 for a group with one class). Rows sum to 1.

        These are probability *estimates*, not the decision: :meth:`predict` applies the cost
        threshold ``p*`` to ``P(D|x)`` first, so it is not in general the argmax of these
        probabilities (it is when ``c_hd == c_dh`` and each group holds one class).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        p_minority = self._minority_probability(X)
        out = np.zeros((X.shape[0], self.classes_.shape[0]))
        for members, model, p_group in (
            (np.flatnonzero(self.minority_mask_), self.minority_estimator_, p_minority),
            (np.flatnonzero(~self.minority_mask_), self.majority_estimator_, 1.0 - p_minority),
        ):
            out[:, members] = p_group[:, None] * self._within_group(X, members, model)
        return out

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        r"""Scores whose argmax is :meth:`predict` (sign for two classes), built from both stages.

        With the stage-1 margin ``m(x)`` (positive: minority group) — ``P(D|x) - p*`` for
        ``stage1="kernel"``, the benefit LR's ``decision_function`` for ``"benefit"`` — the
        score of class ``c`` in group ``g`` is

        .. math:: f_c(x) = \pm m(x) + \log P(c|g, x) - \max_{c' \in g} \log P(c'|g, x),

        with ``+`` for the minority group and ``-`` for the majority. The most probable class
        of the chosen group scores ``|m(x)| >= 0`` and every class of the other group at most
        ``-|m(x)|``, so ``argmax_c f_c = predict`` (at ``m = 0`` exactly, ``predict`` takes the
        minority group). For two classes (one per group) the result has shape
        ``(n_samples,)``, positive for ``classes_[1]``, as scikit-learn expects.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,) or (n_samples, n_classes)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False)
        if self.stage1 == "kernel":
            margin = self._minority_probability(X) - self.threshold_
        else:
            margin = np.asarray(self.stage1_.decision_function(X), dtype=np.float64)
        if self.classes_.shape[0] == 2:
            return margin if bool(self.minority_mask_[1]) else -margin
        out = np.empty((X.shape[0], self.classes_.shape[0]))
        for members, model, sign in (
            (np.flatnonzero(self.minority_mask_), self.minority_estimator_, 1.0),
            (np.flatnonzero(~self.minority_mask_), self.majority_estimator_, -1.0),
        ):
            with np.errstate(divide="ignore"):
                log_p = np.log(self._within_group(X, members, model))
            out[:, members] = sign * margin[:, None] + log_p - log_p.max(axis=1, keepdims=True)
        return out

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
