"""One review capacity shared by all groups, in the batch recalibration pipeline.

With ``capacity.total`` set, recalibrate allocates that many flagged rows (next period) over
the groups with :mod:`costlib.thresholds.capacity._allocation`, on the same summed grids the methods
use:

1. :class:`GroupFrontierFn` (per group, in parallel): a group with enough rated rows
   (``min_rated``) gets its volume scale ``a_g``
   (:func:`costlib.thresholds.capacity._split_baselines.volume_scales` from its rows in the run,
   ``capacity.period_share`` and ``capacity.expected_rows``) and its frontier
   (:func:`costlib.thresholds.capacity._group_frontiers.group_frontiers` of that group alone, which
   equals the frontier computed for all groups at once bit for bit): the Pareto set of its covered
   candidates within ``capacity.min_volume``/``max_volume``, and the concave hull on it. Groups
   below ``min_rated`` are not allocated (their ``capacity`` record has no thresholds).
2. :class:`GatherFrontiers` (one global combine, merged in two levels by the runner): the
   frontiers only, never a grid. Once more than
   :data:`costlib.thresholds.capacity._allocation.EXACT_AUTO_GROUPS` groups have a candidate (or
   with ``capacity.exact: never``) the exact programme cannot run and each frontier is cut to its
   hull vertices (:meth:`costlib.thresholds.capacity._group_frontiers.GroupFrontier.vertices`; the
   same allocation): a few dozen points per group.
3. :func:`allocate`: :func:`costlib.thresholds.capacity._allocation.allocate_frontiers` on the
   frontiers
   sorted by group name, i.e. exactly ``allocate_capacity`` of the sorted groups' grids. Its result
   (:func:`allocation_summary`: per group the cell, thresholds, volume, utility, status, and
   the run's ``lambda``) is a side input of the records stage.
4. :class:`SplitFiguresFn` + :class:`SumSplitFigures`: per group, what an equal split
   (``C / G``) and a traffic-proportional split (``C n̂_g / sum n̂``) of the same capacity
   would give it (:func:`costlib.thresholds.capacity._split_baselines.utility_within` on its whole
   Pareto set, in parallel), summed exactly (``fsum``) into the report's baselines.

The records stage (:class:`costlib_pipelines.recalibrate.shards.OptimizeGroupsFn`) adds each group's
``capacity`` record (:func:`capacity_point`); the publish stage writes ``capacity.json``,
puts the summary in the manifest and holds the run when the allocation exceeds the capacity
(:func:`capacity_violations`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import apache_beam as beam
import numpy as np

from costlib.thresholds.capacity import (
    EXACT_AUTO_GROUPS,
    GroupFrontier,
    allocate_frontiers,
    capacity_spec,
    grid_rows,
    group_frontiers,
    utility_within,
    volume_scales,
)
from costlib.thresholds.grid import ThresholdGrid
from costlib.thresholds.loop import ALL_GROUPS, GroupResult, is_sufficient
from costlib.thresholds.point import DecisionSpec, OperatingPoint, point_at
from costlib_pipelines.config import RunConfig
from costlib_pipelines.recalibrate.capacity_reasons import (
    GroupLimits,
    allocation_reasons,
    group_limits,
)
from costlib_pipelines.recalibrate.grids import dense_grid
from costlib_pipelines.recalibrate.optimizing import split_grid_value

__all__ = [
    "METHOD",
    "AllocateCapacity",
    "CapacityInput",
    "CapacityOutputs",
    "GatherFrontiers",
    "GroupFrontierFn",
    "SplitFiguresFn",
    "SumSplitFigures",
    "allocate",
    "allocation_spec",
    "capacity_point",
    "capacity_summary",
    "capacity_violations",
    "not_allocated_reason",
    "summarise",
]

#: Method name of the allocation's records.
METHOD = "capacity"


def allocation_spec(config: RunConfig) -> DecisionSpec:
    """The allocation's :class:`~costlib.thresholds.DecisionSpec`
    (:func:`costlib.thresholds.capacity.capacity_spec`) from the config: rule, capacity
    objective, target (for an objective that takes one), coverage."""
    objective = config.capacity["objective"]
    share = config.max_unrated_share
    return capacity_spec(rule=config.rule, objective=objective,
                         target=config.target if objective == "linear" else None,
                         max_unrated_share=1.0 if share is None else share)


def _reading_spec(config: RunConfig) -> DecisionSpec:
    """How an allocated group's point is read off its grid: the config's target, rule and
    coverage, the linear objective and no constraints (the allocation chose the point)."""
    share = allocation_spec(config).max_unrated_share
    return DecisionSpec.of(target=config.target, rule=config.rule, max_unrated_share=share)


def _exact_setting(config: RunConfig) -> bool | str:
    return "auto" if config.capacity["exact"] == "auto" else False


@dataclass(frozen=True)
class CapacityInput:
    """What one group contributes to the allocation: its frontier (scaled), its rows in the
    run ``n_g`` and its volume scale ``a_g``."""

    frontier: GroupFrontier
    rows: float
    volume_scale: float
    limits: GroupLimits | None = None  # what bounds it from its own side (capacity_reasons)


def group_input(group: str, grid: ThresholdGrid, config: RunConfig) -> CapacityInput:
    """A group's :class:`CapacityInput` (step 1 of the module docstring)."""
    capacity = config.capacity
    rows = grid_rows(grid)
    expected = capacity["expected_rows"]
    scale = volume_scales({group: rows}, period_share=capacity["period_share"],
                          expected_rows={group: expected[group]} if group in expected
                          else None)[group]
    low, high = capacity["min_volume"], capacity["max_volume"]
    frontier = group_frontiers(
        {group: grid}, allocation_spec(config),
        min_volume={group: low[group]} if group in low else None,
        max_volume={group: high[group]} if group in high else None,
        volume_scale={group: scale})[group]
    limits = group_limits(grid, rule=config.rule,
                          max_unrated_share=allocation_spec(config).max_unrated_share,
                          scale=scale, min_volume=low.get(group), max_volume=high.get(group))
    return CapacityInput(frontier, rows, scale, limits)


class GroupFrontierFn(beam.DoFn):
    """``(group, summed grid)`` -> ``(group, CapacityInput)`` for every group with enough rated
    rows (not ``__all__``); side input: the grid ``edges``."""

    def __init__(self, config: RunConfig):
        self.config = config

    def process(self, element, edges):
        group, value = element
        if group == ALL_GROUPS:
            return
        grid, _ = split_grid_value(value)
        if grid is None:
            return
        grid = dense_grid(grid, edges)
        if not is_sufficient(grid, self.config.min_positives, self.config.min_negatives):
            return
        yield group, group_input(group, grid, self.config)


class GatherFrontiers(beam.CombineFn):
    """Every group's :class:`CapacityInput` on one worker, frontiers cut to their hull
    vertices once the exact programme cannot run (more than
    :data:`~costlib.thresholds.capacity._allocation.EXACT_AUTO_GROUPS` groups with a candidate, or
    ``exact: never``): the accumulator holds frontier summaries, never grids."""

    def __init__(self, exact: bool | str = "auto"):
        self.exact = exact

    def create_accumulator(self) -> dict[str, CapacityInput]:
        return {}

    def _settle(self, acc: dict[str, CapacityInput]) -> dict[str, CapacityInput]:
        feasible = sum(1 for item in acc.values() if item.frontier.feasible)
        if self.exact == "auto" and feasible <= EXACT_AUTO_GROUPS:
            return acc
        for group, item in acc.items():
            front = item.frontier
            if front.feasible and front.hull.size < front.cells.size:
                acc[group] = replace(item, frontier=front.vertices())
        return acc

    def add_input(self, acc, element):
        group, item = element
        acc[group] = item
        return self._settle(acc)

    def merge_accumulators(self, accs):
        merged: dict[str, CapacityInput] = {}
        for acc in accs:
            merged.update(acc)
        return self._settle(merged)

    def extract_output(self, acc):
        return dict(sorted(acc.items()))


def _thresholds(edges: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """Candidate thresholds per classifier: the edges and ``+inf`` (as
    :attr:`costlib.thresholds.ThresholdGrid.thresholds`)."""
    return tuple(np.append(np.asarray(e, dtype=np.float64), np.inf) for e in edges)


def allocate(gathered: Mapping[str, CapacityInput], config: RunConfig,
             edges: Sequence[Any]) -> dict[str, Any]:
    """The allocation of ``capacity.total`` over the gathered groups (step 3): an
    :func:`allocation_summary`."""
    groups = dict(sorted(gathered.items()))
    result = allocate_frontiers(
        {g: item.frontier for g, item in groups.items()}, float(config.capacity["total"]),
        allocation_spec(config), thresholds=_thresholds(edges), exact=_exact_setting(config))
    return allocation_summary(result, groups, config)


def _number(value: float) -> float | str | None:
    """A float for JSON: NaN as null, infinities as "inf"/"-inf"."""
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value


def allocation_summary(result, groups: Mapping[str, CapacityInput],
                       config: RunConfig) -> dict[str, Any]:
    """The allocation as plain values: the run's figures and, under ``"groups"``, per group
    its cell ``index``, ``thresholds``, ``volume``, ``utility``, ``true_positives``,
    ``false_positives``, ``status``, ``volume_scale``, ``traffic`` (``a_g n_g``), and what
    holds it there (``held_by``, ``why``); for the run, the ``unused`` capacity and why
    (``unused_why``, ``held_by``: groups per cause) and why the LP bound exceeds the utility
    (``bound_why``; :mod:`costlib_pipelines.recalibrate.capacity_reasons`)."""
    named = set(config.capacity["min_volume"]) | set(config.capacity["max_volume"]) | set(
        config.capacity["expected_rows"])
    statuses: dict[str, int] = {}
    per_group = {}
    for g, a in result.groups.items():
        statuses[a.status] = statuses.get(a.status, 0) + 1
        item = groups[g]
        per_group[g] = {"index": list(a.index), "thresholds": list(a.thresholds),
                        "volume": a.volume, "utility": a.utility,
                        "true_positives": a.true_positives,
                        "false_positives": a.false_positives, "status": a.status,
                        "volume_scale": item.volume_scale,
                        "traffic": item.volume_scale * item.rows}
    summary = {
        "capacity": result.capacity, "objective": result.objective,
        "target_slope": result.target_slope, "multiplier": result.multiplier,
        "marginal_precision": result.marginal_precision,
        "total_volume": result.total_volume, "total_utility": result.total_utility,
        "total_true_positives": math.fsum(a.true_positives for a in result.groups.values()),
        "upper_bound": result.upper_bound, "lagrangian_total": result.lagrangian_total,
        "integrality_gap": result.integrality_gap, "greedy_utility": result.greedy_utility,
        "exact": result.exact, "feasible": result.feasible, "groups_allocated": len(per_group),
        "statuses": dict(sorted(statuses.items())),
        "traffic_total": math.fsum(v["traffic"] for v in per_group.values()),
        "groups_not_in_run": sorted(named - set(per_group)),
        "groups": per_group,
    }
    limits = {g: item.limits for g, item in groups.items()}
    if all(limit is not None for limit in limits.values()):
        summary.update(allocation_reasons(
            summary, {g: item.frontier for g, item in groups.items()},
            {g: limit for g, limit in limits.items() if limit is not None},
            objective=result.objective,
            target_precision=config.target.marginal_precision,
            max_unrated_share=config.max_unrated_share))
    return summary


class SplitFiguresFn(beam.DoFn):
    """``(group, CapacityInput)`` -> what an equal and a traffic-proportional split of the
    capacity would give the group: ``(utility, true positives, volume)`` for each (step 4);
    side input: the :func:`allocation_summary`."""

    def process(self, element, summary):
        group, item = element
        if summary is None or group not in summary["groups"]:
            return
        traffic = summary["groups"][group]["traffic"]
        capacity, total = summary["capacity"], summary["traffic_total"]
        # costlib.thresholds.capacity._split_baselines.split_shares over all groups: C / G and C
        # n̂_g / sum(n̂)
        equal = capacity / summary["groups_allocated"]
        proportional = capacity * traffic / total if total > 0 else equal
        yield (*utility_within(item.frontier, equal), *utility_within(item.frontier, proportional))


class SumSplitFigures(beam.CombineFn):
    """Per-group split figures -> their exact sums (``math.fsum``: independent of order and
    bundling): ``equal_utility``, ``equal_true_positives``, ``equal_volume`` and the same for
    ``proportional_``."""

    NAMES = ("equal_utility", "equal_true_positives", "equal_volume",
             "proportional_utility", "proportional_true_positives", "proportional_volume")

    def create_accumulator(self) -> list[list[float]]:
        return [[] for _ in self.NAMES]

    def add_input(self, acc, figures):
        for values, v in zip(acc, figures, strict=True):
            values.append(float(v))
        return acc

    def merge_accumulators(self, accs):
        merged = self.create_accumulator()
        for acc in accs:
            for values, more in zip(merged, acc, strict=True):
                values.extend(more)  # every value: a sum of partial sums would round twice
        return merged

    def extract_output(self, acc):
        return {name: math.fsum(values) for name, values in zip(self.NAMES, acc, strict=True)}


def capacity_point(group: str, grid: ThresholdGrid, result: GroupResult,
                   summary: Mapping[str, Any] | None, config: RunConfig
                   ) -> tuple[GroupResult, dict[str, Any]]:
    """``result`` with its ``capacity`` point, and the entry of the group's allocation (None:
    not allocated, too few rated rows; the point is then None, no thresholds).

    The point is :func:`costlib.thresholds.point_at` the allocated thresholds on
    the group's grid (its counts this run, unscaled); a group without a candidate within its
    bounds (status ``infeasible``, thresholds off) gets ``point_status`` infeasible, so
    ``costlib decide`` gives it null decisions and the guard holds the run when the decision
    method is ``capacity``.
    """
    entry = None if summary is None else summary["groups"].get(group)
    point: OperatingPoint | None = None
    if entry is not None:
        point = replace(point_at(grid, entry["thresholds"], _reading_spec(config)),
                        method=METHOD)
        if entry["status"] == "infeasible":
            point = replace(point, status="infeasible", reason=(
                "no covered cell within the group's capacity.min_volume/max_volume: "
                "nothing allocated"))
        elif entry.get("why"):  # what holds the group where it is (capacity_reasons)
            point = replace(point, reason=f"held by {entry['held_by']}: {entry['why']}")
    return replace(result, points={**result.points, METHOD: point}), entry


def not_allocated_reason(grid: ThresholdGrid, config: RunConfig) -> str:
    """Why a group's ``capacity`` record has no thresholds: its own grid holds fewer rated
    rows than ``min_rated`` (the allocation leaves such a group out; the methods' records may
    fall back to ``__all__``, the allocation does not), with the grid's numbers."""
    pos, neg = grid.total_positives, grid.total_negatives
    return (f"left out of the capacity allocation: its grid holds {pos:g} rated positives "
            f"and {neg:g} rated negatives, fewer than min_rated (positives "
            f"{config.min_positives:g}, negatives {config.min_negatives:g}); the allocation "
            "gives such a group no thresholds (no fallback)")


def capacity_summary(summary: Mapping[str, Any] | None,
                     splits: Mapping[str, float] | None) -> dict[str, Any] | None:
    """The manifest's ``capacity`` entry (and ``capacity.json``): the allocation's figures
    without the per-group entries, with the split baselines and the gains over them; JSON
    safe (infinities as strings, NaN as null). None when no group was allocated."""
    if summary is None:
        return None
    out = {k: v for k, v in summary.items() if k != "groups"}
    out.update(splits or {})
    if splits:
        for name in ("equal", "proportional"):
            out[f"gain_over_{name}_utility"] = out["total_utility"] - splits[f"{name}_utility"]
            out[f"gain_over_{name}_true_positives"] = (
                out["total_true_positives"] - splits[f"{name}_true_positives"])
    return {k: _number(v) if isinstance(v, float) else v for k, v in out.items()}


def capacity_violations(records: Sequence[Mapping[str, Any]],
                        summary: Mapping[str, Any] | None) -> list[str]:
    """Reasons for the guard to hold a run whose allocation exceeds its capacity.

    Checked on the written ``capacity`` records themselves: the sum of ``allocated_volume``
    must not exceed ``capacity`` (a relative ``1e-9`` for rounding); and an allocation that
    is not feasible (the groups' least volumes, e.g. ``capacity.min_volume``, exceed it) is
    held.
    """
    mine = [r for r in records if r["method"] == METHOD and r["window_start"] is None]
    if not mine:
        return []
    capacity = float(mine[0]["capacity"])
    used = math.fsum(r["allocated_volume"] or 0.0 for r in mine)
    out = []
    if used > capacity * (1 + 1e-9):
        out.append(f"capacity: the allocation flags {used:,.6g} rows next period, more than "
                   f"capacity.total = {capacity:,.6g}")
    if summary is not None and not summary.get("feasible", True):
        out.append("capacity: no allocation fits: the groups' least volumes "
                   "(capacity.min_volume, or their smallest covered candidates) exceed "
                   f"capacity.total = {capacity:,.6g}")
    return out



def summarise(allocation: Mapping[str, Any], splits: Mapping[str, float] | None
              ) -> dict[str, Any] | None:
    """:func:`capacity_summary` as a ``Map`` over the allocation (splits: a side input)."""
    return capacity_summary(allocation, splits)


class CapacityOutputs(NamedTuple):
    """``allocation``: the :func:`allocation_summary` (one element, or none when no group has
    enough rated rows); ``summary``: the manifest's ``capacity`` entry (likewise)."""

    allocation: Any
    summary: Any


class AllocateCapacity(beam.PTransform):
    """Summed grids per group -> the allocation of ``capacity.total`` (steps 1-4 of the module
    docstring). ``edges``: the grid edges (a list, or the data edges' side input)."""

    def __init__(self, config: RunConfig, edges):
        super().__init__()
        self.config = config
        self.edges = edges

    def expand(self, summed):
        config, edges = self.config, self.edges
        inputs = summed | "Frontiers" >> beam.ParDo(GroupFrontierFn(config), edges)
        allocation = (
            inputs
            | "Gather" >> beam.CombineGlobally(
                GatherFrontiers(_exact_setting(config))).without_defaults()
            | "Allocate" >> beam.Map(allocate, config, edges)
        )
        splits = (
            inputs
            | "Splits" >> beam.ParDo(SplitFiguresFn(),
                                     beam.pvalue.AsSingleton(allocation, default_value=None))
            | "SumSplits" >> beam.CombineGlobally(SumSplitFigures()).without_defaults()
        )
        summary = allocation | "Summary" >> beam.Map(
            summarise, beam.pvalue.AsSingleton(splits, default_value=None))
        return CapacityOutputs(allocation, summary)
