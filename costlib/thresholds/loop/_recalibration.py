"""Recalibrating many groups at once: operating points per group, with a guarded fallback.

A group's thresholds are only trusted when its grid holds at least ``min_positives`` rated
positive rows and ``min_negatives`` rated negative rows. These are rows, counted one each
(:attr:`ThresholdGrid.positive_rows`), whatever weight the rows carry: an audit weight ``w / π``
makes one audited positive an estimate of ``1 / π`` positives and a money weight makes it an
amount, but it is still one row of evidence. Otherwise the group *falls back* to
a parent grid (by default the all-groups grid ``"__all__"``, the sum of every group's grid) and
says so in its status. When the parent is itself too thin (or fallback is off) and the
thresholds in force are known, the group *keeps* them (status ``kept``): a scheduled loop must
not switch a group off because its current thresholds flag too little to rate, or it would
never be rated again. Otherwise the status is ``insufficient_data`` and no thresholds are given.

This is what the Beam pipeline computes per group and window; calling
:func:`recalibrate_grids` on grids built from the same rows gives identical results.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._bootstrap import (
    BootstrapGrids,
    BootstrapResult,
    SparseBootstrapGrids,
    as_dense,
    confidence_intervals,
    intervals_at,
)
from costlib.thresholds.loop._move_evidence import (
    LowerBoundMove,
    constraint_names,
    kept_violations,
    lower_bound_move,
    move_evidence,
)
from costlib.thresholds.loop._policy import DEFAULT_POLICY, InForcePolicy
from costlib.thresholds.point._decision_spec import DecisionSpec, as_decision_spec
from costlib.thresholds.point._operating_point import OperatingPoint, point_at
from costlib.thresholds.point._optimize import optimize

__all__ = [
    "ALL_GROUPS",
    "RECALL_UNKNOWN",
    "GroupResult",
    "ReasonCode",
    "apply_fallback",
    "optimize_group",
    "recalibrate_grids",
]

ALL_GROUPS = "__all__"


@dataclass
class GroupResult:
    """Operating points of one group (per method) and how they were obtained.

    ``status`` is ``"ok"`` (own grid), ``"fallback"`` (points of ``fallback_group``),
    ``"kept"`` (too few rated rows and no usable parent: the thresholds in force, evaluated on
    the group's grid) or ``"insufficient_data"`` (no points). ``rated_positives/negatives`` are
    the group's own weighted totals (rows, estimated rows or money: whatever the weights are);
    ``rated_positive_rows/negative_rows`` its rated rows (None when the grid does not know
    them). ``in_force`` holds, for a thin group whose thresholds in force were given,
    those thresholds evaluated on its grid per method (what :func:`apply_fallback` keeps).
    """

    group: str
    status: str
    rated_positives: float
    rated_negatives: float
    points: dict[str, OperatingPoint | None] = field(default_factory=dict)
    rated_positive_rows: int | None = None
    rated_negative_rows: int | None = None
    intervals: dict[str, BootstrapResult | None] = field(default_factory=dict)
    fallback_group: str | None = None
    in_force: dict[str, OperatingPoint] | None = None
    #: method -> why it has no point although the group had enough rated rows: the audit
    #: does not yet support switching the group on (see :func:`optimize_group`)
    withheld: dict[str, str] = field(default_factory=dict)


#: Key of an operating point's ``details`` holding the method's own thresholds when the
#: evidence rule published other ones (kept the thresholds in force, or moved part way): the
#: move the data did not yet support. ``costlib decide`` audits the rows it would newly flag
#: more heavily (``audit.strata.proposal_stratum``), so that the next run can decide it.
PROPOSED = "proposed_thresholds"


def _with_proposal(reason: str, chosen: OperatingPoint) -> str:
    """A kept / part-way point's reason, naming the method's point (its ``PROPOSED``)."""
    point = ", ".join("inf" if not np.isfinite(t) else f"{t:.4g}" for t in chosen.thresholds)
    return f"{reason}; the method's point: ({point})" if reason else reason


#: How the reason of a method that did not switch a group on begins (:func:`optimize_group`).
NOT_SWITCHED_ON = "not switched on: no thresholds in force"


class ReasonCode(enum.Enum):
    """What a point's reason says, as data (records carry it as ``reason_code``), for code
    that branches on it; the reason itself stays prose for people."""

    #: ``GroupResult.withheld``: the method did not switch the group on (``NOT_SWITCHED_ON``).
    NOT_SWITCHED_ON = "not_switched_on"


def _not_switched_on(bounded: LowerBoundMove) -> str:
    """Why a group without thresholds in force gets no point: the evidence rule, measured
    from flagging nothing, supports no cell of the method's curve."""
    if bounded.census is not None:  # the census of rows flagged before refutes it
        refuted = bounded.census.reason().removeprefix("kept the thresholds in force: ")
        return f"{NOT_SWITCHED_ON}, and {refuted}"
    one_row = f" and one audited row ({bounded.one_row:.4g})" if bounded.one_row else ""
    return (f"{NOT_SWITCHED_ON}, and over flagging nothing the method's "
            f"point would gain {bounded.optimum_gain:.4g} ± {bounded.optimum_se:.4g} (audit "
            f"design se); no point of its curve gains more than z = {bounded.z:g} standard "
            f"errors{one_row}")


def _with_reason(point: OperatingPoint, why: str) -> OperatingPoint:
    """``point`` with ``why`` after its own reason (e.g. an infeasible point's)."""
    return replace(point, reason="; ".join(r for r in (point.reason, why) if r))


def _kept_thin(point: OperatingPoint, grid: ThresholdGrid, spec: DecisionSpec
               ) -> OperatingPoint:
    """The thresholds in force a thin group keeps, with a reason naming the hard constraints
    they violate on its grid (min_recall only with audit rows: P is unknown without): kept
    all the same, since the group cannot be recalibrated, but not silently."""
    checked = spec if grid.has_audit else spec.without_recall_floor()
    violated = kept_violations(grid, point.index, checked)
    if not violated:
        return point
    return _with_reason(point, "kept the thresholds in force (too few rated rows to "
                               "recalibrate); on this grid they violate "
                               f"{constraint_names(violated)}")


def is_sufficient(grid: ThresholdGrid, min_positives: float, min_negatives: float) -> bool:
    """Whether ``grid`` holds at least ``min_positives`` rated positive rows and
    ``min_negatives`` rated negative rows (:attr:`ThresholdGrid.positive_rows` and
    ``negative_rows``: rows, not weights; the weighted totals when the grid does not know
    them, e.g. one made from histograms alone)."""
    positives = grid.total_positives if grid.positive_rows is None else grid.positive_rows
    negatives = grid.total_negatives if grid.negative_rows is None else grid.negative_rows
    return positives >= min_positives and negatives >= min_negatives


def optimize_group(
    group: str,
    grid: ThresholdGrid,
    spec: DecisionSpec | None = None,
    *,
    methods: Sequence[str],
    min_positives: float,
    min_negatives: float,
    bootstrap: BootstrapGrids | SparseBootstrapGrids | None = None,
    level: float = 0.9,
    in_force: Sequence[float] | None = None,
    policy: InForcePolicy = DEFAULT_POLICY,
    **decision: Any,
) -> GroupResult:
    """Optimise one group's grid with every method, if it holds enough rated rows.

    ``spec`` (:class:`~costlib.thresholds.DecisionSpec`: target, rule, coverage, objective,
    constraints, recall bound; or :meth:`~costlib.thresholds.DecisionSpec.of`'s keyword
    arguments ``decision``) is used for the
    point and for the bootstrap replicates alike. ``in_force``: the
    thresholds the group is decided with now (one per classifier, ``+inf`` = off); when the grid is
    too thin they are evaluated on it (:func:`costlib.thresholds.point_at`) so that
    :func:`apply_fallback` can keep them (unless ``policy.keep_when_insufficient`` is false).

    ``policy`` (:class:`~costlib.thresholds.loop.InForcePolicy`, the config's ``in_force``
    section) says when a method moves away from the thresholds in force; its settings:

    ``min_gain_z`` (with ``in_force`` and ``bootstrap``): a method's new point replaces the
    thresholds in force only when its estimated gain exceeds ``min_gain_z`` bootstrap standard
    errors (:mod:`costlib.thresholds.loop._move_evidence`); otherwise the method keeps them (the
    point's
    ``reason`` says so, ``details["move_evidence"]`` holds gain and se), and when every method
    keeps them the status is ``"kept"``. A method whose own point *is* the thresholds in force
    (the same lattice cell) has nothing held back: it publishes its point, without
    ``details["proposed_thresholds"]``, and does not count as keeping (status ``"ok"``; the
    same under ``evidence_z``).

    ``evidence_z`` (with ``in_force``; default 1.645, a one-sided 95% bound; None: off):
    on a grid that carries audit
    weights (:attr:`~costlib.thresholds.ThresholdGrid.variance`), a method moves from the
    thresholds in force only as far as the lower confidence bound of the gain stays positive
    (:func:`costlib.thresholds.lower_bound_move`: Horvitz–Thompson design standard
    errors plus the unseen-region term of ``unseen_rows`` pseudo-rows,
    :func:`costlib.thresholds.loop._move_evidence.unseen_variance`; no bootstrap needed);
    ``details["move_evidence"]`` records gain, se and the weight of one audited row in the
    region the method's point adds. Grids without audit rows are unaffected. ``min_gain_z``,
    when set, takes precedence. ``census_review`` (default on): the rule's point is then
    reviewed on the census of the thresholds in force (:mod:`costlib.thresholds.
    _census_review`): a point in force whose flagged rows lost on their census moves back,
    and a move the census refutes is not taken (``details["move_evidence"]["census"]``).
    ``one_row_margin`` (default on): the bound also subtracts the weight of one audited row
    in the region a move adds, so that no move rests on a single heavy row.

    **Switching on.** Without thresholds in force (``in_force`` None) on a grid with audit
    rows, the same rule is measured from flagging nothing (every threshold ``+inf``): a method
    whose curve has no cell with a positive lower bound over flagging nothing gets no point
    (``points[method]`` None, ``withheld[method]`` says why and names the method's point), and
    the group's status is ``insufficient_data`` when no method switches it on
    (:func:`apply_fallback` may then give it the parent's points). A method whose own point
    flags nothing is published as such. ``switch_on_evidence=False``: such a group gets the
    method's point whatever the audit shows (the behaviour before).

    A :class:`~costlib.thresholds.loop._bootstrap.SparseBootstrapGrids` is made dense only here,
    after the sufficiency check, so a caller holds one group's dense replicates at a time.

    ``min_recall`` on a grid without audit rows (:attr:`ThresholdGrid.has_audit` false): the
    group's recall is unknown, so no point can be shown to meet the floor. Instead of
    :func:`~costlib.thresholds.optimize`'s ValueError, every method's point is
    chosen without the recall floor (the other constraints still apply, intervals likewise) and
    marked ``status="infeasible"`` with the reason :data:`RECALL_UNKNOWN` (the publish guard holds
    such a run; ``costlib decide`` gives the group null decisions).
    """
    spec = as_decision_spec(spec, decision)
    result = GroupResult(
        group=group,
        status="ok",
        rated_positives=grid.total_positives,
        rated_negatives=grid.total_negatives,
        rated_positive_rows=grid.positive_rows,
        rated_negative_rows=grid.negative_rows,
    )
    if not is_sufficient(grid, min_positives, min_negatives):
        result.status = "insufficient_data"
        result.points = dict.fromkeys(methods)
        result.intervals = dict.fromkeys(methods)
        if in_force is not None and policy.keep_when_insufficient:
            result.in_force = {
                method: _kept_thin(point_at(grid, in_force, spec, method=method), grid, spec)
                for method in methods
            }
        return result
    kept = []
    bootstrap = None if bootstrap is None else as_dense(bootstrap)
    min_recall = spec.constraints.min_recall
    recall_unknown = min_recall is not None and not grid.has_audit
    if recall_unknown:
        spec = spec.without_recall_floor()  # chosen without the floor, then marked infeasible
    # min_gain_z takes precedence over evidence_z where it applies (a bootstrap is given)
    bootstrap_rule = in_force is not None and policy.uses_bootstrap_rule(bootstrap is not None)
    evidence_rule = policy.uses_evidence_rule(grid, in_force is not None, bootstrap is not None)
    for method in methods:
        chosen = optimize(grid, spec, method=method)
        result.points[method] = chosen
        if bootstrap_rule:
            assert in_force is not None and bootstrap is not None
            assert policy.min_gain_z is not None
            evidence = move_evidence(grid, bootstrap, chosen, in_force, spec,
                                     z=policy.min_gain_z, method=method)
            if not evidence.move and tuple(evidence.kept.index) != tuple(chosen.index):
                details = {**evidence.kept.details,
                           "move_evidence": {"gain": evidence.gain, "se": evidence.se,
                                             "z": evidence.z},
                           PROPOSED: [float(t) for t in chosen.thresholds]}
                result.points[method] = replace(evidence.kept,
                                                reason=_with_proposal(evidence.reason(), chosen),
                                                details=details)
                kept.append(method)
            elif evidence.forced:
                result.points[method] = _with_reason(chosen, evidence.reason())
        elif evidence_rule:
            assert policy.evidence_z is not None
            switch_on = in_force is None
            reference = (math.inf,) * grid.k if in_force is None else in_force
            bounded = lower_bound_move(grid, chosen, reference, spec,
                                       z=policy.evidence_z, method=method,
                                       unseen_rows=policy.unseen_rows,
                                       census=policy.census_review,
                                       one_row_margin=policy.one_row_margin)
            if switch_on and not bounded.move and not bounded.forced and any(
                    np.isfinite(chosen.thresholds)):
                result.points[method] = None
                result.intervals[method] = None
                result.withheld[method] = _with_proposal(_not_switched_on(bounded), chosen)
                continue
            if tuple(bounded.point.index) != tuple(chosen.index):
                details = {**bounded.point.details, "move_evidence": bounded.summary(),
                           PROPOSED: [float(t) for t in chosen.thresholds]}
                result.points[method] = replace(bounded.point,
                                                reason=_with_proposal(bounded.reason(), chosen),
                                                details=details)
                if not bounded.move:
                    kept.append(method)
            elif bounded.forced:
                result.points[method] = _with_reason(chosen, bounded.reason())
        if recall_unknown and min_recall is not None:
            result.points[method] = _recall_unknown(result.points[method], min_recall)
        result.intervals[method] = (
            None
            if bootstrap is None
            else confidence_intervals(bootstrap, level=level, spec=spec, method=method)
        )
        published = result.points[method]
        if (bootstrap is not None and published is not None
                and tuple(published.thresholds) != tuple(chosen.thresholds)):
            interval = result.intervals[method]
            assert interval is not None
            result.intervals[method] = intervals_at(interval, bootstrap, published.thresholds,
                                                    spec=spec, method=method)
    if methods and len(kept) == len(methods):
        result.status = "kept"
    if methods and len(result.withheld) == len(methods):
        result.status = "insufficient_data"  # no method may switch the group on yet
    return result


#: Reason of a point chosen on a grid without audit rows under ``min_recall``.
RECALL_UNKNOWN = (
    "no audit rows in this group's grid: recall unknown (min_recall needs audit data, "
    "docs/audit.md); the thresholds are the best point without the recall floor"
)


def _recall_unknown(point: OperatingPoint | None, min_recall: float) -> OperatingPoint | None:
    """``point`` marked infeasible for want of audit rows (see :func:`optimize_group`)."""
    if point is None:
        return None
    reason = RECALL_UNKNOWN if not point.reason else f"{RECALL_UNKNOWN}; also: {point.reason}"
    return replace(point, status="infeasible", reason=reason,
                   constraints={**point.constraints, "min_recall": min_recall})


def apply_fallback(
    results: Mapping[str, GroupResult], *, fallback: str = "all_groups"
) -> dict[str, GroupResult]:
    """Replace the points of thin groups by the parent's (``fallback="all_groups"``), else keep
    the thresholds in force.

    A thin group (status ``insufficient_data``) takes, in this order: the parent's points when
    ``fallback="all_groups"`` and the parent ``"__all__"`` is ``ok`` (status ``fallback``); its
    thresholds in force when they were given to :func:`optimize_group` (status ``kept``: the
    run neither learns nor switches the group off for want of ratings, so ratings keep
    arriving); else no points (status ``insufficient_data``). The parent never falls back.
    """
    if fallback not in ("all_groups", "none"):
        raise ValueError(f"fallback must be 'all_groups' or 'none', got {fallback!r}")
    parent = results.get(ALL_GROUPS)
    out = {}
    for name, res in results.items():
        if (
            res.status == "insufficient_data"
            and name != ALL_GROUPS
            and fallback == "all_groups"
            and parent is not None
            and parent.status == "ok"
        ):
            res = replace(res, status="fallback", points=dict(parent.points),
                          intervals=dict(parent.intervals), fallback_group=ALL_GROUPS,
                          in_force=None)
        elif res.status == "insufficient_data" and res.in_force is not None:
            res = replace(res, status="kept", points=dict(res.in_force),
                          intervals=dict.fromkeys(res.in_force), in_force=None)
        out[name] = res
    return out


def recalibrate_grids(
    grids: Mapping[str, ThresholdGrid],
    spec: DecisionSpec | None = None,
    *,
    methods: Sequence[str],
    min_positives: float = 0.0,
    min_negatives: float = 0.0,
    fallback: str = "all_groups",
    bootstrap: Mapping[str, BootstrapGrids | SparseBootstrapGrids] | None = None,
    level: float = 0.9,
    in_force: Mapping[str, Sequence[float]] | None = None,
    policy: InForcePolicy = DEFAULT_POLICY,
    **decision: Any,
) -> dict[str, GroupResult]:
    """Operating points for every group and for the all-groups grid, with fallback.

    Parameters
    ----------
    grids : mapping group -> ThresholdGrid
        One grid per group (same edges). The all-groups grid is added as ``"__all__"`` (the sum)
        unless present.
    bootstrap : mapping group -> BootstrapGrids or SparseBootstrapGrids, optional
        Replicate grids per group (``"__all__"`` summed likewise) for intervals.
    spec : DecisionSpec, optional
        The decision (target, rule, coverage, objective, constraints); without it,
        ``decision`` holds :meth:`~costlib.thresholds.DecisionSpec.of`'s keyword arguments
        (see :func:`optimize_group`).
    in_force : mapping group -> thresholds, optional
        The thresholds each group (and ``"__all__"``) is decided with now; thin groups without
        a usable parent keep them (status ``kept``, see :func:`apply_fallback`).
    policy : InForcePolicy, optional
        When a group moves away from its thresholds in force, switches on, or keeps them
        when thin (see :func:`optimize_group`); by default the schema's defaults.
    """
    spec = as_decision_spec(spec, decision)
    grids = dict(grids)
    if ALL_GROUPS not in grids and grids:
        grids[ALL_GROUPS] = sum(list(grids.values())[1:], next(iter(grids.values())))
    boots = None
    if bootstrap is not None:
        boots = dict(bootstrap)
        if ALL_GROUPS not in boots and boots:
            boots[ALL_GROUPS] = sum(list(boots.values())[1:], next(iter(boots.values())))
    results = {
        name: optimize_group(
            name, grid, spec, methods=methods,
            min_positives=min_positives, min_negatives=min_negatives,
            bootstrap=None if boots is None else boots.get(name), level=level,
            in_force=None if in_force is None else in_force.get(name), policy=policy,
        )
        for name, grid in sorted(grids.items())
    }
    return apply_fallback(results, fallback=fallback)
