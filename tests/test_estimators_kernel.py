"""Kernel LR, Zhang's β/Δ rule and Xu's hierarchical classifier against closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.preprocessing import StandardScaler

from costlib.estimators import (
    BenefitLogisticRegression,
    CostSensitiveKernelLogisticRegression,
    HierarchicalCostSensitiveClassifier,
    KernelLogisticRegression,
    beta_delta,
)
from costlib.estimators._kernel_lr import beta_delta_scores

pytestmark = pytest.mark.usefixtures("single_blas_thread")


NAMES = np.array(["barolo", "grignolino", "barbera"])


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), NAMES[y]


def _xu_cost_matrix(classes, majority, c_hd, c_dh, c_dd):
    """Full cost matrix V[true, predicted] of Xu's setting (no cost within the majority)."""
    k = len(classes)
    v = np.zeros((k, k))
    for q in range(k):
        for j in range(k):
            if q == j:
                continue
            if majority[q] and majority[j]:
                v[q, j] = 0.0
            elif majority[q]:
                v[q, j] = c_hd
            elif majority[j]:
                v[q, j] = c_dh
            else:
                v[q, j] = c_dd
    return v


# --- kernel logistic regression -----------------------------------------------------------------


def test_exact_kernel_lr_equals_the_rkhs_objective():
    X, y = load_breast_cancer(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.choice(X.shape[0], size=80, replace=False)
    X = StandardScaler().fit_transform(X[:, :5])
    Xtr, ytr, Xte = X[idx], y[idx], X[:50]
    c, gamma = 2.0, 0.3
    clf = KernelLogisticRegression(C=c, gamma=gamma, tol=1e-10, max_iter=10_000, random_state=0)
    clf.fit(Xtr, ytr)
    assert clf.exact_
    phi = clf.feature_map_.transform(Xtr)
    np.testing.assert_allclose(phi @ phi.T, rbf_kernel(Xtr, Xtr, gamma=gamma), atol=1e-8)

    # min_{α,b} C Σ_i logloss(y_i, (Kα)_i + b) + ½ αᵀKα, solved independently: with
    # K = U S Uᵀ and α = U S^{-1/2} w the problem is plain L2 logistic regression in w on the
    # features U S^{1/2} (well conditioned), and f(x) = k(x, X) α.
    kmat = rbf_kernel(Xtr, Xtr, gamma=gamma)
    s_vals, u = np.linalg.eigh(kmat)
    keep = s_vals > 1e-10 * s_vals.max()
    feats = u[:, keep] * np.sqrt(s_vals[keep])

    def objective(theta):
        w, b = theta[:-1], theta[-1]
        z = feats @ w + b
        f = c * np.sum(np.logaddexp(0, z) - ytr * z) + 0.5 * w @ w
        gz = c * (expit(z) - ytr)
        return f, np.concatenate((feats.T @ gz + w, [gz.sum()]))

    res = minimize(objective, np.zeros(feats.shape[1] + 1), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 20_000})
    alpha = u[:, keep] @ (res.x[:-1] / np.sqrt(s_vals[keep]))
    np.testing.assert_allclose(kmat @ alpha, feats @ res.x[:-1], atol=1e-8)
    want = rbf_kernel(Xte, Xtr, gamma=gamma) @ alpha + res.x[-1]
    np.testing.assert_allclose(clf.decision_function(Xte), want, atol=2e-4)


def test_gamma_scale_and_nystroem_approximation():
    X, y = load_digits(return_X_y=True)
    X = X[:600] / 16.0
    y = y[:600]
    clf = KernelLogisticRegression(n_components=150, random_state=0).fit(X, y)
    assert not clf.exact_
    assert clf.feature_map_.n_components == 150
    assert clf.gamma_ == pytest.approx(1.0 / (X.shape[1] * X.var()))
    assert clf.score(X, y) > 0.95
    small = KernelLogisticRegression(n_components=1000).fit(X[:100], y[:100])
    assert small.exact_


# --- Zhang's β/Δ rule ---------------------------------------------------------------------------


def test_beta_delta_constants():
    assert beta_delta(1.0, 1.0, 1.0) == (1.0, 0.0)
    beta, delta = beta_delta(c_hd=2.0, c_dh=10.0, c_dd=4.0)
    assert beta == pytest.approx((10 + 2 - 4) / 4)
    assert delta == pytest.approx((10 - 4) / 4)
    with pytest.raises(ValueError, match="c_dd"):
        beta_delta(1.0, 1.0, 0.0)


@pytest.mark.parametrize("seed", range(6))
def test_beta_delta_rule_equals_brute_force_expected_cost(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(2, 6))
    n_major = int(rng.integers(1, k))
    majority = np.zeros(k, dtype=bool)
    majority[rng.choice(k, size=n_major, replace=False)] = True
    c_hd, c_dh, c_dd = rng.uniform(0.1, 10.0, size=3)
    proba = rng.dirichlet(np.full(k, 0.7), size=2000)
    beta, delta = beta_delta(c_hd, c_dh, c_dd)
    pred = np.argmax(beta_delta_scores(proba, majority, beta, delta), axis=1)
    cost = proba @ _xu_cost_matrix(np.arange(k), majority, c_hd, c_dh, c_dd)
    # Same expected cost as the brute-force minimum (majority members tie among themselves)...
    np.testing.assert_allclose(cost[np.arange(len(pred)), pred], cost.min(axis=1), atol=1e-12)
    # ...and with several majority classes the most probable one is chosen.
    chose_major = majority[pred]
    best_major = np.flatnonzero(majority)[np.argmax(proba[:, majority], axis=1)]
    np.testing.assert_array_equal(pred[chose_major], best_major[chose_major])
    if n_major == 1:
        np.testing.assert_array_equal(pred, np.argmin(cost, axis=1))


@pytest.mark.parametrize(("c_hd", "c_dh", "c_dd"), [(1.0, 8.0, 2.0), (5.0, 1.0, 1.0), (1, 1, 9)])
def test_cost_sensitive_kernel_lr_equals_brute_force_on_its_probabilities(wine, c_hd, c_dh, c_dd):
    X, y = wine
    clf = CostSensitiveKernelLogisticRegression(
        c_hd=c_hd, c_dh=c_dh, c_dd=c_dd, majority_classes=["grignolino"], C=0.05, random_state=0
    ).fit(X, y)
    proba = clf.predict_proba(X)
    v = _xu_cost_matrix(clf.classes_, clf.classes_ == "grignolino", c_hd, c_dh, c_dd)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[np.argmin(proba @ v, axis=1)])
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[clf.decision_function(X).argmax(1)])


def test_equal_costs_reduce_the_flat_rule_to_argmax(wine):
    X, y = wine
    flat = CostSensitiveKernelLogisticRegression(c_hd=3, c_dh=3, c_dd=3, C=0.05, random_state=0)
    plain = KernelLogisticRegression(C=0.05, random_state=0)
    np.testing.assert_array_equal(flat.fit(X, y).predict(X), plain.fit(X, y).predict(X))


# --- Xu's hierarchical classifier ---------------------------------------------------------------


def test_hierarchical_with_equal_costs_and_two_classes_is_the_plain_classifier(wine):
    X, y = wine
    keep = y != "barbera"
    X, y = X[keep], y[keep]
    hier = HierarchicalCostSensitiveClassifier(
        minority_classes=["barolo"], c_hd=2.0, c_dh=2.0, random_state=0
    ).fit(X, y)
    plain = KernelLogisticRegression(random_state=0).fit(X, y)
    np.testing.assert_array_equal(hier.predict(X), plain.predict(X))
    hier_b = HierarchicalCostSensitiveClassifier(
        "benefit", minority_classes=["barolo"], c_hd=2.0, c_dh=2.0
    ).fit(X, y)
    np.testing.assert_array_equal(hier_b.predict(X), LogisticRegression().fit(X, y).predict(X))


def test_hierarchical_with_equal_costs_is_plain_two_stage_classification(wine):
    X, y = wine
    hier = HierarchicalCostSensitiveClassifier(
        majority_classes=["grignolino"], c_hd=1.5, c_dh=1.5, random_state=0
    ).fit(X, y)
    group = (y != "grignolino").astype(int)
    stage1 = KernelLogisticRegression(random_state=0).fit(X, group)
    minority = y != "grignolino"
    stage2 = KernelLogisticRegression(random_state=0).fit(X[minority], y[minority])
    want = np.where(stage1.predict(X) == 1, stage2.predict(X), "grignolino")
    np.testing.assert_array_equal(hier.predict(X), want)


@pytest.mark.parametrize(("c_hd", "c_dh"), [(1.0, 9.0), (4.0, 1.0), (1.0, 1.0)])
def test_stage_one_threshold_is_p_star(wine, c_hd, c_dh):
    X, y = wine
    hier = HierarchicalCostSensitiveClassifier(
        minority_classes=["barolo", "barbera"], c_hd=c_hd, c_dh=c_dh, random_state=0
    ).fit(X, y)
    assert hier.threshold_ == pytest.approx(c_hd / (c_hd + c_dh))
    p_d = hier.stage1_.predict_proba(X)[:, 1]
    np.testing.assert_array_equal(hier.predict_minority_group(X), p_d >= hier.threshold_)
    pred = hier.predict(X)
    np.testing.assert_array_equal(np.isin(pred, ["barolo", "barbera"]), p_d >= hier.threshold_)


def test_benefit_stage_one_is_logistic_regression_weighted_by_eta(wine):
    X, y = wine
    c_hd, c_dh = 1.0, 6.0
    hier = HierarchicalCostSensitiveClassifier(
        "benefit",
        majority_classes=["grignolino"],
        c_hd=c_hd,
        c_dh=c_dh,
        stage1_estimator=BenefitLogisticRegression(C=0.01),
    ).fit(X, y)
    group = (y != "grignolino").astype(int)
    ref = LogisticRegression(C=0.01).fit(X, group, sample_weight=np.where(group, 1, c_hd / c_dh))
    assert hier.stage1_.etas_[0] == pytest.approx(c_hd / c_dh)
    np.testing.assert_allclose(hier.stage1_.coef_, ref.coef_, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(hier.predict_minority_group(X), ref.predict(X) == 1)


def test_hierarchical_groups_several_majority_classes_and_defaults(wine):
    X, y = wine
    hier = HierarchicalCostSensitiveClassifier(minority_classes=["barbera"], random_state=0)
    hier.fit(X, y)
    assert hier.minority_estimator_ is None  # one minority class: stage 2 is trivial
    assert hier.majority_estimator_ is not None
    np.testing.assert_array_equal(hier.classes_[hier.minority_mask_], ["barbera"])
    assert set(hier.predict(X)) == set(NAMES)
    default = HierarchicalCostSensitiveClassifier(random_state=0).fit(X, y)
    # grignolino is the most frequent wine: the default majority group.
    np.testing.assert_array_equal(default.classes_[~default.minority_mask_], ["grignolino"])
