"""Losses of Natarajan et al. (2016), Table 1, and the zero-division convention."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.decoding._losses import (
    LOSS_NAMES,
    SetLoss,
    callable_loss,
    fbeta_loss,
    fractional_linear_loss,
    get_loss,
    is_tp_monotonic,
)


def psi_table1(name: str, u: Fraction, v: Fraction, p: Fraction, beta: float = 1.0) -> float:
    """The third column of the paper's Table 1, psi(u, v, p), written out independently."""
    if name == "am":
        return 1 - (u + p * (1 - v - p)) / (2 * p * (1 - p))
    if name == "fbeta":
        b2 = Fraction(beta) ** 2
        return float(1 - (1 + b2) * u / (b2 * p + v))
    if name == "jaccard":
        return (p + v - 2 * u) / (p + v - u)
    if name == "g_tp_pr":
        return 1 - u / math.sqrt(p * v)
    if name == "g_mean":
        return 1 - math.sqrt(u * (1 - v - p + u) / (p * (1 - p)))
    if name == "h_mean":
        return 1 - 2 * u * (1 - v - p + u) / ((1 - v - p) * p + u)
    if name == "auc":
        return (v - u) * (p - u) / (p * (1 - p))
    raise AssertionError(name)


counts = st.tuples(*(st.integers(min_value=0, max_value=40) for _ in range(4)))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(counts)
def test_named_losses_equal_table1_psi_where_defined(c: tuple[int, int, int, int]) -> None:
    tp, fp, fn, tn = c
    n = tp + fp + fn + tn
    if tp == 0 or fp + tn == 0:  # keep every ratio in the psi column well defined
        return
    u, v, p = Fraction(tp, n), Fraction(tp + fp, n), Fraction(tp + fn, n)  # exact
    for name, params in [("am", {}), ("fbeta", {"beta": 1.0}), ("fbeta", {"beta": 0.3}),
                         ("fbeta", {"beta": 2.5}), ("jaccard", {}), ("g_tp_pr", {}),
                         ("g_mean", {}), ("h_mean", {}), ("auc", {})]:
        expected = psi_table1(name, u, v, p, **params)
        assert float(get_loss(name, **params)(tp, fp, fn, tn)) == pytest.approx(expected,
                                                                                abs=1e-12)


def test_hand_computed_values() -> None:
    # TP=3, FP=1, FN=2, TN=4: precision 3/4, recall 3/5, TNR 4/5.
    args = (3, 1, 2, 4)
    assert float(get_loss("f1")(*args)) == pytest.approx(1 - 2 * 3 / (2 * 3 + 2 + 1))
    assert float(get_loss("fbeta", beta=2)(*args)) == pytest.approx(1 - 5 * 3 / (5 * 3 + 4 * 2
                                                                                  + 1))
    assert float(get_loss("jaccard")(*args)) == pytest.approx(3 / 6)
    assert float(get_loss("am")(*args)) == pytest.approx(1 - (0.6 + 0.8) / 2)
    assert float(get_loss("g_tp_pr")(*args)) == pytest.approx(1 - math.sqrt(0.6 * 0.75))
    assert float(get_loss("g_mean")(*args)) == pytest.approx(1 - math.sqrt(0.6 * 0.8))
    assert float(get_loss("h_mean")(*args)) == pytest.approx(1 - 2 * 0.6 * 0.8 / 1.4)
    assert float(get_loss("auc")(*args)) == pytest.approx(0.4 * 0.2)


@pytest.mark.parametrize("name", ["f1", "jaccard", "am", "g_tp_pr", "g_mean", "h_mean", "auc"])
def test_zero_division_convention_perfect_predictions_cost_nothing(name: str) -> None:
    loss = get_loss(name)
    # Empty prediction on a set without positives (TP = FP = FN = 0), any number of negatives.
    np.testing.assert_array_equal(loss(0, 0, 0, np.arange(5)), 0.0)
    # All-positive set predicted in full (no negatives: TNR is 0/0).
    np.testing.assert_array_equal(loss(np.arange(1, 5), 0, 0, 0), 0.0)
    # The empty set of items.
    assert float(loss(0, 0, 0, 0)) == 0.0
    # No warnings and finite everywhere on a grid of counts that includes every zero.
    grid = np.stack(np.meshgrid(*[np.arange(3)] * 4, indexing="ij")).reshape(4, -1)
    with np.errstate(all="raise"):
        values = loss(*grid)
    assert np.all(np.isfinite(values)) and np.all((values >= 0) & (values <= 1))


@pytest.mark.parametrize("name", ["f1", "jaccard", "g_tp_pr"])
def test_zero_division_convention_empty_prediction_with_positives_costs_one(name: str) -> None:
    assert float(get_loss(name)(0, 0, 3, 2)) == 1.0
    # Predicting only negatives when there are no positives: precision 0, recall 1 (0/0).
    assert float(get_loss(name)(0, 2, 0, 3)) == 1.0


def test_zero_division_convention_for_rates() -> None:
    # No positives: TPR = 1; with TNR = 1/2, AM = 1 - 3/4, G-Mean = 1 - sqrt(1/2).
    assert float(get_loss("am")(0, 1, 0, 1)) == pytest.approx(0.25)
    assert float(get_loss("g_mean")(0, 1, 0, 1)) == pytest.approx(1 - math.sqrt(0.5))
    # Harmonic mean of TPR = 0 and TNR = 0 is 0.
    assert float(get_loss("h_mean")(0, 2, 3, 0)) == 1.0


def test_fractional_linear_reproduces_f1_and_jaccard() -> None:
    grid = np.stack(np.meshgrid(*[np.arange(5)] * 4, indexing="ij")).reshape(4, -1)
    f1 = fractional_linear_loss((0, -2, 1, 1), (0, 0, 1, 1))
    jac = fractional_linear_loss((0, -2, 1, 1), (0, -1, 1, 1))
    np.testing.assert_allclose(f1(*grid), get_loss("f1")(*grid), atol=1e-15)
    np.testing.assert_allclose(jac(*grid), get_loss("jaccard")(*grid), atol=1e-15)
    # zero_division is used exactly where the denominator vanishes.
    special = fractional_linear_loss((0, -2, 1, 1), (0, 0, 1, 1), zero_division=0.25)
    assert float(special(0, 0, 0, 7)) == 0.25


@pytest.mark.parametrize("name", ["f1", "jaccard", "am", "g_tp_pr", "g_mean", "h_mean", "auc"])
@pytest.mark.parametrize("n", [1, 2, 7, 15])
def test_named_losses_are_strictly_tp_monotonic(name: str, n: int) -> None:
    assert is_tp_monotonic(name, n)


def test_tp_monotonicity_check_detects_a_violation() -> None:
    assert not is_tp_monotonic(callable_loss(lambda tp, fp, fn, tn: tp / (tp + fp + fn + tn)),
                               6)
    assert is_tp_monotonic(fbeta_loss(0.2), 9) and is_tp_monotonic(fbeta_loss(7.0), 9)


def test_get_loss_names_aliases_and_errors() -> None:
    assert set(LOSS_NAMES) >= {"f1", "fbeta", "jaccard", "am", "g_tp_pr", "g_mean", "h_mean",
                               "auc", "fractional_linear"}
    assert get_loss("F1").name == "f1"
    assert get_loss("G-Mean").kind == "g_mean"
    assert get_loss("fbeta", beta=2).params == {"beta": 2.0}
    loss = get_loss("jaccard")
    assert get_loss(loss) is loss
    wrapped = get_loss(lambda tp, fp, fn, tn: fp + fn)
    assert isinstance(wrapped, SetLoss) and float(wrapped(1, 2, 3, 4)) == 5.0
    with pytest.raises(ValueError, match="unknown"):
        get_loss("accuracy")
    with pytest.raises(ValueError, match="beta"):
        get_loss("fbeta", beta=0.0)
    with pytest.raises(ValueError, match="beta"):
        get_loss("fbeta", beta=float("nan"))
    with pytest.raises(ValueError, match="invalid parameters"):
        get_loss("jaccard", beta=2)
    with pytest.raises(ValueError, match="numerator"):
        fractional_linear_loss((1, 2, 3), (1, 2, 3, 4))


def test_losses_broadcast_and_return_float64() -> None:
    out = get_loss("f1")(np.arange(3)[:, None], 1, np.arange(4)[None, :], 2)
    assert out.shape == (3, 4) and out.dtype == np.float64
    constant = callable_loss(lambda tp, fp, fn, tn: 0.5)(np.arange(3), 0, 0, 0)
    np.testing.assert_array_equal(constant, [0.5, 0.5, 0.5])


def test_auc_with_ties_counted_half_is_the_am_loss() -> None:
    # The claim in auc_loss's notes: (FN FP + (TP FP + FN TN) / 2) / (P N) == AM loss.
    g = np.stack(np.meshgrid(*[np.arange(1, 6)] * 4, indexing="ij")).reshape(4, -1)
    tp, fp, fn, tn = g.astype(float)
    half = (fn * fp + (tp * fp + fn * tn) / 2) / ((tp + fn) * (fp + tn))
    np.testing.assert_allclose(half, get_loss("am")(tp, fp, fn, tn), atol=1e-15)
    # Table 1's AUC loss gives the empty and the full prediction loss 0.
    assert float(get_loss("auc")(0, 0, 3, 4)) == 0.0 and float(get_loss("auc")(3, 4, 0, 0)) == 0.0
