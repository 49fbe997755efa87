"""The decision stage: score streams in, one decision record per valid row out.

- :mod:`.pipeline`: the pipeline and :func:`run_decide` (``costlib decide``; the stage's rules
  and output layout are described there);
- :mod:`.records`: the columns read and the decision records (built, written, read back);
- :mod:`.audit_columns`: the audit sample of a run (settings, record columns, summary);
- :mod:`.sets`, :mod:`.contiguous`: top-k sets decoded after a shuffle, or where they are read;
- :mod:`.transforms`: the Beam DoFns;
- :mod:`.audit_lattice`, :mod:`.audit_sizing`: the audit design of a run (relative strata, sizing
  from the previous run's counts).

Which operating point every group uses is read from the recalibration's output
(:func:`costlib_pipelines.io.published_points.select_operating_points`): the recalibrate stage's
publish guard and in-force thresholds use the same rules, so it lives below both stages.
"""
