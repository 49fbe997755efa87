"""Why a shared capacity is not filled, and why each group gets what it gets.

An allocation (:mod:`costlib_pipelines.recalibrate.capacity`) can leave capacity unused and
report an LP bound well above its utility. Both have causes in the data, which this module
names per group (``held_by``, with a sentence ``why``) and for the run:

``capacity``
    The shared capacity holds the group below its best candidate (status ``capacity_bound``):
    its next candidate on the frontier flags ``dv`` more rows for ``du`` more utility, and
    either does not fit in the rows left or is worth less per row than the price ``lambda``.
``target``
    The group is at its best candidate, and covered cells that flag more rows exist, but they
    have less utility: the next rows' marginal precision is below the target (objective
    ``linear``), or they add no true positive (``true_positives``).
``coverage``
    The group's covered cells (``coverage.max_unrated_share``: its rated region) end at its
    best candidate; cells that flag more rows flag too many unrated rows.
``max_volume``
    ``capacity.max_volume`` caps the group; covered cells above it exist.
``volume``
    The group's best candidate flags every row its lattice can flag: it has no more rows.
``bounds``
    No covered cell within ``capacity.min_volume`` / ``max_volume`` (status ``infeasible``).

For the run: the unused capacity ``C - sum V`` (when ``lambda = 0`` the capacity does not bind
and the groups' own limits above leave it unused; when ``lambda > 0`` no capacity-bound group's
next step fits in what is left), and the gap between the LP bound and the utility (the LP
relaxation takes part of a group's next step, an allocation gives every group one cell).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from costlib.thresholds.capacity import GroupFrontier
from costlib.thresholds.grid import ThresholdGrid

__all__ = ["HELD_BY", "GroupLimits", "allocation_reasons", "group_limits", "next_step"]

#: Every ``held_by`` code, in the order the run's summary lists them.
HELD_BY = ("capacity", "target", "coverage", "max_volume", "volume", "bounds")

#: Relative tolerance when volumes are compared (sums of weights, scaled).
_TOL = 1e-9


@dataclass(frozen=True)
class GroupLimits:
    """A group's volumes that bound its allocation from its own side, scaled like its frontier.

    Attributes
    ----------
    lattice_volume : float
        The most rows any cell flags (every threshold at its lowest candidate).
    covered_volume : float
        The most rows a covered cell flags (its rated region).
    candidate_volume : float
        The most rows a candidate flags: covered and within ``capacity.min_volume`` /
        ``max_volume`` (0 without candidates).
    max_volume : float or None
        The group's ``capacity.max_volume``.
    """

    lattice_volume: float
    covered_volume: float
    candidate_volume: float
    max_volume: float | None


def group_limits(grid: ThresholdGrid, *, rule: str, max_unrated_share: float, scale: float,
                 min_volume: float | None = None,
                 max_volume: float | None = None) -> GroupLimits:
    """:class:`GroupLimits` of one group's grid (volumes times ``scale``, as the frontier's)."""
    volume = grid.volume(rule) * scale
    covered = grid.covered(rule, max_unrated_share)
    in_bounds = covered & (volume >= (min_volume or 0.0)) & (
        volume <= (math.inf if max_volume is None else max_volume))
    return GroupLimits(
        lattice_volume=float(volume.max()),
        covered_volume=float(volume[covered].max()),
        candidate_volume=float(volume[in_bounds].max()) if in_bounds.any() else 0.0,
        max_volume=max_volume)


def next_step(frontier: GroupFrontier, volume: float, utility: float
              ) -> tuple[float, float] | None:
    """``(dv, du)`` from an allocated point to the group's next frontier vertex with more
    volume; None when there is none (the group is at its best candidate)."""
    hull = frontier.hull
    if hull.size == 0:
        return None
    vertex_volumes = frontier.volume[hull]
    later = np.flatnonzero(vertex_volumes > volume * (1 + _TOL) + _TOL)
    if later.size == 0:
        return None
    h = int(hull[int(later[0])])
    return float(frontier.volume[h] - volume), float(frontier.utility[h] - utility)


def _g(value: float) -> str:
    return f"{value:,.4g}"


def _group_reason(entry: Mapping[str, Any], frontier: GroupFrontier, limits: GroupLimits,
                  *, multiplier: float, left: float, objective: str,
                  target_precision: float | None, share: float | None
                  ) -> tuple[str, str, tuple[float, float] | None]:
    """``(held_by, why, next step)`` of one group (see the module docstring); ``why`` gives
    the numbers, the cause is ``held_by``."""
    status, volume, utility = entry["status"], entry["volume"], entry["utility"]
    if status == "infeasible":
        return "bounds", ("no covered cell within its capacity.min_volume/max_volume: "
                          "nothing allocated"), None
    step = next_step(frontier, volume, utility)
    if status == "capacity_bound" and step is not None:
        dv, du = step
        per_row = du / dv
        if dv > left * (1 + _TOL):
            why = (f"its next candidate flags {_g(dv)} more rows for "
                   f"{du:+,.4g} utility ({per_row:.4g} per row), more than the {_g(left)} rows "
                   "left")
        else:
            why = (f"its next candidate flags {_g(dv)} more rows worth "
                   f"{per_row:.4g} utility per row, less than the price lambda = "
                   f"{multiplier:.4g}")
        return "capacity", why, step
    at = f"its best point flags {_g(volume)} rows"
    if volume >= limits.lattice_volume * (1 - _TOL):
        return "volume", f"{at}, every row its lattice can flag", None
    if limits.candidate_volume > volume * (1 + _TOL) + _TOL:
        beyond = ("does not raise its utility: the rows it adds have a marginal precision "
                  f"at or below the target {target_precision:.4g}" if objective == "linear"
                  and target_precision is not None else "adds no true positive")
        why = (f"{at}; flagging more of its covered cells (up to "
               f"{_g(limits.candidate_volume)} rows) {beyond}")
        if limits.covered_volume < limits.lattice_volume * (1 - _TOL):
            why += (f"; beyond {_g(limits.covered_volume)} rows its rated region ends "
                    f"(coverage.max_unrated_share = {share:g})")
        return "target", why, None
    if (limits.max_volume is not None
            and limits.covered_volume > limits.max_volume * (1 + _TOL)):
        return "max_volume", (f"{at}, its capacity.max_volume = {_g(limits.max_volume)}; "
                              f"covered cells flag up to {_g(limits.covered_volume)}"), None
    return "coverage", (f"its rated region ends here: {at}; every cell flagging more (up to "
                        f"{_g(limits.lattice_volume)} rows) flags more unrated rows than "
                        f"coverage.max_unrated_share = {share:g} allows"), None


def allocation_reasons(summary: Mapping[str, Any], frontiers: Mapping[str, GroupFrontier],
                       limits: Mapping[str, GroupLimits], *, objective: str,
                       target_precision: float | None,
                       max_unrated_share: float | None) -> dict[str, Any]:
    """Per group ``held_by`` and ``why`` (added to ``summary["groups"]`` entries, in place),
    and the run's ``unused`` explanation (returned; see the module docstring).

    ``summary``: an allocation summary (capacity, multiplier, totals, feasible, upper bound,
    per-group entries with status, volume, utility).
    """
    capacity = float(summary["capacity"])
    used = float(summary["total_volume"])
    left = max(capacity - used, 0.0)
    multiplier = float(summary["multiplier"])
    share = 1.0 if max_unrated_share is None else max_unrated_share
    held: dict[str, list[str]] = {}
    steps: dict[str, tuple[float, float]] = {}
    for group, entry in summary["groups"].items():
        held_by, why, step = _group_reason(
            entry, frontiers[group], limits[group], multiplier=multiplier, left=left,
            objective=objective, target_precision=target_precision, share=share)
        entry["held_by"], entry["why"] = held_by, why
        held.setdefault(held_by, []).append(group)
        if step is not None:
            steps[group] = step
    out: dict[str, Any] = {
        "unused": left, "held_by": {k: held[k] for k in HELD_BY if k in held},
        "unused_why": _unused_text(capacity, used, left, multiplier, held, steps,
                                   feasible=bool(summary["feasible"])),
        "bound_why": _bound_text(summary, steps, multiplier),
    }
    return out


def _counted(held: Mapping[str, list[str]], codes: tuple[str, ...]) -> str:
    words = {"target": "the target", "coverage": "the rated region (coverage)",
             "max_volume": "capacity.max_volume", "volume": "their own volume",
             "bounds": "no candidate within their bounds"}
    return "; ".join(f"{words[k]}: {len(held[k])} group(s) ({', '.join(held[k][:3])}"
                     f"{', ...' if len(held[k]) > 3 else ''})" for k in codes if k in held)


def _unused_text(capacity: float, used: float, left: float, multiplier: float,
                 held: Mapping[str, list[str]], steps: Mapping[str, tuple[float, float]],
                 *, feasible: bool) -> str:
    if not feasible:
        return ("no allocation fits: the groups' least volumes exceed the capacity "
                f"({_g(used)} of {_g(capacity)} rows)")
    head = f"{_g(used)} of {_g(capacity)} rows allocated, {_g(left)} unused"
    own = _counted(held, HELD_BY[1:])
    if not steps:  # every group at its best candidate: the capacity does not bind
        return (f"{head}: the capacity does not bind (lambda = {multiplier:.4g}); every group "
                f"is at its best point, held there by " + (own or "nothing") + "")
    smallest = min(dv for dv, _ in steps.values())
    text = (f"{head}: {len(steps)} group(s) held by the shared capacity (lambda = "
            f"{multiplier:.4g} utility per row); the smallest next step of any of them needs "
            f"{_g(smallest)} rows")
    if smallest > left * (1 + _TOL):
        text += ", more than is left"
    return text + (f"; the other groups are at their best point, held by {own}" if own else "")


def _bound_text(summary: Mapping[str, Any], steps: Mapping[str, tuple[float, float]],
                multiplier: float) -> str | None:
    """Why the LP bound exceeds the utility (None when it does not)."""
    bound, utility = summary.get("upper_bound"), float(summary["total_utility"])
    if bound is None or not math.isfinite(bound) or bound <= utility + _TOL * max(1.0,
                                                                                 abs(utility)):
        return None
    split = [g for g, (dv, du) in steps.items()
             if math.isclose(du / dv, multiplier, rel_tol=1e-9, abs_tol=1e-12)]
    head = (f"the LP bound {_g(bound)} exceeds the utility {_g(utility)} by "
            f"{_g(bound - utility)}: the bound may take part of a group's next step, an "
            "allocation gives every group one whole cell")
    if split:
        dv, du = steps[split[0]]
        head += (f"; here part of the next step of group {split[0]!r} ({_g(dv)} rows for "
                 f"{du:+,.4g} utility, {du / dv:.4g} per row = lambda), which does not fit")
    if summary.get("exact"):
        head += ("; the allocation is the exact optimum over every combination of cells: no "
                 "allocation reaches the bound")
    return head
