"""The end of a run: its manifest written last and the run published (``LATEST``).

Batch runs end in the pipeline's last stage (:class:`PublishRunFn`: records assembled,
accounting check, publish guard, manifest, ``LATEST``); windowed runs after their pipeline has
finished (:func:`publish_windowed_run`). :class:`PublishSpec` is what either needs;
:func:`grid_edges_entry` is the manifest's ``grid_edges``. The guard itself is
:mod:`costlib_pipelines.recalibrate.publish` (and
:mod:`costlib_pipelines.recalibrate.window_guard` per window). Classes live in this module (never
in ``__main__``) so that every runner can pickle them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import apache_beam as beam

from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.accounting import audit_warning
from costlib_pipelines.io.files import InputError, check_rows_read, write_json
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.min_risk import MinRiskSettings
from costlib_pipelines.io.plausibility import (
    Plausibility,
    plausibility_summary,
    plausibility_violations,
)
from costlib_pipelines.io.runs import (
    RunDirectory,
    check_accounting,
    latest_run_id,
    read_records,
    verified_accounting,
)
from costlib_pipelines.pause import pause_point
from costlib_pipelines.recalibrate import window_guard, window_shards
from costlib_pipelines.recalibrate.capacity import capacity_violations
from costlib_pipelines.recalibrate.carried_edges import write_edge_sketches
from costlib_pipelines.recalibrate.publish import (
    Baseline,
    GuardSettings,
    Override,
    baseline_violations,
    guard_notes,
    guard_violations,
    no_point_note,
    unmatched_label_violation,
)
from costlib_pipelines.recalibrate.shards import assemble_shards
from costlib_pipelines.recalibrate.volume_guard import VolumeCheck

__all__ = ["PublishRunFn", "PublishSpec", "baseline_check", "grid_edges_entry",
           "publish_windowed_run"]


@dataclass(frozen=True)
class PublishSpec:
    """What the pipeline's last stage needs to write the manifest and publish the run."""

    output: str
    run_id: str
    inputs: list[dict[str, Any]]
    runner: str
    started_utc: str
    settings: GuardSettings
    override: Override | None
    baseline: Baseline
    in_force: dict[str, Any] | None = None  # the manifest's ``in_force`` entry
    edges_source: dict[str, Any] | None = None  # the manifest's ``grid_edges.source`` (auto)


class PublishRunFn(beam.DoFn):
    """The last stage of a batch run: records assembled, accounting check, publish guard,
    manifest, ``LATEST``.

    Its main input is one impulse; the row accounting, the dead-letter files and the written
    record shards are side inputs, so it runs once, after all of them are written: it
    concatenates the shards into the run's record files
    (:func:`~costlib_pipelines.recalibrate.shards.assemble_shards`) and writes the manifest last on
    every runner (also when the launcher does not wait for the job, as with Dataflow Flex
    Templates).
    """

    def __init__(self, config: RunConfig, spec: PublishSpec):
        self.config = config
        self.spec = spec

    def process(self, _, accounting, dead_letter_files, shard_ids, edges=None,
                edge_sketches=None, capacity=None, volumes=None):
        spec, config = self.spec, self.config
        pause_point("recalibrate.publish")
        run = RunDirectory(spec.output, config.digest, spec.run_id)
        assemble_shards(run.run_dir, shard_ids)
        write_edge_sketches(edge_sketches, run.run_dir, config.classifiers)  # for the next run
        write_json(run.path("accounting.json"), accounting)
        checked = check_accounting(accounting)
        check_rows_read(spec.inputs, checked["read"])
        points = run.path("operating_points.parquet")
        new = read_records(points) if FileSystems.exists(points) else []
        baseline = spec.baseline
        violations = baseline_check(spec)
        violations += guard_violations(baseline.records, new, spec.settings)
        violations += filter(None, [unmatched_label_violation(
            new, config.columns.get("label_positive"))])
        violations += plausibility_violations(accounting, Plausibility.from_config(config))
        violations += capacity_violations(new, capacity)
        weighted = MinRiskSettings.from_config(config)
        volume = VolumeCheck(volumes, config.publish.max_volume_change,
                             config.publish.on_volume_change,
                             amounts=weighted is not None and weighted.weight_rated_rows)
        violations += volume.violations()
        if capacity is not None:
            write_json(run.path("capacity.json"), capacity)
        if not new:
            violations.append("no operating points: no group had rated rows")
        started = dt.datetime.fromisoformat(spec.started_utc)
        finished = dt.datetime.now(dt.UTC)
        published = not violations or (spec.override is not None and bool(new))
        manifest = {
            "status": "complete",
            "published": published,
            "run_id": spec.run_id,
            "command": "recalibrate",
            "config_digest": config.digest,
            "config": config.raw,
            "inputs": spec.inputs,
            "row_accounting": checked,
            "plausibility": plausibility_summary(accounting),
            "dead_letter_files": len(dead_letter_files),
            "guard": {
                "max_threshold_change": spec.settings.max_threshold_change,
                "min_rated": spec.settings.min_rated,
                "off": spec.settings.off,
                "method": spec.settings.method,
                "compared_with_run": baseline.run_id,
                "previous_run_unreadable": baseline.problem,
                "violations": violations,
                "volume": volume.summary(),
                "notes": [*volume.notes(), *guard_notes(new, spec.settings),
                          *filter(None, (no_point_note(new, spec.settings),
                                         audit_warning(accounting)))],
                "override": (spec.override.record()
                             if spec.override is not None and violations else None),
            },
            "in_force": spec.in_force,
            "capacity": capacity,
            "grid_edges": grid_edges_entry(config, edges, spec.edges_source),
            "outputs": run.outputs(),
            "runner": spec.runner,
            "started_utc": spec.started_utc,
            "finished_utc": finished.isoformat(),
            "seconds": round((finished - started).total_seconds(), 3),
        }
        if published:
            run.commit(manifest)
        else:
            write_json(run.path("manifest.json"), manifest)
        yield manifest


def baseline_check(spec: PublishSpec) -> list[str]:
    """The guard's violations about the run it compares with: the published run could not be
    read, or ``LATEST`` moved while this run was running (fails closed)."""
    try:
        latest_now = latest_run_id(spec.output)
    except InputError as exc:
        latest_now = f"(unreadable: {exc})"
    return baseline_violations(spec.baseline, latest_now)


def grid_edges_entry(config: RunConfig, edges,
                     source: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The manifest's ``grid_edges``: the recipe and the candidate thresholds every group's
    lattice used, per classifier (thresholds in force included); for auto edges, where they
    were placed from (``source``: the published run they were carried from, or a first
    pass over this run's rows and why, :mod:`costlib_pipelines.recalibrate.carried_edges`)."""
    if edges is None:
        return None
    entry = {"recipe": config.grid.edges, "n_edges": config.n_edges,
             "classifiers": list(config.classifiers),
             "edges": [[float(v) for v in e] for e in edges]}
    if source is not None:
        entry["source"] = source
    return entry


def publish_windowed_run(run: RunDirectory, config: RunConfig, spec: PublishSpec,
                         inputs: list[dict[str, Any]],
                         time_range: dict[str, Any] | None,
                         grid_edges: dict[str, Any] | None = None) -> dict[str, Any]:
    """The last step of a windowed run, once its pipeline has finished: row accounting, the
    guard per window (:mod:`costlib_pipelines.recalibrate.window_guard`), the manifest, ``LATEST``.

    The points in force when the run started (``spec.baseline``) are copied into the run and
    every window is checked against the points in force before it. The run is published
    (``LATEST`` moves) unless the guard fails closed on the baseline (unreadable, or
    ``LATEST`` moved meanwhile) and no override is given; held windows do not hold the run:
    ``costlib decide`` skips them. ``grid_edges``: the manifest's entry (the edges every
    window shared, :func:`grid_edges_entry`). Returns the manifest.

    Raises
    ------
    InputError
        Too many implausible rows (the run is not committed).
    """
    window_shards.remove_window_shards(run.run_dir)  # every window is final now
    counters, accounting = verified_accounting(run, inputs, config)
    baseline = spec.baseline
    violations = baseline_check(spec)
    carried = baseline.records if baseline.problem is None else None
    window_guard.write_points_in_force(run.run_dir, carried)
    windows = window_guard.read_windows(run.run_dir)
    eligible = window_guard.eligible_windows(list(windows), config.decide, time_range)
    entries = window_guard.guard_windows(windows, carried, spec.settings, eligible,
                                         override=spec.override)
    published = not violations or spec.override is not None
    finished = dt.datetime.now(dt.UTC)
    manifest = {"status": "complete", "published": published, "run_id": run.run_id,
                "command": "recalibrate", "config_digest": config.digest,
                "config": config.raw, "inputs": inputs,
                "row_accounting": accounting,
                "plausibility": plausibility_summary(counters),
                "windowing": config.windowing,
                "windows": len(windows),
                "event_time_range": time_range,
                "in_force": spec.in_force,
                "grid_edges": grid_edges,
                "guard": window_guard.build_guard_entry(
                    config, spec.settings, baseline.run_id, baseline.problem, violations,
                    entries, spec.override,
                    len({r["group"] for r in carried or []}),
                    notes=list(filter(None, [audit_warning(counters)]))),
                "outputs": run.outputs(), "runner": spec.runner,
                "started_utc": spec.started_utc,
                "finished_utc": finished.isoformat(),
                "seconds": round((finished - dt.datetime.fromisoformat(
                    spec.started_utc)).total_seconds(), 3)}
    if published:
        run.commit(manifest)
    else:
        write_json(run.path("manifest.json"), manifest)
    return manifest
