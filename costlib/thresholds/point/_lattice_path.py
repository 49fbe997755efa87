"""The max-area monotone path through the threshold lattice (the paper's graph method).

A *path* walks the index lattice from the all-lowest cell ``(0, ..., 0)`` to the all-off cell
``(n_1 - 1, ..., n_k - 1)``, raising one coordinate by one per step. Along it TP and FP fall from
their maxima to 0, tracing a PN curve. A step ``u -> v`` contributes the trapezoid

.. math:: w(u, v) = \\tfrac12\\,(FP(u) - FP(v))\\,(TP(u) + TP(v)) \\ge 0,

and the path maximising the total area under its PN curve is sought. The paper puts ``-w`` on
the edges of this graph and runs Bellman-Ford; the lattice is a DAG, so dynamic programming in
lattice order gives the same optimum exactly in ``O(k * cells)``:

.. math:: A(v) = \\max_j \\; A(v - e_j) + w(v - e_j, v), \\qquad A(0) = 0.

Along the last axis the recursion is solved for a whole line at once: with ``V[l]`` the best value
arriving into the line at position ``l`` from outside it, and ``c[l]`` the cumulative step weights
along the line, ``A[l] = c[l] + max_{l' <= l} (V[l'] - c[l'])`` — one ``maximum.accumulate``.
Ties are broken deterministically: within a line towards the latest entry point, between a line
and the previous line towards the step from the previous line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["max_area_path", "max_area_paths", "path_area", "step_weights"]

_START = -1  # predecessor code of the start cell


def step_weights(tp: NDArray[np.float64], fp: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    """Trapezoid area of every unit step, one array per axis.

    ``w[d][i]`` is the area of the step from cell ``i`` to ``i + e_d``; its shape is the lattice
    shape with axis ``d`` one shorter.
    """
    weights = []
    for axis in range(tp.ndim):
        lo = [slice(None)] * tp.ndim
        hi = [slice(None)] * tp.ndim
        lo[axis] = slice(0, -1)
        hi[axis] = slice(1, None)
        u, v = tuple(lo), tuple(hi)
        weights.append(0.5 * (fp[u] - fp[v]) * (tp[u] + tp[v]))
    return weights


def _line(
    values_in: NDArray[np.float64],
    source_in: NDArray[Any],
    weights: NDArray[np.float64],
    axis_code: int,
) -> tuple[NDArray[np.float64], NDArray[Any]]:
    """Solve the recursion along one line (1-D), see the module docstring."""
    cum = np.empty(values_in.size)
    cum[0] = 0.0
    np.cumsum(weights, out=cum[1:])
    shifted = values_in - cum
    running = np.maximum.accumulate(shifted)
    positions = np.arange(values_in.size)
    entry = np.maximum.accumulate(np.where(shifted == running, positions, 0))
    source = np.where(entry == positions, source_in, axis_code)
    return cum + running, source


def _block(
    values_in: NDArray[np.float64], source_in: NDArray[Any], weights: Sequence[Any], axis_code: int
) -> tuple[NDArray[np.float64], NDArray[Any]]:
    """Solve the recursion on a sub-lattice given the values arriving from outside it."""
    if values_in.ndim == 1:
        return _line(values_in, source_in, weights[0], axis_code)
    n = values_in.shape[0]
    values = np.empty_like(values_in)
    source = np.empty(values_in.shape, dtype=np.int8)
    inner = [w for w in weights[1:]]
    for i in range(n):
        if i == 0:
            arriving, arriving_src = values_in[0], source_in[0]
        else:
            from_previous = values[i - 1] + weights[0][i - 1]
            take = from_previous >= values_in[i]
            arriving = np.where(take, from_previous, values_in[i])
            arriving_src = np.where(take, np.int8(axis_code), source_in[i])
        values[i], source[i] = _block(
            arriving, arriving_src, [w[i] for w in inner], axis_code + 1
        )
    return values, source


_WIDE_ROW = 512  # from this row width on, per-row buffered updates beat 2-D block updates
_BLOCK_CELLS = 16_384  # cells per block of rows whose step weights are computed together


def _forward_blocks(
    tp: NDArray[np.float64],
    fp: NDArray[np.float64],
    entry_values: NDArray[np.float64],
    best: NDArray[np.float64],
) -> None:
    """Narrow rows: step weights for blocks of rows in 2-D operations, 4 numpy calls a row.

    ``tp``, ``fp`` of shape ``(g, n0, n1)`` (``g`` lattices solved side by side),
    ``entry_values`` of shape ``(n0, g, n1)``, ``best`` of shape ``(g, n1)``.
    """
    g, n0, n1 = tp.shape
    running = np.empty((g, n1))
    block = max(1, _BLOCK_CELLS // (g * n1))
    for r0 in range(0, n0, block):
        r1 = min(r0 + block, n0)
        f, t = fp[:, r0:r1], tp[:, r0:r1]
        cum = np.zeros((r1 - r0, g, n1))
        along = (f[..., :-1] - f[..., 1:]) * (t[..., :-1] + t[..., 1:])
        np.cumsum(along.transpose(1, 0, 2), axis=2, out=cum[..., 1:])
        lo = max(r0 - 1, 0)
        up = ((fp[:, lo : r1 - 1] - fp[:, lo + 1 : r1])
              * (tp[:, lo : r1 - 1] + tp[:, lo + 1 : r1])).transpose(1, 0, 2)
        for i in range(r0, r1):
            if i:
                np.add(best, up[i - 1 - lo], out=best)
            np.subtract(best, cum[i - r0], out=entry_values[i])
            np.maximum.accumulate(entry_values[i], axis=1, out=running)
            np.add(cum[i - r0], running, out=best)


def _forward_rows(
    tp: NDArray[np.float64],
    fp: NDArray[np.float64],
    entry_values: NDArray[np.float64],
    best: NDArray[np.float64],
) -> None:
    """Wide rows: every step weight computed row by row into preallocated buffers (shapes as
    :func:`_forward_blocks`)."""
    g, n0, n1 = tp.shape
    running = np.empty((g, n1))
    cum = np.zeros((g, n1))
    up = np.empty((g, n1))
    up_sum = np.empty((g, n1))
    along = np.empty((g, n1 - 1))
    along_sum = np.empty((g, n1 - 1))
    for i in range(n0):
        if i:
            np.subtract(fp[:, i - 1], fp[:, i], out=up)
            np.add(tp[:, i - 1], tp[:, i], out=up_sum)
            np.multiply(up, up_sum, out=up)
            np.add(best, up, out=best)
        f, t = fp[:, i], tp[:, i]
        np.subtract(f[:, :-1], f[:, 1:], out=along)
        np.add(t[:, :-1], t[:, 1:], out=along_sum)
        np.multiply(along, along_sum, out=along)
        np.add.accumulate(along, axis=1, out=cum[:, 1:])
        np.subtract(best, cum, out=entry_values[i])
        np.maximum.accumulate(entry_values[i], axis=1, out=running)
        np.add(cum, running, out=best)


_VECTOR_BACKTRACK = 8  # from this many lattices on, rows are searched for all at once


def _row_entries(entry_values: NDArray[np.float64]) -> NDArray[np.intp]:
    """Backtrack: ``ends[i]`` = the path's entry column into row ``i`` for each lattice
    (``ends[n0] = n1 - 1``), the latest argmax of ``X[i, :ends[i + 1] + 1]``.

    Few lattices: row slices searched one lattice at a time. Many: every lattice's row at once,
    with the columns right of each end masked out (the first argmax of the reversed row is the
    latest); the values left of the end hold a finite maximum (the path's), so the mask never
    wins. Both give the same columns.
    """
    n0, g, n1 = entry_values.shape
    ends = np.empty((n0 + 1, g), dtype=np.intp)
    ends[n0] = n1 - 1
    if g < _VECTOR_BACKTRACK:
        for s in range(g):
            j = n1 - 1
            for i in range(n0 - 1, -1, -1):
                j -= int(entry_values[i, s, j::-1].argmax())
                ends[i, s] = j
        return ends
    columns = np.arange(n1)
    for i in range(n0 - 1, -1, -1):
        masked = np.where(columns <= ends[i + 1][:, None], entry_values[i], -np.inf)
        ends[i] = (n1 - 1) - masked[:, ::-1].argmax(axis=1)
    return ends


def _max_area_paths_2d(
    tp: NDArray[np.float64], fp: NDArray[np.float64]
) -> list[tuple[NDArray[np.intp], float]]:
    """k = 2 fast path for ``g`` lattices of one shape at once (``tp``, ``fp`` of shape
    ``(g, n0, n1)``); areas are doubled throughout (an exact scaling) and halved at the end.

    Row ``i`` is solved in one pass (see the module docstring) for all ``g`` lattices together:
    every numpy call covers ``g`` rows, so many small lattices cost about as many calls as one.
    Each lattice's arithmetic is exactly that of solving it alone. Only ``X[i] = V_i - c_i`` is
    stored, and the entry point of row ``i`` for column ``j`` is the latest argmax of
    ``X[i, :j+1]``, recomputed for the cells of the path only.
    """
    g, n0, n1 = tp.shape
    entry_values = np.empty((n0, g, n1))
    best = np.full((g, n1), -np.inf)
    best[:, 0] = 0.0
    forward = _forward_rows if g * n1 >= _WIDE_ROW else _forward_blocks
    forward(tp, fp, entry_values, best)
    areas = best[:, -1] / 2.0
    ends = _row_entries(entry_values)
    out = []
    for s in range(g):
        entry, last = ends[:n0, s], ends[1:, s]  # row i covers columns entry[i] .. last[i]
        lengths = last - entry + 1
        rows = np.repeat(np.arange(n0), lengths)
        starts = np.cumsum(lengths) - lengths
        cols = np.repeat(entry - starts, lengths) + np.arange(rows.size)
        out.append((np.column_stack((rows, cols)).astype(np.intp), float(areas[s])))
    return out


def _max_area_path_2d(
    tp: NDArray[np.float64], fp: NDArray[np.float64]
) -> tuple[NDArray[np.intp], float]:
    """One lattice through :func:`_max_area_paths_2d`."""
    return _max_area_paths_2d(tp[None], fp[None])[0]


def max_area_path(
    tp: NDArray[np.float64], fp: NDArray[np.float64]
) -> tuple[NDArray[np.intp], float]:
    """The monotone lattice path with the largest trapezoid area under its PN curve.

    Parameters
    ----------
    tp, fp : ndarray of shape (n_1, ..., n_k)
        Counts at every threshold tuple, non-increasing along every axis.

    Returns
    -------
    path : ndarray of shape (sum(n_j - 1) + 1, k)
        Lattice indices from ``(0, ..., 0)`` to ``(n_1 - 1, ..., n_k - 1)``.
    area : float
        Area under the path's PN curve (trapezoid rule).
    """
    shape = tp.shape
    k = tp.ndim
    if k == 2 and min(shape) > 1:  # float64 arithmetic (integer counts would overflow)
        return _max_area_path_2d(np.ascontiguousarray(tp, dtype=np.float64),
                                 np.ascontiguousarray(fp, dtype=np.float64))
    weights = step_weights(tp, fp)
    values_in = np.full(shape, -np.inf)
    values_in[(0,) * k] = 0.0
    source_in = np.full(shape, _START, dtype=np.int8)
    if k == 1:
        values, source = _line(values_in, source_in, weights[0], 0)
    else:
        values, source = _block(values_in, source_in, weights, 0)
    end = tuple(n - 1 for n in shape)
    area = float(values[end])
    cell = list(end)
    path = [tuple(cell)]
    while True:
        axis = int(source[tuple(cell)])
        if axis == _START:
            break
        cell[axis] -= 1
        path.append(tuple(cell))
    return np.array(path[::-1], dtype=np.intp).reshape(-1, k), area


def max_area_paths(
    tp: NDArray[np.float64], fp: NDArray[np.float64]
) -> list[tuple[NDArray[np.intp], float]]:
    """:func:`max_area_path` of every lattice in a stack of lattices of one shape.

    For ``k = 2`` the lattices are solved side by side (each numpy call covers one row of every
    lattice), which for many small lattices is several times faster than one at a time; each
    lattice's arithmetic is exactly that of solving it alone, so paths and areas are identical.
    Memory: the stack plus one float64 array of its size.

    Parameters
    ----------
    tp, fp : ndarray of shape (g, n_1, ..., n_k)
        Counts of ``g`` lattices.

    Returns
    -------
    list of (path, area)
        One per lattice, as :func:`max_area_path` returns them.
    """
    if tp.shape != fp.shape or tp.ndim < 2:
        raise ValueError(f"tp and fp must be stacks of one shape, got {tp.shape} and {fp.shape}")
    if tp.ndim == 3 and tp.shape[0] and min(tp.shape[1:]) > 1:
        return _max_area_paths_2d(np.ascontiguousarray(tp, dtype=np.float64),
                                  np.ascontiguousarray(fp, dtype=np.float64))
    return [max_area_path(t, f) for t, f in zip(tp, fp, strict=True)]


def path_area(tp: NDArray[np.float64], fp: NDArray[np.float64], path: NDArray[np.intp]) -> float:
    """Trapezoid area under the PN curve traced by ``path`` (independent of the optimiser)."""
    idx = tuple(path.T)
    t, f = tp[idx], fp[idx]
    return float(np.sum(0.5 * (f[:-1] - f[1:]) * (t[:-1] + t[1:])))
