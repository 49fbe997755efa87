"""Upgrading a followed stream's job in place: stop it with a savepoint, start the new costlib's
job from it, in the same run (``costlib recalibrate --follow --upgrade``).

The streaming job keeps its state in Flink (Beam user state, checkpointed): the poller's set of
files and watermarks emitted, and the judge's :class:`~costlib_pipelines.follow.window_book.
WindowBook` (files read, each open window's partial grids, the watermark, the panes). A Flink
savepoint holds that state, and Beam's Flink runner restores it into a new job given
``--savepoint_path``: its streaming translator names every fused stage's operator (Flink's
``uid``) after the stage, which is named after its input PCollection, so the stateful steps of
an unchanged graph get the same operator ids in every submission (``Read`` feeds ``Judge``;
``Follow/OneKey`` feeds ``Follow/Poll``). Renaming a step that feeds a stateful one changes the
id, and Flink then refuses to start the job ("Cannot map checkpoint/savepoint state for
operator ... to the new program").

So an upgrade:

1. checks the new job against the running one *before touching it*: the same run (landing glob,
   config digest), and the same stateful steps (:func:`stateful_steps`: each stateful step's
   name, input and state names, recorded in the manifest when the job started);
2. stops the running job with a savepoint under ``<run dir>/savepoints/`` (Flink's
   stop-with-savepoint: when the savepoint fails, the job keeps running) and records it in the
   manifest (``follow.upgrade_pending``) before anything else;
3. submits the new job of the same run (same run directory, name and parameters:
   :func:`~costlib_pipelines.follow.recalibrate_stream.follow_pipeline`) with
   ``--savepoint_path``, and waits until Flink says it restored that savepoint and runs;
4. records the new job in ``follow.job`` and the upgrade in ``follow.upgrades``.

If the new job fails to start, the old one stays stopped and its state stays in the savepoint;
the same command (with the old version or a fixed one) resumes from the recorded savepoint.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from costlib_pipelines import flink_rest
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.flags import UsageError
from costlib_pipelines.follow.job_spec import in_force_of, job_spec, stateful_steps
from costlib_pipelines.follow.live_run import FOLLOWING
from costlib_pipelines.io.files import InputError, write_json
from costlib_pipelines.io.runs import latest_run_id, manifest_lock, read_manifest
from costlib_pipelines.recalibrate.publish import GuardSettings

__all__ = ["UpgradeFailed", "upgrade_follow"]

#: Seconds the new job may take to be listed, restore the savepoint and run.
START_TIMEOUT = 300.0


class UpgradeFailed(RuntimeError):
    """The cluster did not complete an upgrade; the message says what state things are in and
    how to go on (exit 4: the engine, not the input)."""


def _update_follow(run_dir: str, change: Callable[[dict[str, Any]], None]) -> None:
    with manifest_lock(run_dir):
        manifest = read_manifest(run_dir)
        change(manifest["follow"])
        write_json(f"{run_dir}/manifest.json", manifest)


def _live_run(output: str, pattern: str, config: RunConfig) -> tuple[str, str, dict[str, Any]]:
    """``(run id, run dir, manifest)`` of the followed run ``output`` publishes; refusals
    (exit 2) when there is none, or when it follows another glob or config."""
    start = ("start one with costlib recalibrate --follow (without --upgrade; it makes a new "
             "run)")
    run_id = latest_run_id(output)
    if run_id is None:
        raise InputError(f"{output}: nothing is published here, so no follow job runs to "
                         f"upgrade: {start}")
    run_dir = f"{output}/runs/{run_id}"
    manifest = read_manifest(run_dir)
    follow = manifest.get("follow") or {}
    if manifest.get("status") != FOLLOWING:
        raise InputError(f"{output}: its published run {run_id} is a batch run, not a followed "
                         f"stream: there is no follow job to upgrade; {start}")
    if follow.get("landing") != pattern:
        raise InputError(f"--input {pattern}: run {run_id} follows {follow.get('landing')}; an "
                         "upgrade continues the same stream: give its glob")
    if manifest.get("config_digest") != config.digest:
        raise ConfigError(
            f"--config: its digest {config.digest} is not run {run_id}'s "
            f"({manifest.get('config_digest')}); an upgrade continues the run with its config "
            "(the manifest's config): use that one, or stop the job and start a new run with "
            "the changed config (recalibrate --follow without --upgrade)")
    spec = follow.get("spec") or {}
    if "stateful_steps" not in spec or manifest.get("grid_edges") is None:
        raise InputError(f"run {run_id} does not record its job's parameters (started by an "
                         "older costlib): it cannot be upgraded in place; stop its job and "
                         f"{start}")
    return run_id, run_dir, manifest


def _running_job(url: str, follow: Mapping[str, Any], name: str) -> str | None:
    """The Flink id of the run's job that runs now: ``follow.job``'s, else the newest job of
    the run's name that has not ended; None when none runs."""
    recorded = (follow.get("job") or {}).get("flink_job_id")
    if recorded and flink_rest.job_state(url, recorded) not in (None, *flink_rest.ENDED):
        return str(recorded)
    newest = flink_rest.running_job(url, name)
    return None if newest is None else str(newest["jid"])


def _same_path(a: str, b: str) -> bool:
    def strip(path: str) -> str:
        return path.removeprefix("file:").lstrip("/").rstrip("/")
    return strip(a) == strip(b)


def _savepoint_target(run_dir: str) -> str | None:
    """Where the savepoint goes: ``<run dir>/savepoints`` of a local run (as a ``file://``
    URI, for the JobManager); the cluster's ``state.savepoints.dir`` otherwise."""
    if "://" in run_dir:
        return None
    return f"file://{os.path.abspath(run_dir)}/savepoints"


def _wait_restored(url: str, name: str, before: set[str], savepoint: str,
                   timeout: float = START_TIMEOUT) -> str:
    """The id of the new job of ``name`` once Flink says it restored ``savepoint`` and runs;
    :class:`UpgradeFailed` when it ends first (Flink's root cause) or nothing happens."""
    deadline = time.monotonic() + timeout
    jid = None
    while time.monotonic() < deadline:
        try:
            if jid is None:
                found = flink_rest.find_job(url, name, exclude=before)
                jid = None if found is None else str(found["jid"])
            if jid is not None:
                state = flink_rest.job_state(url, jid)
                if state in flink_rest.ENDED:
                    cause = flink_rest.root_cause(url, jid) or "no root cause was reported"
                    raise UpgradeFailed(f"the new Flink job {jid} ended {state}: {cause}")
                restored = flink_rest.restored_from(url, jid)
                if state == "RUNNING" and restored is not None:
                    if not _same_path(restored, savepoint):
                        raise UpgradeFailed(f"the new Flink job {jid} restored {restored}, "
                                            f"not the savepoint {savepoint}")
                    return jid
        except flink_rest.RestError:  # a busy JobManager: ask again
            pass
        time.sleep(1.0)
    what = f"the new Flink job {jid}" if jid else f"no new Flink job named {name}"
    raise UpgradeFailed(f"{what} did not restore the savepoint and run within {timeout:g} s")


def upgrade_follow(config: RunConfig, pattern: str, output: str, beam_args: Sequence[str] = (),
                   *, max_threshold_change: float | None = None, min_rated: float | None = None,
                   poll_seconds: float = 5.0, settle_seconds: float = 60.0,
                   progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Replace the running job of the followed run ``output`` publishes by this costlib's job,
    its state carried over in a savepoint (see the module). Guard settings not given stay the
    run's. Returns what was done: ``run_id``, ``from_job``, ``job`` (the new one),
    ``savepoint``, ``stream`` (files read, watermark at the savepoint).

    Raises
    ------
    InputError, ConfigError, UsageError
        Nothing to upgrade, or a new job that could not take over the state (exit 2); the
        running job is left alone.
    UpgradeFailed
        The savepoint or the new job failed on the cluster; the message says where things
        stand and how to resume.
    """
    from costlib_pipelines.follow.landing import check_landing
    from costlib_pipelines.follow.recalibrate_stream import follow_pipeline
    from costlib_pipelines.runner import FlinkJobOptions, runner_name

    say = progress or (lambda _message: None)
    if any(a.split("=", 1)[0] in ("--savepoint_path", "--allow_non_restored_state")
           for a in beam_args):
        raise UsageError("--upgrade takes the savepoint itself and restores all of it: drop "
                         "--savepoint_path and --allow_non_restored_state")
    pattern = check_landing(pattern)
    output = output.rstrip("/")
    run_id, run_dir, manifest = _live_run(output, pattern, config)
    follow, spec = manifest["follow"], manifest["follow"]["spec"]
    recorded = spec.get("settings") or {}
    settings = GuardSettings(
        max_threshold_change=(max_threshold_change if max_threshold_change is not None
                              else recorded.get("max_threshold_change")),
        min_rated=min_rated if min_rated is not None else recorded.get("min_rated", 0.0),
        method=config.decision_method)
    edges = [np.asarray(e, dtype=np.float64) for e in manifest["grid_edges"]["edges"]]
    pipeline = follow_pipeline(config, pattern, run_dir, run_id, edges,
                               in_force_of(spec.get("in_force")), settings, beam_args,
                               poll_seconds=poll_seconds, settle_seconds=settle_seconds)
    options = pipeline.options.get_all_options(drop_default=True)
    url, name = flink_rest.rest_url(options), str(options.get("job_name"))
    if url is None:
        raise UsageError("--upgrade finds, stops and restarts the job through Flink's REST API: "
                         "give its address, --flink_master=HOST:PORT (flink_cluster.py flags "
                         "--streaming prints it)")
    try:
        old = _running_job(url, follow, name)
    except flink_rest.RestError as exc:
        raise InputError(f"Flink's REST API does not answer ({exc}): check --flink_master and "
                         "that the cluster runs; nothing was stopped") from exc
    pending = follow.get("upgrade_pending")
    if old is None and pending is None:
        job = follow.get("job") or {}
        raise InputError(
            f"no follow job of run {run_id} runs on {url} (follow.job: "
            f"{job.get('flink_job_id') or 'none'}), so there is nothing to upgrade: start a new "
            "run with costlib recalibrate --follow (without --upgrade)")
    steps = stateful_steps(pipeline)
    if steps != spec["stateful_steps"]:
        changed = sorted(k for k in {*steps, *spec["stateful_steps"]}
                         if steps.get(k) != spec["stateful_steps"].get(k))
        raise InputError(
            f"the new job's stateful steps differ from run {run_id}'s ({', '.join(changed)}: "
            "name, input or state), so Flink could not map the saved state to it; nothing was "
            "stopped. Keep those steps and the steps feeding them as they are, or stop the job "
            "and start a new run")
    if old is not None:
        say(f"stopping Flink job {old} with a savepoint")
        try:
            savepoint = flink_rest.stop_with_savepoint(url, old, _savepoint_target(run_dir))
        except (flink_rest.SavepointFailed, flink_rest.RestError) as exc:
            try:
                state = flink_rest.job_state(url, old)
            except flink_rest.RestError:
                state = None
            now = ("keeps running (Flink goes on after a failed savepoint); retry the upgrade "
                   "later" if state == "RUNNING" else
                   f"is {state or 'unknown to Flink'}: look at it in the web UI {url}")
            raise UpgradeFailed(f"{exc}; run {run_id} is unchanged and job {old} {now}") from exc
        pending = {"savepoint": savepoint, "from_job": old,
                   "stopped_utc": dt.datetime.now(dt.UTC).isoformat()}
        _update_follow(run_dir, lambda f: f.__setitem__("upgrade_pending", pending))
    else:
        say(f"resuming from the savepoint of the upgrade left pending: {pending['savepoint']}")
    savepoint = str(pending["savepoint"])
    pipeline.options.view_as(FlinkJobOptions).savepoint_path = savepoint
    resume = (f"job {pending['from_job']} is stopped and run {run_id}'s state is in the "
              f"savepoint {savepoint} (follow.upgrade_pending in its manifest); fix the cause "
              "and run the same command again (with this or the previous costlib): it resumes "
              "from that savepoint")
    before = {str(j["jid"]) for j in flink_rest.jobs(url) if j.get("name") == name}
    say(f"submitting the new job of run {run_id} from the savepoint")
    try:
        result = pipeline.run()
        jid = _wait_restored(url, name, before, savepoint)
    except UpgradeFailed as exc:
        raise UpgradeFailed(f"{exc}; {resume}") from exc
    except Exception as exc:  # the job server refused the job: the state is safe all the same
        raise UpgradeFailed(f"the new job was not submitted: {exc}; {resume}") from exc
    job = {"runner": runner_name(beam_args), "flink_rest": url, "name": name,
           "flink_job_id": jid, "note": None,
           "job_service_id": getattr(result, "job_id", lambda: None)()}
    now = dt.datetime.now(dt.UTC).isoformat()

    def done(f: dict[str, Any]) -> None:
        f["job"] = job
        f.pop("upgrade_pending", None)
        f["spec"]["settings"] = job_spec(None, settings)["settings"]
        f["poll_seconds"], f["settle_seconds"] = poll_seconds, settle_seconds
        f.setdefault("upgrades", []).append(
            {"utc": now, "from_job": pending["from_job"], "to_job": jid,
             "savepoint": savepoint, "costlib_version": _version()})

    _update_follow(run_dir, done)
    stream = read_manifest(run_dir)["follow"].get("stream") or {}
    return {"run_id": run_id, "run_dir": run_dir, "from_job": pending["from_job"], "job": job,
            "savepoint": savepoint, "stream": stream, "result": result}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("costlib")
    except PackageNotFoundError:  # a source tree that is not installed
        return "unknown"
