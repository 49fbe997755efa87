"""What an operating point optimises, and what it must satisfy: objectives and constraints.

Kept apart from the geometry (:mod:`costlib.thresholds.point._frontier`,
:mod:`costlib.thresholds.point._lattice_path`): everything here is a function of the counts at a set
of threshold tuples, ``TP``, ``FP`` and the flagged volume ``V = TP + FP + U``
(:meth:`costlib.thresholds.ThresholdGrid.volume`).

Objectives (maximised)
----------------------
``"linear"`` (default)
    ``TP - r FP`` with the target slope ``r`` (:mod:`costlib.thresholds.point._target`).
``"fbeta"`` (``"f1"`` is ``beta = 1``)
    ``F_beta = (1 + b2) TP / ((1 + b2) TP + b2 (P - TP) + FP)``, ``b2 = beta**2``, with ``P`` the
    total positives. On a grid of rated rows ``P`` is the number of *rated* positives (a lower
    bound of the true total, so the recall term is optimistic); the result says so
    (``total_positives_source="rated"``). Convention (as :mod:`costlib.decoding._losses`): ``F = 1``
    when ``TP = FP = 0`` and ``P = 0``.
``"precision_at_volume"``
    Precision at a fixed review volume ``k``: ``TP / k`` over the tuples with ``V <= k`` (a
    shortfall below ``k`` counts as misses), i.e. the most true positives within the volume.

Constraints (all optional, all must hold)
-----------------------------------------
``min_precision p``: ``TP + FP > 0`` and ``TP >= p (TP + FP)`` (flagging nothing has no
precision, so it does not meet a precision floor); ``max_volume c``: ``V <= c`` (review
capacity, unrated rows included); ``max_false_positives f``: ``FP <= f``; ``min_recall r``:
``TP >= r P`` with ``P`` the total positives the recall is measured against
(``Constraints.total_positives``). :func:`costlib.thresholds.optimize` sets ``P``
to the Horvitz–Thompson estimate ``P̂`` (the grid's positive weight) and refuses ``min_recall`` on a
grid without audit rows: there the rated positives are only those the thresholds in force
flagged, so ``P`` and hence recall are unknown (:mod:`costlib.audit._weights`). With
``P = 0`` every tuple meets the floor (there is no positive to miss).

Infeasibility and "nearest"
---------------------------
Constraints are *infeasible* on a candidate set when no covered tuple that flags something
(``V > 0``) meets them all (the all-off tuple always meets ``max_volume`` and
``max_false_positives`` but answers nothing). The point returned then is the *nearest*: among
covered tuples with ``V > 0``, the smallest largest relative violation

.. math:: \\max\\Big(\\frac{(p - \\mathrm{prec})^+}{p},\\;
          \\frac{(V - c)^+}{\\max(c, 1)},\\; \\frac{(FP - f)^+}{\\max(f, 1)},\\;
          \\frac{(r - \\mathrm{recall})^+}{r}\\Big),

with ``recall = TP / P`` (the last term is computed as ``(r P - TP)^+ / (r P)``, zero exactly
where the floor holds, and 0 when ``P = 0``),

ties broken by the objective, then by the tie rules of :mod:`costlib.thresholds.point._frontier`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from costlib._messages import plain
from costlib.bounds import BOUNDS
from costlib.thresholds.point._frontier import tie_break
from costlib.thresholds.point._objective_registry import Objective, objective_names

__all__ = ["OBJECTIVES", "Constraints", "Objective", "Selection", "select"]

#: The objectives built in (:func:`~costlib.thresholds.point._objective_registry.objective_names`
#: lists those registered since too).
OBJECTIVES = objective_names()


@dataclass(frozen=True)
class Constraints:
    """Constraints a chosen tuple must meet (``None`` = not constrained).

    ``total_positives`` is ``P`` of ``min_recall`` (not a constraint itself): needed by
    :meth:`satisfied` and :meth:`violations` when ``min_recall`` is set.
    """

    min_precision: float | None = None
    max_volume: float | None = None
    max_false_positives: float | None = None
    min_recall: float | None = None
    total_positives: float | None = None

    def __post_init__(self) -> None:
        for name in ("min_precision", "min_recall"):
            p = getattr(self, name)
            if p is not None:
                BOUNDS[f"constraints.{name}"].check(name, p)
        total = self.total_positives
        if total is not None and not (total >= 0 and math.isfinite(total)):
            raise ValueError(f"total_positives must be finite and >= 0, got {plain(total)}")
        for name in ("max_volume", "max_false_positives"):
            v = getattr(self, name)
            bound = BOUNDS[f"constraints.{name}"]
            if v is not None and v not in bound:
                raise ValueError(f"{name} must be finite and {bound.text()}, got {plain(v)}")

    @property
    def active(self) -> bool:
        return any(v is not None for v in self.as_dict().values())

    def as_dict(self) -> dict[str, float | None]:
        return {
            "min_precision": self.min_precision,
            "max_volume": self.max_volume,
            "max_false_positives": self.max_false_positives,
            "min_recall": self.min_recall,
        }

    def _recall_floor(self) -> float:
        """``r P`` of ``min_recall`` (which must be set)."""
        assert self.min_recall is not None
        if self.total_positives is None:
            raise ValueError("min_recall needs total_positives P (the positives recall is "
                             "measured against)")
        return self.min_recall * self.total_positives

    def satisfied(
        self, tp: NDArray[np.float64], fp: NDArray[np.float64], vol: NDArray[np.float64]
    ) -> NDArray[np.bool_]:
        """Where every constraint holds."""
        ok = np.ones(np.shape(tp), dtype=bool)
        if self.min_precision is not None:
            rated = tp + fp
            ok &= (rated > 0) & (tp >= self.min_precision * rated)
        if self.max_volume is not None:
            ok &= vol <= self.max_volume
        if self.max_false_positives is not None:
            ok &= fp <= self.max_false_positives
        if self.min_recall is not None:
            ok &= tp >= self._recall_floor()
        return ok

    def violations(
        self, tp: NDArray[np.float64], fp: NDArray[np.float64], vol: NDArray[np.float64]
    ) -> dict[str, NDArray[np.float64]]:
        """Relative violation of each active constraint (0 where it holds)."""
        out = {}
        if self.min_precision is not None:
            rated = tp + fp
            prec = np.zeros(np.shape(tp))
            np.divide(tp, rated, out=prec, where=rated > 0)
            out["min_precision"] = np.maximum(self.min_precision - prec, 0.0) / self.min_precision
        if self.max_volume is not None:
            out["max_volume"] = np.maximum(vol - self.max_volume, 0.0) / max(self.max_volume, 1.0)
        if self.max_false_positives is not None:
            cap = self.max_false_positives
            out["max_false_positives"] = np.maximum(fp - cap, 0.0) / max(cap, 1.0)
        if self.min_recall is not None:
            floor = self._recall_floor()  # r P; (r P - TP)^+ / (r P) = (r - recall)^+ / r
            short = np.maximum(floor - tp, 0.0)
            out["min_recall"] = short / floor if floor > 0 else np.zeros(np.shape(tp))
        return out


@dataclass(frozen=True)
class Selection:
    """Outcome of :func:`select` (positions index the candidate arrays).

    ``status`` is ``"ok"``, ``"coverage_limited"`` (a strictly better tuple meeting every
    constraint exists among the candidates, but not covered: it is ``unrestricted``) or
    ``"infeasible"`` (``position`` is the nearest tuple, ``violated`` names what it misses).
    """

    position: int
    status: str
    unrestricted: int | None
    violated: tuple[str, ...] = ()


def _best(
    values: NDArray[np.float64],
    mask: NDArray[np.bool_],
    fp: NDArray[np.float64],
    tp: NDArray[np.float64],
) -> int | None:
    if not mask.any():
        return None
    masked = np.where(mask, values, -np.inf)
    top = masked.max()
    return tie_break(np.flatnonzero(mask & (masked == top)), fp, tp)


def _best_of(
    cells: NDArray[np.intp],
    objective: Objective,
    tp: NDArray[np.float64],
    fp: NDArray[np.float64],
    total_positives: float,
) -> tuple[int | None, float]:
    """Best of the given candidate positions (objective evaluated on them only)."""
    if cells.size == 0:
        return None, -np.inf
    values = objective.values(tp[cells], fp[cells], total_positives)
    top = values.max()
    return tie_break(cells[values == top], fp, tp), float(top)


def select(
    tp: NDArray[np.float64],
    fp: NDArray[np.float64],
    vol: NDArray[np.float64],
    covered: NDArray[np.bool_] | None,
    objective: Objective,
    constraints: Constraints,
    total_positives: float,
) -> Selection:
    """The best covered candidate meeting every constraint (1-D candidate arrays).

    Parameters
    ----------
    tp, fp, vol : ndarray of shape (m,)
        Counts of the candidates (e.g. the cells of a path, or every cell flattened).
    covered : ndarray of bool or None
        Coverage of each candidate; ``None`` means all covered.
    objective, constraints : see the module docstring.
    total_positives : float
        ``P`` for F-beta.

    Notes
    -----
    Ties among equally good candidates: fewest FP, fewest TP, first position. The objective
    is evaluated only on candidates that meet the constraints.
    """
    cap = objective.volume_cap
    needs_answer = constraints.active or cap is not None
    if needs_answer:
        meets = constraints.satisfied(tp, fp, vol)
        if cap is not None:
            meets &= vol <= cap
        feasible_here = meets if covered is None else meets & covered
        feasible: NDArray[np.bool_] | None = feasible_here
        if not (feasible_here & (vol > 0)).any():
            values = objective.values(tp, fp, total_positives)
            return _nearest(tp, fp, vol, covered, values, objective, constraints)
    else:
        meets = None
        feasible = covered
    cells = np.arange(tp.size) if feasible is None else np.flatnonzero(feasible)
    best, best_value = _best_of(cells, objective, tp, fp, total_positives)
    if best is None:  # no covered candidate at all (cannot happen: all-off is covered)
        values = objective.values(tp, fp, total_positives)
        return _nearest(tp, fp, vol, covered, values, objective, constraints)
    if covered is None or covered.all():
        return Selection(position=best, status="ok", unrestricted=None)
    outside = ~covered if meets is None else meets & ~covered
    free, free_value = _best_of(np.flatnonzero(outside), objective, tp, fp, total_positives)
    if free is not None and free_value > best_value:
        return Selection(position=best, status="coverage_limited", unrestricted=free)
    return Selection(position=best, status="ok", unrestricted=None)


def _nearest(
    tp: NDArray[np.float64],
    fp: NDArray[np.float64],
    vol: NDArray[np.float64],
    covered: NDArray[np.bool_] | None,
    values: NDArray[np.float64],
    objective: Objective,
    constraints: Constraints,
) -> Selection:
    cons = constraints
    cap = objective.volume_cap
    if cap is not None:
        cons = dataclasses.replace(cons, max_volume=cap if cons.max_volume is None
                                   else min(cons.max_volume, cap))
    violations = cons.violations(tp, fp, vol)
    worst = np.max(np.stack(list(violations.values())), axis=0)
    pool = (vol > 0) if covered is None else (vol > 0) & covered
    if not pool.any():  # nothing covered flags anything: only the all-off tuple remains
        pool = np.ones(tp.shape, dtype=bool) if covered is None else covered
    least = worst[pool].min()
    near = pool & (worst == least)
    position = _best(values, near, fp, tp)
    assert position is not None  # the pool is never empty
    violated = tuple(name for name, v in violations.items() if v[position] > 0)
    return Selection(position=position, status="infeasible", unrestricted=None,
                     violated=violated)
