"""The publish guard's volume check: how much more or less a run would flag than the points in
force, on the same rows.

A run whose thresholds move little can still change the flagged volume many times over (a
coarse lattice, a classifier switched on, a group that falls back to ``__all__``). The guard
therefore compares, per group and in total, the *expected flagged volume* ``V`` (rated and
unrated rows, weighted as the grids weigh them: audited rows by ``1 / pi``) of

- the new points: the thresholds of the decision method the run publishes (the parent's under
  fallback; none for a group without thresholds or with an infeasible point, which ``costlib
  decide`` gives null decisions: ``V = 0``, except a point that misses ``min_recall`` only,
  which decide applies), and
- the points in force: the thresholds ``costlib decide`` applies now (``InForce``: the
  published run, or ``--in-force``; ``__all__``'s for groups without their own),

both evaluated on the group's own grid of this run (:func:`volume_at`: exact when the thresholds
are candidate thresholds, which ``in_force.add_to_edges`` ensures for the points in force).
So the two volumes count the same rows and differ only by the thresholds.

The change is the ratio ``max(V_new / V_in_force, V_in_force / V_new)`` of the totals over the
groups (``inf`` when one of them is 0 and the other is not; 1 when both are 0). Above
``publish.max_volume_change`` (default 3) the guard warns (a note in the manifest and the
summary, with both volumes and the groups that changed most) or, with
``publish.on_volume_change: hold``, holds the run (exit 3). Without points in force (nothing
published and no ``--in-force``) nothing is compared and the manifest says so. Batch runs only:
windowed runs are not checked yet.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import numpy as np

from costlib.thresholds.grid import ThresholdGrid
from costlib.thresholds.loop import GroupResult
from costlib.thresholds.point import OperatingPoint
from costlib_pipelines.io.recall_floor import misses_only_min_recall

__all__ = [
    "VOLUMES",
    "GatherVolumes",
    "VolumeCheck",
    "decision_volumes",
    "volume_at",
    "volume_change",
]

#: Tag of the records stage's output of ``(group, new volume, volume in force)``.
VOLUMES = "volumes"


def volume_at(grid: ThresholdGrid, thresholds: Sequence[float] | None, rule: str) -> float:
    """The flagged volume ``V = TP + FP + U`` of ``thresholds`` on ``grid`` (0 for None).

    Each classifier's lattice index is the first candidate threshold ``>= t_j`` (``+inf``:
    off), as :func:`costlib.thresholds.point_at` places a point.
    """
    if thresholds is None:
        return 0.0
    index = tuple(int(np.searchsorted(candidates, float(t), side="left"))
                  for candidates, t in zip(grid.thresholds, thresholds, strict=True))
    return float(grid.volume(rule)[index])


def decision_volumes(group: str, grid: ThresholdGrid, result: GroupResult, method: str,
                     rule: str, in_force: Sequence[float] | None
                     ) -> tuple[str, float, float]:
    """``(group, V of the new point, V of the point in force)`` on ``grid``.

    ``result`` is the group's result after its fallback (``method``'s point is then the
    parent's); an absent or thresholdless point flags nothing, and so does an infeasible one
    unless it misses ``min_recall`` only (decide applies that one). ``in_force``: the
    thresholds the group is decided with now (None: nothing, null decisions).
    """
    point = result.points.get(method)
    new = point.thresholds if point is not None and _applied(point) else None
    return group, volume_at(grid, new, rule), volume_at(grid, in_force, rule)


def _finite_or_none(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _applied(point: OperatingPoint) -> bool:
    """Whether ``costlib decide`` applies ``point`` once published: any feasible point, and an
    infeasible one that misses ``min_recall`` only
    (:func:`~costlib_pipelines.io.recall_floor.misses_only_min_recall`, on the fields its
    record would carry)."""
    if point.status != "infeasible":
        return True
    limits = point.constraints
    return misses_only_min_recall({
        "point_status": "infeasible", "thresholds": list(point.thresholds),
        "min_recall": limits.get("min_recall"), "min_precision": limits.get("min_precision"),
        "max_volume": limits.get("max_volume"),
        "max_false_positives": limits.get("max_false_positives"),
        "precision": _finite_or_none(point.precision), "volume": float(point.volume),
        "fp": float(point.fp)})


class GatherVolumes(beam.CombineFn):
    """``(group, new, in force)`` triples -> ``{group: [new, in force]}`` (one small dict;
    the groups' volumes only, never a grid)."""

    def create_accumulator(self) -> dict[str, list[float]]:
        return {}

    def add_input(self, acc, element):
        group, new, old = element
        acc[group] = [float(new), float(old)]
        return acc

    def merge_accumulators(self, accs):
        merged: dict[str, list[float]] = {}
        for acc in accs:
            merged.update(acc)
        return merged

    def extract_output(self, acc):
        return dict(sorted(acc.items()))


def volume_change(new: float, old: float) -> float:
    """``max(new / old, old / new)``: 1 for equal volumes (both 0 included), ``inf`` when
    exactly one is 0."""
    if new == old:
        return 1.0
    if new <= 0 or old <= 0:
        return math.inf
    return max(new / old, old / new)


def _ratio_text(ratio: float) -> str:
    return "from nothing or to nothing" if math.isinf(ratio) else f"{ratio:.3g}x"


@dataclass(frozen=True)
class VolumeCheck:
    """The volume check of one run (see the module docstring).

    Attributes
    ----------
    volumes : mapping of group to (new, in force)
        From :class:`GatherVolumes`; None when the run has no points in force.
    max_change : float or None
        ``publish.max_volume_change`` (None: not checked).
    action : {"warn", "hold"}
        ``publish.on_volume_change``.
    amounts : bool
        The grids weigh rows by their regret (``min_risk.weight_rated_rows``).
    """

    volumes: Mapping[str, Sequence[float]] | None
    max_change: float | None
    action: str = "warn"
    #: True when the grids weigh rows by their regret (``min_risk.weight_rated_rows``): the
    #: volumes are then amounts, and the message says so.
    amounts: bool = False

    @property
    def totals(self) -> tuple[float, float]:
        """``(V_new, V_in_force)`` summed over the groups (``math.fsum``)."""
        values = list((self.volumes or {}).values())
        return (math.fsum(v[0] for v in values), math.fsum(v[1] for v in values))

    @property
    def change(self) -> float | None:
        """The ratio of the totals (:func:`volume_change`), None without points in force."""
        if self.volumes is None:
            return None
        return volume_change(*self.totals)

    def exceeded(self) -> bool:
        change = self.change
        return self.max_change is not None and change is not None and change > self.max_change

    def message(self, first: int = 3) -> str:
        """The numbers: both totals, the ratio, the limit, and the groups whose volume changed
        most (by absolute difference)."""
        new, old = self.totals
        change = self.change
        assert change is not None
        moved = sorted((self.volumes or {}).items(), key=lambda kv: (-abs(kv[1][0] - kv[1][1]),
                                                                    kv[0]))
        most = "; ".join(f"{g} {v[1]:,.6g} -> {v[0]:,.6g}" for g, v in moved[:first]
                         if v[0] != v[1])
        limit = "" if self.max_change is None else (
            f", more than publish.max_volume_change = {self.max_change:g}")
        flagged = (f"rows worth {new:,.6g} (regret-weighted: min_risk.weight_rated_rows)"
                   if self.amounts else f"{new:,.6g} rows")
        return (f"volume: the new points would flag {flagged} of this run's input "
                f"against {old:,.6g} for the points in force on the same rows "
                f"({_ratio_text(change)}{limit})" + (f"; most changed: {most}" if most else ""))

    def violations(self) -> list[str]:
        """The check's violation when it holds runs (``action`` hold) and is exceeded."""
        return [self.message()] if self.action == "hold" and self.exceeded() else []

    def notes(self) -> list[str]:
        """The check's note when it only warns (``action`` warn) and is exceeded."""
        return [self.message()] if self.action == "warn" and self.exceeded() else []

    def summary(self) -> dict[str, Any]:
        """The manifest's ``guard.volume`` entry."""
        if self.volumes is None:
            return {"compared": False, "max_volume_change": self.max_change,
                    "on_volume_change": self.action,
                    "note": "no points in force: the flagged volume is not compared"}
        new, old = self.totals
        change = self.change
        return {"compared": True, "unit": "amount" if self.amounts else "rows",
                "new_volume": new, "in_force_volume": old,
                "change": "inf" if change is not None and math.isinf(change) else change,
                "max_volume_change": self.max_change, "on_volume_change": self.action,
                "exceeded": self.exceeded(), "groups": len(self.volumes)}
