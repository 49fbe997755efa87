"""Baselines of the paper: threshold at 1/2 and the EUM threshold tuned on validation data."""

from __future__ import annotations

import numpy as np
import pytest

from costlib.decoding import threshold_predictions, tune_threshold
from costlib.decoding._losses import get_loss


def empirical_loss(loss, labels, predicted) -> float:
    tp = np.sum(predicted & labels)
    fp = np.sum(predicted & ~labels)
    fn = np.sum(~predicted & labels)
    tn = np.sum(~predicted & ~labels)
    return float(loss(tp, fp, fn, tn))


def test_threshold_at_one_half() -> None:
    np.testing.assert_array_equal(threshold_predictions([0.2, 0.5, 0.7, 0.49]),
                                  [False, True, True, False])
    with pytest.raises(ValueError, match="probabilities"):
        threshold_predictions([0.2, 2.0])


@pytest.mark.parametrize("name", ["f1", "jaccard", "am", "g_tp_pr"])
def test_tuned_threshold_minimises_the_validation_loss(name: str) -> None:
    rng = np.random.default_rng(9)
    loss = get_loss(name)
    for _ in range(10):
        p = np.round(rng.random(60), 2)  # rounding creates ties
        y = rng.random(60) < p
        threshold = tune_threshold(p, y, loss)
        achieved = empirical_loss(loss, y, threshold_predictions(p, threshold))
        candidates = np.concatenate([np.unique(p), [1.1]])
        best = min(empirical_loss(loss, y, p >= t) for t in candidates)
        assert achieved == pytest.approx(best, abs=1e-12)


def test_tuned_threshold_validation() -> None:
    with pytest.raises(ValueError, match="labels has shape"):
        tune_threshold([0.1, 0.2], [1], "f1")
    with pytest.raises(ValueError, match="0/1"):
        tune_threshold([0.1, 0.2], [1, 2], "f1")
    with pytest.raises(ValueError, match="empty"):
        tune_threshold([], [], "f1")
