"""Files and records shared by every stage: inputs, run directories, the output lock, contracts.

- :mod:`.files`: matching input globs, reading Parquet row groups, writing outputs atomically;
- :mod:`.batches`: validating one Arrow batch of the score stream (usable rows, dead letters);
- :mod:`.schema`: the score stream's schema contract (columns and types a run needs);
- :mod:`.labels`: reading a label column in every convention (bool, 0/1, floats, strings);
- :mod:`.units`: what a run's weighted numbers count (rows, estimated rows, money);
- :mod:`.plausibility`: a run's plausibility settings and the violations they hold back;
- :mod:`.preflight`: the plausibility settings and every input file's schema, before a run;
- :mod:`.accounting`, :mod:`.dead_letters`: row counters and Beam metrics, dead-letter files;
- :mod:`.min_risk`: per-row costs (cost-weighted recalibration, minimum-risk decisions);
- :mod:`.runs`: per-run output directories (``OUTPUT/runs/RUN_ID``, ``LATEST``, manifests);
- :mod:`.lock`: one run at a time per output directory;
- :mod:`.published_points`: which published operating point every group uses, per window;
- :mod:`.records`: output records typed by the JSON contracts in ``schemas/``;
- :mod:`.status`: health of a published output (``costlib status``);
- :mod:`.frames`: a run's operating points and decisions as pandas frames
  (:func:`operating_points_frame`, :func:`decisions_frame`: the documented way to read them).

The two frame readers are imported on first use: they need pandas, which the commands that only
read a run's records (``costlib status``, ``publish``, ``unlock``) do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from costlib_pipelines.io.frames import decisions_frame, operating_points_frame

__all__ = ["decisions_frame", "operating_points_frame"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from costlib_pipelines.io import frames

        return getattr(frames, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
