"""ExampleCostLogisticRegression and BayesMinimumRiskClassifier: scikit-learn contract, the
objective and its gradient, decisions vs the library functions, metadata routing."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn
from scipy.optimize import check_grad
from scipy.special import expit
from sklearn.calibration import CalibratedClassifierCV
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from costlib.costs._example_costs import (
    bayes_minimum_risk,
    binary_example_costs,
    savings_score,
    total_cost,
)
from costlib.estimators import (
    BayesMinimumRiskClassifier,
    ExampleCostLogisticRegression,
    MinimumExpectedCostClassifier,
)
from costlib.estimators._example_cost_lr import _objective

pytestmark = pytest.mark.usefixtures("single_blas_thread")

CHECKED = [
    ExampleCostLogisticRegression(),
    ExampleCostLogisticRegression(init="logistic", tol=1e-10),  # weights == repeats to 1e-7
    BayesMinimumRiskClassifier(),
    BayesMinimumRiskClassifier(calibration="sigmoid", cv=3),
]


@parametrize_with_checks(CHECKED)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def _fraud_like(seed: int = 0, n: int = 600):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    amount = rng.lognormal(3.0, 1.0, size=n)
    logit = 1.5 * X[:, 0] - X[:, 1] + 0.5 * np.log(amount) - 3.5
    y = (rng.uniform(size=n) < expit(logit)).astype(int)
    costs = binary_example_costs(fn=amount, fp=8.0, tp=2.0)  # a reviewed flag costs a fee
    return X, y, costs, amount


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 3))
    a = rng.normal(size=50)
    for fit_intercept in (True, False):
        w = rng.normal(size=3 + fit_intercept)
        err = check_grad(lambda v, fi=fit_intercept: _objective(v, X, a, fi)[0],
                         lambda v, fi=fit_intercept: _objective(v, X, a, fi)[1], w)
        assert err < 1e-6


def _expected_cost(w, b, X, y, costs):
    h = expit(X @ w + b)
    rows = np.arange(len(y))
    return float(np.sum((1 - h) * costs[rows, y, 0] + h * costs[rows, y, 1]))


def test_fit_reaches_a_stationary_point_that_beats_cost_blind_starts():
    X, y, costs, _ = _fraud_like()
    clf = ExampleCostLogisticRegression(C=1e4, tol=1e-10, max_iter=2000).fit(
        X, y, cost_matrix=costs)
    w, b = clf.coef_[0], clf.intercept_[0]
    ours = _expected_cost(w, b, X, y, costs)
    assert clf.objective_ == pytest.approx(ours / len(y))
    lr = LogisticRegression(C=1e4).fit(X, y)
    assert ours < _expected_cost(lr.coef_[0], lr.intercept_[0], X, y, costs)
    assert ours < _expected_cost(np.zeros(4), 0.0, X, y, costs)
    # no coordinate step improves the (almost unpenalised) objective
    for j in range(5):
        for step in (-1e-3, 1e-3):
            w2, b2 = w.copy(), b
            if j < 4:
                w2[j] += step
            else:
                b2 += step
            assert _expected_cost(w2, b2, X, y, costs) >= ours - 1e-6 * abs(ours)


def test_cost_scale_does_not_change_the_fit():
    X, y, costs, _ = _fraud_like(2)
    a = ExampleCostLogisticRegression().fit(X, y, cost_matrix=costs)
    b = ExampleCostLogisticRegression().fit(X, y, cost_matrix=1000.0 * costs)
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-6, atol=1e-9)


def test_cost_sensitive_lr_saves_more_than_cost_blind_lr_out_of_sample():
    X, y, costs, _ = _fraud_like(3, n=4000)
    tr, te = slice(0, 2000), slice(2000, None)
    ours = ExampleCostLogisticRegression().fit(X[tr], y[tr], cost_matrix=costs[tr])
    blind = LogisticRegression().fit(X[tr], y[tr])
    s_ours = savings_score(y[te], ours.predict(X[te]), costs[te])
    s_blind = savings_score(y[te], blind.predict(X[te]), costs[te])
    assert s_ours > s_blind + 0.05


def test_rejects_multiclass_and_bad_costs():
    X, y, costs, _ = _fraud_like()
    with pytest.raises(ValueError, match="Only binary"):
        ExampleCostLogisticRegression().fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="rows, expected one per example"):
        ExampleCostLogisticRegression().fit(X, y, cost_matrix=costs[:-1])
    with pytest.raises(ValueError, match="nothing to learn"):
        ExampleCostLogisticRegression().fit(X, y, cost_matrix=np.zeros((len(y), 2, 2)))
    with pytest.raises(ValueError, match="init"):
        ExampleCostLogisticRegression(init="warm").fit(X, y)


def test_bayes_min_risk_wrapper_equals_library_rule_and_class_level_classifier():
    X, y, costs, _ = _fraud_like(4)
    clf = BayesMinimumRiskClassifier(LogisticRegression()).fit(X, y)
    proba = clf.predict_proba(X)
    np.testing.assert_array_equal(clf.predict(X, cost_matrix=costs),
                                  clf.classes_[bayes_minimum_risk(proba, costs)])
    # identical per-row matrices: the class-level MinimumExpectedCostClassifier
    cost = np.array([[0.0, 1.0], [7.0, 0.0]])
    ref = MinimumExpectedCostClassifier(LogisticRegression(), cost).fit(X, y)
    np.testing.assert_array_equal(
        clf.predict(X, cost_matrix=np.broadcast_to(cost, (len(y), 2, 2))), ref.predict(X))
    np.testing.assert_array_equal(
        BayesMinimumRiskClassifier(LogisticRegression(), cost_matrix=cost).fit(X, y).predict(X),
        ref.predict(X))
    np.testing.assert_allclose(clf.decision_function(X, cost_matrix=costs),
                               clf.expected_costs(X, costs)[:, 0]
                               - clf.expected_costs(X, costs)[:, 1])


def test_bayes_min_risk_frozen_prefit_and_calibration():
    X, y, costs, _ = _fraud_like(5, n=900)
    prefit = LogisticRegression().fit(X[:300], y[:300])
    frozen = BayesMinimumRiskClassifier(FrozenEstimator(prefit)).fit(X[300:], y[300:])
    np.testing.assert_allclose(frozen.predict_proba(X), prefit.predict_proba(X))
    cal = BayesMinimumRiskClassifier(FrozenEstimator(prefit), calibration="isotonic").fit(
        X[300:], y[300:])
    ref = CalibratedClassifierCV(FrozenEstimator(prefit), method="isotonic").fit(
        X[300:], y[300:])
    np.testing.assert_allclose(cal.predict_proba(X), ref.predict_proba(X))
    np.testing.assert_array_equal(cal.predict(X, cost_matrix=costs),
                                  bayes_minimum_risk(ref.predict_proba(X), costs))
    with pytest.raises(ValueError, match="calibration"):
        BayesMinimumRiskClassifier(calibration="platt").fit(X, y)


def test_cost_matrix_is_routed_as_metadata_to_fit_and_scorer():
    X, y, costs, _ = _fraud_like(6, n=900)
    folds = list(KFold(3, shuffle=True, random_state=0).split(X))
    with sklearn.config_context(enable_metadata_routing=True):
        scorer = make_scorer(savings_score).set_score_request(cost_matrix=True)
        pipe = make_pipeline(
            StandardScaler(), ExampleCostLogisticRegression().set_fit_request(cost_matrix=True))
        got = cross_validate(pipe, X, y, params={"cost_matrix": costs}, scoring=scorer,
                             cv=folds)["test_score"]
        search = GridSearchCV(pipe, {"examplecostlogisticregression__C": [0.01, 1.0]},
                              scoring=scorer, cv=folds).fit(X, y, cost_matrix=costs)
        bmr = BayesMinimumRiskClassifier().set_predict_request(cost_matrix=True)
        bmr_pipe = make_pipeline(StandardScaler(), bmr).fit(X, y)
        routed = bmr_pipe.predict(X, cost_matrix=costs)
    manual = []
    for tr, te in folds:
        m = make_pipeline(StandardScaler(), ExampleCostLogisticRegression()).fit(
            X[tr], y[tr], examplecostlogisticregression__cost_matrix=costs[tr])
        manual.append(savings_score(y[te], m.predict(X[te]), costs[te]))
    np.testing.assert_allclose(got, manual, rtol=1e-12)
    assert search.best_params_["examplecostlogisticregression__C"] in (0.01, 1.0)
    np.testing.assert_array_equal(
        routed, bayes_minimum_risk(bmr_pipe.predict_proba(X), costs))
    assert total_cost(y, routed, costs) <= total_cost(y, bmr_pipe.predict(X), costs)
