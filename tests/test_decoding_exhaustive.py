"""optimal_topk against brute force: all 2^n predictions, each scored over all 2^n label vectors.

The brute-force expectation enumerates every label vector ``y`` with probability
:math:`\\prod_i p_i^{y_i}(1 - p_i)^{1 - y_i}` and evaluates the loss on the confusion counts of
``(s, y)``; it shares nothing with the decoders except the loss definition (tested on its own in
``test_losses.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from costlib.decoding import expected_loss, optimal_topk
from costlib.decoding._losses import SetLoss, callable_loss, fractional_linear_loss, get_loss


def all_vectors(n: int) -> np.ndarray:
    """Every 0/1 vector of length n, shape (2^n, n)."""
    codes = np.arange(2**n)[:, None]
    return ((codes >> np.arange(n)[None, :]) & 1).astype(np.float64)


def label_probabilities(p: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """P(Y = y) for each row y of ``labels`` under independent Bernoulli(p)."""
    return np.prod(np.where(labels == 1.0, p[None, :], 1.0 - p[None, :]), axis=1)


def count_distribution(p: np.ndarray, predictions: np.ndarray) -> np.ndarray:
    """W[j, tp, fn] = P(TP = tp, FN = fn) for prediction ``predictions[j]``, summing the
    probabilities of all 2^n label vectors (each label vector enumerated explicitly)."""
    n = p.size
    labels = all_vectors(n)
    weights = label_probabilities(p, labels)
    positives = labels.sum(axis=1)
    tp = (predictions @ labels.T).astype(np.int64)
    fn = positives.astype(np.int64)[None, :] - tp
    rows = np.arange(predictions.shape[0])[:, None]
    flat = (rows * (n + 1) + tp) * (n + 1) + fn
    totals = np.bincount(flat.ravel(), weights=np.broadcast_to(weights, flat.shape).ravel(),
                         minlength=predictions.shape[0] * (n + 1) ** 2)
    return totals.reshape(predictions.shape[0], n + 1, n + 1)


def brute_force_expected_losses(p: np.ndarray, predictions: np.ndarray, loss: SetLoss,
                                distribution: np.ndarray | None = None) -> np.ndarray:
    """E[L(s, Y)] for each row s of ``predictions``, by enumerating all label vectors."""
    n = p.size
    if distribution is None:
        distribution = count_distribution(p, predictions)
    k = predictions.sum(axis=1)[:, None, None]
    tp = np.arange(n + 1, dtype=np.float64)[None, :, None]
    fn = np.arange(n + 1, dtype=np.float64)[None, None, :]
    fp = k - tp
    tn = n - k - fn
    feasible = (fp >= 0) & (tn >= 0)
    values = loss(np.broadcast_to(tp, feasible.shape), np.where(feasible, fp, 0.0),
                  np.broadcast_to(fn, feasible.shape), np.where(feasible, tn, 0.0))
    assert np.all(distribution[~feasible] == 0.0)
    return np.einsum("jab,jab->j", distribution, np.where(feasible, values, 0.0))


def brute_force_minimum(p: np.ndarray, loss: SetLoss) -> float:
    predictions = all_vectors(p.size)
    return float(brute_force_expected_losses(p, predictions, loss).min())


NAMED_LOSSES = [
    get_loss("f1"),
    get_loss("fbeta", beta=0.5),
    get_loss("fbeta", beta=2.0),
    get_loss("fbeta", beta=math.sqrt(2.0)),
    get_loss("fbeta", beta=0.37),  # β² irrational-looking: no DP, exponential sum only
    get_loss("jaccard"),
    get_loss("am"),
    get_loss("g_tp_pr"),
    get_loss("g_mean"),
    get_loss("h_mean"),
    get_loss("auc"),
    # A TP-monotonic fractional-linear loss other than F/Jaccard: 1 - u / (v + 0.5 p + 0.1).
    fractional_linear_loss((0.1, -1.0, 1.0, 0.5), (0.1, 0.0, 1.0, 0.5)),
]


def probability_cases(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    tied = rng.choice([0.15, 0.4, 0.4, 0.7, 0.9], size=n)
    with_01 = rng.random(n)
    m = min(n, max(2, n // 3))
    with_01[rng.choice(n, size=m, replace=False)] = rng.choice([0.0, 1.0], size=m)
    return {
        "uniform": rng.random(n),
        "skewed": rng.beta(0.5, 5.0, size=n),
        "tied": tied,
        "zeros_and_ones": with_01,
    }


def methods_for(loss: SetLoss) -> list[dict]:
    methods: list[dict] = [{"method": "algorithm1", "tol": 0.0}, {"method": "algorithm1"}]
    if loss.kind in {"fbeta", "jaccard", "am", "g_tp_pr"}:
        methods.append({"method": "exponential_sum"})
    if loss.kind == "fbeta" and loss.params["beta"] in (0.5, 1.0, 2.0):
        methods.append({"method": "fbeta_dp"})
    return methods


@pytest.mark.parametrize("loss", NAMED_LOSSES, ids=lambda loss: loss.name)
@pytest.mark.parametrize("n", [1, 2, 5, 9])
def test_optimal_topk_matches_exhaustive_search(loss: SetLoss, n: int) -> None:
    for case, p in probability_cases(n, seed=100 + n).items():
        predictions = all_vectors(n)
        values = brute_force_expected_losses(p, predictions, loss)
        best = float(values.min())
        for options in methods_for(loss):
            result = optimal_topk(p, loss, **options)
            assert result.expected_loss == pytest.approx(best, abs=1e-12), (case, options)
            # The returned set itself attains the minimum (scored by brute force).
            index = int(np.dot(result.selected.astype(np.int64), 1 << np.arange(n)))
            assert values[index] == pytest.approx(best, abs=1e-12), (case, options)
            # Every top-k value is the brute-force value of that top-k set.
            for k in range(n + 1):
                top = np.zeros(n)
                top[result.order[:k]] = 1.0
                code = int(np.dot(top.astype(np.int64), 1 << np.arange(n)))
                assert result.expected_losses[k] == pytest.approx(values[code], abs=1e-12)


@pytest.mark.parametrize("case", ["uniform", "zeros_and_ones"])
def test_optimal_topk_matches_exhaustive_search_n12(case: str) -> None:
    p = probability_cases(12, seed=12)[case]
    predictions = all_vectors(12)
    distribution = count_distribution(p, predictions)
    for loss in NAMED_LOSSES:
        best = float(brute_force_expected_losses(p, predictions, loss, distribution).min())
        for options in methods_for(loss):
            value = optimal_topk(p, loss, **options).expected_loss
            assert value == pytest.approx(best, abs=1e-12), (loss.name, options)


@pytest.mark.parametrize("loss", NAMED_LOSSES, ids=lambda loss: loss.name)
def test_expected_loss_of_any_prediction_matches_enumeration(loss: SetLoss) -> None:
    rng = np.random.default_rng(7)
    for case, p in probability_cases(8, seed=8).items():
        predictions = rng.random((12, 8)) < 0.5
        truth = brute_force_expected_losses(p, predictions.astype(np.float64), loss)
        for s, value in zip(predictions, truth, strict=True):
            assert expected_loss(p, s, loss) == pytest.approx(value, abs=1e-13), case
            assert expected_loss(p, s, loss, tol=0.0) == pytest.approx(value, abs=1e-13), case


def test_user_callable_loss_matches_exhaustive_search() -> None:
    # Weighted errors 2 FP + 3 FN (decomposable, TP monotonic): optimum is p_i >= 0.4 per item.
    loss = callable_loss(lambda tp, fp, fn, tn: 2.0 * fp + 3.0 * fn, name="cost")
    p = np.random.default_rng(3).random(9)
    result = optimal_topk(p, loss)
    assert result.expected_loss == pytest.approx(brute_force_minimum(p, loss), abs=1e-12)
    np.testing.assert_array_equal(result.selected, p >= 0.4)


def test_brute_force_helper_is_itself_correct_on_a_hand_example() -> None:
    # Two items, p = (0.5, 0.5), predict item 0 only, F1 loss:
    # y=00 -> TP0 FP1 FN0: F=0 (loss 1); y=10 -> F=1 (loss 0); y=01 -> loss 1; y=11 -> F=2/3.
    p = np.array([0.5, 0.5])
    value = brute_force_expected_losses(p, np.array([[1.0, 0.0]]), get_loss("f1"))[0]
    assert value == pytest.approx(0.25 * (1 + 0 + 1 + 1 / 3))
