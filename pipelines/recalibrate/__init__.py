"""The recalibration stage: score streams in, operating points per group out.

- :mod:`.pipeline`: the pipeline and :func:`run_recalibrate` (``costlib recalibrate``);
- :mod:`.manifest`: a finished run's manifest and its publication (``LATEST``);
- :mod:`.event_times`: the event-time range of a windowed run's input;
- :mod:`.reading`: files split into row-group ranges, and the batches of an element;
- :mod:`.aggregating`: batches read, validated and histogrammed into partial grids per group;
- :mod:`.grids`: the rows that enter the grids, and the combiners that add partial grids;
- :mod:`.edges`: edges from a first pass (edge sketches, fine histograms, summed);
- :mod:`.optimizing`: one group's summed grid -> its operating points;
- :mod:`.carried_edges`, :mod:`.in_force`: candidate thresholds and the thresholds in force;
- :mod:`.shards`, :mod:`.window_shards`: per-group optimisation sharded by group range;
- :mod:`.capacity`: one review capacity shared by all groups;
- :mod:`.publish`, :mod:`.window_guard`: the guard that holds suspicious runs for a human.

What it shares with the decide stage (row accounting, dead letters, the preflight, per-row
costs) is in :mod:`costlib_pipelines.io`.
"""
