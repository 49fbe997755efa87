"""Audit designs sized from data: Neyman-style probabilities per stratum, water-filled to a budget.

:mod:`costlib.audit._sampling` draws an audit of the unflagged rows with probability
``pi_h = min(1, max(floor, c * w_h))`` per stratum ``h``. This module chooses the ``w_h`` and
``c`` from counts instead of by hand.

The quantity estimated
----------------------
Let ``r`` be the target slope (``TP - r FP`` is the linear objective) and ``y_i`` the label of an
unflagged row ``i``. Flagging the row changes the objective by

    d_i = y_i - r (1 - y_i)        (1 for a positive, -r for a negative).

A neighbour of the point in force that flags more rows gains ``G = sum_{i in D} d_i`` over the
set ``D`` of unflagged rows it adds; the audit estimates it by Horvitz-Thompson,
``G_hat = sum_{i in D} I_i d_i / pi_i``. With independent inclusions ``I_i ~ Bernoulli(pi_i)``

    Var[G_hat] = sum_{i in D} d_i^2 (1 - pi_i) / pi_i.

The design does not know ``D`` (which neighbour wins is what the audit is for), so it treats
every unflagged row as a possible member and minimises the variance of the estimated gain of
flagging *all* of them, ``sum_h Var[G_hat_h]``. With a common ``pi_h`` in stratum ``h``, ``N_h``
unflagged rows and the mean square ``M_h = mean_{i in h} d_i^2``, that is

    V(pi) = sum_h N_h M_h (1 / pi_h - 1).

If the stratum holds ``P_h`` positives and ``Q_h`` negatives (``P_h + Q_h = N_h``),
``M_h = (P_h + r^2 Q_h) / (P_h + Q_h)``. With ``r = 0``, ``d_i = y_i`` and ``G_hat`` is the
estimated number of positives among the unflagged rows: the only random part of the estimated
total positives ``P_hat`` and so, at the point in force (whose flagged positives are rated with
certainty), of its estimated recall ``F / (F + G_hat)`` (delta method:
``Var[recall] ~ recall^2 Var[G_hat] / P^2``). One formula serves both the gain and the recall.

The allocation (Neyman, water-filled)
-------------------------------------
Minimise ``V(pi)`` subject to ``sum_h N_h pi_h = B`` (the budget: expected audited rows) and
``floor <= pi_h <= 1``. ``V`` is convex in ``pi`` (``1 / pi`` is) and the constraints are
linear, so the KKT conditions are sufficient: with multiplier ``nu`` of the budget,
``-N_h M_h / pi_h^2 + nu N_h = 0`` where the box does not bind, hence

    pi_h = min(1, max(floor, c * S_h)),        S_h = sqrt(M_h),  c = 1 / sqrt(nu),

with the one ``c`` for which ``sum_h N_h pi_h = B``. Strata clipped at 1 or at the floor drop
out and the budget left over is re-spread over the others ("water-filling"):
:func:`costlib.audit.budget_scale` finds ``c`` exactly on the piecewise-linear
``sum_h N_h min(1, max(floor, c S_h))``. Poisson sampling makes ``S_h`` the root mean square of
``d_i`` in the stratum, not its standard deviation as in fixed-size stratified sampling (where
``Var = N_h^2 (1 - n_h / N_h) s_h^2 / n_h``).

Since every stratum has the same ``pi_h`` for all its rows, the *share* audited on a new period
is ``sum_h (N'_h / N') pi_h``: it equals ``B / N`` whenever the strata's shares of the unflagged
rows are as in the counts the design came from, whatever the number of rows ``N'``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.audit._sampling import AuditDesign, budget_scale

__all__ = [
    "NeymanAllocation",
    "design_variance",
    "gain_spreads",
    "neyman_design",
    "neyman_probabilities",
]


@dataclass(frozen=True)
class NeymanAllocation:
    """Probabilities per stratum for a budget.

    Attributes
    ----------
    probabilities : ndarray of float64, shape (m,)
        ``pi_h = min(1, max(floor, scale * spreads[h]))``.
    scale : float
        The ``c`` solving the budget.
    expected : float
        ``sum_h N_h pi_h`` (equals the budget up to rounding).
    variance : float
        ``V(pi) = sum_h N_h S_h^2 (1 / pi_h - 1)``: the variance of the estimated gain (see the
        module docstring) when ``S_h^2`` is the stratum's mean square of ``d_i``.
    """

    probabilities: NDArray[np.float64]
    scale: float
    expected: float
    variance: float


def _as_vector(values: Sequence[float] | NDArray[Any], name: str) -> NDArray[np.float64]:
    out = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.isfinite(out).all() or (out < 0).any():
        raise ValueError(f"{name}: need finite numbers >= 0, got {out.tolist()}")
    return out


def design_variance(
    counts: Sequence[float] | NDArray[Any],
    spreads: Sequence[float] | NDArray[Any],
    probabilities: Sequence[float] | NDArray[Any],
) -> float:
    """``V(pi) = sum_h N_h S_h^2 (1 / pi_h - 1)``: Horvitz-Thompson variance of the estimated
    gain of flagging every unflagged row, with ``S_h`` the root mean square of the per-row
    contribution in stratum ``h`` (strata with ``N_h S_h = 0`` contribute 0 whatever ``pi_h``)."""
    n = _as_vector(counts, "counts")
    s = _as_vector(spreads, "spreads")
    p = np.asarray(probabilities, dtype=np.float64).reshape(-1)
    if not (n.shape == s.shape == p.shape):
        raise ValueError(f"counts {n.shape}, spreads {s.shape} and probabilities {p.shape} "
                         "differ in shape")
    weight = n * s**2
    used = weight > 0
    if (p[used] <= 0).any():
        return float("inf")
    return float(np.sum(weight[used] * (1.0 / p[used] - 1.0)))


def neyman_probabilities(
    counts: Sequence[float] | NDArray[Any],
    spreads: Sequence[float] | NDArray[Any],
    budget: float,
    floor: float,
) -> NeymanAllocation:
    """Neyman probabilities ``pi_h = min(1, max(floor, c S_h))`` with ``sum_h N_h pi_h = budget``.

    Minimises ``sum_h N_h S_h^2 (1 / pi_h - 1)`` over ``floor <= pi_h <= 1`` subject to the
    budget (derivation in the module docstring); ``c`` is re-solved after clipping
    (water-filling, :func:`costlib.audit.budget_scale`).

    Parameters
    ----------
    counts : sequence of float
        ``N_h >= 0``: unflagged rows per stratum.
    spreads : sequence of float
        ``S_h >= 0``: root mean square of the per-row contribution per stratum (see
        :func:`gain_spreads`); only their ratios matter. A stratum with ``S_h = 0`` gets the
        floor.
    budget : float
        Expected audited rows ``B``, in ``[floor * sum_h N_h, sum_{S_h > 0} N_h +
        floor * sum_{S_h = 0} N_h]``.
    floor : float
        Minimum probability, in (0, 1].

    Raises
    ------
    ValueError
        Shapes differ, a negative or non-finite count or spread, or a budget outside the
        reachable range (the message gives the range).
    """
    n = _as_vector(counts, "counts")
    s = _as_vector(spreads, "spreads")
    if n.shape != s.shape or n.size == 0:
        raise ValueError(f"counts ({n.size}) and spreads ({s.size}) need one entry per stratum")
    if not 0.0 < floor <= 1.0:
        raise ValueError(f"floor: need 0 < floor <= 1, got {floor}")
    if not np.isfinite(budget):
        raise ValueError(f"budget: need a finite number, got {budget}")
    design = AuditDesign(weights=tuple(s.tolist()), edges=tuple(range(s.size - 1)),
                         floor=floor, budget_share=0.0)
    try:
        scale = budget_scale(n, design, float(budget))
    except ValueError as exc:
        raise ValueError(f"budget: {exc}") from None
    probabilities = design.probabilities(scale)
    return NeymanAllocation(
        probabilities=probabilities,
        scale=float(scale),
        expected=float(np.sum(n * probabilities)),
        variance=design_variance(n, s, probabilities),
    )


def gain_spreads(
    positives: Sequence[float] | NDArray[Any],
    negatives: Sequence[float] | NDArray[Any],
    slope: float,
) -> NDArray[np.float64]:
    """``S_h = sqrt((P_h + r^2 Q_h) / (P_h + Q_h))``: root mean square of ``d_i = y_i - r(1 - y_i)``
    over a stratum's unflagged rows, from its (estimated) positives ``P_h`` and negatives ``Q_h``.

    ``slope = r = 0`` gives ``sqrt(P_h / (P_h + Q_h))``: the allocation for the estimated total
    positives (and recall). A stratum with ``P_h + Q_h = 0`` has no evidence; it gets the largest
    spread of the others (an unobserved region is treated as the most uncertain one, never as
    certain), or 1 when no stratum has any.
    """
    p = _as_vector(positives, "positives")
    q = _as_vector(negatives, "negatives")
    if p.shape != q.shape:
        raise ValueError(f"positives ({p.size}) and negatives ({q.size}) differ in length")
    if not (np.isfinite(slope) and slope >= 0):
        raise ValueError(f"slope: need a finite number >= 0, got {slope}")
    total = p + q
    seen = total > 0
    spreads = np.zeros_like(p)
    spreads[seen] = np.sqrt((p[seen] + slope**2 * q[seen]) / total[seen])
    fill = float(spreads[seen].max()) if seen.any() and spreads[seen].max() > 0 else 1.0
    spreads[~seen] = fill
    return spreads


def neyman_design(
    counts: Sequence[float] | NDArray[Any],
    spreads: Sequence[float] | NDArray[Any],
    edges: Sequence[float],
    budget_share: float,
    floor: float,
) -> tuple[AuditDesign, NeymanAllocation]:
    """The :class:`~costlib.audit.AuditDesign` that audits an expected
    ``budget_share * sum_h N_h`` of the counted unflagged rows, Neyman-allocated.

    Its weights are the probabilities and its ``budget_share`` is 1, so
    ``design.probabilities()`` returns exactly :func:`neyman_probabilities`' ``pi_h`` and
    :func:`costlib.audit.audit_sample` draws with them.

    Raises
    ------
    ValueError
        No counted row, ``floor > budget_share``, or a budget that cannot be reached.
    """
    n = _as_vector(counts, "counts")
    total = float(n.sum())
    if total <= 0:
        raise ValueError("counts: no unflagged row was counted")
    if not 0.0 <= budget_share <= 1.0:
        raise ValueError(f"budget_share: need 0 <= budget_share <= 1, got {budget_share}")
    if floor > budget_share:
        raise ValueError(f"floor {floor} is above budget_share {budget_share}: the floor alone "
                         "audits more than the budget")
    allocation = neyman_probabilities(n, spreads, budget_share * total, floor)
    design = AuditDesign(edges=tuple(edges), weights=tuple(allocation.probabilities.tolist()),
                         floor=floor, budget_share=1.0)
    return design, allocation
