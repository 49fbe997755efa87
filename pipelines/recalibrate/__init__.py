"""The recalibration stage: score streams in, operating points per group out.

- :mod:`.pipeline`: the pipeline and :func:`run_recalibrate` (``costlib recalibrate``);
- :mod:`.transforms`: its composite transforms and DoFns (grids per group, sketches, merging);
- :mod:`.carried_edges`, :mod:`.in_force`: candidate thresholds and the thresholds in force;
- :mod:`.shards`, :mod:`.window_shards`: per-group optimisation sharded by group range;
- :mod:`.capacity`: one review capacity shared by all groups;
- :mod:`.min_risk`: per-row costs (cost-weighted recalibration, minimum-risk decisions);
- :mod:`.publish`, :mod:`.window_guard`: the guard that holds suspicious runs for a human.
"""

from costlib._moved import forward_to_modules

__getattr__ = forward_to_modules(
    __name__,
    ("pipeline", "transforms", "carried_edges", "in_force", "shards", "window_shards",
     "capacity", "min_risk", "publish", "window_guard"),
    current=frozenset({"run_recalibrate", "build_recalibrate"}),
)
