"""Exact Algorithm 1 for small sets, vectorised across sets.

For sets of ``n`` items (rows of ``sorted_p``, each sorted decreasingly) the Poisson-binomial
distributions of positives among the top ``k`` (forward) and among the rest (backward) are built
for all rows at once in ``n`` array updates each; the loss table
:math:`T_k[a, b] = L(a, k - a, b, n - k - b)` is shared by every set of size ``n`` (and cached per
loss and ``n``), so

.. math::

    L_k = \\sum_{a, b} P(A_k = a)\\, T_k[a, b]\\, P(B_k = b)

is one matrix product per ``k``: :math:`O(N n^3 / 6)` flops, no truncation, no Python loop over
sets. Used for many small sets and for single sets of up to 32 items.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from ._losses import SetLoss


@lru_cache(maxsize=256)
def loss_tables(loss: SetLoss, n: int) -> tuple[NDArray[np.float64], ...]:
    """``tables[k][a, b] = L(a, k - a, b, n - k - b)`` for ``a <= k``, ``b <= n - k``."""
    tables = []
    for k in range(n + 1):
        a = np.arange(k + 1, dtype=np.float64)[:, None]
        b = np.arange(n - k + 1, dtype=np.float64)[None, :]
        table = loss(a, k - a, b, (n - k) - b)
        table.setflags(write=False)
        tables.append(table)
    return tuple(tables)


#: The matrix products run on a multiple of this many rows (zero rows appended): BLAS kernels
#: handle the rows beyond the last full block of their unroll (4, 8 or 16 rows) with other
#: code, which rounds differently, so without the padding a set's expected losses changed in
#: their last bit with the number of sets decoded beside it (e.g. with ``decoding.buckets``).
ROW_ALIGN = 16

#: Bytes of the distributions built together (:func:`expected_losses_exact`): a block of
#: ``DP_BYTES // (16 * (n + 1)**2)`` sets (forward and backward, ``(n + 1)**2 * 8`` bytes per
#: set each), 594 sets of 20 items. Every update is one numpy call over the whole block, so
#: larger blocks pay the per-call overhead less often (256 sets of 20: ~40% more time).
DP_BYTES = 1 << 22


def _positive_counts(
    p: NDArray[np.float64], q: NDArray[np.float64], out: NDArray[np.float64],
    scratch: NDArray[np.float64],
) -> None:
    """Poisson-binomial distributions of the count of positives among growing item prefixes.

    ``p`` and ``q = 1 - p`` have shape (m, c): item ``j`` of each of ``c`` sets, items in the
    order they are added. ``out[j, a, :]`` becomes :math:`P(\\text{positives among the first }
    j \\text{ items} = a)` for ``a <= j`` (entries ``a > j`` are left unset), by
    :math:`P_j(a) = q_j P_{j-1}(a) + p_j P_{j-1}(a - 1)` with the boundary terms
    :math:`q_j P_{j-1}(0)` and :math:`p_j P_{j-1}(j - 1)` computed alone (no added zero).
    Sets lie on the last axis, so every update is a contiguous row operation.
    """
    out[0, 0] = 1.0
    for j in range(1, p.shape[0] + 1):
        prev, cur = out[j - 1, :j], out[j]
        np.multiply(q[j - 1], prev, out=cur[:j])
        np.multiply(p[j - 1], prev[:-1], out=scratch[:j - 1])
        cur[1:j] += scratch[:j - 1]
        np.multiply(p[j - 1], prev[j - 1], out=cur[j])


#: Largest scratch space :func:`expected_losses_exact` keeps between calls (per thread): the
#: distributions of a chunk of 2048 sets of 20 items take 12.5 MB.
WORKSPACE_BYTES = 1 << 25

_kept = threading.local()


def _scratch(size: int) -> NDArray[np.float64]:
    """``size`` float64 scratch values: the thread's kept array when it is large enough (grown
    up to :data:`WORKSPACE_BYTES`), a new one beyond that.

    Arrays of this size come from ``mmap``, and the pages of a new one are faulted in (and
    zeroed by the kernel) on first touch: in the decide pipeline that cost about as much as
    the decoding itself (300,000 page faults per 5M rows in sets of 20).
    """
    if size * 8 > WORKSPACE_BYTES:
        return np.empty(size)
    kept: NDArray[np.float64] | None = getattr(_kept, "array", None)
    if kept is None or kept.size < size:
        kept = _kept.array = np.empty(size)
    return kept[:size]


def expected_losses_exact(sorted_p: NDArray[np.float64], tables: Sequence[NDArray[np.float64]],
                          out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """Exact :math:`L_k` for each row of ``sorted_p`` (shape (c, n)); returns (c, n + 1)
    (``out`` when given, an array of that shape).

    The distributions are built a block of sets at a time (:data:`DP_BYTES`) with the sets on
    the last axis (:func:`_positive_counts`: forward over the items for :math:`A_k`, and
    backward for :math:`B_k` in the same calls, the reversed items beside the forward ones)
    and stored set by set, then each :math:`L_k` is one matrix product with :math:`T_k` and a
    row-wise dot product over all ``c`` sets (padded with zero rows to a multiple of
    :data:`ROW_ALIGN`, so that every set's result is the same bits whatever sets are decoded
    beside it and wherever it sits among them; the updates are elementwise, so the block size
    changes no bit either). All intermediate arrays are views of one scratch array kept
    between calls (:func:`_scratch`).
    """
    rows, n = sorted_p.shape
    padded = -(-rows // ROW_ALIGN) * ROW_ALIGN  # rows of the products (:data:`ROW_ALIGN`)
    block = max(min(rows, DP_BYTES // (16 * (n + 1) ** 2)), 1)
    half = padded * (n + 1) * (n + 2) // 2  # values of all top[k] (and of all rest[k])
    sizes = (half, half, padded * (n + 1), (n + 1) ** 2 * 2 * block,
             max(n - 1, 0) * 2 * block, n * 2 * block)
    ends = np.cumsum(sizes).tolist()
    space = _scratch(ends[-1])
    parts = [space[end - size:end] for size, end in zip(sizes, ends, strict=True)]
    # top[k][i, a] = P(A_k = a) of set i, a <= k;  rest[k][i, b] = P(B_k = b), b <= n - k:
    # each one C-contiguous (padded, .) array, as the matrix products need them
    top, rest, top_at, rest_at = [], [], 0, 0
    for k in range(n + 1):
        top.append(parts[0][top_at:top_at + padded * (k + 1)].reshape(padded, k + 1))
        rest.append(parts[1][rest_at:rest_at + padded * (n - k + 1)].reshape(padded, n - k + 1))
        top_at += padded * (k + 1)
        rest_at += padded * (n - k + 1)
    for k in range(n + 1):
        top[k][rows:] = 0.0
        rest[k][rows:] = 0.0
    # columns [0, width): forward distributions of the block's sets; [width, 2 width): backward
    counts = parts[3].reshape(n + 1, n + 1, 2 * block)
    scratch = parts[4].reshape(max(n - 1, 0), 2 * block)
    items = parts[5].reshape(n, 2 * block)
    for start in range(0, rows, block):
        stop = min(start + block, rows)
        width = stop - start
        p = items[:, :2 * width]
        p[:, :width] = sorted_p[start:stop].T
        p[:, width:] = sorted_p[start:stop, ::-1].T
        _positive_counts(p, 1.0 - p, counts[..., :2 * width], scratch[:, :2 * width])
        for k in range(n + 1):
            top[k][start:stop] = counts[k, :k + 1, :width].T
            rest[k][start:stop] = counts[n - k, :n - k + 1, width:2 * width].T
    if out is None:
        out = np.empty((rows, n + 1))
    for k in range(n + 1):
        product = parts[2][:padded * (n - k + 1)].reshape(padded, n - k + 1)
        np.matmul(top[k], tables[k], out=product)
        out[:, k] = np.einsum("ij,ij->i", product, rest[k])[:rows]
    return out


@lru_cache(maxsize=256)
def padded_loss_table(loss: SetLoss, n: int) -> NDArray[np.float64]:
    """``table[k, a, b] = L(a, k - a, b, n - k - b)``, zero where ``a > k`` or ``b > n - k``."""
    table = np.zeros((n + 1, n + 1, n + 1))
    for k, block in enumerate(loss_tables(loss, n)):
        table[k, :k + 1, :n - k + 1] = block
    table.setflags(write=False)
    return table


def expected_losses_single(sorted_p: NDArray[np.float64], padded_table: NDArray[np.float64]
                           ) -> NDArray[np.float64]:
    """Exact :math:`L_k`, ``k = 0..n``, of one small set (``sorted_p`` decreasing).

    Same sums as :func:`expected_losses_exact` with 1-D updates and one ``einsum`` over the
    padded table of :func:`padded_loss_table`: about 2n small array operations in all.
    """
    n = sorted_p.size
    top = np.zeros((n + 1, n + 1))
    top[0, 0] = 1.0
    rest = np.zeros((n + 1, n + 1))
    rest[n, 0] = 1.0
    for k in range(1, n + 1):
        p = sorted_p[k - 1]
        np.multiply(top[k - 1, :k], 1.0 - p, out=top[k, :k])
        top[k, 1:k + 1] += p * top[k - 1, :k]
        j = n - k
        p = sorted_p[j]
        np.multiply(rest[j + 1, :k], 1.0 - p, out=rest[j, :k])
        rest[j, 1:k + 1] += p * rest[j + 1, :k]
    return np.einsum("ka,kab,kb->k", top, padded_table, rest)
