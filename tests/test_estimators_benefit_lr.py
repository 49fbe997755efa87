"""BenefitLogisticRegression against closed forms: weighted LR, the seed's objective, OvR sums."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from costlib.costs._matrices import BenefitMatrix
from costlib.estimators import BenefitLogisticRegression

pytestmark = pytest.mark.usefixtures("single_blas_thread")


TIGHT = {"tol": 1e-10, "max_iter": 5000}


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X[:, :6]), y


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), np.array(["barolo", "grignolino", "barbera"])[y]


@pytest.mark.parametrize("b", [[[1.0, -1.0], [-10.0, 5.0]], [[3.0, -6.0], [-1.0, 0.5]]])
def test_binary_equals_logistic_regression_with_eta_weights(cancer, b):
    X, y = cancer
    eta = (b[0][0] - b[0][1]) / (b[1][1] - b[1][0])
    clf = BenefitLogisticRegression(b, C=0.5, **TIGHT).fit(X, y)
    ref = LogisticRegression(C=0.5, **TIGHT).fit(X, y, sample_weight=np.where(y == 0, eta, 1.0))
    assert clf.etas_ == pytest.approx([eta])
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(clf.intercept_, ref.intercept_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(clf.predict_proba(X), ref.predict_proba(X), atol=1e-8)
    np.testing.assert_allclose(clf.decision_function(X), ref.decision_function(X), atol=1e-6)
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))


def test_binary_minimises_the_seeds_weighted_logistic_loss(cancer):
    # J(θ) = Σ_i s_i [-y_i log h - η (1 - y_i) log(1 - h)] · C + ½‖w‖² (intercept free),
    # minimised independently with scipy.
    X, y = cancer
    X = X[:200]
    y = y[:200]
    b = np.array([[2.0, -1.0], [-4.0, 1.0]])
    eta = 3.0 / 5.0
    c = 0.7
    sw = np.random.default_rng(0).uniform(0.5, 2.0, size=y.shape[0])

    def objective(theta):
        w, w0 = theta[:-1], theta[-1]
        h = expit(X @ w + w0)
        loss = -(y * np.log(h) + eta * (1 - y) * np.log1p(-h))
        grad_z = sw * (h * (y + eta * (1 - y)) - y)  # d loss / d z, weighted
        f = c * np.sum(sw * loss) + 0.5 * w @ w
        g = np.concatenate((c * X.T @ grad_z + w, [c * grad_z.sum()]))
        return f, g

    res = minimize(objective, np.zeros(X.shape[1] + 1), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})
    clf = BenefitLogisticRegression(b, C=c, **TIGHT).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(clf.coef_[0], res.x[:-1], rtol=1e-4, atol=1e-5)
    assert clf.intercept_[0] == pytest.approx(res.x[-1], rel=1e-4, abs=1e-5)


def test_string_labels_and_a_labelled_matrix_in_any_order(cancer):
    X, y01 = cancer
    y = np.array(["malignant", "benign"])[y01]  # sorted classes_: benign, malignant
    # Matrix given in the order (malignant, benign): missing a malignant case costs 20.
    bm = BenefitMatrix([[1.0, -20.0], [-1.0, 1.0]], labels=["malignant", "benign"])
    clf = BenefitLogisticRegression(bm, **TIGHT).fit(X, y)
    np.testing.assert_array_equal(clf.classes_, ["benign", "malignant"])
    # aligned: rows/cols (benign, malignant) = [[1, -1], [-20, 1]]; η = (1 + 1) / (1 + 20)
    np.testing.assert_allclose(clf.benefit_matrix_, [[1.0, -1.0], [-20.0, 1.0]])
    assert clf.etas_[0] == pytest.approx(2 / 21)
    ref = LogisticRegression(**TIGHT).fit(X, y, sample_weight=np.where(y == "benign", 2 / 21, 1))
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))
    # Costly misses -> more samples flagged malignant than by plain LR.
    plain = LogisticRegression(**TIGHT).fit(X, y).predict(X)
    assert (clf.predict(X) == "malignant").sum() > (plain == "malignant").sum()


def _seed_ovr(b, pri, k, normalized):
    """The seed's b00, b01, b10 (sums over i != k), b11 = b_kk, written out with loops."""
    b00 = b01 = b10 = 0.0
    rest_mass = 0.0
    for i in range(len(pri)):
        if i == k:
            continue
        b00 += pri[i] * b[i][i]
        b01 += pri[i] * b[i][k]
        b10 += pri[i] * b[k][i]
        rest_mass += pri[i]
    if normalized:
        b00, b01, b10 = b00 / rest_mass, b01 / rest_mass, b10 / rest_mass
    return (b00 - b01) / (b[k][k] - b10)


@pytest.mark.parametrize("combination", ["paper", "normalized"])
def test_multiclass_is_one_vs_rest_benefit_lr_with_the_seeds_combination(wine, combination):
    X, y = wine
    classes = np.unique(y)  # barbera, barolo, grignolino
    b = [[2.0, -1.0, -3.0], [-1.0, 1.0, -1.0], [-2.0, -4.0, 1.0]]
    pri = np.array([np.mean(y == c) for c in classes])
    clf = BenefitLogisticRegression(b, combination=combination, **TIGHT).fit(X, y)
    etas = [_seed_ovr(b, pri, k, combination == "normalized") for k in range(3)]
    np.testing.assert_allclose(clf.etas_, etas, rtol=1e-12)
    np.testing.assert_allclose(clf.class_priors_, pri)
    logits = np.empty((X.shape[0], 3))
    for k, c in enumerate(classes):
        target = (y == c).astype(int)
        ref = LogisticRegression(**TIGHT).fit(X, target, sample_weight=np.where(target, 1, etas[k]))
        np.testing.assert_allclose(clf.coef_[k], ref.coef_[0], rtol=1e-5, atol=1e-7)
        logits[:, k] = ref.decision_function(X)
    np.testing.assert_allclose(clf.decision_function(X), logits, atol=1e-5)
    # Prediction = the class whose binary classifier scores highest (seed's rule).
    np.testing.assert_array_equal(clf.predict(X), classes[np.argmax(expit(logits), axis=1)])
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(np.argmax(proba, axis=1), np.argmax(logits, axis=1))


def test_the_two_combinations_differ_and_user_priors_are_used(wine):
    X, y = wine
    b = [[2.0, -1.0, -3.0], [-1.0, 1.0, -1.0], [-2.0, -4.0, 1.0]]
    paper = BenefitLogisticRegression(b).fit(X, y)
    normalized = BenefitLogisticRegression(b, combination="normalized").fit(X, y)
    assert not np.allclose(paper.etas_, normalized.etas_)
    fixed = BenefitLogisticRegression(b, priors=[2, 1, 1]).fit(X, y)
    np.testing.assert_allclose(fixed.class_priors_, [0.5, 0.25, 0.25])
    with pytest.raises(ValueError, match="priors"):
        BenefitLogisticRegression(b, priors=[1, 1]).fit(X, y)


def test_default_matrix_is_plain_logistic_regression(wine):
    X, y = wine
    clf = BenefitLogisticRegression(**TIGHT).fit(X[:, :4], y)
    assert clf.predict(X[:, :4]).dtype == y.dtype
    Xb, yb = X[y != "barbera"], y[y != "barbera"]
    clf = BenefitLogisticRegression(**TIGHT).fit(Xb, yb)
    ref = LogisticRegression(**TIGHT).fit(Xb, yb)
    np.testing.assert_allclose(clf.coef_, ref.coef_, rtol=1e-6, atol=1e-8)
