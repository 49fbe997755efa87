"""Refinement on rows: re-bin around a point, or compare it with a much finer lattice.

A grid is exact only at its candidate thresholds (:mod:`costlib.thresholds.point._resolution`
bounds what finer ones could reach from the grid alone). With the rows at hand,
:func:`refine` re-bins around the chosen point (every rated positive's score near it becomes a
candidate) and optimises again; :func:`resolution_check` compares a point's value with the same
objective on a much finer lattice of the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from costlib.thresholds.binning._edges import decision_edges
from costlib.thresholds.binning._rows import as_score_array, split_labels
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._operating_point import OperatingPoint
from costlib.thresholds.point._optimize import optimize

__all__ = ["refine", "resolution_check"]


def _window_candidates(values: NDArray[np.float64], positives: NDArray[np.bool_],
                       low: float, high: float, max_others: int) -> NDArray[np.float64]:
    """Every positive's score in ``[low, high)``, and up to ``max_others`` quantiles of all."""
    inside = (values >= low) & (values < high)
    out = np.unique(values[inside & positives])
    rest = values[inside]
    if rest.size:
        q = np.quantile(rest, np.arange(max_others) / max_others, method="lower")
        out = np.union1d(out, q)
    return out


def refine(
    point: OperatingPoint,
    grid: ThresholdGrid,
    scores: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    audit_probabilities: ArrayLike | None = None,
    window: int = 4,
    max_rounds: int = 4,
    max_others: int = 256,
    **optimize_kwargs: Any,
) -> tuple[OperatingPoint, ThresholdGrid]:
    """Re-bin around a point on the rows it was chosen from, and optimise again.

    Each round, on every axis, the candidates within ``window`` edges of the point's threshold
    (below and above) gain every rated positive's score in that range and ``max_others``
    quantiles of all scores there; the grid is rebuilt from the rows and the same
    optimisation runs again, until the thresholds stop moving or ``max_rounds`` is reached.
    With full labels, once every positive's score near the point is a candidate, the point is
    the exact optimum over all thresholds in that neighbourhood (see
    :func:`costlib.thresholds.decision_edges_from_sketch` for why positives' scores suffice).

    Parameters
    ----------
    point : OperatingPoint
        Chosen on ``grid`` with ``optimize_kwargs``.
    grid : ThresholdGrid
        Built from exactly these rows.
    scores, labels, weights, audit_probabilities
        The rows, as :meth:`~costlib.thresholds.ThresholdGrid.from_scores` took them.
    **optimize_kwargs
        What :func:`costlib.thresholds.optimize` was called with (target, rule,
        method, objective, constraints, coverage).

    Returns
    -------
    (OperatingPoint, ThresholdGrid)
        The refined point (its ``details["refinement_rounds"]`` says how many rounds ran) and
        the grid it was chosen on.
    """
    s = np.asarray(as_score_array(scores, grid.names)[0], dtype=np.float64)
    n = s.shape[0]
    y, unrated = split_labels(labels, n)
    positives = y if unrated is None else y & ~unrated
    rounds = 0
    while rounds < max_rounds:
        rounds += 1
        new_edges = []
        for j, edges in enumerate(grid.edges):
            t = point.index[j]
            padded = np.append(edges, np.inf)
            low = padded[max(t - window, 0)]
            high = padded[min(t + window, edges.size)]
            if t - window <= 0:
                low = -np.inf
            extra = _window_candidates(s[:, j], positives, low, high, max_others)
            extra = extra[np.isfinite(extra)]
            new_edges.append(np.union1d(edges, extra))
        if all(e.size == old.size for e, old in zip(new_edges, grid.edges, strict=True)):
            break
        grid = ThresholdGrid.from_scores(s, labels, new_edges, weights, names=grid.names,
                                         weight_bits=grid.weight_bits,
                                         audit_probabilities=audit_probabilities)
        moved = optimize(grid, **optimize_kwargs)
        same = moved.thresholds == point.thresholds
        point = moved
        if same:
            break
    point.details["refinement_rounds"] = rounds
    return point, grid


def resolution_check(
    point: OperatingPoint,
    scores: ArrayLike,
    labels: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    n_edges: int = 4096,
    audit_probabilities: ArrayLike | None = None,
    names: Sequence[str] | None = None,
    **optimize_kwargs: Any,
) -> dict[str, Any]:
    """The point's objective against the same objective on a much finer lattice of the rows.

    The fine lattice is :func:`costlib.thresholds.decision_edges` with ``n_edges`` candidates
    per classifier (default 4,096; every rated positive's score when they fit), optimised with the
    same ``optimize_kwargs`` (method, target, objective, constraints, coverage).

    Returns
    -------
    dict
        ``value`` (the point's), ``fine_value``, ``share`` (``value / fine_value``; 1 when both
        are 0), ``fine_thresholds``, ``fine_edges`` (sizes per classifier).
    """
    fine_edges = decision_edges(scores, labels, weights, n_edges=n_edges, names=names,
                                audit_probabilities=audit_probabilities)
    fine_grid = ThresholdGrid.from_scores(scores, labels, fine_edges, weights, names=names,
                                          audit_probabilities=audit_probabilities)
    fine = optimize(fine_grid, **optimize_kwargs)
    if fine.objective == point.objective:
        share = 1.0
    elif fine.objective == 0:
        share = float("nan")
    else:
        share = point.objective / fine.objective
    return {"value": point.objective, "fine_value": fine.objective, "share": share,
            "fine_thresholds": fine.thresholds, "fine_edges": [e.size for e in fine_edges]}
