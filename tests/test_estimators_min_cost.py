"""Minimum expected cost and cost-based naive Bayes against brute force and their parts."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_wine
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import CategoricalNB, GaussianNB
from sklearn.preprocessing import KBinsDiscretizer, StandardScaler

from costlib.costs._matrices import BenefitMatrix, CostMatrix
from costlib.estimators import CostSensitiveNaiveBayes, MinimumExpectedCostClassifier

pytestmark = pytest.mark.usefixtures("single_blas_thread")


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), np.array(["barolo", "grignolino", "barbera"])[y]


def _brute_force(proba, cost):
    """argmin_k Σ_q p_q V_qk with explicit loops."""
    out = []
    for p in proba:
        costs = [sum(p[q] * cost[q][k] for q in range(len(p))) for k in range(len(p))]
        out.append(int(np.argmin(costs)))
    return np.array(out)


def test_zero_one_costs_give_argmax(wine):
    X, y = wine
    base = LogisticRegression(C=0.05).fit(X, y)
    for cost in (None, 1 - np.eye(3)):
        clf = MinimumExpectedCostClassifier(LogisticRegression(C=0.05), cost).fit(X, y)
        argmax = base.classes_[base.predict_proba(X).argmax(1)]
        np.testing.assert_array_equal(clf.predict(X), argmax)
        np.testing.assert_array_equal(clf.predict(X), base.predict(X))


def test_minimum_expected_cost_equals_brute_force(wine):
    X, y = wine
    cost = np.random.default_rng(1).uniform(0, 5, size=(3, 3))
    np.fill_diagonal(cost, 0.0)
    clf = MinimumExpectedCostClassifier(LogisticRegression(C=0.02), cost).fit(X, y)
    proba = clf.predict_proba(X)
    want = clf.classes_[_brute_force(proba, cost)]
    np.testing.assert_array_equal(clf.predict(X), want)
    np.testing.assert_allclose(clf.expected_costs(X), proba @ cost)
    np.testing.assert_allclose(clf.decision_function(X), -(proba @ cost))
    # Costs move decisions away from argmax on this weakly regularised model.
    assert (clf.predict(X) != clf.estimator_.predict(X)).any()


def test_binary_decision_function_sign_matches_predict():
    X, y = load_digits(n_class=2, return_X_y=True)
    clf = MinimumExpectedCostClassifier(LogisticRegression(C=1e-3), [[0, 1], [30, 0]]).fit(X, y)
    dec = clf.decision_function(X)
    assert dec.shape == (X.shape[0],)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(dec > 0).astype(int)])


def test_prefit_estimator_through_frozen_estimator(wine):
    X, y = wine
    prefit = GaussianNB().fit(X[::2], y[::2])
    cost = CostMatrix([[0, 4, 1], [1, 0, 1], [1, 9, 0]], labels=["grignolino", "barolo", "barbera"])
    clf = MinimumExpectedCostClassifier(FrozenEstimator(prefit), cost).fit(X[1::2], y[1::2])
    assert clf.estimator_.estimator is prefit  # not refitted on the second half
    np.testing.assert_array_equal(clf.predict_proba(X), prefit.predict_proba(X))
    # aligned to classes_ = (barbera, barolo, grignolino)
    np.testing.assert_array_equal(clf.cost_matrix_, [[0, 9, 1], [1, 0, 1], [1, 4, 0]])
    want = clf.classes_[_brute_force(prefit.predict_proba(X), clf.cost_matrix_)]
    np.testing.assert_array_equal(clf.predict(X), want)


def test_benefit_matrix_through_regret_costs(wine):
    X, y = wine
    b = BenefitMatrix([[3.0, -1.0, -2.0], [-1.0, 1.0, -5.0], [-1.0, -1.0, 2.0]])
    clf = MinimumExpectedCostClassifier(LogisticRegression(C=0.02), b.regret_costs()).fit(X, y)
    proba = clf.predict_proba(X)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmax(proba @ b.values, 1)])


# --- cost-based naive Bayes ---------------------------------------------------------------------


def test_naive_bayes_is_categorical_nb_on_clustered_attributes(wine):
    X, y = wine
    clf = CostSensitiveNaiveBayes(n_bins=4, alpha=0.5).fit(X, y)
    disc = KBinsDiscretizer(n_bins=4, encode="ordinal", strategy="kmeans", subsample=None).fit(X)
    codes = disc.transform(X).astype(int)
    nb = CategoricalNB(alpha=0.5, min_categories=4).fit(codes, y)
    np.testing.assert_allclose(clf.predict_joint_log_proba(X), nb.predict_joint_log_proba(codes))
    np.testing.assert_allclose(clf.predict_proba(X), nb.predict_proba(codes), atol=1e-12)
    np.testing.assert_array_equal(clf.predict(X), nb.predict(codes))  # 0/1 costs: argmax


def test_naive_bayes_decision_is_the_seeds_product_formula(wine):
    X, y = wine
    cost = np.array([[0.0, 1.0, 6.0], [2.0, 0.0, 1.0], [8.0, 1.0, 0.0]])
    clf = CostSensitiveNaiveBayes(cost, n_bins=3).fit(X, y)
    nb = clf.naive_bayes_
    codes = clf.discretizer_.transform(X).astype(int)
    # C_k* = argmin_k Σ_q V_qk p(C_q) Π_i p(x_i | C_q), computed from the fitted tables.
    prior = np.exp(nb.class_log_prior_)
    want = []
    for row in codes:
        joint = prior * np.prod(
            [np.exp(nb.feature_log_prob_[i][:, row[i]]) for i in range(len(row))], axis=0
        )
        want.append(int(np.argmin(joint @ cost)))
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.array(want)])
    assert (clf.predict(X) != nb.predict(codes)).any()


def test_naive_bayes_categorical_attributes():
    rng = np.random.default_rng(0)
    n = 400
    y = rng.integers(0, 2, size=n)
    colour = np.where(rng.uniform(size=n) < 0.8, y * 2, rng.integers(0, 3, size=n))  # 0..2
    size = rng.normal(y * 1.5, 1.0)
    X = np.column_stack((size, colour))
    clf = CostSensitiveNaiveBayes(categorical_features=[1], n_bins=4).fit(X, y)
    np.testing.assert_array_equal(clf.categorical_features_, [1])
    codes = np.column_stack((clf.discretizer_.transform(X[:, :1]), colour)).astype(int)
    nb = CategoricalNB(min_categories=[4, 3]).fit(codes, y)
    np.testing.assert_allclose(clf.predict_proba(X), nb.predict_proba(codes), atol=1e-12)
    mask = CostSensitiveNaiveBayes(categorical_features=[False, True], n_bins=4).fit(X, y)
    np.testing.assert_allclose(mask.predict_proba(X), clf.predict_proba(X))
    with pytest.raises(ValueError, match="not seen in training"):
        clf.predict(np.array([[0.0, 3.0]]))
    with pytest.raises(ValueError, match="integer category codes"):
        clf.predict(np.array([[0.0, 1.5]]))
    with pytest.raises(ValueError, match="out of range"):
        CostSensitiveNaiveBayes(categorical_features=[2]).fit(X, y)
