"""optimal_classes against brute force over all 2^K class sets (one true class per instance)."""

from __future__ import annotations

import numpy as np
import pytest

from costlib.decoding import optimal_classes
from costlib.decoding._losses import get_loss

NAMES = ["f1", "jaccard", "am", "g_tp_pr", "g_mean", "h_mean", "auc"]


def brute_force(class_probabilities: np.ndarray, loss) -> np.ndarray:
    """Minimum over all class subsets of sum_c P(Y = c) L(counts(subset, e_c)), per row."""
    n_classes = class_probabilities.shape[1]
    subsets = ((np.arange(2**n_classes)[:, None] >> np.arange(n_classes)) & 1).astype(float)
    k = subsets.sum(axis=1)[:, None]  # (2^K, 1)
    tp = subsets  # true class c is in the subset or not: TP in {0, 1}, shape (2^K, K)
    values = loss(tp, k - tp, 1.0 - tp, n_classes - k - (1.0 - tp))  # (2^K, K)
    expected = class_probabilities @ values.T  # (rows, 2^K)
    return expected.min(axis=1)


@pytest.mark.parametrize("name", NAMES)
def test_matches_brute_force(name: str) -> None:
    rng = np.random.default_rng(1)
    loss = get_loss(name)
    for n_classes in (1, 2, 5, 8):
        probs = rng.dirichlet(np.full(n_classes, 0.5), size=50)
        probs[0] = np.full(n_classes, 1.0 / n_classes)  # all tied
        probs[1] = np.eye(n_classes)[0]  # certain
        result = optimal_classes(probs, loss)
        np.testing.assert_allclose(result.expected_loss, brute_force(probs, loss), atol=1e-12)
        assert result.selected.shape == probs.shape
        np.testing.assert_array_equal(result.selected.sum(axis=1), result.k)


def test_paper_formula_on_a_hand_example() -> None:
    # pi = (0.5, 0.3, 0.2), F1: top-1 -> 1 - 0.5 = 0.5; top-2 -> 1 - 0.8*(2/3) = 0.4667;
    # top-3 -> 1 - 1*(2/4) = 0.5; empty -> 1.
    result = optimal_classes([0.5, 0.3, 0.2], "f1")
    np.testing.assert_allclose(result.expected_losses, [1.0, 0.5, 1 - 0.8 * 2 / 3, 0.5])
    assert result.k == 2 and result.selected.tolist() == [True, True, False]


def test_vectorised_rows_equal_single_rows_and_ties_go_to_lower_index() -> None:
    rng = np.random.default_rng(2)
    probs = rng.dirichlet(np.full(12, 0.3), size=30)
    probs[3] = [0.25, 0.05, 0.25, 0.25, 0.2, 0, 0, 0, 0, 0, 0, 0]
    batch = optimal_classes(probs, "jaccard")
    for i, row in enumerate(probs):
        single = optimal_classes(row, "jaccard")
        assert single.k == batch.k[i]
        np.testing.assert_array_equal(single.selected, batch.selected[i])
        np.testing.assert_allclose(single.expected_losses, batch.expected_losses[i])
    # Row 3: if two of the three 0.25-classes are chosen, they are classes 0 and 2.
    forced = optimal_classes(probs[3], lambda tp, fp, fn, tn: fn + 0.3 * np.abs(tp + fp - 2))
    assert forced.k == 2 and np.flatnonzero(forced.selected).tolist() == [0, 2]


def test_validation() -> None:
    with pytest.raises(ValueError, match=r"row 1 sums to"):
        optimal_classes([[0.5, 0.5], [0.5, 0.6]], "f1")
    with pytest.raises(ValueError, match=r"class_probabilities\[0, 1\] is nan"):
        optimal_classes([[0.5, np.nan]], "f1")
    with pytest.raises(ValueError, match="shape"):
        optimal_classes(np.zeros((2, 2, 2)), "f1")
