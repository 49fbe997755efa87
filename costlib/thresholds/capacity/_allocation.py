"""One review capacity shared by many groups: thresholds per group under a common volume budget.

Problem
-------
Every group ``g`` (market, surface, policy) has its own
:class:`~costlib.thresholds.ThresholdGrid` on one lattice. Choose one threshold tuple ``t_g``
per group to

.. math:: \\max \\sum_g U_g(t_g) \\quad \\text{s.t.} \\quad \\sum_g V_g(t_g) \\le C,

where ``V_g(t) = a_g (TP + FP + U_unrated)`` is the flagged volume (unrated rows included, as
:meth:`~costlib.thresholds.ThresholdGrid.volume`) and ``U_g`` the utility, ``a_g (TP - r FP)``
(``objective="linear"``, target slope ``r``) or ``a_g TP`` (``objective="true_positives"``).
``a_g`` is the group's ``volume_scale`` (expected next-period rows / window rows, default 1): the
capacity is next period's, so both the group's volumes and what they yield are scaled by it
(scaling only ``V`` would claim the window's true positives for ``a_g`` times the reviews).
A group's *candidates* are its covered cells (``U_unrated(t) <= s V(t)``,
:meth:`~costlib.thresholds.ThresholdGrid.covered`, ``s = max_unrated_share``) whose scaled
volume lies in ``[min_volume[g], max_volume[g]]``; the all-off cell ("flag nothing", ``V = U = 0``)
is one of them unless ``min_volume[g] > 0``.

Method
------
Steps 1 (each group's Pareto set) and 2 (its concave frontier) are in
:mod:`costlib.thresholds.capacity._group_frontiers`; the capacity is allocated on those frontiers:

3. *LP optimum and lambda.* Start every group at ``p_0`` (its smallest volume) and take the
   frontier segments of all groups in decreasing slope (ties: group order, then segment order)
   while they fit in ``C``. The first segment that does not fit is split: the fractional
   allocation is the optimum of the LP relaxation (every group may mix two neighbouring
   vertices), and its value equals the Lagrangian dual
   ``L(lambda) = sum_g max_t (U_g - lambda V_g) + lambda C`` at ``lambda`` = the split segment's
   slope, the smallest ``L``: an upper bound on every integral allocation (``upper_bound``).
   ``lambda`` is the marginal utility of one more unit of capacity (0 when every group gets its
   best point). For the linear objective a segment with no unrated rows has
   ``dU/dV = p - r (1 - p)`` at marginal precision ``p``: every group is cut where the
   precision of its next reviews falls to ``(lambda + r) / (1 + r)``
   (``marginal_precision``); for true positives ``lambda`` is that precision itself.
4. *Integral allocation.* The split group keeps its lower vertex (feasible: at most one group is
   between two vertices). The remaining capacity is then filled greedily with the next segments
   that still fit (in slope order, never past a segment a group had to skip). The
   ``integrality_gap`` is ``upper_bound - total_utility``.
5. *Exact optimum* (``exact=True``, or ``"auto"`` within a work budget). The exact optimum over
   the lattice: the largest ``sum_g U_g`` over every combination of one candidate cell per group
   with ``sum_g V_g <= C`` -- *not* restricted to frontier vertices (an optimum may use Pareto
   points below the concave hull), and exact for real-valued volumes (no discretised volume
   axis). It is a dynamic programme over groups on Pareto sets of partial sums (Nemhauser-
   Ullmann): the states after ``g`` groups are the non-dominated ``(sum V, sum U)`` pairs with
   ``sum V <= C``; states whose utility plus the LP bound of the remaining groups (step 3 on
   them) cannot reach the greedy allocation's value (less a relative ``1e-9``) are dropped.
   "Exact" is up to float64 rounding of the utilities ``TP - r FP`` and of the scaled volumes;
   volumes are summed in group order and compared with ``C`` as computed. With ``exact="auto"``
   the programme runs for at most :data:`EXACT_AUTO_GROUPS` groups with a candidate and stops
   (the greedy allocation is kept, ``exact=False``) once it has formed more than
   :data:`EXACT_BUDGET` state-candidate pairs.

Statuses (per group): ``"ok"`` (the group got its best candidate, the one it would choose with
unlimited capacity: the most utility, then the least volume), ``"capacity_bound"`` (the shared
capacity holds it below that) and ``"infeasible"`` (no candidate: no covered cell within its
volume bounds; it is given the all-off cell and no capacity). When even the groups' smallest
candidate volumes exceed ``C`` the allocation is ``feasible=False``: every group gets its
smallest-volume candidate, ``multiplier = inf`` and the bound and gap are NaN.

Ties (deterministic): among cells with equal volume and utility the one with the largest
row-major index (the highest thresholds) represents them; the exact programme prefers the
smaller total volume among equal utilities.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from costlib._messages import plain
from costlib.thresholds.capacity._group_frontiers import (
    _F,
    _I,
    GroupFrontier,
    as_capacity_spec,
    group_frontiers,
)
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._decision_spec import DecisionSpec

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EXACT_AUTO_GROUPS",
    "EXACT_BUDGET",
    "CapacityAllocation",
    "GroupAllocation",
    "allocate_capacity",
    "allocate_frontiers",
    "lagrangian_volume",
]

#: ``exact="auto"``: the exact programme gives up after forming this many state-candidate pairs.
EXACT_BUDGET = 4_000_000

#: ``exact="auto"``: the exact programme is tried for at most this many feasible groups.
EXACT_AUTO_GROUPS = 64


@dataclass(frozen=True)
class GroupAllocation:
    """What one group gets. Counts are scaled by the group's ``volume_scale``.

    ``best_volume``/``best_utility`` describe the group's best candidate (what it would take with
    unlimited capacity); NaN for an infeasible group.
    """

    group: str
    index: tuple[int, ...]
    thresholds: tuple[float, ...]
    volume: float
    utility: float
    true_positives: float
    false_positives: float
    status: str
    best_volume: float
    best_utility: float


@dataclass(frozen=True)
class CapacityAllocation:
    """Result of :func:`allocate_capacity` (see the module docstring for every quantity).

    Attributes
    ----------
    groups : dict of str to GroupAllocation
        In the order of the input mapping.
    capacity : float
    objective, rule : str
    target_slope : float or None
    multiplier : float
        ``lambda``: marginal utility of one more unit of capacity.
    marginal_precision : float
        Precision of the marginal reviews at ``lambda``: ``(lambda + r) / (1 + r)`` (linear) or
        ``lambda`` (true positives); NaN when infeasible.
    total_volume, total_utility : float
        Of the returned (integral) allocation.
    lagrangian_total : float
        ``L(lambda) = sum_g max_t (U_g - lambda V_g) + lambda C``; equals ``upper_bound``.
    upper_bound : float
        The LP relaxation / Lagrangian dual value.
    integrality_gap : float
        ``upper_bound - total_utility`` (>= 0 up to rounding).
    greedy_utility : float
        Utility of the greedy allocation of step 4 (what is returned unless ``exact``).
    exact : bool
        Whether the returned allocation is the exact optimum over the lattice.
    feasible : bool
        Whether the groups' smallest candidate volumes fit in the capacity.
    frontiers : dict of str to GroupFrontier
    """

    groups: dict[str, GroupAllocation]
    capacity: float
    objective: str
    rule: str
    target_slope: float | None
    multiplier: float
    marginal_precision: float
    total_volume: float
    total_utility: float
    lagrangian_total: float
    upper_bound: float
    integrality_gap: float
    greedy_utility: float
    exact: bool
    feasible: bool
    frontiers: dict[str, GroupFrontier] = field(repr=False)

    def to_frame(self) -> pd.DataFrame:
        """One row per group: thresholds, volume, utility, counts, status."""
        rows: list[dict[str, Any]] = []
        for a in self.groups.values():
            row: dict[str, Any] = {"group": a.group, "status": a.status, "volume": a.volume,
                                   "utility": a.utility, "true_positives": a.true_positives,
                                   "false_positives": a.false_positives,
                                   "best_volume": a.best_volume, "best_utility": a.best_utility}
            row.update({f"threshold_{j}": t for j, t in enumerate(a.thresholds)})
            rows.append(row)
        import pandas as pd  # only here: importing costlib.thresholds does not import pandas

        return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- steps 3 and 4
@dataclass(frozen=True)
class _Segments:
    """All groups' frontier segments in the order the greedy takes them."""

    group: _I  # index into the list of feasible frontiers
    upper: _I  # position (into the group's Pareto arrays) of the segment's upper vertex
    dv: _F
    du: _F

    @classmethod
    def of(cls, fronts: list[GroupFrontier]) -> _Segments:
        g, up, dv, du, step = [], [], [], [], []
        for i, f in enumerate(fronts):
            h = f.hull
            if h.size > 1:
                g.append(np.full(h.size - 1, i, dtype=np.intp))
                up.append(h[1:])
                dv.append(np.diff(f.volume[h]))
                du.append(np.diff(f.utility[h]))
                step.append(np.arange(h.size - 1))
        if not g:
            empty = np.zeros(0)
            return cls(np.zeros(0, np.intp), np.zeros(0, np.intp), empty, empty)
        gg: _I = np.concatenate(g)
        uu: _I = np.concatenate(up)
        vv: _F = np.concatenate(dv)
        ww: _F = np.concatenate(du)
        order = np.lexsort((np.concatenate(step), gg, -(ww / vv)))
        return cls(gg[order], uu[order], vv[order], ww[order])


def _lp(fronts: list[GroupFrontier], capacity: float
        ) -> tuple[list[int], float, float, float, bool]:
    """Greedy allocation, LP value, lambda, greedy value, feasible."""
    choice = [int(f.hull[0]) for f in fronts]
    base_v = math.fsum(float(f.volume[f.hull[0]]) for f in fronts)
    base_u = math.fsum(float(f.utility[f.hull[0]]) for f in fronts)
    if base_v > capacity:
        return choice, math.nan, math.inf, base_u, False
    seg = _Segments.of(fronts)
    room = capacity - base_v
    cum = np.cumsum(seg.dv)
    taken = int(np.searchsorted(cum, room, side="right"))
    lp = base_u + float(seg.du[:taken].sum())
    multiplier = 0.0
    if taken < seg.dv.size:
        used = float(cum[taken - 1]) if taken else 0.0
        lp += (room - used) / float(seg.dv[taken]) * float(seg.du[taken])
        multiplier = float(seg.du[taken] / seg.dv[taken])
    for i, up in zip(seg.group[:taken].tolist(), seg.upper[:taken].tolist(), strict=True):
        choice[i] = up
    # Fill: later segments that still fit, never past one a group had to skip.
    left = room - (float(cum[taken - 1]) if taken else 0.0)
    blocked: set[int] = set()
    for i, up, dv in zip(seg.group[taken:].tolist(), seg.upper[taken:].tolist(),
                         seg.dv[taken:].tolist(), strict=True):
        if i in blocked:
            continue
        if dv <= left:
            choice[i], left = up, left - dv
        else:
            blocked.add(i)
    greedy = math.fsum(float(f.utility[c]) for f, c in zip(fronts, choice, strict=True))
    return choice, lp, multiplier, greedy, True


def lagrangian_volume(frontiers: Mapping[str, GroupFrontier], multiplier: float) -> float:
    """Total volume of the groups' Lagrangian choices at ``multiplier`` (non-increasing in it)."""
    return math.fsum(float(f.volume[f.choose(multiplier)])
                     for f in frontiers.values() if f.feasible)


# ----------------------------------------------------------------------------- step 5
def _lp_curve(fronts: list[GroupFrontier]) -> tuple[_F, _F]:
    """Breakpoints ``(volume, utility)`` of the LP value of ``fronts`` as a function of capacity."""
    base_v = sum(float(f.volume[f.hull[0]]) for f in fronts)
    base_u = sum(float(f.utility[f.hull[0]]) for f in fronts)
    seg = _Segments.of(fronts)
    return (np.concatenate(([base_v], base_v + np.cumsum(seg.dv))),
            np.concatenate(([base_u], base_u + np.cumsum(seg.du))))


def _exact(fronts: list[GroupFrontier], capacity: float, incumbent: float,
           budget: float) -> list[int] | None:
    """Exact optimum over the Pareto sets (positions per group), or None past ``budget``."""
    tol = 1e-9 * max(1.0, abs(incumbent))
    states_v = np.zeros(1)
    states_u = np.zeros(1)
    back: list[tuple[_I, _I]] = []
    work = 0
    for i, f in enumerate(fronts):
        work += states_v.size * f.volume.size
        if work > budget:
            return None
        v = (states_v[:, None] + f.volume[None, :]).ravel()
        u = (states_u[:, None] + f.utility[None, :]).ravel()
        rest_v, rest_u = _lp_curve(fronts[i + 1:]) if i + 1 < len(fronts) else (
            np.zeros(1), np.zeros(1))
        room = capacity - v
        bound = np.full(v.size, -math.inf)
        ok = room >= rest_v[0]
        bound[ok] = u[ok] + np.interp(room[ok], rest_v, rest_u)
        keep = np.flatnonzero(ok & (bound >= incumbent - tol))
        order = keep[np.lexsort((keep, -u[keep], v[keep]))]
        w = u[order]
        front = np.ones(order.size, dtype=bool)
        if order.size > 1:
            front[1:] = w[1:] > np.maximum.accumulate(w)[:-1]
        order = order[front]
        if order.size == 0:
            return None
        parent, point = np.divmod(order, f.volume.size)
        back.append((parent.astype(np.intp), point.astype(np.intp)))
        states_v, states_u = v[order], u[order]
    best = int(np.flatnonzero(states_u == states_u.max())[0])  # least volume among the best
    choice = [0] * len(fronts)
    for i in range(len(fronts) - 1, -1, -1):
        parent, point = back[i]
        choice[i] = int(point[best])
        best = int(parent[best])
    return choice


# ----------------------------------------------------------------------------- the entry points
def allocate_capacity(
    grids: Mapping[str, ThresholdGrid],
    capacity: float,
    spec: DecisionSpec | None = None,
    *,
    exact: bool | str = "auto",
    **frontier_args: Any,
) -> CapacityAllocation:
    """Thresholds for every group that maximise total utility within one review capacity.

    :func:`~costlib.thresholds.capacity._group_frontiers.group_frontiers` (steps 1-2) followed by
    :func:`allocate_frontiers` (steps 3-5).

    Parameters
    ----------
    grids : mapping of group name to ThresholdGrid
        All on one lattice (equal edges).
    capacity : float
        ``C >= 0`` (``inf``: unlimited), in scaled volume units (rows next period).
    spec : DecisionSpec, optional
        Rule, capacity objective, target and coverage
        (:func:`~costlib.thresholds.capacity._group_frontiers.capacity_spec`); without it,
        the keyword arguments in ``frontier_args`` make one.
    exact : bool or "auto"
        Compute the exact integral optimum (step 5): always (its time can grow exponentially with
        the number of groups), never, or for at most :data:`EXACT_AUTO_GROUPS` groups within
        :data:`EXACT_BUDGET`.
    **frontier_args
        The per-group bounds and, without ``spec``, its parts:

        - ``rule`` {"any", "all"};
        - ``objective``: ``"linear"`` (``U = TP - r FP``), ``"true_positives"`` (``U = TP``) or
          another registered capacity objective, scaled by ``volume_scale``;
        - ``target`` (Target): the trade-off of the linear objective, its slope ``r``
          (``Target(slope=r)``, or ``Target.from_marginal_precision(m)`` for
          ``r = m / (1 - m)``); a bare number is refused (TypeError): it could be read either
          way;
        - ``max_unrated_share`` in [0, 1]: coverage, only cells with ``U_unrated <= s V`` are
          candidates;
        - ``min_volume``, ``max_volume`` (mapping of group to float): per-group bounds on the
          scaled volume ``V_g``;
        - ``volume_scale`` (mapping of group to float): ``a_g > 0``, expected next-period rows
          / window rows (:func:`~costlib.thresholds.capacity._split_baselines.volume_scales`);
          volumes and utilities are scaled.

    Returns
    -------
    CapacityAllocation
    """
    _check_capacity(capacity, exact)
    bounds = {k: v for k, v in frontier_args.items() if k in _GROUP_BOUNDS}
    spec = as_capacity_spec(spec, {k: v for k, v in frontier_args.items()
                                   if k not in _GROUP_BOUNDS})
    frontiers = group_frontiers(grids, spec, **bounds)
    first = grids[next(iter(grids))]
    return allocate_frontiers(frontiers, capacity, spec, thresholds=first.thresholds,
                              exact=exact)


#: The per-group arguments of :func:`allocate_capacity` (the rest make its spec).
_GROUP_BOUNDS = ("min_volume", "max_volume", "volume_scale")


def _check_capacity(capacity: float, exact: bool | str) -> float:
    cap = float(capacity)
    if math.isnan(cap) or cap < 0:
        raise ValueError(f"capacity must be >= 0, got {plain(capacity)}")
    if exact not in (True, False, "auto"):
        raise ValueError(f"exact must be True, False or 'auto', got {exact!r}")
    return cap


def allocate_frontiers(
    frontiers: Mapping[str, GroupFrontier],
    capacity: float,
    spec: DecisionSpec | None = None,
    *,
    thresholds: Sequence[NDArray[np.float64]],
    exact: bool | str = "auto",
    **decision: Any,
) -> CapacityAllocation:
    """Steps 3-5 of the module docstring on the groups' frontiers (from
    :func:`~costlib.thresholds.capacity._group_frontiers.group_frontiers`, computed for all groups
    at once or group by group: the frontiers are the same).

    Only a group's frontier enters: where the exact programme (step 5) cannot run (``exact``
    False, or ``"auto"`` with more than :data:`EXACT_AUTO_GROUPS` groups with a candidate) the
    frontiers may be reduced to their hull vertices
    (:meth:`~costlib.thresholds.capacity._group_frontiers.GroupFrontier.vertices`) with the same
    result, which is how a pipeline gathers many groups on one worker.

    Parameters
    ----------
    frontiers : mapping of group name to GroupFrontier
        In the order ties are broken and volumes summed (a pipeline sorts them by name).
    capacity : float
    thresholds : sequence of ndarray
        Candidate thresholds per classifier
        (:attr:`costlib.thresholds.ThresholdGrid.thresholds`: the edges and ``+inf``), to name
        each group's thresholds.
    spec, exact
        As for :func:`allocate_capacity` (``spec.rule`` is only recorded; without ``spec``,
        ``decision`` holds ``rule``, ``objective``, ``target``).

    Returns
    -------
    CapacityAllocation
    """
    cap = _check_capacity(capacity, exact)
    spec = as_capacity_spec(spec, decision)
    slope, rule, objective = spec.objective.linear_slope, spec.rule, spec.objective.name
    fronts = [f for f in frontiers.values() if f.feasible]
    choice, lp, multiplier, greedy, feasible = _lp(fronts, cap)
    solved = False
    if feasible and fronts and (exact is True or (
            exact == "auto" and len(fronts) <= EXACT_AUTO_GROUPS)):
        budget = math.inf if exact is True else EXACT_BUDGET
        found = _exact(fronts, cap, greedy, budget)
        if found is not None:
            value = math.fsum(float(f.utility[c]) for f, c in zip(fronts, found, strict=True))
            solved = True
            if value > greedy:
                choice = found
    picked = {f.group: c for f, c in zip(fronts, choice, strict=True)}

    def named(index: tuple[int, ...]) -> tuple[float, ...]:
        return tuple(float(t[i]) for t, i in zip(thresholds, index, strict=True))

    groups: dict[str, GroupAllocation] = {}
    for g, f in frontiers.items():
        if not f.feasible:
            off = tuple(n - 1 for n in f.shape)
            groups[g] = GroupAllocation(g, off, named(off), 0.0, 0.0, 0.0, 0.0,
                                        "infeasible", math.nan, math.nan)
            continue
        c = picked[g]
        index = tuple(int(i) for i in np.unravel_index(int(f.cells[c]), f.shape))
        last = f.cells.size - 1
        groups[g] = GroupAllocation(
            g, index, named(index), float(f.volume[c]), float(f.utility[c]),
            float(f.true_positives[c]), float(f.false_positives[c]),
            "ok" if c == last else "capacity_bound", float(f.volume[last]),
            float(f.utility[last]))
    total_u = math.fsum(a.utility for a in groups.values())
    total_v = math.fsum(a.volume for a in groups.values())
    if feasible:
        at = [f.choose(multiplier) for f in fronts]
        lagrangian = math.fsum(float(f.utility[c] - multiplier * f.volume[c])
                               for f, c in zip(fronts, at, strict=True)
                               ) + (multiplier * cap if multiplier else 0.0)
        precision = multiplier if slope is None else (multiplier + slope) / (1.0 + slope)
    else:
        lagrangian, precision = math.nan, math.nan
    return CapacityAllocation(
        groups=groups, capacity=cap, objective=objective, rule=rule,
        target_slope=slope, multiplier=multiplier, marginal_precision=precision,
        total_volume=total_v, total_utility=total_u, lagrangian_total=lagrangian,
        upper_bound=lp, integrality_gap=lp - total_u if feasible else math.nan,
        greedy_utility=greedy, exact=solved, feasible=feasible, frontiers=dict(frontiers))
