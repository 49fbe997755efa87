"""costlib.costs, the benefit metric: matrix validation, B, μ, the benefit curve and η, against
independent truth."""

from __future__ import annotations

import copy
import doctest
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

import costlib.costs._matrices
import costlib.estimators._benefit_lr
import costlib.estimators._min_expected_cost
from costlib.costs._benefit import (
    benefit_curve,
    benefit_optimal_threshold,
    class_priors,
    expected_benefit,
    normalized_benefit,
)
from costlib.costs._binary import eta, one_vs_rest_benefit, target_marginal_precision
from costlib.costs._matrices import BenefitMatrix, CostMatrix

B2 = [[1.0, -1.0], [-5.0, 2.0]]
B3 = [[1.0, -1.0, -2.0], [-1.0, 2.0, -1.0], [-3.0, -1.0, 1.0]]


def _per_sample_benefit(y_true, y_pred, b, labels, w=None):
    """Independent B: weighted mean of b[true, pred] looked up sample by sample."""
    pos = {lab: i for i, lab in enumerate(labels)}
    vals = np.array([b[pos[t]][pos[p]] for t, p in zip(y_true, y_pred, strict=True)])
    return float(np.average(vals, weights=w))


# --- the matrix type ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ([[1.0, -1.0, 0.5], [-1.0, 1.0, -1.0]], "square"),
        ([[1.0]], "K >= 2"),
        (np.zeros((2, 2, 2)), "square"),
        ([[1.0, np.nan], [-1.0, 1.0]], "finite"),
        ([[1.0, -np.inf], [-1.0, 1.0]], "finite"),
        ([["a", "b"], ["c", "d"]], "numeric"),
    ],
)
def test_matrix_shape_and_values_are_validated(values, match):
    with pytest.raises(ValueError, match=match):
        BenefitMatrix(values)


def test_sign_assumption_is_named_entry_by_entry():
    with pytest.raises(ValueError, match=r"b\[0,1\]=0.5 >= 0.*b\[1,0\]=0 >= 0"):
        BenefitMatrix([[1.0, 0.5], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"b\[1,1\]=-2 < 0"):
        BenefitMatrix([[1.0, -1.0], [-1.0, -2.0]])
    with pytest.warns(UserWarning, match=r"b\[0,1\]=0.5 >= 0"):
        bm = BenefitMatrix([[1.0, 0.5], [-1.0, 1.0]], strict=False)
    assert bm.sign_violations() == ["b[0,1]=0.5 >= 0"]
    assert BenefitMatrix(B2).sign_violations() == []


def test_labels_are_validated():
    with pytest.raises(ValueError, match="one label per row"):
        BenefitMatrix(B2, labels=["a"])
    with pytest.raises(ValueError, match="unique"):
        BenefitMatrix(B2, labels=["a", "a"])


def test_matrix_is_read_only_and_round_trips():
    bm = BenefitMatrix(B3, labels=["x", "y", "z"])
    with pytest.raises(ValueError):
        bm.values[0, 0] = 3.0
    assert pickle.loads(pickle.dumps(bm)) == bm
    assert copy.deepcopy(bm) == bm
    assert bm != BenefitMatrix(B3)
    assert "labels=['x', 'y', 'z']" in repr(bm)
    np.testing.assert_array_equal(np.asarray(bm), np.array(B3))


def test_aligned_to_reorders_by_label():
    bm = BenefitMatrix(B3, labels=["z", "x", "y"])
    got = bm.aligned_to(np.array(["x", "y", "z"]))
    b = np.array(B3)
    # row/column "x" was index 1, "y" 2, "z" 0
    np.testing.assert_array_equal(got, b[np.ix_([1, 2, 0], [1, 2, 0])])
    with pytest.raises(ValueError, match=r"label\(s\) \['w'\] are not in the benefit matrix"):
        bm.aligned_to(np.array(["w", "x", "y"]))
    with pytest.raises(ValueError, match="3x3 but there are 2 classes"):
        BenefitMatrix(B3).aligned_to(np.array([0, 1]))


def test_cost_benefit_conversions():
    bm = BenefitMatrix.from_costs([[0.0, 1.0], [10.0, 0.0]])
    np.testing.assert_array_equal(bm.values, [[0.0, -1.0], [-10.0, 0.0]])
    np.testing.assert_array_equal(bm.to_costs().values, [[0.0, 1.0], [10.0, 0.0]])
    regret = BenefitMatrix(B3).regret_costs().values
    np.testing.assert_array_equal(np.diag(regret), 0.0)
    # Same Bayes decisions: argmax_k Σ_q p_q b_qk == argmin_k Σ_q p_q V_qk.
    p = np.random.default_rng(0).dirichlet(np.ones(3), size=500)
    np.testing.assert_array_equal(np.argmax(p @ np.array(B3), 1), np.argmin(p @ regret, 1))
    np.testing.assert_array_equal(CostMatrix.zero_one(3).values, 1 - np.eye(3))
    with pytest.raises(ValueError, match="got a CostMatrix where a benefit matrix"):
        BenefitMatrix(CostMatrix([[0.0, 1.0], [1.0, 0.0]]))
    relabelled = BenefitMatrix(BenefitMatrix(B2), labels=["n", "p"])
    assert relabelled.labels.tolist() == ["n", "p"]


# --- B and μ ------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    k=st.integers(2, 4),
    n=st.integers(1, 40),
    seed=st.integers(0, 2**31 - 1),
    weighted=st.booleans(),
)
def test_expected_benefit_is_mean_benefit_per_sample(k, n, seed, weighted):
    rng = np.random.default_rng(seed)
    b = -rng.uniform(0.1, 5, size=(k, k))
    b[np.diag_indices(k)] = rng.uniform(0, 5, size=k)
    labels = [f"c{i}" for i in range(k)]
    y_true = rng.choice(labels, size=n)
    y_pred = rng.choice(labels, size=n)
    w = rng.uniform(0.1, 3, size=n) if weighted else None
    got = expected_benefit(y_true, y_pred, b, labels=labels, sample_weight=w)
    assert got == pytest.approx(_per_sample_benefit(y_true, y_pred, b, labels, w), rel=1e-12)
    # μ = B / Σ π_i b_ii with the (weighted) class priors of y_true.
    pri = np.array([np.sum(np.where(y_true == c, 1.0 if w is None else w, 0)) for c in labels])
    pri /= pri.sum()
    mu = normalized_benefit(y_true, y_pred, b, labels=labels, sample_weight=w)
    assert mu == pytest.approx(got / (pri @ np.diag(b)), rel=1e-10)


def test_mu_is_one_for_perfect_predictions_and_matches_the_binary_formula():
    y = np.array([0, 0, 0, 1, 1, 0, 1, 0])
    assert normalized_benefit(y, y, B2) == pytest.approx(1.0)
    # Binary: B = π0 F0 b00 + π0 (1 - F0) b01 + π1 F1 b10 + π1 (1 - F1) b11.
    y_pred = np.array([0, 1, 0, 0, 1, 0, 1, 1])
    pi0, pi1 = 5 / 8, 3 / 8
    f0, f1 = 3 / 5, 1 / 3  # class-0 kept as 0; class-1 predicted 0
    b = np.array(B2)
    want = pi0 * f0 * b[0, 0] + pi0 * (1 - f0) * b[0, 1] + pi1 * f1 * b[1, 0]
    want += pi1 * (1 - f1) * b[1, 1]
    assert expected_benefit(y, y_pred, B2) == pytest.approx(want)
    assert normalized_benefit(y, y_pred, B2) == pytest.approx(want / (pi0 * 1 + pi1 * 2))


def test_labels_resolution_and_errors():
    y_true = np.array(["spam", "ham", "ham"])
    y_pred = np.array(["ham", "ham", "spam"])
    b = BenefitMatrix([[2.0, -4.0], [-1.0, 1.0]], labels=["spam", "ham"])
    want = _per_sample_benefit(y_true, y_pred, b.values, ["spam", "ham"])
    assert expected_benefit(y_true, y_pred, b) == pytest.approx(want)
    with pytest.raises(ValueError, match=r"y_true has label\(s\) \['eggs'\] that are not in"):
        expected_benefit(np.array(["eggs", "ham", "ham"]), y_pred, b)
    with pytest.raises(ValueError, match=r"y_pred has label\(s\) \[7\]"):
        expected_benefit([0, 1, 1], [0, 7, 1], B2, labels=[0, 1])
    with pytest.raises(ValueError, match="3 distinct label"):
        expected_benefit([0, 1, 2], [0, 1, 2], B2)
    with pytest.raises(ValueError, match="disagree"):
        expected_benefit(y_true, y_pred, b, labels=["ham", "spam"])
    with pytest.raises(ValueError, match="undefined"):
        normalized_benefit([0, 1], [1, 0], [[0.0, -1.0], [-2.0, 0.0]])
    with pytest.raises(ValueError, match="empty"):
        expected_benefit([], [], B2)
    with pytest.raises(ValueError, match="sample_weight"):
        expected_benefit([0, 1], [0, 1], B2, sample_weight=[1.0, -1.0])


def test_class_priors():
    np.testing.assert_allclose(class_priors(["a", "b", "b", "b"], ["b", "a"]), [0.75, 0.25])
    np.testing.assert_allclose(class_priors([0, 1], [0, 1], [3.0, 1.0]), [0.75, 0.25])
    with pytest.raises(ValueError, match="not among"):
        class_priors([0, 2], [0, 1])


# --- the benefit curve and the optimal threshold ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 60), seed=st.integers(0, 2**31 - 1), ties=st.booleans())
def test_benefit_curve_and_optimum_equal_a_brute_force_scan(n, seed, ties):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    y[0], y[-1] = 0, 1  # both classes present when n > 1
    s = rng.normal(size=n) + y
    if ties:
        s = np.round(s, 0)
    w = rng.uniform(0.2, 2.0, size=n)
    b = np.array([[1.0, -rng.uniform(0.1, 4)], [-rng.uniform(0.1, 9), rng.uniform(0.1, 3)]])
    kw = {"labels": [0, 1], "sample_weight": w}
    thresholds, curve = benefit_curve(y, s, b, **kw)
    assert thresholds[-1] == np.inf
    assert np.all(np.diff(thresholds) > 0)

    def brute(t):  # weighted mean of b[true, pred] with the rule s >= t -> class 1
        return float(np.average(b[y, (s >= t).astype(int)], weights=w))

    # Scan every observed score, every midpoint and beyond both ends.
    grid = np.unique(np.concatenate((s, (s[:-1] + s[1:]) / 2, [s.min() - 1, s.max() + 1])))
    for t, val in zip(thresholds, curve, strict=True):
        assert val == pytest.approx(brute(t), abs=1e-12)
    t_star = benefit_optimal_threshold(y, s, b, **kw)
    assert brute(t_star) == pytest.approx(max(brute(t) for t in grid), abs=1e-12)
    assert expected_benefit(y, (s >= t_star).astype(int), b, **kw) == pytest.approx(brute(t_star))


def test_optimal_threshold_matches_the_paper_condition_for_gaussian_scores():
    # f0 = N(0,1), f1 = N(d,1): f0(t) π0 (b00 - b01) = f1(t) π1 (b11 - b10) solves to
    # t* = d/2 + ln(π0 (b00 - b01) / (π1 (b11 - b10))) / d.
    rng = np.random.default_rng(7)
    n0, n1, d = 150_000, 50_000, 2.0
    s = np.concatenate((rng.normal(0, 1, n0), rng.normal(d, 1, n1)))
    y = np.concatenate((np.zeros(n0, int), np.ones(n1, int)))
    b = np.array([[1.0, -2.0], [-4.0, 3.0]])
    pi0, pi1 = n0 / (n0 + n1), n1 / (n0 + n1)
    t_theory = d / 2 + np.log(pi0 * (b[0, 0] - b[0, 1]) / (pi1 * (b[1, 1] - b[1, 0]))) / d
    t_emp = benefit_optimal_threshold(y, s, b)
    # The empirical B(t) is flat near its optimum; compare values, then locations loosely.
    def b_theory(t):
        return (
            pi0 * norm.cdf(t) * b[0, 0] + pi0 * norm.sf(t) * b[0, 1]
            + pi1 * norm.cdf(t - d) * b[1, 0] + pi1 * norm.sf(t - d) * b[1, 1]
        )

    assert b_theory(t_emp) == pytest.approx(b_theory(t_theory), abs=2e-3)
    assert abs(t_emp - t_theory) < 0.1


def test_threshold_on_calibrated_probabilities_is_the_target_marginal_precision():
    rng = np.random.default_rng(3)
    p = rng.uniform(size=400_000)
    y = (rng.uniform(size=p.shape[0]) < p).astype(int)
    b = np.array([[0.0, -3.0], [-1.0, 0.0]])  # a false positive costs 3 false negatives
    m = target_marginal_precision(b)
    assert m == pytest.approx(0.75)
    assert benefit_optimal_threshold(y, p, b) == pytest.approx(m, abs=0.02)


def test_curve_edge_cases():
    thresholds, curve = benefit_curve([1, 1], [0.3, 0.5], B2, labels=[0, 1])
    np.testing.assert_allclose(thresholds, [0.3, 0.5, np.inf])
    np.testing.assert_allclose(curve, [2.0, (2.0 - 5.0) / 2, -5.0])
    assert benefit_optimal_threshold([1, 1], [0.3, 0.5], B2, labels=[0, 1]) == 0.3
    # 0/1 labels say which class is positive even when one class is absent
    same = benefit_curve([1, 1], [0.3, 0.5], B2)
    np.testing.assert_array_equal(same[1], curve)
    with pytest.raises(ValueError, match="pass pos_label="):
        benefit_curve([2, 2], [0.3, 0.5], B2)
    with pytest.raises(ValueError, match="2x2"):
        benefit_curve([0, 1, 2], [0.1, 0.2, 0.3], B3)
    with pytest.raises(ValueError, match="finite"):
        benefit_curve([0, 1], [0.1, np.nan], B2)
    with pytest.raises(ValueError, match="not in the matrix labels"):
        benefit_curve(["a", "c"], [0.1, 0.2], BenefitMatrix(B2, labels=["a", "b"]))


# --- η, m and the one-vs-rest combination -------------------------------------------------------


def test_eta_and_marginal_precision():
    assert eta(B2) == pytest.approx((1 + 1) / (2 + 5))
    assert eta(BenefitMatrix(B2)) == eta(B2)
    e = eta(B2)
    assert target_marginal_precision(B2) == pytest.approx(e / (1 + e))
    # Gain of one extra flagged item with precision p changes sign at m.
    b = np.array(B2)
    m = target_marginal_precision(B2)
    for p, sign in ((m - 1e-6, -1), (m + 1e-6, 1)):
        gain = p * (b[1, 1] - b[1, 0]) - (1 - p) * (b[0, 0] - b[0, 1])
        assert np.sign(gain) == sign
    with pytest.raises(ValueError, match="2x2"):
        eta(B3)
    with pytest.raises(ValueError, match="b00 > b01"):
        eta([[1.0, 2.0], [-1.0, 1.0]])


def test_one_vs_rest_combination_as_written_and_normalised():
    b = np.array(B3)
    pri = np.array([0.5, 0.3, 0.2])
    for k in range(3):
        rest = [i for i in range(3) if i != k]
        want = np.array(
            [
                [sum(pri[i] * b[i, i] for i in rest), sum(pri[i] * b[i, k] for i in rest)],
                [sum(pri[i] * b[k, i] for i in rest), b[k, k]],
            ]
        )
        np.testing.assert_allclose(one_vs_rest_benefit(b, pri, k), want)
        norm_want = want.copy()
        norm_want[0, :] /= 1 - pri[k]
        norm_want[1, 0] /= 1 - pri[k]
        got = one_vs_rest_benefit(b, pri, k, combination="normalized")
        np.testing.assert_allclose(got, norm_want)
    # Hand-checked: class 0 vs rest.
    np.testing.assert_allclose(one_vs_rest_benefit(b, pri, 0), [[0.8, -0.9], [-0.7, 1.0]])
    # For K = 2 the normalised combination gives the original matrix back (k = 1 vs 0).
    np.testing.assert_allclose(
        one_vs_rest_benefit(B2, [0.9, 0.1], 1, combination="normalized"), B2
    )
    with pytest.raises(ValueError, match="combination"):
        one_vs_rest_benefit(b, pri, 0, combination="mean")
    with pytest.raises(ValueError, match="priors"):
        one_vs_rest_benefit(b, pri[:2], 0)


@pytest.mark.parametrize(
    "module",
    [
        costlib.costs._matrices,
        costlib.estimators._benefit_lr,
        costlib.estimators._min_expected_cost,
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0
