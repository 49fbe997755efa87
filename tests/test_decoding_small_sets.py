"""The vectorised exact decoder of small sets (``costlib.decoding._small_sets``) against
enumeration of every label vector, and its independence of how sets are chunked."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from costlib.decoding import optimal_topk_batch, optimal_topk_ragged
from costlib.decoding._losses import get_loss
from costlib.decoding._small_sets import expected_losses_exact, loss_tables


def enumerated_expected_losses(sorted_p: np.ndarray, loss_name: str) -> np.ndarray:
    """``E[L]`` of predicting the first ``k`` items, ``k = 0..n``, for one set: the sum of
    ``P(y) L(tp, fp, fn, tn)`` over all ``2^n`` label vectors ``y``."""
    loss = get_loss(loss_name)
    n = sorted_p.size
    labels = (np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1
    weights = np.prod(np.where(labels == 1, sorted_p, 1.0 - sorted_p), axis=1)
    out = np.empty(n + 1)
    for k in range(n + 1):
        tp = labels[:, :k].sum(axis=1).astype(np.float64)
        fn = labels[:, k:].sum(axis=1).astype(np.float64)
        out[k] = np.sum(weights * loss(tp, k - tp, fn, (n - k) - fn))
    return out


@pytest.mark.parametrize("loss_name", ["f1", "jaccard", "g_mean", "auc"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 6, 8])
def test_expected_losses_equal_enumeration_of_every_label_vector(loss_name: str, n: int) -> None:
    rng = np.random.default_rng(n)
    probs = np.concatenate([rng.random((6, n)), rng.choice([0.0, 0.5, 1.0], (4, n))])
    sorted_p = np.ascontiguousarray(-np.sort(-probs, axis=1))
    exact = expected_losses_exact(sorted_p, loss_tables(get_loss(loss_name), n))
    assert exact.shape == (len(probs), n + 1)
    for row, values in zip(sorted_p, exact, strict=True):
        np.testing.assert_allclose(values, enumerated_expected_losses(row, loss_name),
                                   rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n", [0, 3, 20])
def test_no_sets_give_an_empty_table(n: int) -> None:
    exact = expected_losses_exact(np.zeros((0, n)), loss_tables(get_loss("f1"), n))
    assert exact.shape == (0, n + 1)


@pytest.mark.parametrize("n", [1, 5, 20, 33])
def test_results_do_not_depend_on_the_chunk_size(n: int) -> None:
    """Sets are decoded to the same bits whatever sets share their chunk and wherever they sit
    in it (the products run on whole blocks of ``ROW_ALIGN`` rows: BLAS multiplies the rows
    past the last full block of its unroll with other code, which rounds differently)."""
    probs = np.random.default_rng(7).random((301, n)) ** 3
    reference = optimal_topk_batch(probs, "f1", chunk_size=1)
    for chunk_size in (2, 3, 7, 17, 64, 2048):
        batch = optimal_topk_batch(probs, "f1", chunk_size=chunk_size)
        np.testing.assert_array_equal(batch.expected_losses, reference.expected_losses)
        np.testing.assert_array_equal(batch.k, reference.k)
        np.testing.assert_array_equal(batch.selected, reference.selected)


def test_ragged_sets_decode_to_the_same_bits_in_any_split() -> None:
    """``optimal_topk_ragged`` over all sets and over consecutive slices of them (what the
    decide pipeline's buckets and row groups do) give identical results, bit for bit."""
    rng = np.random.default_rng(8)
    sizes = np.maximum(rng.poisson(12, 3000), 1)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    values = rng.random(offsets[-1]) ** 4
    whole = optimal_topk_ragged(values, offsets, "f1")
    cuts = np.concatenate([[0], np.sort(rng.choice(sizes.size, 40, replace=False)),
                           [sizes.size]])
    parts = [optimal_topk_ragged(values[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a],
                                 "f1") for a, b in itertools.pairwise(cuts)]
    np.testing.assert_array_equal(np.concatenate([p.expected_loss for p in parts]),
                                  whole.expected_loss)
    np.testing.assert_array_equal(np.concatenate([p.k for p in parts]), whole.k)
    np.testing.assert_array_equal(np.concatenate([p.selected for p in parts]), whole.selected)


def test_the_kept_scratch_space_leaks_nothing_between_calls_or_threads() -> None:
    """The decoder's intermediate arrays live in one scratch array kept per thread between
    calls: a call after calls of other sizes (which leave other values there), and calls on
    two threads at once, give the same bits as the first call, and the expected losses equal
    the enumeration of every label vector."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(5)
    tables = {n: loss_tables(get_loss("f1"), n) for n in (3, 8, 20)}
    inputs = {n: np.ascontiguousarray(-np.sort(-rng.random((37 if n < 20 else 700, n)),
                                                axis=1)) for n in tables}
    first = {n: expected_losses_exact(inputs[n], tables[n]).copy() for n in (8, 3, 20)}
    for row, values in zip(inputs[8][:5], first[8][:5], strict=True):
        np.testing.assert_allclose(values, enumerated_expected_losses(row, "f1"), rtol=1e-12,
                                   atol=1e-15)

    def again(n: int) -> bytes:
        out = np.full((len(inputs[n]), n + 1), np.nan)
        expected_losses_exact(inputs[n], tables[n], out=out)
        return out.tobytes()

    for n in (20, 3, 8, 20, 8):  # the same thread, other sizes between
        assert again(n) == first[n].tobytes()
    with ThreadPoolExecutor(max_workers=2) as pool:
        for n, got in zip([20, 8, 3] * 6, pool.map(again, [20, 8, 3] * 6), strict=True):
            assert got == first[n].tobytes()
