"""The recalibration pipeline: Parquet score streams in, operating points per group out.

Output layout (each run in its own directory, so re-runs never mix shards)::

    OUTPUT/
      LATEST                      run id of the newest *complete* run (replaced atomically)
      runs/<run_id>/
        operating_points.parquet  one record per (group, method), schemas/operating_point.json
        operating_points.jsonl    the same records as JSON lines
        pn_curves.parquet         the PN curve each method chose its point on
        dead_letter/part-*.parquet   bad rows with reason, source file, row group and row
        accounting.json           row accounting written by the pipeline
        manifest.json             written LAST, after the pipeline succeeded: a run without
                                  it is incomplete (interrupted or failed)

Windowed mode writes ``runs/<run_id>/windows/<start>_<end>/operating_points.*`` per event-time
window instead, assembled from per-shard files (``windows/<start>_<end>/shards/``, deleted when
the run finishes; :mod:`costlib_pipelines.recalibrate.window_shards`); a late firing rewrites its
shard and re-assembles its window's files (upsert: the newest pane of each group wins, and
``pane_index`` in the records says which pane it is). When the run has finished, every window
is checked by the publish guard against the points in force before it
(:mod:`costlib_pipelines.recalibrate.window_guard`); ``points_in_force.parquet`` holds those of the
published run it started from.

This module builds the pipeline (:func:`build_recalibrate`) and runs it
(:func:`run_recalibrate`); the transforms it puts together live in the modules of
:mod:`costlib_pipelines.recalibrate` (reading, aggregating, grids, edges, optimizing, ...), the
manifest and publishing of a finished run in :mod:`costlib_pipelines.recalibrate.manifest`, the
input's event-time range in :mod:`costlib_pipelines.recalibrate.event_times`.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import apache_beam as beam
import numpy as np
from apache_beam.transforms import trigger
from apache_beam.transforms.window import SlidingWindows

from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.io.accounting import SumCounters
from costlib_pipelines.io.dead_letters import WriteDeadLettersFn
from costlib_pipelines.io.files import (
    UNIT_ROWS,
    InputError,
    match_inputs,
    write_json,
)
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.lock import hold_output, record_job
from costlib_pipelines.io.min_risk import MinRiskSettings
from costlib_pipelines.io.preflight import preflight
from costlib_pipelines.io.runs import RunDirectory
from costlib_pipelines.pause import pause_point
from costlib_pipelines.recalibrate import shards, window_guard, window_shards
from costlib_pipelines.recalibrate.aggregating import AggregateBatches
from costlib_pipelines.recalibrate.capacity import AllocateCapacity
from costlib_pipelines.recalibrate.carried_edges import (
    SKETCH_FILE,
    carried_sketches,
    read_edge_sketches,
    write_edge_sketches,
)
from costlib_pipelines.recalibrate.edges import (
    DataEdges,
    SumEdgeSketches,
    decision_edges_from_sketches,
)
from costlib_pipelines.recalibrate.event_times import event_time_range
from costlib_pipelines.recalibrate.grids import SumBootstrapGrids, SumGrids
from costlib_pipelines.recalibrate.in_force import InForce, edges_with_in_force, read_in_force
from costlib_pipelines.recalibrate.manifest import (
    PublishRunFn,
    PublishSpec,
    grid_edges_entry,
    publish_windowed_run,
)
from costlib_pipelines.recalibrate.optimizing import OptimizeGroupFn
from costlib_pipelines.recalibrate.publish import (
    GuardSettings,
    Override,
    PublishRefused,
    read_baseline,
)
from costlib_pipelines.recalibrate.reading import ReadingUnits
from costlib_pipelines.recalibrate.shards import (
    AssembleShardsFn,
    OptimizeGroupsFn,
    ShardBoundaries,
    WriteShardFn,
    optimize_parent,
)
from costlib_pipelines.recalibrate.volume_guard import VOLUMES, GatherVolumes
from costlib_pipelines.runner import job_name_flags, make_pipeline, run_to_end, runner_name

__all__ = ["build_recalibrate", "preflight", "run_recalibrate"]

DAY = 86_400


def needed_columns(config: RunConfig, *, windowed: bool) -> list[str]:
    """The physical columns recalibration reads (Parquet column projection)."""
    cols = config.columns
    names = [cols["group"], cols["item_id"], cols["label"], *config.classifiers]
    if cols.get("weight"):
        names.append(cols["weight"])
    if cols.get("audit_probability"):
        names.append(cols["audit_probability"])
    if windowed:
        names.append(cols["event_time"])
    costs = MinRiskSettings.from_config(config)
    if costs is not None and costs.weight_rated_rows:
        names += [c for c in costs.input_columns() if c not in names]
    return names


def auto_edges_source(config: RunConfig, output: str, published_run_id: str | None
                      ) -> tuple[list[np.ndarray] | None, dict[str, Any] | None]:
    """For ``grid.edges: auto``: the edges carried from the published run's sketch (None: a
    first pass places them) and the manifest's ``grid_edges.source``; ``(None, None)`` for
    the other recipes. (A stream cannot wait for a first pass: :func:`build_recalibrate`
    refuses one without carried edges.)
    """
    if config.grid.edges != "auto":
        return None, None
    if config.grid.auto_edges_from == "previous_run":
        sketches, source = carried_sketches(output, published_run_id, config.classifiers)
        if sketches is not None:
            try:
                edges = decision_edges_from_sketches(sketches, config)
            except InputError as exc:
                source = {"note": f"cannot place edges from run {published_run_id}'s sketch "
                                  f"({exc}): edges from a first pass"}
            else:
                return edges, {"from": "previous_run", **source}
    else:
        source = {"note": "grid.auto_edges_from is this_run"}
    return None, {"from": "this_run", **source}


def windowed_edges(config: RunConfig, run_dir: str, fixed: list[np.ndarray] | None,
                   in_force: InForce | None) -> list[np.ndarray] | None:
    """The edges every window of a finished windowed run used: ``fixed`` (uniform, explicit or
    carried) or, for auto edges from a first pass, placed again from the sketch the run wrote
    (the same deterministic function of the same sums); thresholds in force added."""
    if fixed is None:
        if config.grid.edges != "auto":
            return None
        path = f"{run_dir}/{SKETCH_FILE}"
        if not FileSystems.exists(path):
            return None  # no row was read
        fixed = decision_edges_from_sketches(read_edge_sketches(path, config.classifiers),
                                             config)
    return edges_with_in_force(fixed, in_force, config)[0]


def build_recalibrate(
    pipeline: beam.Pipeline,
    paths: Sequence[str],
    config: RunConfig,
    run_dir: str,
    run_id: str,
    *,
    batches=None,
    publish: PublishSpec | None = None,
    unit_rows: int | None = UNIT_ROWS,
    in_force: InForce | None = None,
    carried_edges: list[np.ndarray] | None = None,
):
    """Add the recalibration transforms to ``pipeline``.

    ``batches`` may be given instead of ``paths`` (a PCollection of
    ``(source, row_group, table)``, e.g. from a TestStream). Files are read in units of
    row-group ranges of about ``unit_rows`` rows, spread over workers
    (:class:`~costlib_pipelines.recalibrate.reading.ReadingUnits`; ``unit_rows=None``: whole
    files, one stage less, for inputs no file of which would split). With ``publish`` (batch runs),
    the last stage writes the manifest and publishes the run (:class:`PublishRunFn`). ``in_force``:
    the thresholds in force, added to the edges and kept for thin groups as the config's
    ``in_force`` section says (:mod:`costlib_pipelines.recalibrate.in_force`). ``carried_edges``:
    auto edges placed from the published run's sketch (:func:`auto_edges_source`); without them
    auto edges come from a first pass. Runs with auto edges write the summed edge sketch of
    their rows (:mod:`costlib_pipelines.recalibrate.carried_edges`), counted in the grid pass when
    the edges were carried.
    """
    windowed = config.windowing is not None
    columns = needed_columns(config, windowed=windowed)
    if batches is not None:
        sources = batches
    elif unit_rows is None:  # files are the units (Create spreads them already)
        sources = pipeline | "Files" >> beam.Create(list(paths))
    else:
        sources = (pipeline | "Files" >> beam.Create(list(paths))
                   | "Units" >> ReadingUnits(unit_rows))
    edges = config.fixed_edges() if carried_edges is None else carried_edges
    sketches = None
    if edges is None and batches is not None and windowed:
        raise ConfigError(
            "grid.edges: auto edges on a stream need edges carried from a published run (a "
            "first pass would wait for the end of the stream); use uniform or explicit edges")
    if edges is None:
        data_edges = DataEdges(config, columns)
        edges = beam.pvalue.AsSingleton(
            sources | "DataEdges" >> data_edges
            | "InForceEdges" >> beam.Map(lambda e: edges_with_in_force(e, in_force, config)[0])
        )
        sketches = data_edges.sketches
    else:
        edges, _ = edges_with_in_force(edges, in_force, config)
    partials = sources | "Aggregate" >> AggregateBatches(
        config, edges, columns=columns, windowed=windowed, sketch_rows=carried_edges is not None
    )
    if carried_edges is not None:
        sketches = partials.edge_sketches | "EdgeSketches" >> SumEdgeSketches(defaults=False)
    if sketches is not None and (publish is None or windowed):  # else the publish stage
        _ = sketches | "WriteEdgeSketch" >> beam.Map(  # writes it, before the manifest
            write_edge_sketches, run_dir, list(config.classifiers))
    if windowed:  # unbounded input: fire on every update, each firing rewrites the totals
        global_window = beam.WindowInto(
            beam.window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
        )
        accounting = partials.accounting | "AccountingGlobal" >> global_window
    else:  # batch runs are in the global window already
        accounting = partials.accounting
    accounting = accounting | "SumAccounting" >> beam.CombineGlobally(
        SumCounters()).without_defaults()
    if publish is None or windowed:  # else the publish stage writes it, before the manifest
        _ = accounting | "WriteAccounting" >> beam.Map(
            lambda acc: write_json(f"{run_dir}/accounting.json", acc)
        )
    dead_letter_files = partials.dead_letters | "WriteDeadLetters" >> beam.ParDo(
        WriteDeadLettersFn(f"{run_dir}/dead_letter")
    )
    grids, boots = partials.grids, partials.bootstrap
    if windowed:
        window = config.windowing
        windowing = beam.WindowInto(
            SlidingWindows(size=window["size_days"] * DAY, period=window["period_days"] * DAY),
            trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
            allowed_lateness=window["allowed_lateness_days"] * DAY,
        )
        grids = grids | "WindowGrids" >> windowing
        boots = boots | "WindowBootstrap" >> windowing
    summed = grids | "SumGrids" >> beam.CombinePerKey(SumGrids(config, compact_output=True))
    if config.bootstrap["replicates"] > 0:
        summed_boots = boots | "SumBootstrap" >> beam.CombinePerKey(SumBootstrapGrids())
        summed = {"grid": summed, "bootstrap": summed_boots} | "Join" >> beam.CoGroupByKey()
    if windowed:  # sharded by group per window (costlib_pipelines.recalibrate.window_shards)
        return (
            summed
            | "Optimize" >> beam.ParDo(OptimizeGroupFn(config, in_force), edges)
            | "Windows" >> window_shards.WriteWindows(config, run_dir, run_id)
        )
    capacity = (summed | "Capacity" >> AllocateCapacity(config, edges)
                if config.allocates_capacity else None)
    shard_ids, volumes = optimize_and_write(
        summed, config, edges, run_dir, run_id, in_force,
        allocation=None if capacity is None else capacity.allocation)
    once = pipeline | "Once" >> beam.Impulse()  # one element: the last stage runs once
    if publish is None:
        return once | "Assemble" >> beam.ParDo(AssembleShardsFn(run_dir),
                                               beam.pvalue.AsList(shard_ids))
    return once | "Publish" >> beam.ParDo(
        PublishRunFn(config, publish),
        accounting=beam.pvalue.AsSingleton(accounting, default_value={"read": 0}),
        dead_letter_files=beam.pvalue.AsList(dead_letter_files),
        shard_ids=beam.pvalue.AsList(shard_ids),
        edges=edges,
        edge_sketches=(None if sketches is None
                       else beam.pvalue.AsSingleton(sketches, default_value=None)),
        capacity=None if capacity is None else beam.pvalue.AsSingleton(
            capacity.summary, default_value=None),
        volumes=beam.pvalue.AsSingleton(
            volumes | "GatherVolumes" >> beam.CombineGlobally(GatherVolumes()),
            default_value={}) if in_force is not None else None,
    )


def optimize_and_write(summed, config: RunConfig, edges, run_dir: str, run_id: str,
                       in_force: InForce | None = None, allocation=None):
    """Batch runs: optimise and write per group, records sharded by group range.

    See :mod:`costlib_pipelines.recalibrate.shards`: the edges (a list, or the quantile edges' side
    input), the all-groups result and the shard boundaries are side inputs; groups are optimised
    (with their fallback) and their records written by shard in parallel. Returns the PCollection of
    the written shards' ids, which the last stage (:class:`PublishRunFn`, or
    :class:`~costlib_pipelines.recalibrate.shards.AssembleShardsFn` without publishing) takes as a
    side input and concatenates into the run's record files; and the PCollection of the volume
    guard's ``(group, new volume, volume in force)`` (groups with rated rows, only when
    ``in_force`` is given; :mod:`costlib_pipelines.recalibrate.volume_guard`).
    ``allocation``: the shared capacity's allocation
    (:class:`~costlib_pipelines.recalibrate.capacity.AllocateCapacity`), a side input of the
    records stage, which then writes every group's ``capacity`` record.
    """
    parent = beam.pvalue.AsSingleton(
        summed | "OptimizeAllGroups" >> beam.FlatMap(optimize_parent, config, edges, in_force),
        default_value=None,
    )
    boundaries = beam.pvalue.AsSingleton(
        summed
        | "GroupNames" >> beam.Keys()
        | "ShardBoundaries" >> beam.CombineGlobally(
            ShardBoundaries(shards.GROUPS_PER_SHARD)).without_defaults(),
        default_value=[],  # no group: no shard (what the boundaries of no name are)
    )
    extra = {} if allocation is None else {
        "allocation": beam.pvalue.AsSingleton(allocation, default_value=None)}
    optimized = summed | "Optimize" >> beam.ParDo(
        OptimizeGroupsFn(config, run_id, shards.FLUSH_GROUPS, in_force), edges, parent,
        boundaries, **extra).with_outputs(VOLUMES, main="chunks")
    written = (
        optimized.chunks
        | "PerWindow" >> beam.GroupByKey()  # by shard (batch runs have one, global, window)
        | "Finalize" >> beam.ParDo(WriteShardFn(run_dir))
    )
    return written, optimized[VOLUMES]


def run_recalibrate(
    config: RunConfig,
    inputs: str | Sequence[str],
    output: str,
    beam_args: Sequence[str] = (),
    *,
    run_id: str | None = None,
    max_threshold_change: float | None = None,
    min_rated: float | None = None,
    override: Override | None = None,
    progress: Callable[[str], None] | None = None,
    unit_rows: int = UNIT_ROWS,
    in_force: str | None = None,
) -> dict[str, object]:
    """Run the pipeline; batch runs publish themselves in their last stage (see the guard).

    ``max_threshold_change`` and ``min_rated`` override the config's ``publish`` section. When
    the guard finds violations (see :mod:`costlib_pipelines.recalibrate.publish`) the run is
    complete but not published: the manifest lists the violations, ``LATEST`` stays, and
    :class:`~costlib_pipelines.recalibrate.publish.PublishRefused` is raised, unless ``override``
    (who and why) is
    given, which publishes and records it. A launch that only writes a job graph (Dataflow Flex
    Templates: ``--template_location``) returns at once; the job publishes itself when it ends.
    Windowed runs: their files are upserted per window as panes fire; when the pipeline has
    finished, :func:`publish_windowed_run` guards every window and commits the run. Held
    windows raise :class:`~costlib_pipelines.recalibrate.publish.PublishRefused` after the commit
    (the run is published, ``costlib decide`` skips them).

    Before any input is read: the run id is checked, the runner must be known to Beam, and the
    run takes ``output``'s lock (:mod:`costlib_pipelines.io.lock`: one run per output; also the
    check that the output is writable). ``progress`` receives a line per phase; ``unit_rows``
    sizes the row-group ranges files are read in
    (:class:`~costlib_pipelines.recalibrate.reading.ReadingUnits`).

    ``in_force``: where the thresholds in force are read (an operating points file, run or
    output directory); default the output's published run
    (:mod:`costlib_pipelines.recalibrate.in_force`).
    """
    config.check_recalibrate("run config")
    say = progress or (lambda _message: None)
    windowed = config.windowing is not None
    started = time.time()
    run = RunDirectory(output, config.digest, run_id)
    runner = runner_name(beam_args)
    with hold_output(run.output, run_id=run.run_id, command="recalibrate") as lock:
        run.check_replaceable()
        pause_point("recalibrate.locked")
        paths = match_inputs(inputs)
        say(f"checking {len(paths)} input file(s)")
        input_files = preflight(paths, config, windowed=windowed)
        time_range = event_time_range(paths, config.columns["event_time"]) if windowed else None
        baseline = read_baseline(output)  # before prepare(): a re-run replaces its directory
        thresholds_in_force, in_force_entry = read_in_force(config, in_force, baseline, output)
        carried, edges_source = auto_edges_source(config, output, baseline.run_id)
        fixed = config.fixed_edges() if carried is None else carried
        if fixed is not None:  # quantile and first-pass auto edges get theirs in the pipeline
            in_force_entry["edges_added"] = edges_with_in_force(fixed, thresholds_in_force,
                                                                config)[1]
        spec = PublishSpec(
            output=run.output,
            run_id=run.run_id,
            inputs=input_files,
            runner=runner,
            started_utc=dt.datetime.fromtimestamp(started, dt.UTC).isoformat(),
            settings=GuardSettings(
                max_threshold_change=(max_threshold_change if max_threshold_change is not None
                                      else config.publish.max_threshold_change),
                min_rated=min_rated if min_rated is not None else config.publish.min_rated,
                method=config.decision_method,
            ),
            override=override,
            baseline=baseline,
            in_force=in_force_entry,
            edges_source=edges_source,
        )
        run.prepare()
        pipeline = make_pipeline(job_name_flags(beam_args, "recalibrate", run.run_id),
                                 type_check=False)
        splits = any(f["rows"] > unit_rows and f["row_groups"] > 1 for f in input_files)
        build_recalibrate(pipeline, paths, config, run.run_dir, run.run_id, publish=spec,
                          in_force=thresholds_in_force, unit_rows=unit_rows if splits else None,
                          carried_edges=carried)
        say(f"running the pipeline on {runner} (run {run.run_id})")
        if run_to_end(pipeline, runner, graph_only=lambda: _graph_only(pipeline),
                      record_job=partial(record_job, lock), log_dir=run.run_dir) is None:
            return {"status": "submitted", "run_id": run.run_id, "published": None,
                    "note": "job graph written; the job writes its manifest and publishes at "
                            "its end"}
        pause_point("recalibrate.finished")
        if windowed:
            edges_entry = grid_edges_entry(
                config, windowed_edges(config, run.run_dir, fixed, thresholds_in_force),
                edges_source)
            manifest = publish_windowed_run(run, config, spec, input_files, time_range,
                                            grid_edges=edges_entry)
        else:
            manifest = run.read_json("manifest.json")
            if manifest is None:
                raise RuntimeError(f"{run.run_dir}: the pipeline finished without a manifest")
    manifest["seconds"] = round(time.time() - started, 3)
    held = window_guard.held_eligible((manifest.get("guard") or {}).get("windows") or [])
    if manifest["published"] and held:
        raise PublishRefused(
            f"run {run.run_id} is published (LATEST names it), but the guard holds "
            f"{len(held)} window(s); costlib decide keeps applying each group's last applied "
            "window (or the points in force before the run):\n  " + "\n  ".join(
                f"window {e['window']}: " + "; ".join(e["violations"]) for e in held) +
            f"\nrelease one after review with: costlib publish --output {output} --run-id "
            f"{run.run_id} --window <start>_<end> --by NAME --reason TEXT")
    if not manifest["published"]:
        violations = manifest["guard"]["violations"]
        before = (f"LATEST still points at {baseline.run_id}" if baseline.run_id is not None
                  else "no run of this output is published yet")
        raise PublishRefused(
            f"run {run.run_id} is complete but held for review, {before}:\n  "
            + "\n  ".join(violations) +
            f"\npublish it after review with: costlib publish --output {output} --run-id "
            f"{run.run_id} --by NAME --reason TEXT (or re-run with --override-guard)",
            run_dir=str(run.run_dir),
        )
    return manifest


def _graph_only(pipeline: beam.Pipeline) -> bool:
    """True when the runner only writes a job graph (a Flex Template or classic template)."""
    options = pipeline.options.get_all_options(drop_default=True)
    return bool(options.get("template_location"))
