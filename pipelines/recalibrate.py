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

import apache_beam as beam
import pyarrow as pa
from apache_beam.transforms import trigger
from apache_beam.transforms.window import SlidingWindows

from costlib.recalibration import apply_fallback
from pipelines.batches import check_schema
from pipelines.config import RunConfig
from pipelines.files import (
    InputError,
    match_inputs,
    open_parquet,
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
from pipelines.runs import RunDirectory, check_accounting, read_records
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
              for_decisions: bool = False) -> None:
    """Open every file's footer and check its schema before starting the pipeline."""
    for path in paths:
        schema = open_parquet(path).schema_arrow
        check_schema(schema, path, config, windowed=windowed, for_decisions=for_decisions)


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


def build_recalibrate(
    pipeline: beam.Pipeline,
    paths: Sequence[str],
    config: RunConfig,
    run_dir: str,
    run_id: str,
    *,
    batches=None,
):
    """Add the recalibration transforms to ``pipeline``.

    ``batches`` may be given instead of ``paths`` (a PCollection of
    ``(source, row_group, table)``, e.g. from a TestStream).
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
    (
        partials.accounting
        | "AccountingGlobal" >> global_window
        | "SumAccounting" >> beam.CombineGlobally(SumCounters()).without_defaults()
        | "WriteAccounting" >> beam.Map(lambda acc: write_json(f"{run_dir}/accounting.json", acc))
    )
    _ = partials.dead_letters | "WriteDeadLetters" >> beam.ParDo(
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
    return (
        summed
        | "Optimize" >> beam.ParDo(OptimizeGroupFn(config))
        | "PerWindow" >> beam.GroupByKey()
        | "Finalize" >> beam.ParDo(FinalizeWindowFn(config, run_dir, run_id, windowed))
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
    """Run the pipeline to completion, write the manifest, and publish unless the guard holds.

    ``max_threshold_change`` and ``min_rated`` override the config's ``publish`` section. When
    the guard finds violations (see :mod:`pipelines.publish`) the run is complete but not
    published: the manifest lists the violations, ``LATEST`` stays, and
    :class:`~pipelines.publish.PublishRefused` is raised, unless ``override`` (who and why) is
    given, which publishes and records it.
    """
    windowed = config.windowing is not None
    started = time.time()
    paths = match_inputs(inputs)
    preflight(paths, config, windowed=windowed)
    run = RunDirectory(output, config.digest, run_id)
    try:  # read before prepare(): a re-run with the same id replaces the run LATEST may name
        previous, previous_id = latest_records(output)
        previous_problem = None
    except InputError as exc:
        previous, previous_id, previous_problem = None, None, str(exc)
    run.prepare()
    pipeline = make_pipeline(beam_args)
    build_recalibrate(pipeline, paths, config, run.run_dir, run.run_id)
    result = pipeline.run()
    result.wait_until_finish()
    accounting = check_accounting(run.read_json("accounting.json", {"read": 0}))
    settings = GuardSettings(
        max_threshold_change=(max_threshold_change if max_threshold_change is not None
                              else config.publish["max_threshold_change"]),
        min_rated=min_rated if min_rated is not None else config.publish["min_rated"],
        method=config.decision_method,
    )
    new = [] if windowed else read_records(run.path("operating_points.parquet"))
    violations = guard_violations(previous, new, settings)
    published = not violations or override is not None
    manifest = {
        "status": "complete",
        "published": published,
        "run_id": run.run_id,
        "command": "recalibrate",
        "config_digest": config.digest,
        "config": config.raw,
        "inputs": paths,
        "row_accounting": accounting,
        "guard": {
            "max_threshold_change": settings.max_threshold_change,
            "min_rated": settings.min_rated,
            "method": settings.method,
            "compared_with_run": previous_id,
            "previous_run_unreadable": previous_problem,
            "violations": violations,
            "override": override.record() if override is not None and violations else None,
        },
        "outputs": run.outputs(),
        "runner": runner_name(beam_args),
        "started_utc": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(),
        "finished_utc": dt.datetime.now(dt.UTC).isoformat(),
        "seconds": round(time.time() - started, 3),
    }
    if published:
        run.commit(manifest)
        return manifest
    write_json(run.path("manifest.json"), manifest)
    raise PublishRefused(
        f"run {run.run_id} is complete but held for review, LATEST still points at "
        f"{previous_id}:\n  " + "\n  ".join(violations) +
        f"\npublish it after review with: costlib publish --output {output} --run-id "
        f"{run.run_id} --by NAME --reason TEXT (or re-run with --override-guard)"
    )
