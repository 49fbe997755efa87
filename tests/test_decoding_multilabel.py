"""Many small sets at once: optimal_topk_batch and optimal_topk_ragged."""

from __future__ import annotations

import numpy as np
import pytest

from costlib.decoding import optimal_topk, optimal_topk_batch, optimal_topk_ragged
from costlib.decoding._losses import get_loss

NAMES = ["f1", "jaccard", "am", "g_tp_pr", "g_mean", "h_mean", "auc"]


@pytest.mark.parametrize("name", NAMES)
def test_batch_equals_one_set_at_a_time(name: str) -> None:
    rng = np.random.default_rng(3)
    probs = np.concatenate([rng.random((40, 9)), rng.beta(0.5, 5.0, (40, 9)),
                            rng.choice([0.0, 0.3, 0.3, 1.0], (20, 9))])
    batch = optimal_topk_batch(probs, name, chunk_size=16)
    for i, row in enumerate(probs):
        single = optimal_topk(row, name, method="algorithm1", tol=0.0)
        np.testing.assert_allclose(batch.expected_losses[i], single.expected_losses, atol=1e-13)
        assert batch.k[i] == single.k
        np.testing.assert_array_equal(batch.selected[i], single.selected)
    np.testing.assert_allclose(batch.expected_loss,
                               batch.expected_losses[np.arange(len(probs)), batch.k])


def test_batch_of_large_sets_falls_back_to_single_decoding() -> None:
    probs = np.random.default_rng(4).random((3, 80))
    batch = optimal_topk_batch(probs, "f1")
    for i, row in enumerate(probs):
        assert batch.k[i] == optimal_topk(row, "f1").k
    assert batch.expected_losses.shape == (3, 81)


def test_ragged_sets_with_offsets() -> None:
    rng = np.random.default_rng(5)
    sizes = [0, 3, 7, 3, 1, 12, 7, 0, 70]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    values = rng.random(offsets[-1])
    for name in ("f1", "am"):
        result = optimal_topk_ragged(values, offsets, name)
        for i in range(len(sizes)):
            part = values[offsets[i]:offsets[i + 1]]
            single = optimal_topk(part, name)
            assert result.k[i] == single.k
            assert result.expected_loss[i] == pytest.approx(single.expected_loss, abs=1e-12)
            np.testing.assert_array_equal(result.selected[offsets[i]:offsets[i + 1]],
                                          single.selected)
        assert result.expected_loss[0] == 0.0 and result.k[0] == 0


@pytest.mark.parametrize("size", [1, 4, 20])
def test_ragged_sets_all_of_one_size(size: int) -> None:
    """Sets all of one size (decoded from the values as an (N, size) array, no gather): the
    same as one set at a time, ties in probability by the lower index."""
    rng = np.random.default_rng(size)
    values = np.round(rng.random(60 * size) ** 2, 1)  # many ties
    offsets = np.arange(0, values.size + 1, size)
    result = optimal_topk_ragged(values, offsets, "f1")
    for i in range(60):
        part = values[offsets[i]:offsets[i + 1]]
        single = optimal_topk(part, "f1")
        assert result.k[i] == single.k
        assert result.expected_loss[i] == pytest.approx(single.expected_loss, abs=1e-12)
        np.testing.assert_array_equal(result.selected[offsets[i]:offsets[i + 1]],
                                      single.selected)


def test_ragged_validation() -> None:
    with pytest.raises(ValueError, match="offsets must start at 0"):
        optimal_topk_ragged([0.1, 0.2], [0, 1], "f1")
    with pytest.raises(ValueError, match="non-decreasing"):
        optimal_topk_ragged([0.1, 0.2], [0, 2, 1, 2], "f1")
    with pytest.raises(ValueError, match="integer"):
        optimal_topk_ragged([0.1, 0.2], [0.0, 2.0], "f1")
    with pytest.raises(ValueError, match=r"values\[1\] is nan"):
        optimal_topk_ragged([0.1, np.nan], [0, 2], "f1")
    with pytest.raises(ValueError, match="2-D"):
        optimal_topk_batch([0.1, 0.2], "f1")


def test_batch_handles_empty_input() -> None:
    result = optimal_topk_batch(np.zeros((0, 5)), get_loss("f1"))
    assert result.k.shape == (0,) and result.selected.shape == (0, 5)
