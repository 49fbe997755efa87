"""Optimising one group: its summed grid (and replicate grids) -> its operating points.

:func:`optimize_one` is what every optimising stage calls per group (batch runs:
:class:`~costlib_pipelines.recalibrate.shards.OptimizeGroupsFn`; windowed runs:
:class:`OptimizeGroupFn`); :func:`split_grid_value` unpacks a summed element. Classes live in
this module (never in ``__main__``) so that every runner can pickle them.
"""

from __future__ import annotations

import apache_beam as beam

from costlib.thresholds.loop import optimize_group
from costlib_pipelines.config import RunConfig
from costlib_pipelines.recalibrate.grids import dense_grid

__all__ = ["OptimizeGroupFn", "optimize_one", "split_grid_value"]


class OptimizeGroupFn(beam.DoFn):
    """``(group, grid[, replicate grids])`` -> ``(group, (GroupResult, pane index))`` (windowed
    runs; :class:`~costlib_pipelines.recalibrate.window_shards.WriteWindows` keys them by shard)."""

    def __init__(self, config: RunConfig, in_force=None):
        self.config = config
        self.in_force = in_force  # costlib_pipelines.recalibrate.in_force.InForce, or None

    def process(self, element, edges=None, pane=beam.DoFn.PaneInfoParam):
        group, value = element
        grid, boot = split_grid_value(value)
        if grid is None:  # only unrated rows: no operating point (as for a group without rows)
            return
        result = optimize_one(self.config, group, grid, boot, edges, self.in_force)
        pane_index = 0 if pane is None else int(pane.index)
        yield group, (result, pane_index)


def split_grid_value(value):
    """``(grid, bootstrap grids or None)`` of a summed element (plain, or from CoGroupByKey)."""
    if isinstance(value, dict):  # from CoGroupByKey: {"grid": [...], "bootstrap": [...]}
        grid = value["grid"][0] if value["grid"] else None
        boot = value["bootstrap"][0] if value["bootstrap"] else None
        return grid, boot
    return value, None


def optimize_one(config: RunConfig, group: str, grid, boot=None, edges=None, in_force=None):
    """One group's :class:`~costlib.thresholds.GroupResult`; a compact grid is made dense
    here (:func:`dense_grid`). Called on one group at a time, a worker holds one group's dense
    lattice at a time (:class:`~costlib_pipelines.recalibrate.shards.OptimizeGroupsFn` holds a
    bounded batch).
    ``in_force``: the run's thresholds in force
    (:class:`~costlib_pipelines.recalibrate.in_force.InForce`, or None); the run's
    :class:`~costlib.thresholds.InForcePolicy` (``config.policy``) says whether
    :func:`~costlib.thresholds.optimize_group` keeps or weighs them."""
    grid = dense_grid(grid, edges)
    return optimize_group(
        group, grid, config.decision, methods=config.methods,
        min_positives=config.min_positives, min_negatives=config.min_negatives,
        bootstrap=boot, level=config.bootstrap["level"],
        in_force=None if in_force is None else in_force.get(group), policy=config.policy,
    )
