"""Shared capacity: one review capacity ``C`` shared by many groups.

Public face of the wing:

ALLOCATION_OBJECTIVES, GroupFrontier, group_frontiers, capacity_spec
    Each group's concave frontier of (volume, utility) points under the capacity's
    :class:`~costlib.thresholds.DecisionSpec` (:mod:`._group_frontiers`).
CapacityAllocation, GroupAllocation, allocate_capacity, allocate_frontiers, EXACT_AUTO_GROUPS
    The split of ``C`` that maximises the summed utility: a Lagrangian price on volume, exact
    for few groups (:mod:`._allocation`).
SplitBaselines, split_baselines, grid_rows, utility_within, volume_scales
    The fixed splits a user would pick instead (equal, by volume), scored on the same
    frontiers (:mod:`._split_baselines`).
"""

from costlib.thresholds.capacity._allocation import (
    EXACT_AUTO_GROUPS,
    CapacityAllocation,
    GroupAllocation,
    allocate_capacity,
    allocate_frontiers,
)
from costlib.thresholds.capacity._group_frontiers import (
    ALLOCATION_OBJECTIVES,
    GroupFrontier,
    capacity_spec,
    group_frontiers,
)
from costlib.thresholds.capacity._split_baselines import (
    SplitBaselines,
    grid_rows,
    split_baselines,
    utility_within,
    volume_scales,
)

__all__ = [
    "ALLOCATION_OBJECTIVES", "EXACT_AUTO_GROUPS", "CapacityAllocation", "GroupAllocation",
    "GroupFrontier", "SplitBaselines", "allocate_capacity", "allocate_frontiers", "capacity_spec",
    "grid_rows", "group_frontiers", "split_baselines", "utility_within", "volume_scales",
]
