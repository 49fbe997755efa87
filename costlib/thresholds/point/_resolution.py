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

from costlib.message_text import thresholds_text
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
        The largest ``f̄`` over the coarse boxes that could beat the point (``f̄ > value``);
        ``-inf`` when there is none (a coarse box that cannot beat the point says nothing
        about it, and is not searched for).
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
            f"resolution: between thresholds {thresholds_text(self.box_low)} and "
            f"{thresholds_text(self.box_high)} the flagged "
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


#: Block edge of the first level of the box search is the smallest power of ``_SPLIT`` that
#: leaves at most this many blocks.
_TOP_BLOCKS = 4096
#: Each level of the box search splits a block into ``_SPLIT ** k`` blocks.
_SPLIT = 4


@dataclass(frozen=True)
class _Boxes:
    """Everything a box's bound and tests read, for one grid, rule and setting."""

    tp: NDArray[np.float64]
    fp: NDArray[np.float64]
    vol: NDArray[np.float64]
    unrated: NDArray[np.float64] | None  # None: coverage cannot exclude a box
    objective: Objective
    constraints: Constraints
    total: float
    max_unrated_share: float
    max_jump: float
    step_limit: float | None  # positives one box may hold before it is coarse (None: off)

    def _values(self, tp: NDArray[np.float64], fp: NDArray[np.float64]) -> NDArray[np.float64]:
        return self.objective.values(tp, fp, self.total)

    def scan(self) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
        """``f̄`` at every box, which boxes are candidates, which are coarse (every cell)."""
        fp_b, vol_b = _upper_corner(self.fp), _upper_corner(self.vol)
        unr_b = None if self.unrated is None else _upper_corner(self.unrated)
        return self._tests(self.tp, fp_b, self.vol, vol_b,
                           None if self.step_limit is None else _upper_corner(self.tp), unr_b)

    def cells(self, flat_a: NDArray[np.intp], flat_b: NDArray[np.intp]
              ) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
        """What :meth:`scan` gives, at the boxes with lower corners ``flat_a`` (flat indices)
        and upper corners ``flat_b``: elementwise the same arithmetic, so the same values."""
        tp, fp, vol = self.tp.ravel(), self.fp.ravel(), self.vol.ravel()
        unr_b = None if self.unrated is None else self.unrated.ravel()[flat_b]
        tp_b = None if self.step_limit is None else tp[flat_b]
        return self._tests(tp[flat_a], fp[flat_b], vol[flat_a], vol[flat_b], tp_b, unr_b)

    def _tests(self, tp: NDArray[np.float64], fp_b: NDArray[np.float64],
               vol: NDArray[np.float64], vol_b: NDArray[np.float64],
               tp_b: NDArray[np.float64] | None, unr_b: NDArray[np.float64] | None
               ) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.bool_]]:
        optimistic = self._values(tp, fp_b)
        candidates = vol > vol_b  # boxes whose corners differ
        # TP(a), FP(b), V(b): optimistic for every constraint (a recall floor uses TP(a)).
        if self.constraints.active:
            candidates &= self.constraints.satisfied(tp, fp_b, vol_b)
        cap = self.objective.volume_cap
        if cap is not None:
            candidates &= vol_b <= cap
        if unr_b is not None:
            candidates &= unr_b <= self.max_unrated_share * vol
        # Coarse: the volume jumps; optionally also a box holding more than a share of the
        # point's true positives (and more than ``_MIN_UNITS`` rows' weight of them).
        coarse = vol > self.max_jump * vol_b
        if tp_b is not None:
            assert self.step_limit is not None
            coarse |= tp - tp_b > self.step_limit
        return optimistic, candidates, candidates & coarse

    def bounds(self, flat_lo: NDArray[np.intp], flat_hi: NDArray[np.intp]
               ) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
        """For blocks of boxes with lower corners between ``lo`` and ``hi`` (whose upper corners
        are then between ``lo + 1`` and ``hi``, clipped): no box in the block has a larger
        ``f̄`` than the first array, and none can be coarse where the second is False.

        Counts and volume never rise with a threshold, so ``TP(a) <= TP(lo)``,
        ``FP(b) >= FP(hi)``, ``V(a) <= V(lo)`` and ``V(b) >= V(hi)`` in the block.
        """
        tp, fp, vol = self.tp.ravel(), self.fp.ravel(), self.vol.ravel()
        tp_lo, vol_lo, vol_hi = tp[flat_lo], vol[flat_lo], vol[flat_hi]
        coarse = vol_lo > self.max_jump * vol_hi
        if self.step_limit is not None:
            coarse |= tp_lo - tp[flat_hi] > self.step_limit
        return self._values(tp_lo, fp[flat_hi]), coarse


def _best_boxes(boxes: _Boxes, value: float, slack: float
                ) -> tuple[float, float, int | None]:
    """``(finer, coarse_bound, flat index of the coarse box attaining it)`` as a scan of every
    box gives them, by branch and bound over blocks of boxes.

    Blocks of ``s`` boxes per axis are bounded from their corners (:meth:`_Boxes.bounds`),
    split ``_SPLIT`` ways per axis down to single boxes, and dropped when no box in them can
    matter: their bound is below the best candidate box found so far (or ``value``), and
    none of them can be coarse or their bound is below the best coarse box found so far.
    ``slack`` absorbs rounding where the objective's arithmetic is not monotone (F-beta).
    Every box tying with the best coarse box is read, so the first in flat order wins as
    with :func:`numpy.argmax`.
    """
    shape = boxes.tp.shape
    k = len(shape)
    top = np.array(shape, dtype=np.intp) - 1
    size = 1
    while np.prod([-(-n // size) for n in shape]) > _TOP_BLOCKS:
        size *= _SPLIT
    lo = np.stack([g.ravel() for g in np.meshgrid(*[np.arange(0, n, size) for n in shape],
                                                  indexing="ij")], axis=1).astype(np.intp)
    step = np.stack([g.ravel() for g in np.meshgrid(*[np.arange(_SPLIT)] * k, indexing="ij")],
                    axis=1).astype(np.intp)
    finer = coarse_best = value  # a coarse box counts only when it could beat the point
    while True:
        flat_lo = np.ravel_multi_index(tuple(lo.T), shape)
        # The box at each block's lower corner is one of the boxes: what it reaches is a
        # lower bound of both maxima.
        flat_b = np.ravel_multi_index(tuple(np.minimum(lo + 1, top).T), shape)
        optimistic, candidates, coarse = boxes.cells(flat_lo, flat_b)
        finer = max(finer, float(np.max(optimistic, where=candidates, initial=-np.inf)))
        coarse_best = max(coarse_best, float(np.max(optimistic, where=coarse, initial=-np.inf)))
        if size == 1:
            break
        flat_hi = np.ravel_multi_index(tuple(np.minimum(lo + size, top).T), shape)
        bound, may_be_coarse = boxes.bounds(flat_lo, flat_hi)
        keep = (bound >= finer - slack) | (may_be_coarse & (bound >= coarse_best - slack))
        size //= _SPLIT
        lo = (lo[keep][:, None, :] + size * step[None, :, :]).reshape(-1, k)
        lo = lo[(lo <= top).all(axis=1)]
    if not coarse_best > value:
        return finer, -np.inf, None
    return finer, coarse_best, int(np.min(flat_lo[coarse & (optimistic == coarse_best)]))


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

    Notes
    -----
    The objectives rise with TP and fall with FP, and counts never rise with a threshold, so a
    block of boxes is bounded by ``f̄`` at its outer corners; blocks that cannot reach the
    point's value, or a coarse box already found, are never read cell by cell. The result is
    the one a scan of every box gives; a linear objective with a negative slope, or a value
    that is not finite, is scanned.
    """
    if not (tolerance >= 0 and max_jump > 1):
        raise ValueError(f"need tolerance >= 0 and max_jump > 1, got {tolerance}, {max_jump}")
    rule = check_rule(rule)
    constraints = constraints or Constraints()
    tp, fp = grid.counts(rule)
    step_limit = None
    if max_step_share is not None:
        pos = grid.pos
        unit = float(pos[pos > 0].min()) if pos.any() else 1.0
        step_limit = max(max_step_share * point_tp, _MIN_UNITS * unit)
    unrated = (grid.unrated_counts(rule) if grid.has_unrated and max_unrated_share < 1
               else None)
    boxes = _Boxes(tp, fp, grid.volume(rule), unrated, objective, constraints,
                   grid.total_positives, max_unrated_share, max_jump, step_limit)
    if objective.monotone and np.isfinite(value):
        # F-beta's quotient may round a step against its order; its values lie in [0, 1].
        slack = objective.rounding_slack
        finer, coarse_bound, flat = _best_boxes(boxes, float(value), slack)
    else:
        finer, coarse_bound, flat = _scanned(boxes, value)
    if flat is None:
        return Resolution(False, float(value), finer, -np.inf, None, None, float("nan"),
                          tolerance, max_jump)
    a = np.unravel_index(flat, tp.shape)
    b = tuple(min(i + 1, n - 1) for i, n in zip(a, tp.shape, strict=True))
    vol = boxes.vol
    jump = float(vol[a] / vol[b]) if vol[b] > 0 else float("inf")
    limited = coarse_bound - value > tolerance * abs(value) and coarse_bound > value
    return Resolution(bool(limited), float(value), finer, coarse_bound,
                      grid.threshold_values([int(i) for i in a]), grid.threshold_values(b), jump,
                      tolerance, max_jump)


def _scanned(boxes: _Boxes, value: float) -> tuple[float, float, int | None]:
    """What :func:`_best_boxes` finds, from every box at once."""
    optimistic, candidates, coarse = boxes.scan()
    finer = max(float(np.max(optimistic, where=candidates, initial=-np.inf)), float(value))
    coarse &= optimistic > value  # only a coarse box that could beat the point counts
    if not coarse.any():
        return finer, -np.inf, None
    masked = np.where(coarse, optimistic, -np.inf)
    flat = int(np.argmax(masked))
    return finer, float(masked.flat[flat]), flat
