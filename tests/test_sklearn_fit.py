"""costlib inside scikit-learn: the benefit scorer for TunedThresholdClassifierCV, the `>=` rule,
the hierarchical classifier's probabilities and scores, F-β names, and readable error messages."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine, make_classification
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import TunedThresholdClassifierCV, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from costlib.costs._benefit import (
    benefit_curve,
    benefit_optimal_threshold,
    benefit_scorer,
    expected_benefit,
)
from costlib.costs._matrices import BenefitMatrix, CostMatrix
from costlib.decoding import optimal_topk, optimal_topk_batch, optimal_topk_ragged
from costlib.decoding._losses import fbeta_loss, get_loss
from costlib.estimators import HierarchicalCostSensitiveClassifier
from costlib.thresholds import Target

pytestmark = pytest.mark.usefixtures("single_blas_thread")

B = BenefitMatrix([[1.0, -2.0], [-10.0, 5.0]])  # rows = true, columns = predicted


def _split(seed=0):
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X[:, :10], y, test_size=0.5, stratify=y, random_state=seed)


# --- the scorer with TunedThresholdClassifierCV ------------------------------------------------


def test_tuned_threshold_with_benefit_scorer_equals_costlibs_threshold_on_the_same_scores():
    Xtr, Xval, ytr, yval = _split()
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(Xtr, ytr)
    scores = model.predict_proba(Xval)[:, 1]
    candidates = np.unique(scores)  # every threshold where the benefit can change
    # scikit-learn's route: a frozen model, tuned on the validation rows only.
    tuned = TunedThresholdClassifierCV(
        FrozenEstimator(model), scoring=benefit_scorer(B), thresholds=candidates,
        cv=[(np.arange(len(yval)), np.arange(len(yval)))], refit=False,
    ).fit(Xval, yval)
    # costlib's route on the same scores.
    t_costlib = benefit_optimal_threshold(yval, scores, B)
    _, curve = benefit_curve(yval, scores, B)
    assert tuned.best_threshold_ == t_costlib
    assert tuned.best_score_ == pytest.approx(curve.max(), abs=1e-12)
    # Independent truth: brute force over every candidate with the >= rule.
    brute = [expected_benefit(yval, (scores >= t).astype(int), B) for t in candidates]
    assert max(brute) == pytest.approx(tuned.best_score_, abs=1e-12)
    assert candidates[int(np.argmax(brute))] == t_costlib
    # The tuned classifier predicts with the same rule.
    np.testing.assert_array_equal(tuned.predict(Xval), (scores >= t_costlib).astype(int))


def test_cross_validated_tuning_beats_the_default_threshold_out_of_sample():
    Xtr, Xte, ytr, yte = _split(1)
    base = make_pipeline(StandardScaler(), LogisticRegression())
    tuned = TunedThresholdClassifierCV(base, scoring=benefit_scorer(B), cv=5).fit(Xtr, ytr)
    plain = base.fit(Xtr, ytr)
    # Missing a positive costs 15 in regret against 3 for a false alarm: the threshold drops.
    assert tuned.best_threshold_ < 0.5
    assert expected_benefit(yte, tuned.predict(Xte), B) >= expected_benefit(
        yte, plain.predict(Xte), B)


def test_cost_matrix_scorer_is_minus_the_expected_cost():
    Xtr, Xte, ytr, yte = _split(2)
    V = CostMatrix([[0.0, 3.0], [15.0, 0.0]])
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(Xtr, ytr)
    pred = model.predict(Xte)
    expected_cost = np.mean(V.values[yte, pred])
    assert benefit_scorer(V)(model, Xte, yte) == pytest.approx(-expected_cost)
    # Zero off-diagonal costs break the benefit sign convention but still define a cost.
    V0 = CostMatrix([[0.0, 0.0], [1.0, 0.0]])
    assert benefit_scorer(V0)(model, Xte, yte) == pytest.approx(-np.mean(V0.values[yte, pred]))


def test_benefit_curve_uses_greater_or_equal_on_ties():
    # Two rows share the score 0.5: with >= both are class 1 at t = 0.5.
    y, s = [0, 1, 1], [0.2, 0.5, 0.5]
    thresholds, curve = benefit_curve(y, s, B)
    np.testing.assert_array_equal(thresholds, [0.2, 0.5, np.inf])
    b = B.values
    assert curve[1] == pytest.approx((b[0, 0] + 2 * b[1, 1]) / 3)
    assert benefit_optimal_threshold(y, s, B) == 0.5


# --- the hierarchical classifier's predict_proba and decision_function --------------------------


def _wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), np.array(["barolo", "grignolino", "barbera"])[y]


@pytest.mark.parametrize("stage1", ["kernel", "benefit"])
def test_hierarchical_probabilities_are_the_product_of_the_two_stages(stage1):
    X, y = _wine()
    clf = HierarchicalCostSensitiveClassifier(
        stage1, minority_classes=["barolo", "barbera"], c_hd=1.0, c_dh=4.0, random_state=0
    ).fit(X, y)
    proba = clf.predict_proba(X)
    assert proba.shape == (len(y), 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    # Recompute from the fitted stages directly.
    p_d = clf.stage1_.predict_proba(X)[:, list(clf.stage1_.classes_).index(1)]
    minority = np.flatnonzero(clf.minority_mask_)
    within = clf.minority_estimator_.predict_proba(X)
    expected = np.zeros_like(proba)
    for j, c in enumerate(clf.minority_estimator_.classes_):
        expected[:, c] = p_d * within[:, j]
    expected[:, np.flatnonzero(~clf.minority_mask_)[0]] = 1 - p_d
    np.testing.assert_allclose(proba, expected, atol=1e-12)
    # The minority group's total is stage 1's probability.
    np.testing.assert_allclose(proba[:, minority].sum(axis=1), p_d, atol=1e-12)


@pytest.mark.parametrize("stage1", ["kernel", "benefit"])
def test_hierarchical_decision_function_argmax_is_predict(stage1):
    X, y = _wine()
    clf = HierarchicalCostSensitiveClassifier(
        stage1, minority_classes=["barolo", "barbera"], c_hd=1.0, c_dh=4.0, random_state=0
    ).fit(X, y)
    scores = clf.decision_function(X)
    assert scores.shape == (len(y), 3)
    np.testing.assert_array_equal(clf.classes_[np.argmax(scores, axis=1)], clf.predict(X))
    assert clf.threshold_ == pytest.approx(0.2)


def test_hierarchical_binary_decision_function_sign_is_predict_and_ranks_like_stage1():
    X, y = make_classification(400, 6, weights=[0.85], random_state=3)
    clf = HierarchicalCostSensitiveClassifier(c_hd=1.0, c_dh=3.0, random_state=0).fit(X, y)
    scores = clf.decision_function(X)
    assert scores.shape == (400,)
    np.testing.assert_array_equal(clf.classes_[(scores >= 0).astype(int)], clf.predict(X))
    np.testing.assert_allclose(scores, clf.predict_proba(X)[:, 1] - 0.25, atol=1e-12)


# --- F-β by name and by parameter --------------------------------------------------------------


def test_fbeta_names_and_parameters():
    tp, fp, fn, tn = np.array([3.0]), np.array([2.0]), np.array([4.0]), np.array([1.0])
    for name, beta in [("f2", 2.0), ("f0.5", 0.5), ("F1", 1.0), ("f1.5", 1.5)]:
        loss = get_loss(name)
        b2 = beta * beta
        truth = 1 - (1 + b2) * 3 / ((1 + b2) * 3 + b2 * 4 + 2)  # closed form
        assert float(loss(tp, fp, fn, tn)[0]) == pytest.approx(truth)
        assert loss is get_loss("fbeta", beta=beta)
    assert get_loss("f1", beta=1) is get_loss("f1")
    with pytest.raises(ValueError, match=r"use get_loss\('fbeta', beta=2\)"):
        get_loss("f1", beta=2)
    with pytest.raises(ValueError, match="f<β>"):
        get_loss("fx")
    # Decoders take the names too, and agree with the parameter form.
    p = np.random.default_rng(0).random(40)
    assert optimal_topk(p, "f2").k == optimal_topk(p, "fbeta", beta=2.0).k
    assert fbeta_loss(2.0).name == get_loss("f2").name


# --- error messages -----------------------------------------------------------------------------


def test_ragged_sets_point_to_optimal_topk_ragged():
    with pytest.raises(ValueError, match="optimal_topk_ragged") as info:
        optimal_topk_batch([[0.1, 0.7], [0.3]], "f1")
    assert "inhomogeneous" not in str(info.value)
    # The route it names does take those sets.
    result = optimal_topk_ragged(np.array([0.1, 0.7, 0.3]), np.array([0, 2, 3]), "f1")
    assert len(result.k) == 2


@pytest.mark.parametrize("call", [
    lambda: optimal_topk([0.5], "f1", tol=np.float64(-1.5)),
    lambda: HierarchicalCostSensitiveClassifier(c_hd=np.float64(-1.1)).fit([[0.0], [1.0]], [0, 1]),
    lambda: Target.from_marginal_precision(np.float64(1.1)),
])
def test_error_messages_show_plain_numbers(call):
    with pytest.raises(ValueError) as info:
        call()
    assert "np.float64" not in str(info.value)
    assert "1.1" in str(info.value) or "1.5" in str(info.value)
