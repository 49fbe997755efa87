"""Is moving away from the thresholds in force supported by the data? (hysteresis for a loop)

A scheduled recalibration re-optimises every run. On noisy estimates (few rated rows, or audit
rows weighted by ``1/π``) the optimum of the run's grid wanders from run to run although the
best thresholds have not changed, and every wander costs utility on the next day: the optimum of
a noisy grid is biased towards points whose estimate happens to be high (the winner's curse).

The rule here moves only on evidence. With ``t₀`` the thresholds in force and ``t*`` the point
the method chose, the estimated gain of moving is

.. math:: \\hat\\Delta = \\hat O(t^*) - \\hat O(t_0),

where ``Ô`` is the objective on the run's grid (``TP - r FP`` for the linear objective). Its
standard error comes from the Poisson-bootstrap replicate grids (:mod:`costlib.bootstrap`),
evaluated at the *same two points* in every replicate:
``se = sd_b(Ô_b(t*) - Ô_b(t₀))``. The run moves when ``Δ̂ > z · se`` and keeps ``t₀``
otherwise. The replicates' variance covers the audit's Horvitz–Thompson sampling variance and
the population's own variation, so a move supported by a handful of heavily weighted audit rows
needs a larger gain than one supported by thousands of flagged rows. ``z = 0`` moves on any
positive estimated gain (ties keep ``t₀``); larger ``z`` moves more reluctantly.

The chosen point is selected on the same grid, so ``Δ̂`` is optimistic; the rule does not
correct that bias, it only refuses moves that the noise alone could explain.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from costlib.bootstrap import BootstrapGrids
from costlib.grid import ThresholdGrid
from costlib.operating_point import OperatingPoint, point_at
from costlib.target import Target

__all__ = ["MoveEvidence", "move_evidence"]


@dataclass(frozen=True)
class MoveEvidence:
    """The estimated gain of moving from the thresholds in force to a chosen point.

    Attributes
    ----------
    gain : float
        ``Ô(t*) - Ô(t₀)`` on the run's grid.
    se : float
        Bootstrap standard error of the gain (0 when the two points flag the same cells).
    z : float
        The required number of standard errors.
    move : bool
        ``gain > z * se`` (and ``gain > 0``).
    kept : OperatingPoint
        The thresholds in force evaluated on the run's grid (what is published when not
        ``move``).
    """

    gain: float
    se: float
    z: float
    move: bool
    kept: OperatingPoint

    def reason(self) -> str:
        """One line for the record when the thresholds in force are kept."""
        return (f"kept the thresholds in force: moving to the optimum would gain "
                f"{self.gain:.4g} ± {self.se:.4g} (bootstrap se), not more than z = {self.z:g} "
                f"standard errors")


def move_evidence(
    grid: ThresholdGrid,
    bootstrap: BootstrapGrids,
    chosen: OperatingPoint,
    in_force: Sequence[float],
    *,
    z: float,
    target: Target | None,
    rule: str,
    method: str,
    options: Mapping[str, Any] | None = None,
) -> MoveEvidence:
    """Whether the data support moving from ``in_force`` to ``chosen`` (see the module doc).

    Parameters
    ----------
    grid : ThresholdGrid
        The grid ``chosen`` was optimised on.
    bootstrap : BootstrapGrids
        Replicates of ``grid`` (at least 2).
    chosen : OperatingPoint
    in_force : sequence of float
        The thresholds in force, one per classifier (``+inf`` = off).
    z : float
        Standard errors the gain must exceed, ``z >= 0``.
    target, rule, method, options
        As for :func:`costlib.operating_point.point_at` / ``optimize``.

    Returns
    -------
    MoveEvidence
    """
    if not (np.isfinite(z) and z >= 0):
        raise ValueError(f"z must be a finite number >= 0, got {z!r}")
    if bootstrap.n_replicates < 2:
        raise ValueError(f"need at least 2 bootstrap replicates, got {bootstrap.n_replicates}")
    kwargs = {"target": target, "rule": rule, "method": method, **dict(options or {})}
    kept = point_at(grid, in_force, **kwargs)
    gain = float(chosen.objective - kept.objective)
    if tuple(kept.index) == tuple(chosen.index):
        return MoveEvidence(gain=0.0, se=0.0, z=float(z), move=False, kept=kept)
    diffs = np.empty(bootstrap.n_replicates)
    for r in range(bootstrap.n_replicates):
        replicate = bootstrap.replicate(r)
        diffs[r] = (point_at(replicate, chosen.thresholds, **kwargs).objective
                    - point_at(replicate, kept.thresholds, **kwargs).objective)
    se = float(np.std(diffs, ddof=1))
    return MoveEvidence(gain=gain, se=se, z=float(z), move=bool(gain > 0 and gain > z * se),
                        kept=kept)
