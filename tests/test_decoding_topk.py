"""optimal_topk / expected_loss: input handling, ties, 0/1 probabilities, early stop, plot."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.decoding import expected_loss, optimal_topk, optimal_topk_batch, plot_expected_losses
from costlib.decoding._losses import callable_loss, get_loss
from costlib.decoding._topk import early_stop_k

ALL_NAMES = ["f1", "jaccard", "am", "g_tp_pr", "g_mean", "h_mean", "auc"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([0.2, 0.5, np.nan], r"probabilities\[2\] is nan; probabilities must be in \[0, 1\]"),
        ([0.2, 1.5], r"probabilities\[1\] is 1.5; probabilities must be in \[0, 1\]"),
        ([-0.1, 0.5], r"probabilities\[0\] is -0.1"),
        ([0.3, np.inf], r"probabilities\[1\] is inf"),
        ([[0.1, 0.2]], r"probabilities must be 1-D"),
        (["a", "b"], r"probabilities must be an array of numbers"),
    ],
)
def test_invalid_probabilities_raise_clear_errors(values, message) -> None:
    with pytest.raises(ValueError, match=message):
        optimal_topk(values, "f1")
    with pytest.raises(ValueError, match=message):
        expected_loss(values, np.zeros(np.size(values), dtype=bool), "f1")


def test_invalid_options_raise() -> None:
    with pytest.raises(ValueError, match="method 'nope' is unknown"):
        optimal_topk([0.5], method="nope")
    with pytest.raises(ValueError, match="exponential_sum"):
        optimal_topk([0.5, 0.2], "g_mean", method="exponential_sum")
    with pytest.raises(ValueError, match="fbeta_dp"):
        optimal_topk([0.5, 0.2], "jaccard", method="fbeta_dp")
    with pytest.raises(ValueError, match="beta"):
        optimal_topk([0.5, 0.2], "fbeta", beta=0.37, method="fbeta_dp")
    with pytest.raises(ValueError, match="tol"):
        optimal_topk([0.5], tol=-1.0)
    with pytest.raises(ValueError, match="selected has shape"):
        expected_loss([0.5, 0.2], [True])


def test_result_fields_are_consistent() -> None:
    p = np.random.default_rng(0).random(40)
    result = optimal_topk(p, "f1")
    assert result.selected.dtype == bool and result.selected.shape == (40,)
    assert result.selected.sum() == result.k
    assert np.all(p[result.selected].min() >= p[~result.selected].max())
    assert result.expected_losses.shape == (41,)
    assert result.expected_loss == result.expected_losses[result.k] == result.expected_losses.min()
    assert result.expected_loss == pytest.approx(expected_loss(p, result.selected, "f1"),
                                                 abs=1e-12)
    np.testing.assert_array_equal(np.sort(result.order), np.arange(40))
    assert result.method == "exponential_sum" and result.loss.name == "f1"


def test_docstring_example() -> None:
    result = optimal_topk([0.9, 0.1, 0.6, 0.45], "f1")
    assert result.k == 3 and result.selected.tolist() == [True, False, True, True]


def test_ties_are_broken_by_lower_index_first() -> None:
    p = np.array([0.3, 0.6, 0.6, 0.6, 0.1, 0.6])
    # Errors plus a penalty for predicting other than 2 items (TP monotonic): each 0.6-item
    # selected saves 0.2 expected errors, each item away from k = 2 costs 0.3, so k = 2 and the
    # tie among the four 0.6-items is split.
    loss = callable_loss(lambda tp, fp, fn, tn: fp + fn + 0.3 * np.abs(tp + fp - 2.0))
    result = optimal_topk(p, loss)
    assert result.k == 2
    assert result.selected.tolist() == [False, True, True, False, False, False]
    np.testing.assert_array_equal(result.order, [1, 2, 3, 5, 0, 4])
    batch = optimal_topk_batch(np.stack([p, p[::-1]]), loss)
    np.testing.assert_array_equal(batch.selected[0], result.selected)
    assert batch.selected[1].tolist() == [True, False, True, False, False, False]


def test_certain_items() -> None:
    p = np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    for name in ALL_NAMES[:-1]:
        result = optimal_topk(p, name)
        assert result.selected.tolist() == [True, False, True, False, False], name
        assert result.expected_loss == pytest.approx(0.0, abs=1e-15)
    nothing = optimal_topk(np.zeros(6), "f1")
    assert nothing.k == 0 and nothing.expected_loss == 0.0
    everything = optimal_topk(np.ones(6), "jaccard", method="exponential_sum")
    assert everything.k == 6 and everything.expected_loss == pytest.approx(0.0, abs=1e-15)


def test_empty_and_single_item_sets() -> None:
    empty = optimal_topk([], "f1")
    assert empty.k == 0 and empty.selected.shape == (0,) and empty.expected_loss == 0.0
    one = optimal_topk([0.7], "f1")
    # Predict it: loss 0.3 (wrong if negative); skip it: loss 0.7 (F = 0 if positive).
    np.testing.assert_allclose(one.expected_losses, [0.7, 0.3])
    assert one.k == 1


@settings(max_examples=30, deadline=None, derandomize=True)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_permuting_the_items_permutes_the_answer(values, rnd) -> None:
    p = np.array(values)
    perm = np.array(rnd.sample(range(p.size), p.size))
    for name in ("f1", "g_mean"):
        a = optimal_topk(p, name)
        b = optimal_topk(p[perm], name)
        assert a.k == b.k
        assert a.expected_loss == pytest.approx(b.expected_loss, abs=1e-12)
        # Same multiset of selected probabilities (ties may pick other indices).
        np.testing.assert_array_equal(np.sort(p[a.selected]), np.sort(p[perm][b.selected]))


# ---------------------------------------------------------------------------------------------
# The paper's early stop


def test_early_stop_matches_full_scan_for_f1_am_gmean_hmean_on_random_sets() -> None:
    rng = np.random.default_rng(2016)
    for trial in range(60):
        n = int(rng.integers(2, 40))
        p = [rng.random(n), rng.beta(0.5, 5.0, n),
             rng.choice([0, 0.1, 0.5, 0.9, 1.0], n)][trial % 3]
        for name in ("f1", "am", "g_mean", "h_mean"):
            full = optimal_topk(p, name, method="algorithm1")
            early = optimal_topk(p, name, method="algorithm1", early_stop=True)
            assert early.expected_loss == pytest.approx(full.expected_loss, abs=1e-12), (name, p)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=25),
       st.sampled_from(["f1", "jaccard", "g_tp_pr", "am", "g_mean"]))
def test_early_stop_agrees_with_full_scan_whenever_the_curve_is_unimodal(values, name) -> None:
    p = np.array(values)
    full = optimal_topk(p, name, method="algorithm1", tol=0.0)
    early = optimal_topk(p, name, method="algorithm1", tol=0.0, early_stop=True)
    tail = full.expected_losses[1:]
    steps = np.diff(tail)
    # Unimodal: strictly decreasing, then never decreasing again.
    first_rise = np.flatnonzero(steps >= 0)
    unimodal = first_rise.size == 0 or np.all(steps[first_rise[0]:] >= 0)
    if unimodal:
        assert early.k == full.k
    # Whatever the shape, early stop never beats the full scan, and its curve is a prefix of it.
    assert early.expected_loss >= full.expected_loss - 1e-15
    evaluated = ~np.isnan(early.expected_losses)
    np.testing.assert_array_equal(early.expected_losses[evaluated],
                                  full.expected_losses[evaluated])


@pytest.mark.parametrize(
    ("name", "p", "early_k", "best_k"),
    [
        ("g_tp_pr", [0.804, 0.369, 0.32], 1, 3),
        ("jaccard", [0.894, 0.391, 0.369, 0.29, 0.183, 0.006], 1, 3),
    ],
)
def test_early_stop_is_a_heuristic_counterexamples(name, p, early_k, best_k) -> None:
    full = optimal_topk(p, name, method="algorithm1", tol=0.0)
    early = optimal_topk(p, name, method="algorithm1", tol=0.0, early_stop=True)
    assert (early.k, full.k) == (early_k, best_k)
    assert early.expected_loss > full.expected_loss + 1e-4
    # Algorithm 1 stopped after evaluating k = early_k + 1.
    assert np.isnan(early.expected_losses[early_k + 2:]).all()


def test_early_stop_rule_on_hand_made_curves() -> None:
    assert early_stop_k(np.array([0.9, 0.5, 0.4, 0.45, 0.1])) == 2  # stops at the first rise
    assert early_stop_k(np.array([0.2, 0.5, 0.4, 0.3])) == 0  # L_0 is kept
    assert early_stop_k(np.array([0.9, 0.8, 0.7])) == 2  # no rise: k = n
    assert early_stop_k(np.array([0.3, 0.4])) == 0


def test_early_stop_works_with_every_method() -> None:
    p = np.random.default_rng(5).beta(0.5, 5.0, 300)
    full = optimal_topk(p, "f1")
    for method in ("algorithm1", "exponential_sum", "fbeta_dp"):
        early = optimal_topk(p, "f1", method=method, early_stop=True)
        assert early.k == full.k


# ---------------------------------------------------------------------------------------------
# Plot


def test_plot_expected_losses_writes_a_png(tmp_path) -> None:
    result = optimal_topk(np.random.default_rng(1).random(30), "f1")
    path = tmp_path / "curve.png"
    fig = plot_expected_losses(result, path)
    assert path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    line = fig.axes[0].lines[0]
    np.testing.assert_array_equal(line.get_ydata(), result.expected_losses)
    marker = fig.axes[0].lines[-1]
    assert marker.get_xdata()[0] == result.k
    assert marker.get_ydata()[0] == result.expected_loss
    early = optimal_topk(np.random.default_rng(1).random(30), "f1", method="algorithm1",
                         early_stop=True)
    fig = plot_expected_losses(early)
    assert np.isfinite(fig.axes[0].lines[0].get_ydata()).all()
    assert get_loss("f1").name in fig.axes[0].get_ylabel()
