"""The census of the thresholds in force: undo a move that turned out bad, refuse one it refutes.

A move of the evidence rule (:func:`costlib.thresholds.loop._move_evidence.lower_bound_move`) into
a region below the thresholds in force rests on audit rows weighted ``1/π``. It is taken when
their Horvitz–Thompson estimate is high, so it is taken most often when that estimate is too
high (the winner's curse), and the rows that made it high stay in the recalibration window
for as long as the window lasts. Once the move is published, the region is flagged, and every
row of it is rated with certainty (``π = 1``): a *census*, free of design variance and of the
selection that made the move (the decision to flag a day's rows was made before their labels
existed). The grid keeps those rows apart (:attr:`~costlib.thresholds.ThresholdGrid.census`).

With ``f`` the thresholds in force and ``c`` another cell of the lattice, the census gain of
moving from ``f`` to ``c`` is

.. math:: G(c) = O_{cen}(c) - O_{cen}(f), \\quad O_{cen} = TP_{cen} - r\\, FP_{cen},

the linear objective over the census rows only (the rows both cells flag cancel). Its
variance is that of a sum over the rows flagged by exactly one of the two cells, ``D(c, f)``
(:func:`costlib.thresholds.grid._lattice_regions.flagged_by_one`):

.. math:: \\widehat{Var}(c) = \\max\\Big(\\sum_{D} w^2 [y] + r^2 \\sum_{D} w^2 [\\lnot y],\\;
          r \\sum_{D} w^2\\Big).

The first term is the Poisson (bootstrap) variance of the observed rows; the second the
variance of the same rows if the region were at break-even (precision ``r / (1 + r)``, each
row ``+1`` or ``-r`` with variance ``r``): a region of ``n`` negatives and no positive has
observed variance ``r² n`` but is only evidence of a loss once ``r n > z sqrt(r n)``, i.e.
``n > z² / r`` rows (11 at the default ``z`` and ``r = 1/4``), not at 3.

Two rules use it, with the evidence rule's ``z``:

- **undo**: when the thresholds in force are kept, every cell ``c >= f`` (coordinatewise: it
  flags a subset of what ``f`` flags, for rule ``any`` and ``all`` alike) that is covered and
  meets the constraints on the run's grid is a candidate; if the best census lower bound
  ``G(c) - z sqrt(Var(c))`` is positive, ``c`` is published (ties: the smallest change of
  flagged volume). The rows ``f`` flags beyond ``c`` lost on their census.
- **veto**: a move to ``c`` whose census gain is below 0 by more than ``z`` standard errors
  (the census of the region it would flag, or unflag, refutes it) is not taken; the
  thresholds in force are kept and reviewed by the undo rule.

Without census channels (a grid built without audit probabilities, or merged with one) there
is no review.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning._rows import check_rule
from costlib.thresholds.grid._grid import ThresholdGrid, lattice_counts
from costlib.thresholds.grid._lattice_regions import flagged_by_one
from costlib.thresholds.point._decision_spec import DecisionSpec, as_decision_spec

__all__ = ["CensusReview", "census_gains", "census_review"]


@dataclass(frozen=True)
class CensusReview:
    """The outcome of :func:`census_review`.

    Attributes
    ----------
    index : tuple of int or None
        The lattice cell to publish instead of the evidence rule's, or None (no change).
    action : str
        ``"undo"`` (the thresholds in force shrink to ``index``), ``"veto"`` (the move is
        refused: ``index`` is the thresholds in force) or ``""``.
    gain, se : float
        Census gain of ``index`` over the thresholds in force and its standard error (undo),
        or of the refused move (veto).
    rows : float
        Census weight (rated rows) in the region the two cells flag differently.
    """

    index: tuple[int, ...] | None
    action: str = ""
    gain: float = 0.0
    se: float = 0.0
    rows: float = 0.0

    def reason(self) -> str:
        """One line for the record (empty when there was no change)."""
        if self.action == "undo":
            return (f"moved back: the rows the thresholds in force flag beyond this point "
                    f"lost {self.gain:.4g} ± {self.se:.4g} on their census ({self.rows:.4g} "
                    f"rated rows since they were flagged)")
        if self.action == "veto":
            return (f"kept the thresholds in force: the census of the region the move would "
                    f"change refutes it (gain {self.gain:.4g} ± {self.se:.4g}, "
                    f"{self.rows:.4g} rated rows)")
        return ""

    def summary(self) -> dict[str, float | str]:
        """Action, gain, se and rows, for the record's details."""
        return {"action": self.action, "gain": self.gain, "se": self.se, "rows": self.rows}


def census_gains(grid: ThresholdGrid, index: Sequence[int], *, rule: str, slope: float
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]] | None:
    """``(G, se, rows)`` at every cell against ``f = index`` (see the module doc): the census
    gain, its standard error and the census weight of the rows flagged by exactly one of the
    two cells. None when the grid has no census channels."""
    if grid.census is None:
        return None
    rule = check_rule(rule)
    at = tuple(int(i) for i in index)
    neg, pos, neg_sq, pos_sq = (lattice_counts(grid.census[j], rule) for j in range(4))
    objective = pos - slope * neg
    gain = objective - objective[at]
    pos_sq, neg_sq = flagged_by_one(pos_sq, at, rule), flagged_by_one(neg_sq, at, rule)
    observed = pos_sq + slope * slope * neg_sq
    at_break_even = slope * (pos_sq + neg_sq)
    rows = flagged_by_one(pos, at, rule) + flagged_by_one(neg, at, rule)
    return gain, np.sqrt(np.maximum(observed, at_break_even)), rows


def census_review(
    grid: ThresholdGrid,
    in_force: Sequence[int],
    decided: Sequence[int],
    spec: DecisionSpec | None = None,
    *,
    z: float,
    slope: float | None = None,
    **decision: Any,
) -> CensusReview:
    """Review the evidence rule's cell ``decided`` against the census of the thresholds in
    force ``in_force`` (lattice cells of ``grid``; see the module doc).

    Parameters
    ----------
    grid : ThresholdGrid
        The run's grid, with census channels.
    in_force, decided : sequence of int
        Lattice cells of the thresholds in force and of the evidence rule's choice.
    z : float
        Standard errors of evidence, ``z >= 0`` (the evidence rule's).
    spec : DecisionSpec, optional
        The decision (its rule, target slope ``r`` of ``TP - r FP``, coverage and hard
        constraints); without it, ``slope`` (``r``) and ``decision``
        (:meth:`~costlib.thresholds.DecisionSpec.of`'s keyword arguments: ``rule``, ...)
        make one.

    Returns
    -------
    CensusReview
    """
    if not (np.isfinite(z) and z >= 0):
        raise ValueError(f"z must be a finite number >= 0, got {z!r}")
    if spec is None:
        spec = as_decision_spec(None, {"target_slope": slope, **decision})
    elif slope is not None or decision:
        raise TypeError("give a DecisionSpec or its keyword arguments, not both")
    if spec.target is None:
        raise ValueError("the census review needs a target (slope r of TP - r FP)")
    rule = spec.rule
    found = census_gains(grid, in_force, rule=rule, slope=spec.target.slope)
    if found is None:
        return CensusReview(None)
    gain, se, rows = found
    f = tuple(int(i) for i in in_force)
    d = tuple(int(i) for i in decided)
    veto = None
    if d != f:
        if not gain[d] + z * se[d] < 0:
            return CensusReview(None)
        veto = CensusReview(f, "veto", float(gain[d]), float(se[d]), float(rows[d]))
    subset = np.zeros(grid.shape, dtype=bool)  # cells >= f coordinatewise flag a subset
    subset[tuple(slice(i, None) for i in f)] = True
    subset[f] = False
    ok = subset & grid.covered(rule, spec.max_unrated_share)
    constraints = spec.constraints_on(grid)
    if constraints.active and ok.any():
        tp, fp = grid.counts(rule)
        ok &= constraints.satisfied(tp, fp, grid.volume(rule))
    bound = np.where(ok, gain - z * se, -np.inf)
    top = float(bound.max())
    if not top > 0:
        return veto or CensusReview(None)
    tied = np.flatnonzero(bound.ravel() >= top - 1e-9 * max(1.0, abs(top)))
    volume = grid.volume(rule).ravel()
    best = int(tied[np.argmin(np.abs(volume[tied] - volume[np.ravel_multi_index(
        f, grid.shape)]))])
    at = tuple(int(i) for i in np.unravel_index(best, grid.shape))
    return CensusReview(at, "undo", float(gain[at]), float(se[at]), float(rows[at]))
