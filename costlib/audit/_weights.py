"""Audit samples: Horvitz–Thompson weights and the coverage rule for rows rated with known π.

Ratings exist where the thresholds in force flagged an item (inclusion probability ``π = 1``)
and on an *audit sample* of the unflagged items, each drawn with a known probability
``0 < π < 1`` (e.g. stratified by score band). The score stream records ``π`` on every row.

Estimation (Horvitz–Thompson). A rated row ``i`` with weight ``w_i`` enters the grid with weight
``w_i / π_i``. Assume every scored row ``i`` is rated independently with probability ``π_i``
(independent Bernoulli inclusion ``I_i ~ Bernoulli(π_i)`` with the recorded ``π_i``, and every
sampled row's rating returned). Then for every lattice cell ``b`` and label ``y``

    E[ sum_i I_i (w_i / π_i) [b_i = b, y_i = y] ] = sum_i w_i [b_i = b, y_i = y],

so every histogram cell, hence every ``TP(t)``, ``FP(t)`` (sums of cells) and the total
``P = sum_b H_pos[b]``, is an unbiased estimate of the corresponding count of the whole scored
population. Its variance is ``sum_i w_i² (1 - π_i) / π_i [i in the cell]`` (zero for ``π = 1``).

Coverage with audit data. A row enters the grid in exactly one way:

- rated (label not null): ``π`` must be in ``(0, 1]``; weight ``w / π`` in ``H_pos``/``H_neg``;
- unrated with ``0 < π < 1``: an unflagged row *represented* by the audit sample of its region
  (the rated audit rows carry its weight through ``1 / π``): it is left out of the grid, in
  particular it is **not** unrated weight ``H_unr``;
- unrated with ``π = 1`` (flagged, not rated yet), ``π = 0`` or ``π`` missing (NaN: no audit
  could reach it): weight ``w`` in ``H_unr``, an unrated gap exactly as without audit data.

So coverage ``U(t) <= s V(t)`` holds wherever audit rows can land, and thresholds can move below
the flagged region. An audited row whose rating is still missing looks like a represented row:
ratings of sampled rows must be complete, or the estimates are biased low (non-response).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib._messages import plain

__all__ = ["AuditWeights", "audit_weights"]


@dataclass(frozen=True)
class AuditWeights:
    """How the rows of a sample with inclusion probabilities enter a grid.

    Attributes
    ----------
    keep : ndarray of bool, shape (n,)
        Rows that enter the grid: rated rows and unrated gaps (not the represented rows).
    weights : ndarray of float64, shape (n,)
        Grid weight per row: ``w / π`` for rated rows, ``w`` for unrated gaps, 0 for represented
        rows (``w = 1`` when no weights were given).
    unrated : ndarray of bool, shape (n,)
        Unrated gaps: unrated rows with ``π = 1``, ``π = 0`` or ``π`` missing (NaN).
    audited : ndarray of bool, shape (n,)
        Rated rows with ``π < 1`` (the audit sample).
    """

    keep: NDArray[np.bool_]
    weights: NDArray[np.float64]
    unrated: NDArray[np.bool_]
    audited: NDArray[np.bool_]

    @property
    def audited_rows(self) -> int:
        """Number of rated audit rows (``π < 1``)."""
        return int(self.audited.sum())


def audit_weights(
    unrated: NDArray[np.bool_] | None,
    probabilities: ArrayLike,
    weights: NDArray[np.float64] | None = None,
) -> AuditWeights:
    """Horvitz–Thompson weights and the unrated-gap mask (see the module docstring).

    Parameters
    ----------
    unrated : ndarray of bool of shape (n,), or None
        Rows whose label is null (``None``: every row is rated).
    probabilities : array-like of float, shape (n,)
        Inclusion probability ``π`` of every row; NaN = missing (allowed on unrated rows only).
    weights : ndarray of float64, shape (n,), optional
        Row weights ``w`` (default 1), already validated (finite, >= 0).

    Returns
    -------
    AuditWeights

    Raises
    ------
    ValueError
        ``π`` missing or outside ``(0, 1]`` on a rated row, or outside ``[0, 1]`` on an unrated
        row, naming the first offending row.
    """
    p = np.asarray(probabilities, dtype=np.float64)
    n = p.shape[0] if p.ndim == 1 else -1
    if p.ndim != 1 or (unrated is not None and unrated.shape != (n,)) or (
            weights is not None and weights.shape != (n,)):
        raise ValueError(f"audit probabilities must have shape (n,) to match the rows, got "
                         f"{p.shape}")
    gap = np.zeros(n, dtype=bool) if unrated is None else unrated
    rated = ~gap
    missing = np.isnan(p)
    _raise_first(rated & missing, p, "is missing on a rated row (rated rows need π in (0, 1])")
    _raise_first(rated & ~missing & ~((p > 0) & (p <= 1)), p, "must be in (0, 1] on a rated row")
    _raise_first(gap & ~missing & ~((p >= 0) & (p <= 1)), p, "must be in [0, 1] (or missing)")
    represented = gap & (p > 0) & (p < 1)
    w = np.ones(n) if weights is None else weights
    grid_weights = np.where(rated, w / np.where(rated, p, 1.0), np.where(represented, 0.0, w))
    return AuditWeights(keep=~represented, weights=grid_weights, unrated=gap & ~represented,
                       audited=rated & (p < 1))


def _raise_first(bad: NDArray[np.bool_], p: NDArray[np.float64], what: str) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"audit probability π[{i}] = {plain(p[i])} {what}")

