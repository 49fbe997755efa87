"""Is moving away from the thresholds in force supported by the data? (hysteresis for a loop)

A scheduled recalibration re-optimises every run. On noisy estimates (few rated rows, or audit
rows weighted by ``1/π``) the optimum of the run's grid wanders from run to run although the
best thresholds have not changed, and every wander costs utility on the next day: the optimum of
a noisy grid is biased towards points whose estimate happens to be high (the winner's curse).

The rule here moves only on evidence. With ``t₀`` the thresholds in force and ``t*`` the point
the method chose, the estimated gain of moving is

.. math:: \\hat\\Delta = \\hat O(t^*) - \\hat O(t_0),

where ``Ô`` is the objective on the run's grid (``TP - r FP`` for the linear objective). Its
standard error comes from the Poisson-bootstrap replicate grids
(:mod:`costlib.thresholds.loop._bootstrap`), evaluated at the *same two points* in every replicate:
``se = sd_b(Ô_b(t*) - Ô_b(t₀))``. The run moves when ``Δ̂ > z · se`` and keeps ``t₀``
otherwise. The replicates' variance covers the audit's Horvitz–Thompson sampling variance and
the population's own variation, so a move supported by a handful of heavily weighted audit rows
needs a larger gain than one supported by thousands of flagged rows. ``z = 0`` moves on any
positive estimated gain (ties keep ``t₀``); larger ``z`` moves more reluctantly.

The chosen point is selected on the same grid, so ``Δ̂`` is optimistic; the rule does not
correct that bias, it only refuses moves that the noise alone could explain.

**Constraints come first.** Keeping ``t₀`` is only an option when ``t₀`` meets the hard
constraints of the run (``min_precision``, ``max_volume``, ``max_false_positives``,
``min_recall``) on the run's grid, as the method's point had to (:func:`kept_violations`).
When it does not, the point in force is no candidate: the method's point is published (a gain
below 0 is then the price of the constraint), with a reason naming what ``t₀`` violates. The
coverage rule is not such a constraint, and a point in force whose flagged rows are still
unrated (a rating backlog) is not judged at all: its TP and FP say nothing yet, and it may be
kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning._rows import DESIGN_EXPECTED_SCALE, check_rule
from costlib.thresholds.grid._grid import ThresholdGrid, lattice_counts
from costlib.thresholds.grid._lattice_regions import flagged_by_one, one_sided
from costlib.thresholds.loop._bootstrap import BootstrapGrids
from costlib.thresholds.loop._census_review import CensusReview, census_review
from costlib.thresholds.point._decision_spec import DecisionSpec, as_decision_spec
from costlib.thresholds.point._operating_point import OperatingPoint, point_at

__all__ = [
    "DEFAULT_EVIDENCE_Z",
    "DEFAULT_UNSEEN_ROWS",
    "LowerBoundMove",
    "MoveEvidence",
    "gain_standard_errors",
    "kept_violations",
    "lower_bound_move",
    "move_evidence",
    "one_row_weight",
    "one_row_weights",
    "segment_cells",
    "unseen_variance",
]

#: A one-sided 95% lower confidence bound: the default of ``in_force.evidence_z``
#: (:func:`lower_bound_move`, on whenever a grid carries audit weights).
DEFAULT_EVIDENCE_Z = 1.645

#: Pseudo-rows ``κ`` of the unseen-region term of :func:`gain_standard_errors`: a region is
#: credited with the variance of one more audited row than it holds (capped at its worst case).
DEFAULT_UNSEEN_ROWS = 1.0


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
    forced : tuple of str
        The hard constraints the thresholds in force violate on the run's grid
        (:func:`kept_violations`); when any, ``move`` is True whatever the gain.
    """

    gain: float
    se: float
    z: float
    move: bool
    kept: OperatingPoint
    forced: tuple[str, ...] = ()

    def reason(self) -> str:
        """One line for the record when the thresholds in force are kept (or, ``forced``,
        could not be: the constraints they violate)."""
        if self.forced:
            return forced_reason(self.forced)
        return (f"kept the thresholds in force: moving to the optimum would gain "
                f"{self.gain:.4g} ± {self.se:.4g} (bootstrap se), not more than z = {self.z:g} "
                f"standard errors")


def kept_violations(grid: ThresholdGrid, index: Sequence[int],
                    spec: DecisionSpec | None = None, **decision: Any) -> tuple[str, ...]:
    """The hard constraints of ``spec`` (or of :meth:`~costlib.thresholds.DecisionSpec.of`'s
    keyword arguments ``decision``) that the lattice cell ``index`` (the thresholds in force)
    violates on ``grid``: names of ``min_precision``, ``max_volume``,
    ``max_false_positives``, ``min_recall`` (empty: it may be kept).

    Judged as the optimiser judges a candidate (:meth:`Constraints.satisfied`), and only on
    evidence: a point in force whose flagged rows are not covered by ratings (more unrated
    weight than ``max_unrated_share`` allows: a rating backlog) has TP and FP counts that say
    nothing about its precision or recall, so it is not judged (it may be kept); nor is
    ``min_precision`` at a point with no rated row."""
    spec = as_decision_spec(spec, decision)
    constraints = spec.constraints_on(grid)
    if not constraints.active:
        return ()
    rule = spec.rule
    at = tuple(int(i) for i in index)
    if not bool(grid.covered(rule, spec.max_unrated_share)[at]):
        return ()
    tp, fp = grid.counts(rule)
    volume = grid.volume(rule)
    one = (np.atleast_1d(tp[at]), np.atleast_1d(fp[at]), np.atleast_1d(volume[at]))
    if tp[at] + fp[at] <= 0 and constraints.min_precision is not None:
        constraints = replace(constraints, min_precision=None)
    if not constraints.active or bool(constraints.satisfied(*one)[0]):
        return ()
    named = tuple(name for name, v in constraints.violations(*one).items() if v[0] > 0)
    return named or tuple(k for k, v in constraints.as_dict().items() if v is not None)


def constraint_names(violated: Sequence[str]) -> str:
    """``constraints.min_recall, constraints.max_volume``: the config keys of ``violated``."""
    return ", ".join(f"constraints.{v}" for v in violated)


def forced_reason(violated: Sequence[str]) -> str:
    """The record's reason when the point in force could not be kept."""
    return (f"moved without the evidence rule: the thresholds in force violate "
            f"{constraint_names(violated)} on this run's grid")


def move_evidence(
    grid: ThresholdGrid,
    bootstrap: BootstrapGrids,
    chosen: OperatingPoint,
    in_force: Sequence[float],
    spec: DecisionSpec | None = None,
    *,
    z: float,
    method: str,
    **decision: Any,
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
    spec : DecisionSpec, optional
        The decision ``chosen`` was optimised for (or its keyword arguments ``decision``).
    method : str
        As for :func:`costlib.thresholds.point_at`.

    Returns
    -------
    MoveEvidence
    """
    if not (np.isfinite(z) and z >= 0):
        raise ValueError(f"z must be a finite number >= 0, got {z!r}")
    if bootstrap.n_replicates < 2:
        raise ValueError(f"need at least 2 bootstrap replicates, got {bootstrap.n_replicates}")
    spec = as_decision_spec(spec, decision)
    kept = point_at(grid, in_force, spec, method=method)
    gain = float(chosen.objective - kept.objective)
    if tuple(kept.index) == tuple(chosen.index):
        return MoveEvidence(gain=0.0, se=0.0, z=float(z), move=False, kept=kept)
    violated = kept_violations(grid, kept.index, spec)
    if violated:
        return MoveEvidence(gain=gain, se=float("nan"), z=float(z), move=True, kept=kept,
                            forced=violated)
    diffs = np.empty(bootstrap.n_replicates)
    for r in range(bootstrap.n_replicates):
        replicate = bootstrap.replicate(r)
        diffs[r] = (point_at(replicate, chosen.thresholds, spec, method=method).objective
                    - point_at(replicate, kept.thresholds, spec, method=method).objective)
    se = float(np.std(diffs, ddof=1))
    return MoveEvidence(gain=gain, se=se, z=float(z), move=bool(gain > 0 and gain > z * se),
                        kept=kept)


def unseen_variance(grid: ThresholdGrid, index: Sequence[int], *, rule: str, slope: float,
                    unseen_rows: float = DEFAULT_UNSEEN_ROWS) -> NDArray[np.float64]:
    """Variance the Horvitz–Thompson estimate cannot see: rows of a region that the audit did
    not sample, at every cell ``c`` against the tuple ``f = index``.

    The variance estimate ``sum (1 - π)(w/π)²`` over *audited* rows is unbiased but skewed:
    a region of ``N`` unflagged rows at inclusion probability ``π`` in which no row was
    audited (probability ``(1 - π)^N``) has estimate 0 *and* variance estimate 0, so moving
    into it looks free and certain. From the grid's design channels
    (:attr:`~costlib.thresholds.ThresholdGrid.design`) the two one-sided regions
    ``R ∈ {c \\ f, f \\ c}`` have ``W(R) = sum_{i∈R, π_i<1} w_i² (1 - π_i)/π_i`` (the variance
    of the region's estimated count if *every* row carried one label: the largest possible)
    and ``A(R) = sum_{i∈R, π_i<1} π_i`` (the expected number of audited rows). One audited
    row drawn from ``R``'s design adds ``W(R)/A(R)`` to the variance in expectation (for a
    single probability ``π``: ``(1 - π)/π²``, the square of the row's weight ``1/π``, less
    its own share). The term credits each region with ``κ`` such rows more than it holds, a
    Poisson-style upper correction (``κ = 1``: the number of unseen rows whose chance of all
    staying unsampled is ``e^{-1}``), capped at the region's worst case:

    .. math:: U(c, f) = \\max(1, r^2) \\sum_R W(R) \\frac{\\kappa}{\\max(A(R), \\kappa)}.

    A region where fewer than ``κ`` audited rows were expected counts with its full worst-case
    variance ``W(R)`` (it is unknown); a well-audited region with one row's worth, small next
    to the estimate of its ``n`` audited rows. ``max(1, r²)``: the unseen row has the label
    with the larger coefficient in the gain ``TP - r FP``. Rows flagged by the thresholds in
    force (``π = 1``) add nothing. Mixing strata in one region uses their mean weight ``W/A``.
    Zeros when the grid has no design channels or ``κ = 0``.
    """
    if grid.design is None or unseen_rows == 0:
        return np.zeros(grid.shape)
    if not (np.isfinite(unseen_rows) and unseen_rows > 0):
        raise ValueError(f"unseen_rows must be a finite number >= 0, got {unseen_rows!r}")

    rule = check_rule(rule)
    worst = one_sided(lattice_counts(grid.design[0], rule), index, rule)
    expected = one_sided(lattice_counts(grid.design[1] / DESIGN_EXPECTED_SCALE, rule), index,
                          rule)
    total = np.zeros(grid.shape)
    for w, a in zip(worst, expected, strict=True):
        total += w * unseen_rows / np.maximum(a, unseen_rows)
    return max(1.0, slope * slope) * total


def one_row_weights(grid: ThresholdGrid, index: Sequence[int], *, rule: str
                    ) -> NDArray[np.float64]:
    """:func:`one_row_weight` at every cell of the lattice (zeros without design channels)."""
    if grid.design is None:
        return np.zeros(grid.shape)
    rule = check_rule(rule)
    w = one_sided(lattice_counts(grid.design[0], rule), index, rule)[0]
    a = one_sided(lattice_counts(grid.design[1], rule), index, rule)[0] / DESIGN_EXPECTED_SCALE
    out = np.zeros(grid.shape)
    np.divide(w, a, out=out, where=a > 0)
    return np.sqrt(out)


def one_row_weight(grid: ThresholdGrid, index: Sequence[int], cell: Sequence[int], *,
                   rule: str) -> float:
    """The mean Horvitz–Thompson weight of one audited row in the region that ``cell`` flags
    and ``index`` does not: ``sqrt(W / A)`` of that region (for one probability ``π``,
    ``sqrt(1 - π)/π``), i.e. how much one audited row there moves the estimated TP or FP.
    0 without design channels or when the region holds no audit-eligible row."""
    return float(one_row_weights(grid, index, rule=rule)[tuple(int(i) for i in cell)])


def gain_standard_errors(grid: ThresholdGrid, index: Sequence[int], *, rule: str,
                         slope: float, unseen_rows: float = 0.0) -> NDArray[np.float64]:
    """Design standard error of the estimated gain ``Ô(c) - Ô(f)`` of every cell ``c`` against
    the tuple ``f = index``, for the linear objective ``TP - r FP`` (``r = slope``).

    The two tuples' estimates share the rows both flag; the difference is a Horvitz–Thompson
    sum over the rows flagged by exactly one of them, positives with coefficient ``±1`` and
    negatives ``∓r``. Its variance estimate
    (:func:`costlib.thresholds.binning._rows.ht_variance_weights`) is

    .. math:: \\widehat{Var} = D_+(c, f) + r^2 D_-(c, f), \\quad
              D(c, f) = X(c) + X(f) - 2 X(c \\wedge f),

    with ``X`` the lattice sums of the grid's variance channel
    (:attr:`~costlib.thresholds.grid._grid.
    ThresholdGrid.variance`). With ``unseen_rows = κ > 0`` the unseen-region term
    :func:`unseen_variance` is added (what :func:`lower_bound_move` uses). Zero everywhere
    when the grid has no variance channel (no audit rows: every rated row was rated with
    certainty).
    """
    if grid.variance is None:
        return np.zeros(grid.shape)

    rule = check_rule(rule)
    total = np.zeros(grid.shape)
    for channel, coefficient in ((1, 1.0), (0, slope * slope)):
        total += coefficient * flagged_by_one(lattice_counts(grid.variance[channel], rule),
                                              index, rule)
    if unseen_rows:
        total += unseen_variance(grid, index, rule=rule, slope=slope, unseen_rows=unseen_rows)
    return np.sqrt(total)


def segment_cells(start: Sequence[int], end: Sequence[int]) -> NDArray[np.intp]:
    """The lattice cells of the straight segment from cell ``start`` to cell ``end``, both
    included: ``round(start + λ (end - start))`` for ``m = max_j |end_j - start_j| + 1``
    evenly spaced ``λ ∈ [0, 1]``, so that the coordinate that moves most takes every step
    and the others move proportionally (shape ``(m, k)``)."""
    a = np.asarray(start, dtype=np.float64)
    b = np.asarray(end, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"start {a.shape} and end {b.shape} need the same (k,) shape")
    steps = int(np.abs(b - a).max()) + 1
    return np.rint(a + np.linspace(0.0, 1.0, steps)[:, None] * (b - a)).astype(np.intp)


@dataclass(frozen=True)
class LowerBoundMove:
    """The outcome of :func:`lower_bound_move`.

    Attributes
    ----------
    point : OperatingPoint
        What to publish: the thresholds in force (kept), the method's point, or the candidate
        of the method's curve with the best lower confidence bound of the gain.
    move : bool
        Whether ``point`` differs from the thresholds in force.
    gain, se : float
        Estimated gain of ``point`` over the thresholds in force, and its standard error.
    optimum_gain, optimum_se : float
        The same for the method's own point.
    z : float
    """

    point: OperatingPoint
    move: bool
    gain: float
    se: float
    optimum_gain: float
    optimum_se: float
    z: float
    one_row: float = 0.0
    forced: tuple[str, ...] = ()
    census: CensusReview | None = None

    def reason(self) -> str:
        """One line for the record (empty when the method's own point was taken on evidence;
        ``forced``: the constraints the thresholds in force violate; ``census``: the census
        review changed the evidence rule's point)."""
        if self.forced:
            return forced_reason(self.forced)
        if self.census is not None:
            return self.census.reason()
        if not self.move:
            return (f"kept the thresholds in force: the method's point would gain "
                    f"{self.optimum_gain:.4g} ± {self.optimum_se:.4g} (audit design se), and no "
                    f"point of its curve gains more than z = {self.z:g} standard errors"
                    + (f" and one audited row ({self.one_row:.4g})" if self.one_row else ""))
        if self.gain != self.optimum_gain or self.se != self.optimum_se:
            return (f"moved part way: the method's point would gain {self.optimum_gain:.4g} ± "
                    f"{self.optimum_se:.4g} (audit design se); this one {self.gain:.4g} ± "
                    f"{self.se:.4g} has the best lower bound at z = {self.z:g}")
        return ""

    def summary(self) -> dict[str, Any]:
        """Gain and se of the point taken and of the method's point, ``z``, ``one_row``:
        the weight of one audited row in the region the method's point newly flags
        (:func:`one_row_weight`), and ``census``: the census review's action, when it
        changed the point (:mod:`costlib.thresholds.loop._census_review`)."""
        out: dict[str, Any] = {"gain": self.gain, "se": self.se,
                               "optimum_gain": self.optimum_gain,
                               "optimum_se": self.optimum_se, "z": self.z,
                               "one_row": self.one_row}
        if self.census is not None:
            out["census"] = self.census.summary()
        return out


def lower_bound_move(
    grid: ThresholdGrid,
    chosen: OperatingPoint,
    in_force: Sequence[float],
    spec: DecisionSpec | None = None,
    *,
    z: float,
    method: str,
    unseen_rows: float = DEFAULT_UNSEEN_ROWS,
    census: bool = True,
    one_row_margin: bool = True,
    **decision: Any,
) -> LowerBoundMove:
    """Move from the thresholds in force only as far as the audit's evidence carries.

    Among the cells of the method's curve (``chosen.path``: its path or frontier) that are
    covered and meet the constraints, and the thresholds in force ``f``, pick the one whose
    estimated gain over ``f`` has the highest lower confidence bound

    .. math:: L(c) = \\hat O(c) - \\hat O(f) - z \\sqrt{\\widehat{Var}(c, f) + U(c, f)}
              - w_1(c, f),

    (:func:`gain_standard_errors` with the unseen-region term :func:`unseen_variance` of
    ``κ = unseen_rows`` pseudo-rows; ``w_1``, with ``one_row_margin``, the weight of one
    audited row in the region ``c`` adds, :func:`one_row_weights`: the move must survive the
    loss of one audited positive there, so that it never rests on a single heavy row; 0 for
    regions without audit-eligible rows, e.g. every move that only drops flagged rows); keep
    ``f`` unless that bound is positive. Among cells
    whose bounds tie (within ``1e-9`` relative), the one that changes the least flagged
    volume (``|V(c) - V(f)|``, then the smallest index along the curve) is taken: a region
    that adds neither estimated gain nor evidence is not worth flagging. On a grid without
    audit rows every se is 0 and this is the method's point. Linear objective only
    (``TP - r FP``); other objectives return the method's point.

    **Turning a classifier on.** When a classifier is off in ``f`` (its threshold ``+inf``),
    the method's curve usually holds no cell between ``f`` and its point: a hull's frontier
    goes from "off" straight to the classifier's optimum, a move whose added region spans
    every audit stratum and whose bound is rarely positive on a thin audit, so the classifier
    would stay off. The candidates then also include the cells of the lattice segment from
    ``f`` to the method's point (:func:`segment_cells`: the classifier switched on high first,
    part way towards the optimum). With every classifier on in ``f`` the candidates are the
    curve's alone.

    The standard error is the audit design's (Horvitz–Thompson, given the population), not the
    population's own variation from run to run: rows flagged by the thresholds in force are a
    census of the window (``π = 1``), so moves inside the rated region need no further
    evidence, while a move resting on a few heavily weighted audit rows, or into a region the
    audit barely reached, does.
    """
    if not (np.isfinite(z) and z >= 0):
        raise ValueError(f"z must be a finite number >= 0, got {z!r}")
    spec = as_decision_spec(spec, decision)
    rule = spec.rule
    kept = point_at(grid, in_force, spec, method=method)
    plain_gain = float(chosen.objective - kept.objective)
    if chosen.objective_name != "linear" or spec.target is None:
        return LowerBoundMove(chosen, tuple(kept.index) != tuple(chosen.index), plain_gain, 0.0,
                              plain_gain, 0.0, float(z))
    slope = spec.target.slope
    if tuple(kept.index) == tuple(chosen.index):
        result = LowerBoundMove(chosen, False, 0.0, 0.0, 0.0, 0.0, float(z))
        return _census_reviewed(result, grid, kept, spec, method, unseen_rows) \
            if census else result
    violated = kept_violations(grid, kept.index, spec)
    if violated:  # the point in force is no candidate: the method's point (module doc)
        return LowerBoundMove(chosen, True, plain_gain, float("nan"), plain_gain,
                              float("nan"), float(z), forced=violated)
    se_all = gain_standard_errors(grid, kept.index, rule=rule, slope=slope,
                                  unseen_rows=unseen_rows)
    tp, fp = grid.counts(rule)
    volume = grid.volume(rule)
    cells = np.asarray(chosen.path, dtype=np.intp).reshape(-1, grid.k)
    if any(int(i) == n - 1 for i, n in zip(kept.index, grid.shape, strict=True)):
        segment = segment_cells(kept.index, chosen.index)
        on_curve = (segment[:, None, :] == cells[None, :, :]).all(axis=2).any(axis=1)
        cells = np.vstack([cells, segment[~on_curve]])  # the curve's cells first (ties)
    idx = tuple(cells.T)
    objective = tp[idx] - slope * fp[idx]
    gain = objective - kept.objective
    se = se_all[idx]
    ok = grid.covered(rule, spec.max_unrated_share)[idx]
    constraints = spec.constraints_on(grid)
    if constraints.active:
        ok &= constraints.satisfied(tp[idx], fp[idx], volume[idx])
    chosen_at = np.flatnonzero((cells == np.asarray(chosen.index)).all(axis=1))
    ok[chosen_at] = True
    one_rows = one_row_weights(grid, kept.index, rule=rule)
    bound = np.where(ok, gain - z * se - (one_rows[idx] if one_row_margin else 0.0), -np.inf)
    top = float(np.max(bound))
    at_chosen = tuple(int(i) for i in chosen.index)
    optimum_gain = float(chosen.objective - kept.objective)
    optimum_se = float(se_all[at_chosen])
    one_row = float(one_rows[at_chosen])
    if not top > 0:
        result = LowerBoundMove(kept, False, 0.0, 0.0, optimum_gain, optimum_se, float(z),
                                one_row)
    else:
        tied = np.flatnonzero(bound >= top - 1e-9 * max(1.0, abs(top)))
        change = np.abs(volume[idx] - volume[tuple(int(i) for i in kept.index)])
        best = int(tied[np.argmin(change[tied])])
        if chosen_at.size and int(chosen_at[0]) in tied.tolist() and (
                change[int(chosen_at[0])] <= change[best]):
            result = LowerBoundMove(chosen, True, optimum_gain, optimum_se, optimum_gain,
                                    optimum_se, float(z), one_row)
        else:
            thresholds = grid.threshold_values(tuple(int(i) for i in cells[best]))
            result = LowerBoundMove(point_at(grid, thresholds, spec, method=method), True,
                                    float(gain[best]), float(se[best]), optimum_gain,
                                    optimum_se, float(z), one_row)
    return _census_reviewed(result, grid, kept, spec, method, unseen_rows,
                            se_all) if census else result


def _census_reviewed(result: LowerBoundMove, grid: ThresholdGrid, kept: OperatingPoint,
                     spec: DecisionSpec, method: str, unseen_rows: float,
                     se_all: NDArray[np.float64] | None = None) -> LowerBoundMove:
    """``result`` after the census review of the thresholds in force
    (:func:`costlib.thresholds.loop._census_review.census_review`): unchanged, the thresholds in
    force (veto) or a cell above them (undo), with the design gain and se of what is
    published (``se_all``: :func:`gain_standard_errors` against ``kept``, when computed
    already)."""
    review = census_review(grid, kept.index, result.point.index, spec, z=result.z)
    if review.index is None:
        return result
    if review.index == tuple(kept.index):
        return replace(result, point=kept, move=False, gain=0.0, se=0.0, census=review)
    point = point_at(grid, grid.threshold_values(review.index), spec, method=method)
    if se_all is None:
        assert spec.target is not None  # the evidence rule's linear objective
        se_all = gain_standard_errors(grid, kept.index, rule=spec.rule,
                                      slope=spec.target.slope, unseen_rows=unseen_rows)
    se = se_all[review.index]
    return replace(result, point=point, move=True,
                   gain=float(point.objective - kept.objective), se=float(se), census=review)
