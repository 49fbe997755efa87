"""Bin cells of rows: each row's flat cell index, and dense histograms per (channel, cell).

A row with bins ``b = (b_1, ..., b_k)`` on a lattice of shape ``(n_1, ..., n_k)``
(``n_j = B_j + 1``; bins from :mod:`costlib.thresholds.binning._bin_locator`) has the row-major flat
cell index ``c = (...((b_1) n_2 + b_2) n_3 + ...) n_k + b_k`` (:func:`cell_codes`). The channel
of a row (0 = rated negative, 1 = rated positive, 2 = unrated) is folded into the same code,
``channel * prod(n) + c``, so that one ``bincount`` histograms every channel at once
(:func:`histogram_cells`: the dense ``(channels, *shape)`` array a
:class:`costlib.thresholds.grid._grid.ThresholdGrid` holds). Rows are coded in chunks of
:data:`ROW_CHUNK`, so every temporary of a chunk stays in cache; the sparse partials
(:mod:`costlib.thresholds.grid._sparse`) and the bootstrap use the same codes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning._bin_locator import BinLocator

__all__ = ["cell_codes", "histogram_cells"]

ROW_CHUNK = 1 << 16  # rows per pass: every temporary of a chunk stays in cache


def cell_codes(
    scores: NDArray[np.float64], locators: Sequence[BinLocator], shape: tuple[int, ...]
) -> NDArray[np.intp]:
    """Row-major flat index of each row's bin cell."""
    flat = locators[0](scores[:, 0])
    for j in range(1, len(locators)):
        flat *= shape[j]
        flat += locators[j](scores[:, j])
    return flat


def histogram_cells(
    scores: NDArray[np.float64],
    labels: NDArray[np.bool_],
    weights: NDArray[np.float64] | None,
    locators: Sequence[BinLocator],
    shape: tuple[int, ...],
    *,
    unrated: NDArray[np.bool_] | None = None,
) -> NDArray[np.float64]:
    """Weighted counts per (label, cell): an array of shape ``(2, *shape)``, [0] = negatives.

    With ``unrated`` (a row mask) the array has shape ``(3, *shape)`` and channel 2 holds the
    unrated rows (their ``labels`` entries are ignored). Rows are processed in chunks of
    :data:`ROW_CHUNK`; the channel is folded into the cell code so that one ``bincount`` per
    chunk histograms every channel.
    """
    size = int(np.prod(shape))
    channels = 2 if unrated is None else 3
    total = np.zeros(channels * size, dtype=np.int64 if weights is None else np.float64)
    for start in range(0, scores.shape[0], ROW_CHUNK):
        stop = start + ROW_CHUNK
        code = _channel_codes(scores[start:stop], labels[start:stop],
                              None if unrated is None else unrated[start:stop],
                              locators, shape)
        if weights is None:
            total += np.bincount(code, minlength=channels * size)
        else:
            total += np.bincount(code, weights=weights[start:stop], minlength=channels * size)
    return total.astype(np.float64, copy=False).reshape((channels, *shape))


def _channel_codes(
    scores: NDArray[np.float64],
    labels: NDArray[Any],
    unrated: NDArray[np.bool_] | None,
    locators: Sequence[BinLocator],
    shape: tuple[int, ...],
    bins: Sequence[NDArray[np.intp]] | None = None,
) -> NDArray[np.intp]:
    """Flat index into the ``(channels, *shape)`` array: channel * size + cell.

    The channel is the label (0, 1), or 2 for ``unrated`` rows. ``bins``: each classifier's
    bin per row, already located (else the ``locators`` locate them)."""
    size = int(np.prod(shape))
    if bins is None:
        code = cell_codes(scores, locators, shape)
    else:
        code = bins[0].astype(np.intp, copy=True)
        for j in range(1, len(bins)):
            code *= shape[j]
            code += bins[j]
    if unrated is None:
        code += labels * size
    else:
        channel = labels.astype(np.intp)
        channel[unrated] = 2
        channel *= size
        code += channel
    return code
