"""Is an operating point limited by the lattice? A bound from the grid, and refinement on rows.

Every count on a :class:`~costlib.thresholds.ThresholdGrid` is exact, but only at its
candidate thresholds. A threshold tuple ``tau`` between candidates lies in a lattice *box*: on every
axis ``e[a_j] <= tau_j < e[a_j + 1]`` (``e[B] = +inf`` is "off"), with lower corner ``a`` and upper
corner ``b = a + 1`` (clipped at "off"). Raising a threshold never flags more rows, under both
rules, so

.. math:: TP(b) \\le TP(\\tau) \\le TP(a), \\quad FP(b) \\le FP(\\tau) \\le FP(a),
          \\quad V(b) \\le V(\\tau) \\le V(a),

and for any objective that rises with TP and falls with FP (linear ``TP - r FP``, F-beta,
precision at a volume)

.. math:: f(\\tau) \\le f\\big(TP(a), FP(b)\\big) =: \\bar f(a).

Constraints and coverage are relaxed the same way (a box is kept when *some* tuple in it might
meet them: ``TP(a) >= p (TP(a) + FP(b))``, ``V(b) <= c``, ``FP(b) <= f``,
``TP(a) >= r P`` for a recall floor (``P`` is the grid's total, the same for every tuple),
``U(b) <= s V(a)``). The largest ``f̄`` over all boxes bounds what *any* finer lattice of the
same rows can reach (:func:`lattice_resolution`, ``finer_bound``): when it is within a
tolerance of the point's value, resolution cannot matter.

The bound is loose inside boxes that hold many rows of both labels. A point is called
**resolution-limited** when a *coarse* box, one whose flagged volume jumps by more than
``max_jump`` times between its corners (``V(a) > max_jump V(b)``, including ``V(b) = 0``: the
step from "off" to the top candidate), could beat it by more than ``tolerance``: then the lattice
is too coarse exactly where a better point might be, e.g. when "flag nothing" wins while rated
positives sit above the top candidate. Thresholds below the lowest candidate are not boxes
(the default edges start at the lowest score).

On rows, :func:`costlib.thresholds.point._refine.refine` re-bins around the chosen point and
optimises again (:mod:`costlib.thresholds.point._refine`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning._rows import check_rule
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._objectives import Constraints, Objective

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_MAX_JUMP",
    "DEFAULT_TOLERANCE",
    "Resolution",
    "lattice_resolution",
]

#: Relative gain a finer lattice must be able to reach for a point to count as limited.
DEFAULT_TOLERANCE = 0.02
#: Volume ratio between a box's corners above which the box is coarse.
DEFAULT_MAX_JUMP = 4.0
#: Share of the point's true positives one box may hold before it is coarse (None: only the
#: volume jump makes a box coarse, the default).
DEFAULT_MAX_STEP_SHARE: float | None = None
#: A box holding at most this many rows' weight of positives is never coarse by its positives.
_MIN_UNITS = 2.0


@dataclass(frozen=True)
class Resolution:
    """How far the lattice can limit a point (see the module docstring).

    Attributes
    ----------
    limited : bool
        A coarse box could beat the point by more than the tolerance.
    value : float
        The point's objective value.
    finer_bound : float
        No tuple of any finer lattice of the same rows exceeds this (the largest ``f̄`` over
        every box that might meet the constraints and coverage).
    coarse_bound : float
        The largest ``f̄`` over coarse boxes only (``-inf`` when there is none).
    box_low, box_high : tuple of float or None
        Thresholds at the corners ``a`` and ``b`` of the coarse box attaining ``coarse_bound``.
    volume_jump : float
        ``V(a) / V(b)`` of that box (``inf`` when ``V(b) = 0``; NaN without a box).
    tolerance, max_jump : float
        The settings used.
    """

    limited: bool
    value: float
    finer_bound: float
    coarse_bound: float
    box_low: tuple[float, ...] | None
    box_high: tuple[float, ...] | None
    volume_jump: float
    tolerance: float
    max_jump: float

    def reason(self, objective_name: str) -> str:
        """One line for ``OperatingPoint.reason`` (empty when not limited)."""
        if not self.limited:
            return ""
        jump = "from nothing" if np.isinf(self.volume_jump) else f"{self.volume_jump:.3g}x"
        return (
            f"resolution: between thresholds {self.box_low} and {self.box_high} the flagged "
            f"volume changes {jump}, and a finer lattice there could reach {objective_name} up "
            f"to {self.coarse_bound:.6g} against {self.value:.6g} here; use finer candidate "
            "thresholds (grid.edges: auto) or refine on the rows (costlib.thresholds.refine)"
        )

    def summary(self) -> dict[str, Any]:
        """Plain values for records and reports."""
        return {
            "limited": self.limited,
            "finer_bound": _plain(self.finer_bound),
            "coarse_bound": _plain(self.coarse_bound),
            "box_low": None if self.box_low is None else list(self.box_low),
            "box_high": None if self.box_high is None else list(self.box_high),
            "volume_jump": _plain(self.volume_jump),
        }


def _plain(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def _upper_corner(values: NDArray[np.float64]) -> NDArray[np.float64]:
    """``values[min(a + 1, off)]`` at every cell ``a`` (one step up on every axis)."""
    out = values
    for axis in range(values.ndim):  # shift by one along the axis, the last entry repeated
        rest = [slice(None)] * values.ndim
        above, last = list(rest), list(rest)
        above[axis], last[axis] = slice(1, None), slice(-1, None)
        out = np.concatenate([out[tuple(above)], out[tuple(last)]], axis=axis)
    return out


def lattice_resolution(
    grid: ThresholdGrid,
    value: float,
    *,
    rule: str = "any",
    objective: Objective,
    constraints: Constraints | None = None,
    max_unrated_share: float = 0.0,
    tolerance: float = DEFAULT_TOLERANCE,
    max_jump: float = DEFAULT_MAX_JUMP,
    point_tp: float = 0.0,
    max_step_share: float | None = DEFAULT_MAX_STEP_SHARE,
) -> Resolution:
    """Bound what finer candidate thresholds could reach, from the grid alone.

    Parameters
    ----------
    grid : ThresholdGrid
    value : float
        Objective value of the chosen point.
    rule : {"any", "all"}
    objective, constraints : as :func:`costlib.thresholds.point._objectives.select` takes them.
    max_unrated_share : float
        The coverage setting ``s``.
    tolerance : float, default 0.02
        Relative gain (of ``|value|``) below which resolution does not count.
    max_jump : float, default 4
        Volume ratio between corners above which a box is coarse.
    point_tp : float
        True positives of the chosen point (for ``max_step_share``).
    max_step_share : float, optional
        Also call a box coarse when it holds more than this share of ``point_tp`` (and more
        than two rows' weight) of positives. Off by default: on coarse but smooth lattices
        (e.g. 20 uniform edges) most boxes near the optimum would count.

    Returns
    -------
    Resolution
    """
    if not (tolerance >= 0 and max_jump > 1):
        raise ValueError(f"need tolerance >= 0 and max_jump > 1, got {tolerance}, {max_jump}")
    rule = check_rule(rule)
    constraints = constraints or Constraints()
    tp, fp = grid.counts(rule)
    vol = grid.volume(rule)
    fp_b, vol_b = _upper_corner(fp), _upper_corner(vol)
    optimistic = objective.values(tp, fp_b, grid.total_positives)
    candidates = vol > vol_b  # boxes whose corners differ
    # TP(a), FP(b), V(b): optimistic for every constraint (a recall floor uses TP(a)).
    if constraints.active:
        candidates &= constraints.satisfied(tp, fp_b, vol_b)
    if objective.name == "precision_at_volume":
        assert objective.volume is not None
        candidates &= vol_b <= objective.volume
    if grid.has_unrated and max_unrated_share < 1:
        candidates &= _upper_corner(grid.unrated_counts(rule)) <= max_unrated_share * vol
    finer = max(float(np.max(optimistic, where=candidates, initial=-np.inf)), float(value))
    # Coarse: the volume jumps; optionally also a box holding more than a share of the
    # point's true positives (and more than ``_MIN_UNITS`` rows' weight of them).
    coarse_boxes = vol > max_jump * vol_b
    if max_step_share is not None:
        pos = grid.pos
        unit = float(pos[pos > 0].min()) if pos.any() else 1.0
        step_limit = max(max_step_share * point_tp, _MIN_UNITS * unit)
        coarse_boxes |= tp - _upper_corner(tp) > step_limit
    coarse = candidates & coarse_boxes
    if not coarse.any():
        return Resolution(False, float(value), finer, -np.inf, None, None, float("nan"),
                          tolerance, max_jump)
    masked = np.where(coarse, optimistic, -np.inf)
    flat = int(np.argmax(masked))
    a = np.unravel_index(flat, tp.shape)
    b = tuple(min(i + 1, n - 1) for i, n in zip(a, tp.shape, strict=True))
    coarse_bound = float(masked.flat[flat])
    jump = float(vol[a] / vol_b[a]) if vol_b[a] > 0 else float("inf")
    limited = coarse_bound - value > tolerance * abs(value) and coarse_bound > value
    return Resolution(bool(limited), float(value), finer, coarse_bound,
                      grid.threshold_values([int(i) for i in a]), grid.threshold_values(b), jump,
                      tolerance, max_jump)

