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
window instead; a late firing rewrites its window's files (upsert: the newest pane wins, and
``pane_index`` in the records says which pane it is).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from apache_beam.transforms import trigger
from apache_beam.transforms.window import SlidingWindows

from costlib.recalibration import apply_fallback
from pipelines.batches import (
    Plausibility,
    check_schema,
    plausibility_summary,
    plausibility_violations,
)
from pipelines.config import RunConfig
from pipelines.files import (
    InputError,
    check_rows_read,
    match_inputs,
    read_footers,
    write_bytes_atomically,
    write_json,
    write_parquet,
)
from pipelines.publish import (
    GuardSettings,
    Override,
    PublishRefused,
    guard_violations,
    latest_records,
)
from pipelines.records import (
    PN_CURVE_SCHEMA,
    operating_point_records,
    pn_curve_records,
    records_to_jsonl,
    records_to_table,
)
from pipelines.runner import make_pipeline, runner_name
from pipelines.runs import RunDirectory, check_accounting, latest_run_id, read_records
from pipelines.transforms import (
    AggregateBatches,
    OptimizeGroupFn,
    QuantileEdges,
    SumBootstrapGrids,
    SumCounters,
    SumGrids,
    WriteDeadLettersFn,
)

__all__ = ["build_recalibrate", "preflight", "run_recalibrate"]

DAY = 86_400


def preflight(paths: Sequence[str], config: RunConfig, *, windowed: bool,
              for_decisions: bool = False) -> list[dict[str, Any]]:
    """Check the plausibility settings and every file's schema (footer) before the pipeline.

    Returns the manifest's ``inputs``: ``{"path", "rows", "row_groups"}`` per file.
    """
    Plausibility.from_config(config)  # a bad time or range is a ConfigError before any work
    inputs = []
    for footer in read_footers(paths):
        check_schema(footer.schema, footer.path, config, windowed=windowed,
                     for_decisions=for_decisions)
        inputs.append(footer.record())
    return inputs


def needed_columns(config: RunConfig, *, windowed: bool) -> list[str]:
    """The physical columns recalibration reads (Parquet column projection)."""
    cols = config.columns
    names = [cols["group"], cols["item_id"], cols["label"], *config.classifiers]
    if cols.get("weight"):
        names.append(cols["weight"])
    if windowed:
        names.append(cols["event_time"])
    return names


class FinalizeWindowFn(beam.DoFn):
    """All group results of one window (pane) -> fallback, records, files."""

    def __init__(self, config: RunConfig, run_dir: str, run_id: str, windowed: bool):
        self.config = config
        self.run_dir = run_dir
        self.run_id = run_id
        self.windowed = windowed

    def process(self, element, window=beam.DoFn.WindowParam):
        _, items = element
        latest = {}
        for result, pane in items:  # accumulating panes: keep the newest result per group
            best = latest.get(result.group)
            if best is None or pane > best[1]:
                latest[result.group] = (result, pane)
        results = apply_fallback({g: r for g, (r, _) in latest.items()},
                                 fallback=self.config.fallback)
        if self.windowed:
            start = window.start.to_utc_datetime().replace(tzinfo=dt.UTC)
            end = window.end.to_utc_datetime().replace(tzinfo=dt.UTC)
            directory = f"{self.run_dir}/windows/{start:%Y%m%dT%H%M%S}_{end:%Y%m%dT%H%M%S}"
        else:
            start = end = None
            directory = self.run_dir
        config = self.config
        records, curves = [], []
        for group in sorted(results):
            result = results[group]
            records += operating_point_records(
                result, rule=config.rule, classifiers=config.classifiers,
                target_marginal_precision=config.target.marginal_precision,
                run_id=self.run_id, config_digest=config.digest,
                window_start=start, window_end=end, pane_index=latest[group][1],
            )
            curves += pn_curve_records(result, window_start=start, window_end=end)
        write_parquet(f"{directory}/operating_points.parquet",
                      records_to_table(records, "operating_point.json"))
        write_bytes_atomically(f"{directory}/operating_points.jsonl",
                               records_to_jsonl(records).encode())
        write_parquet(f"{directory}/pn_curves.parquet",
                      pa.Table.from_pylist(curves, schema=PN_CURVE_SCHEMA))
        yield directory, len(records)


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
    previous: list[dict[str, Any]] | None
    previous_id: str | None
    previous_problem: str | None


class PublishRunFn(beam.DoFn):
    """The last stage of a batch run: accounting check, publish guard, manifest, ``LATEST``.

    It runs once, after the operating points (main input), the row accounting and every
    dead-letter file (side inputs) are written, so the manifest is written last on every runner
    (also when the launcher does not wait for the job, as with Dataflow Flex Templates).
    """

    def __init__(self, config: RunConfig, spec: PublishSpec):
        self.config = config
        self.spec = spec

    def process(self, _, accounting, dead_letter_files):
        spec, config = self.spec, self.config
        run = RunDirectory(spec.output, config.digest, spec.run_id)
        write_json(run.path("accounting.json"), accounting)
        checked = check_accounting(accounting)
        check_rows_read(spec.inputs, checked["read"])
        points = run.path("operating_points.parquet")
        new = read_records(points) if FileSystems.exists(points) else []
        violations = guard_violations(spec.previous, new, spec.settings)
        violations += plausibility_violations(accounting, Plausibility.from_config(config))
        if not new:
            violations.append("no operating points: no group had rated rows")
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
            "dead_letter_files": int(dead_letter_files),
            "guard": {
                "max_threshold_change": spec.settings.max_threshold_change,
                "min_rated": spec.settings.min_rated,
                "method": spec.settings.method,
                "compared_with_run": spec.previous_id,
                "previous_run_unreadable": spec.previous_problem,
                "violations": violations,
                "override": (spec.override.record()
                             if spec.override is not None and violations else None),
            },
            "outputs": run.outputs(),
            "runner": spec.runner,
            "started_utc": spec.started_utc,
            "finished_utc": dt.datetime.now(dt.UTC).isoformat(),
        }
        if published:
            run.commit(manifest)
        else:
            write_json(run.path("manifest.json"), manifest)
        yield manifest


def build_recalibrate(
    pipeline: beam.Pipeline,
    paths: Sequence[str],
    config: RunConfig,
    run_dir: str,
    run_id: str,
    *,
    batches=None,
    publish: PublishSpec | None = None,
):
    """Add the recalibration transforms to ``pipeline``.

    ``batches`` may be given instead of ``paths`` (a PCollection of
    ``(source, row_group, table)``, e.g. from a TestStream). With ``publish`` (batch runs), the
    last stage writes the manifest and publishes the run (:class:`PublishRunFn`).
    """
    windowed = config.windowing is not None
    columns = needed_columns(config, windowed=windowed)
    sources = batches if batches is not None else pipeline | "Files" >> beam.Create(list(paths))
    edges = config.fixed_edges()
    if edges is None:
        edges = beam.pvalue.AsSingleton(
            sources | "QuantileEdges" >> QuantileEdges(config, columns)
        )
    partials = sources | "Aggregate" >> AggregateBatches(
        config, edges, columns=columns, windowed=windowed
    )
    if windowed:  # unbounded input: fire on every update, each firing rewrites the totals
        global_window = beam.WindowInto(
            beam.window.GlobalWindows(),
            trigger=trigger.Repeatedly(trigger.AfterCount(1)),
            accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
        )
    else:
        global_window = beam.WindowInto(beam.window.GlobalWindows())
    accounting = (
        partials.accounting
        | "AccountingGlobal" >> global_window
        | "SumAccounting" >> beam.CombineGlobally(SumCounters()).without_defaults()
    )
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
    summed = grids | "SumGrids" >> beam.CombinePerKey(SumGrids(config))
    if config.bootstrap["replicates"] > 0:
        summed_boots = boots | "SumBootstrap" >> beam.CombinePerKey(SumBootstrapGrids())
        summed = {"grid": summed, "bootstrap": summed_boots} | "Join" >> beam.CoGroupByKey()
    written = (
        summed
        | "Optimize" >> beam.ParDo(OptimizeGroupFn(config))
        | "PerWindow" >> beam.GroupByKey()
        | "Finalize" >> beam.ParDo(FinalizeWindowFn(config, run_dir, run_id, windowed))
    )
    if publish is None or windowed:
        return written
    return (
        written
        | "AllWritten" >> beam.combiners.Count.Globally()
        | "Publish" >> beam.ParDo(
            PublishRunFn(config, publish),
            accounting=beam.pvalue.AsSingleton(accounting, default_value={"read": 0}),
            dead_letter_files=beam.pvalue.AsSingleton(
                dead_letter_files | "CountDeadLetterFiles" >> beam.combiners.Count.Globally()
            ),
        )
    )


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
) -> dict[str, object]:
    """Run the pipeline; batch runs publish themselves in their last stage (see the guard).

    ``max_threshold_change`` and ``min_rated`` override the config's ``publish`` section. When
    the guard finds violations (see :mod:`pipelines.publish`) the run is complete but not
    published: the manifest lists the violations, ``LATEST`` stays, and
    :class:`~pipelines.publish.PublishRefused` is raised, unless ``override`` (who and why) is
    given, which publishes and records it. A launch that only writes a job graph (Dataflow Flex
    Templates: ``--template_location``) returns at once; the job publishes itself when it ends.
    Windowed runs have no publish step: their files are upserted per window as panes fire.
    """
    windowed = config.windowing is not None
    started = time.time()
    paths = match_inputs(inputs)
    input_files = preflight(paths, config, windowed=windowed)
    run = RunDirectory(output, config.digest, run_id)
    if run_id is not None and latest_run_id(output) == run_id:
        raise InputError(
            f"run id {run_id!r} is the published run ({output}/LATEST names it): re-running "
            "into it would replace the operating points readers use before the guard checks "
            "them; choose another run id"
        )
    try:  # read before prepare(): a re-run with the same id replaces that run's directory
        previous, previous_id = latest_records(output)
        previous_problem = None
    except InputError as exc:
        previous, previous_id, previous_problem = None, None, str(exc)
    spec = PublishSpec(
        output=run.output,
        run_id=run.run_id,
        inputs=input_files,
        runner=runner_name(beam_args),
        started_utc=dt.datetime.fromtimestamp(started, dt.UTC).isoformat(),
        settings=GuardSettings(
            max_threshold_change=(max_threshold_change if max_threshold_change is not None
                                  else config.publish["max_threshold_change"]),
            min_rated=min_rated if min_rated is not None else config.publish["min_rated"],
            method=config.decision_method,
        ),
        override=override,
        previous=previous,
        previous_id=previous_id,
        previous_problem=previous_problem,
    )
    run.prepare()
    pipeline = make_pipeline(beam_args)
    build_recalibrate(pipeline, paths, config, run.run_dir, run.run_id, publish=spec)
    result = pipeline.run()
    if _graph_only(pipeline):
        return {"status": "submitted", "run_id": run.run_id, "published": None,
                "note": "job graph written; the job writes its manifest and publishes at its end"}
    result.wait_until_finish()
    if windowed:
        counters = run.read_json("accounting.json", {"read": 0})
        accounting = check_accounting(counters)
        check_rows_read(input_files, accounting["read"])
        problems = plausibility_violations(counters, Plausibility.from_config(config))
        if problems:
            raise InputError(f"run {run.run_id} not committed: " + "; ".join(problems))
        manifest = {"status": "complete", "published": True, "run_id": run.run_id,
                    "command": "recalibrate", "config_digest": config.digest,
                    "config": config.raw, "inputs": input_files, "row_accounting": accounting,
                    "plausibility": plausibility_summary(counters),
                    "outputs": run.outputs(), "runner": spec.runner,
                    "started_utc": spec.started_utc,
                    "finished_utc": dt.datetime.now(dt.UTC).isoformat()}
        run.commit(manifest)
    else:
        manifest = run.read_json("manifest.json")
        if manifest is None:
            raise RuntimeError(f"{run.run_dir}: the pipeline finished without a manifest")
    manifest["seconds"] = round(time.time() - started, 3)
    if not manifest["published"]:
        violations = manifest["guard"]["violations"]
        raise PublishRefused(
            f"run {run.run_id} is complete but held for review, LATEST still points at "
            f"{previous_id}:\n  " + "\n  ".join(violations) +
            f"\npublish it after review with: costlib publish --output {output} --run-id "
            f"{run.run_id} --by NAME --reason TEXT (or re-run with --override-guard)"
        )
    return manifest


def _graph_only(pipeline: beam.Pipeline) -> bool:
    """True when the runner only writes a job graph (a Flex Template or classic template)."""
    options = pipeline.options.get_all_options(drop_default=True)
    return bool(options.get("template_location"))
