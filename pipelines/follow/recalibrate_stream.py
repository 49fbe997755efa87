"""The streaming job of ``costlib recalibrate --follow``: landed files in, windows judged as they
close.

The graph (every class in this module, never in ``__main__``)::

    Flink ticks -> key "poll" -> PollLandingFn   a file once; the producer's watermark
      -> ReadLandedFn                             per file: partial grids per period bucket
      -> key "judge" -> JudgeWindowsFn            one book (window_book.WindowBook) in state

- :class:`ReadLandedFn` reads a file as a batch windowed run does
  (:class:`~costlib_pipelines.recalibrate.aggregating.AggregateBatchesFn`: validation, dead
  letters by row, partial grids per period bucket and group) and sends one
  :class:`~costlib_pipelines.follow.window_book.FilePartials` to the judge. A file that cannot
  be read, or whose schema breaks the contract, is dead-lettered whole
  (``dead_letter/files/<digest>.json`` with the reason) and the job keeps running.
- :class:`JudgeWindowsFn` keeps the book in Beam state (checkpointed by the runner). When the
  producer's watermark passes a window's end (every file listed with it read) it sums the
  window's grids, optimises every group (the batch functions), writes the window's files as a
  batch windowed run writes them, and records the guard's verdict in the live manifest
  (:mod:`costlib_pipelines.follow.live_run`), which moves the groups' points for ``costlib
  decide`` at once when the window is applied. Late files judge their windows again.

Exactly once: :class:`PollLandingFn` keeps what it emitted in its state (the names still in
the directory, the largest watermark), and the book the files it added (until their windows
retire); after a restore both are as they were at one checkpoint, so the files read after it
are read again and added once. Side effects are idempotent: window files have
names of their window, dead letters of their file and row group, and a pane's verdict is
recorded once.

The judge runs on one key (one worker): windows are judged in order and verdicts are made
against the points in force before them. Its cost per window is the batch run's per-window
optimisation; reading is spread over the workers.
"""

from __future__ import annotations

import hashlib
from typing import Any

import apache_beam as beam
import pyarrow as pa
from apache_beam.coders import PickleCoder
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms import userstate
from apache_beam.transforms.window import IntervalWindow
from apache_beam.utils.timestamp import Timestamp

from costlib_pipelines.config import RunConfig
from costlib_pipelines.follow.landing import (
    LandedFile,
    LandingCursor,
    WatermarkMark,
    check_landing,
    parse_watermark,
)
from costlib_pipelines.follow.live_run import record_job, record_stream, record_verdict
from costlib_pipelines.follow.window_book import FilePartials, WindowBook
from costlib_pipelines.io.dead_letters import dead_letter_name
from costlib_pipelines.io.files import InputError, read_footers, write_json, write_parquet
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.plausibility import MICROS_PER_DAY
from costlib_pipelines.io.runs import read_operating_points
from costlib_pipelines.io.schema import check_schema
from costlib_pipelines.recalibrate.aggregating import AggregateBatchesFn
from costlib_pipelines.recalibrate.event_times import event_time_range
from costlib_pipelines.recalibrate.grids import SumBootstrapGrids, SumGrids
from costlib_pipelines.recalibrate.optimizing import optimize_one
from costlib_pipelines.recalibrate.publish import GuardSettings
from costlib_pipelines.recalibrate.window_shards import (
    assemble_window,
    window_directory,
    write_window_shard,
)

__all__ = ["JUDGE", "FollowLanding", "JudgeWindowsFn", "ReadLandedFn", "build_follow",
           "follow_pipeline"]

#: The one key of the judging stage.
JUDGE = "judge"


class PollLandingFn(beam.DoFn):
    """``(key, tick)`` -> every :class:`LandedFile` not emitted before and a
    :class:`WatermarkMark` per larger watermark (one key: the
    :class:`~costlib_pipelines.follow.landing.LandingCursor` is the DoFn's state,
    checkpointed with the job; bounded by the landing directory's size)."""

    CURSOR = userstate.ReadModifyWriteStateSpec("cursor", PickleCoder())

    def __init__(self, pattern: str, settle_seconds: float):
        self.pattern, self.settle_seconds = pattern, settle_seconds

    def process(self, element, cursor_state=beam.DoFn.StateParam(CURSOR)):  # noqa: B008
        cursor = cursor_state.read() or LandingCursor()
        before = (len(cursor.emitted), cursor.watermark_us, len(cursor.unmarked))
        fresh = cursor.poll(self.pattern, self.settle_seconds)
        if fresh or before != (len(cursor.emitted), cursor.watermark_us, len(cursor.unmarked)):
            cursor_state.write(cursor)
        yield from fresh


def _poll_key(tick) -> tuple[str, bytes]:
    return "poll", b""


class FollowLanding(beam.PTransform):
    """``pipeline`` -> :class:`LandedFile` and :class:`WatermarkMark` elements as they land.

    A tick every ``poll_seconds`` from Flink's own streaming impulse source (a source of the
    runner, not a splittable DoFn: Python's ``Watch`` and ``MatchContinuously`` defer their
    polls through the portable Flink runner's SDF checkpoints, whose state grows with time,
    apache/beam#27648, and which left a job idle without polling here) drives one poll of the
    landing glob on one key (:class:`PollLandingFn`). Flink only."""

    def __init__(self, pattern: str, poll_seconds: float, settle_seconds: float):
        super().__init__()
        self.pattern, self.poll_seconds = pattern, poll_seconds
        self.settle_seconds = settle_seconds

    def expand(self, pbegin):
        from apache_beam.io.flink.flink_streaming_impulse_source import (
            FlinkStreamingImpulseSource,
        )

        ticks = FlinkStreamingImpulseSource()
        ticks.config = {"interval_ms": max(1, round(self.poll_seconds * 1000)),
                        "message_count": 0}  # an instance's own (the class shares one dict)
        tick = pbegin | "Ticks" >> ticks
        tick.element_type = bytes  # the runner's ticks are raw bytes (BytesCoder), whatever
        return (tick               # the pipeline's type checking infers
                | "OneKey" >> beam.Map(_poll_key)
                | "Poll" >> beam.ParDo(PollLandingFn(self.pattern, self.settle_seconds)))


def dead_file_path(run_dir: str, source: str) -> str:
    """Where a file dead-lettered whole is recorded (a name of the file: idempotent)."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    return f"{run_dir}/dead_letter/files/{digest}.json"


class ReadLandedFn(beam.DoFn):
    """:class:`LandedFile` -> ``(JUDGE, FilePartials)`` (bad rows written as dead letters);
    :class:`WatermarkMark` -> ``(JUDGE, mark)``."""

    def __init__(self, config: RunConfig, columns: list[str], edges: list, run_dir: str):
        self.config, self.columns, self.edges, self.run_dir = config, columns, edges, run_dir

    def setup(self):
        self.aggregate = AggregateBatchesFn(self.config, self.columns, True,
                                            self.config.bootstrap["replicates"] > 0)

    def process(self, element):
        if isinstance(element, WatermarkMark):
            yield JUDGE, element
            return
        yield JUDGE, self.read(element)

    def read(self, landed: LandedFile) -> FilePartials:
        """One file's partials; the whole file dead-lettered when it cannot be used."""
        partials = FilePartials(landed.path)
        try:
            if not landed.complete:
                raise InputError(f"{landed.path}: not a complete Parquet file (no footer after "
                                 "the settle time): write files elsewhere and rename them in")
            footer = read_footers([landed.path])[0]
            check_schema(footer.schema, landed.path, self.config, windowed=True)
            time_range = event_time_range([landed.path], self.config.columns["event_time"])
            outputs = self._aggregate(landed.path)
        except (InputError, OSError, pa.ArrowException) as exc:
            write_json(dead_file_path(self.run_dir, landed.path),
                       {"source": landed.path, "reason": str(exc)})
            partials.dead = str(exc)
            partials.accounting["files_dead_lettered"] += 1
            return partials
        partials.accounting["files_read"] += 1
        if time_range is not None:
            partials.event_range = (parse_watermark(time_range["min_utc"]),
                                    parse_watermark(time_range["max_utc"]))
        for tag, value in outputs:
            if tag == "accounting":
                partials.accounting.update(value)
            elif tag == "dead_letters":
                source, row_group, table = value
                write_parquet(
                    f"{self.run_dir}/dead_letter/{dead_letter_name(source, row_group)}", table)
            elif tag in ("grids", "bootstrap"):
                (group, partial), bucket = value.value, value.timestamp.micros
                target = partials.grids if tag == "grids" else partials.boots
                target.append((int(bucket), group, partial))
        return partials

    def _aggregate(self, path: str) -> list[tuple[str, Any]]:
        """The batch aggregation of one file, as ``(tag, value)`` (all read before any is
        sent: a file that fails half-way sends nothing)."""
        self.aggregate.start_bundle()
        outputs = []
        for out in self.aggregate.process(path, self.edges):
            if isinstance(out, TaggedOutput):
                outputs.append((out.tag, out.value))
            else:
                outputs.append(("grids", out))
        return outputs


class JudgeWindowsFn(beam.DoFn):
    """``(JUDGE, FilePartials | WatermarkMark)`` -> the verdict entries it recorded.

    The book (:class:`WindowBook`) is the DoFn's state; see the module for what it does."""

    BOOK = userstate.ReadModifyWriteStateSpec("book", PickleCoder())

    def __init__(self, config: RunConfig, run_dir: str, run_id: str, edges: list,
                 in_force, settings: GuardSettings):
        self.config, self.run_dir, self.run_id = config, run_dir, run_id
        self.edges, self.in_force, self.settings = edges, in_force, settings
        window = config.windowing or {}
        self.size_us = round(window["size_days"] * MICROS_PER_DAY)
        self.period_us = round(window["period_days"] * MICROS_PER_DAY)
        self.lateness_us = round(window["allowed_lateness_days"] * MICROS_PER_DAY)

    def setup(self):
        self.grid_sum = SumGrids(self.config, compact_output=True)
        self.boot_sum = SumBootstrapGrids()

    def process(self, element, book_state=beam.DoFn.StateParam(BOOK)):  # noqa: B008
        _, item = element
        book = book_state.read() or WindowBook(self.size_us, self.period_us, self.lateness_us)
        verdicts = []
        if isinstance(item, FilePartials):
            for start in book.add_file(item, self.grid_sum, self.boot_sum):
                verdicts += self.judge(book, start)
        else:
            book.add_mark(item.watermark_us, item.files)
        for start in book.advance():
            verdicts += self.judge(book, start)
        book.expire()
        book_state.write(book)
        if not verdicts:
            record_stream(self.run_dir, book.status(), book.time_range())
        yield from verdicts

    def judge(self, book: WindowBook, start_us: int) -> list[dict[str, Any]]:
        """Optimise, write and judge the window starting at ``start_us`` (its next pane)."""
        pane = book.next_pane(start_us)
        results = {}
        for group, (grid, boot) in book.window_sums(start_us, self.grid_sum,
                                                    self.boot_sum).items():
            if grid is not None:  # only unrated rows: no point (as in a batch run)
                results[group] = optimize_one(self.config, group, grid, boot, self.edges,
                                              self.in_force)
        if not results:
            return []
        window = IntervalWindow(Timestamp(micros=start_us),
                                Timestamp(micros=start_us + self.size_us))
        latest = {g: (r, pane) for g, r in results.items()}
        parent = results.get("__all__")
        directory, shard = write_window_shard(self.config, self.run_dir, self.run_id, window,
                                              latest, parent, 0)
        assemble_window(directory, [shard])
        FileSystems.delete([f"{directory}/shards"])
        name = window_directory(self.run_dir, window).rsplit("/", 1)[1]
        records = read_operating_points(f"{directory}/operating_points.parquet")
        entry = record_verdict(self.run_dir, self.config, self.settings, name, pane, records,
                               book.time_range(), book.status())
        return [entry]


def build_follow(pipeline: beam.Pipeline, pattern: str, config: RunConfig, run_dir: str,
                 run_id: str, columns: list[str], edges: list, in_force,
                 settings: GuardSettings, *, poll_seconds: float, settle_seconds: float,
                 landed=None):
    """Add the followed stream's transforms to ``pipeline``; returns the verdicts.

    ``landed``: a PCollection of :class:`LandedFile` / :class:`WatermarkMark` to use instead
    of watching ``pattern`` (tests on runners without Flink's streaming impulse)."""
    if landed is None:
        landed = pipeline | "Follow" >> FollowLanding(pattern, poll_seconds, settle_seconds)
    return (landed
            | "Read" >> beam.ParDo(ReadLandedFn(config, columns, edges, run_dir))
            | "Judge" >> beam.ParDo(JudgeWindowsFn(config, run_dir, run_id, edges, in_force,
                                                   settings)))



def start_follow(config: RunConfig, pattern: str, output: str, beam_args=(), *,
                 run_id: str | None = None, in_force: str | None = None,
                 max_threshold_change: float | None = None, min_rated: float | None = None,
                 poll_seconds: float = 5.0, settle_seconds: float = 60.0,
                 landed=None, progress=None) -> dict[str, Any]:
    """Start ``costlib recalibrate --follow``: make and publish the live run, then submit the
    streaming job (returns once it is submitted; the job runs until stopped).

    Needs ``windowing`` in the config and edges known before any row is read (uniform or
    explicit, or auto edges carried from the published run). ``landed`` replaces the watched
    directory (tests). Returns ``{"status": "following", "run_id", "run_dir", "job_id",
    "result"}`` (``result``: Beam's pipeline result).
    """
    import datetime as dt

    from costlib_pipelines.config import ConfigError
    from costlib_pipelines.follow.job_spec import job_spec, record_spec, stateful_steps
    from costlib_pipelines.follow.live_run import start_live_run
    from costlib_pipelines.io.lock import hold_output
    from costlib_pipelines.io.runs import RunDirectory
    from costlib_pipelines.recalibrate.in_force import edges_with_in_force, read_in_force
    from costlib_pipelines.recalibrate.manifest import grid_edges_entry
    from costlib_pipelines.recalibrate.pipeline import auto_edges_source
    from costlib_pipelines.recalibrate.publish import read_baseline
    from costlib_pipelines.runner import find_flink_job, runner_name

    say = progress or (lambda _message: None)
    config.check_recalibrate("run config")
    if config.windowing is None:
        raise ConfigError("--follow judges event-time windows: the config needs a windowing "
                          "section (size_days, period_days, allowed_lateness_days)")
    if config.allocates_capacity:
        raise ConfigError("--follow does not allocate a shared capacity (batch runs only)")
    pattern = check_landing(pattern)
    run = RunDirectory(output, config.digest, run_id)
    runner = runner_name(beam_args)
    with hold_output(run.output, run_id=run.run_id, command="recalibrate --follow"):
        run.check_replaceable()
        baseline = read_baseline(output)
        if baseline.problem is not None:
            raise InputError(f"{output}: {baseline.problem}; the stream would be compared with "
                             "nothing: repair LATEST first (costlib status)")
        thresholds_in_force, in_force_entry = read_in_force(config, in_force, baseline, output)
        carried, edges_source = auto_edges_source(config, output, baseline.run_id)
        fixed = config.fixed_edges() if carried is None else carried
        if fixed is None:
            raise ConfigError(
                "grid.edges: auto edges on a followed stream need edges carried from a "
                "published run (a first pass would wait for the end of the stream); run a "
                "batch recalibration into this output first, or use uniform or explicit edges")
        edges, in_force_entry["edges_added"] = edges_with_in_force(fixed, thresholds_in_force,
                                                                   config)
        settings = GuardSettings(
            max_threshold_change=(max_threshold_change if max_threshold_change is not None
                                  else config.publish.max_threshold_change),
            min_rated=min_rated if min_rated is not None else config.publish.min_rated,
            method=config.decision_method)
        run.prepare()
        follow = {"landing": pattern, "poll_seconds": poll_seconds,
                  "settle_seconds": settle_seconds,
                  "spec": job_spec(thresholds_in_force, settings)}
        start_live_run(run, config, settings=settings, baseline_run=baseline.run_id,
                       carried=baseline.records, follow=follow, in_force=in_force_entry,
                       grid_edges=grid_edges_entry(config, edges, edges_source), runner=runner)
    say(f"run {run.run_id} is published and following {pattern}")
    pipeline = follow_pipeline(config, pattern, run.run_dir, run.run_id, list(edges),
                               thresholds_in_force, settings, beam_args,
                               poll_seconds=poll_seconds, settle_seconds=settle_seconds,
                               landed=landed)
    record_spec(run.run_dir, stateful_steps=stateful_steps(pipeline))
    say(f"submitting the streaming job to {runner}")
    result = pipeline.run()
    job_id = getattr(result, "job_id", lambda: None)()
    job = None
    if landed is None:  # a job on a cluster: its name, and its Flink id when Flink says it
        job = {**find_flink_job(pipeline.options), "job_service_id": job_id}
        record_job(run.run_dir, job)
    return {"status": "following", "run_id": run.run_id, "run_dir": run.run_dir,
            "job_id": job_id, "job": job, "result": result,
            "started_utc": dt.datetime.now(dt.UTC).isoformat()}


def follow_pipeline(config: RunConfig, pattern: str, run_dir: str, run_id: str, edges: list,
                    in_force, settings: GuardSettings, beam_args=(), *, poll_seconds: float,
                    settle_seconds: float, landed=None) -> beam.Pipeline:
    """The streaming pipeline of the followed run ``run_id`` (not run yet), named
    ``costlib-recalibrate-<run id>`` on a Flink or portable runner: the one job of a started
    stream, and of each upgrade of it (the same graph, so Flink maps the saved state back)."""
    from costlib_pipelines.recalibrate.pipeline import needed_columns
    from costlib_pipelines.runner import job_name_flags, make_pipeline

    streaming = [] if landed is not None or "--streaming" in beam_args else ["--streaming"]
    pipeline = make_pipeline(job_name_flags([*beam_args, *streaming], "recalibrate", run_id),
                             type_check=False)
    build_follow(pipeline, pattern, config, run_dir, run_id,
                 needed_columns(config, windowed=True), edges, in_force, settings,
                 poll_seconds=poll_seconds, settle_seconds=settle_seconds,
                 landed=None if landed is None else landed(pipeline))
    return pipeline
