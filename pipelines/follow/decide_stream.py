"""The streaming job of ``costlib decide --follow``: each landed score file decided on its own.

The graph::

    Flink ticks -> key "poll" -> PollLandingFn -> DecideLandedFn

Every landed file (the writer's contract of :mod:`costlib_pipelines.follow.landing`; the
watermark file plays no part here) is decided by the batch decide pipeline on that one file
(:func:`~costlib_pipelines.decide.pipeline.run_decide`, run in the worker on Beam's in-process
runner), with the operating points ``--operating-points`` names *when the file is decided*:
for a followed recalibration, per group its newest applied window (or the points in force
before the stream). So each output is exactly what ``costlib decide`` writes for that file —
threshold and top-k decisions, the audit sample, accounting, manifest — in its own output
directory ``OUTPUT/files/<name>-<digest>/`` (``<name>`` the file's name without ``.parquet``,
``<digest>`` 8 hex digits of its path), whose ``LATEST`` names the run.

Exactly once: a file whose output directory has a ``LATEST`` is decided already and skipped
(a restarted job replays the files read after its last checkpoint); a run interrupted before
its ``LATEST`` is replaced whole by the retry (its run id is the directory's name). A file that
cannot be decided (unreadable, a broken schema, no usable points) is recorded in
``OUTPUT/dead_letter/files/<digest>.json`` with the reason, and the job goes on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import time
from typing import Any

import apache_beam as beam

from costlib_pipelines.config import RunConfig
from costlib_pipelines.follow.landing import LandedFile, check_landing
from costlib_pipelines.io.files import InputError, write_json

__all__ = ["DecideLandedFn", "build_follow_decide", "decided_name", "start_follow_decide"]

#: How long a landed file waits for usable points (a followed stream before its first
#: window) before it is dead-lettered.
WAIT_SECONDS = 600.0


def _following(operating_points: str) -> bool:
    """Whether ``operating_points`` is the output of a followed recalibration (its ``LATEST``
    run's manifest says ``following``)."""
    from costlib_pipelines.io.runs import latest_run_id, read_manifest

    try:
        run_id = latest_run_id(operating_points)
        return run_id is not None and read_manifest(
            f"{operating_points.rstrip('/')}/runs/{run_id}").get("status") == "following"
    except (InputError, OSError, ValueError):
        return False


def decided_name(path: str) -> str:
    """The output directory name of a landed file: its name without ``.parquet`` (characters
    other than letters, digits, ``.``, ``_`` and ``-`` as ``_``, at most 100), ``-`` and 8 hex
    digits of its path; also the run id of its decide run."""
    stem = os.path.basename(path)
    stem = stem[: -len(".parquet")] if stem.endswith(".parquet") else stem
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", stem)[:100].lstrip("._-") or "file"
    return f"{stem}-{hashlib.sha1(path.encode()).hexdigest()[:8]}"


class DecideLandedFn(beam.DoFn):
    """:class:`LandedFile` -> ``{"file", "output", "status", ...}`` after deciding it (or
    finding it decided, or dead-lettering it)."""

    def __init__(self, config: RunConfig, operating_points: str, output: str,
                 wait_seconds: float):
        self.config, self.operating_points, self.output = config, operating_points, output
        self.wait_seconds = wait_seconds

    def process(self, element):
        if not isinstance(element, LandedFile):  # a watermark: decisions do not wait for one
            return
        yield decide_landed(self.config, element, self.operating_points, self.output,
                            self.wait_seconds)


def wait_for_points(operating_points: str, wait_seconds: float) -> None:
    """Return once ``operating_points`` has points ``costlib decide`` can apply (a followed
    stream before its first usable window has none), polling every 2 s; after
    ``wait_seconds`` the last :class:`InputError` is raised (the file is dead-lettered)."""
    from costlib_pipelines.io.runs import load_operating_points

    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            load_operating_points(operating_points, windows="usable")
            return
        except InputError as exc:
            if time.monotonic() >= deadline:
                raise InputError(f"no usable operating points in {operating_points} after "
                                 f"{wait_seconds:g} s: {exc}") from exc
        time.sleep(2.0)


def decide_landed(config: RunConfig, landed: LandedFile, operating_points: str,
                  output: str, wait_seconds: float = 0.0) -> dict[str, Any]:
    """Decide one landed file into ``output/files/<decided_name>`` (see the module); waits
    up to ``wait_seconds`` for usable points first."""
    from costlib_pipelines.decide.pipeline import run_decide
    from costlib_pipelines.io.runs import latest_run_id

    name = decided_name(landed.path)
    target = f"{output}/files/{name}"
    started = time.time()
    if latest_run_id(target) is not None:
        return {"file": landed.path, "output": target, "status": "decided_before"}
    try:
        wait_for_points(operating_points, wait_seconds)
        if not landed.complete:
            raise InputError(f"{landed.path}: not a complete Parquet file (no footer after the "
                             "settle time): write files elsewhere and rename them in")
        manifest = run_decide(config, [landed.path], operating_points, target, run_id=name)
    except (InputError, OSError) as exc:
        digest = hashlib.sha1(landed.path.encode()).hexdigest()[:16]
        write_json(f"{output}/dead_letter/files/{digest}.json",
                   {"source": landed.path, "reason": str(exc)})
        return {"file": landed.path, "output": None, "status": "dead_lettered",
                "reason": str(exc)}
    return {"file": landed.path, "output": target, "status": "decided",
            "rows": manifest["row_accounting"].get("decided", 0),
            "points_run": manifest["operating_points"].get("run_id"),
            "seconds": round(time.time() - started, 3)}


def build_follow_decide(pipeline: beam.Pipeline, pattern: str, config: RunConfig,
                        operating_points: str, output: str, *, poll_seconds: float,
                        settle_seconds: float, wait_seconds: float = WAIT_SECONDS,
                        landed=None):
    """Add the followed decisions to ``pipeline`` (``landed``: elements instead of watching
    ``pattern``, for tests); returns what each file became."""
    from costlib_pipelines.follow.recalibrate_stream import FollowLanding

    if landed is None:
        landed = pipeline | "Follow" >> FollowLanding(pattern, poll_seconds, settle_seconds)
    return (landed
            | "Spread" >> beam.Reshuffle()
            | "Decide" >> beam.ParDo(DecideLandedFn(config, operating_points, output,
                                                    wait_seconds)))


def start_follow_decide(config: RunConfig, pattern: str, operating_points: str, output: str,
                        beam_args=(), *, poll_seconds: float = 5.0,
                        settle_seconds: float = 60.0, landed=None) -> dict[str, Any]:
    """Start ``costlib decide --follow``: check the points and the output, then submit the
    streaming job (returns once it is submitted). ``job`` in the result: the job's name
    (``costlib-decide-follow-<UTC time>``) and Flink id
    (:func:`~costlib_pipelines.runner.find_flink_job`; None with ``landed``), also recorded
    in ``OUTPUT/follow.json`` (:data:`~costlib_pipelines.io.status.FOLLOW_RECORD`, read by
    ``costlib status``)."""
    from costlib_pipelines.decide.records import decoding_settings
    from costlib_pipelines.io.files import check_output_path
    from costlib_pipelines.io.runs import load_operating_points
    from costlib_pipelines.io.status import FOLLOW_RECORD
    from costlib_pipelines.runner import (
        find_flink_job,
        job_name_flags,
        make_pipeline,
        runner_name,
    )

    pattern = check_landing(pattern)
    output = check_output_path(output).rstrip("/")
    decoding_settings(config)  # a config error before any job
    if not _following(operating_points):  # a stream's first points may come later
        load_operating_points(operating_points, windows="usable")  # else there now, or exit 2
    os.makedirs(f"{output}/files", exist_ok=True)
    streaming = [] if landed is not None or "--streaming" in beam_args else ["--streaming"]
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    pipeline = make_pipeline(job_name_flags([*beam_args, *streaming], "decide-follow", stamp),
                             type_check=False)
    build_follow_decide(pipeline, pattern, config, operating_points, output,
                        poll_seconds=poll_seconds, settle_seconds=settle_seconds,
                        landed=None if landed is None else landed(pipeline))
    started = dt.datetime.now(dt.UTC).isoformat()
    result = pipeline.run()
    job = None if landed is not None else find_flink_job(pipeline.options)
    write_json(f"{output}/{FOLLOW_RECORD}",
               {"command": "decide", "landing": pattern, "operating_points": operating_points,
                "started_utc": started, "job": job})
    return {"status": "following", "output": output, "runner": runner_name(beam_args),
            "job": job, "result": result}
