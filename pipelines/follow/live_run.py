"""The run a followed stream writes while it runs: published from its start, judged per window.

``costlib recalibrate --follow`` makes one run directory, as a windowed batch run does
(``runs/<run_id>/windows/<start>_<end>/``), but commits it *before* the stream starts
(:func:`start_live_run`): the manifest (``status: following``) and ``LATEST`` name it, and
``points_in_force.parquet`` holds the points in force at the start, so ``costlib decide``
keeps applying them to every group no applied window covers yet. As each window is final the
streaming job writes its files and then its verdict (:func:`record_verdict`): the window guard
of a batch windowed run (:func:`~costlib_pipelines.recalibrate.window_guard.guard_windows`,
same rules) against the points in force just before the window — the points in force at the
start, overridden by the applied windows that end before it, as the manifest says *now*. So a
person's ``costlib publish --window`` (release or withdraw) while the job runs is what the
next verdict compares with, and no verdict already made changes.

Every change of the manifest happens under an exclusive lock on ``.manifest.lock`` in the run
directory (``fcntl.flock``: the job's judging worker and ``costlib publish`` on the machine
sharing the filesystem), and the manifest is replaced atomically. A window's verdict is
recorded once per pane: a restarted job that judges a pane again finds its entry and leaves
it (nothing is published twice).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from typing import Any

from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import write_json
from costlib_pipelines.io.runs import (
    POINTS_IN_FORCE,
    RunDirectory,
    manifest_lock,
    read_manifest,
    read_operating_points,
)
from costlib_pipelines.recalibrate import window_guard
from costlib_pipelines.recalibrate.publish import GuardSettings

__all__ = [
    "FOLLOWING",
    "points_in_force_before",
    "record_job",
    "record_verdict",
    "start_live_run",
]

#: ``status`` of the manifest of a run a stream is writing.
FOLLOWING = "following"


def start_live_run(run: RunDirectory, config: RunConfig, *, settings: GuardSettings,
                   baseline_run: str | None, carried: Sequence[dict[str, Any]] | None,
                   follow: Mapping[str, Any], in_force: Mapping[str, Any] | None,
                   grid_edges: Mapping[str, Any] | None, runner: str) -> dict[str, Any]:
    """Copy the points in force into the prepared run, write its manifest (no window yet) and
    point ``LATEST`` at it; returns the manifest."""
    window_guard.write_points_in_force(run.run_dir, carried)
    now = dt.datetime.now(dt.UTC).isoformat()
    manifest = {
        "status": FOLLOWING, "published": True, "run_id": run.run_id,
        "command": "recalibrate", "config_digest": config.digest, "config": config.raw,
        "inputs": [], "follow": {**follow, "started_utc": now},
        "row_accounting": {}, "windowing": config.windowing, "windows": 0,
        "event_time_range": None, "in_force": dict(in_force or {}),
        "grid_edges": None if grid_edges is None else dict(grid_edges),
        "guard": window_guard.build_guard_entry(
            config, settings, baseline_run, None, [], [], None,
            len({r["group"] for r in carried or []})),
        "outputs": [], "runner": runner, "started_utc": now,
    }
    run.commit(manifest)
    return manifest


def _window_key(name: str) -> tuple[str, str]:
    return name[16:], name[:15]  # by end, then start (as read_windows orders them)


def points_in_force_before(run_dir: str, entries: Sequence[dict[str, Any]], name: str,
                           method: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The points in force just before window ``name``: the run's points in force at the
    start, each group's replaced by the applied windows ending before it, in order of end;
    and for the groups a window of the run set, ``"window <name>"`` (where they came from)."""
    current: dict[str, dict[str, Any]] = {}
    sources: dict[str, str] = {}
    path = f"{run_dir}/{POINTS_IN_FORCE}"
    if os.path.exists(path):
        current = {r["group"]: r for r in read_operating_points(path) if r["method"] == method}
    for entry in sorted(entries, key=lambda e: _window_key(e["window"])):
        if _window_key(entry["window"]) >= _window_key(name):
            break
        if entry["state"] == window_guard.APPLIED:
            records = read_operating_points(
                f"{run_dir}/windows/{entry['window']}/operating_points.parquet")
            for record in records:
                if record["method"] == method:
                    current[record["group"]] = record
                    sources[record["group"]] = f"window {entry['window']}"
    return list(current.values()), sources


def record_verdict(run_dir: str, config: RunConfig, settings: GuardSettings, name: str,
                   pane: int, records: Sequence[dict[str, Any]],
                   time_range: dict[str, str] | None, stream: Mapping[str, Any]
                   ) -> dict[str, Any]:
    """Judge window ``name``'s pane ``pane`` (its ``records`` are written) and record the
    verdict in the manifest; returns the window's entry. A pane judged before keeps its entry;
    a later pane replaces the window's entry, the earlier verdicts kept in its
    ``earlier_panes``. ``stream``: the stream's status (files read, watermark, accounting)."""
    with manifest_lock(run_dir):
        manifest = read_manifest(run_dir)
        guard = manifest["guard"]
        entries: list[dict[str, Any]] = guard["windows"]
        existing = next((e for e in entries if e["window"] == name), None)
        if existing is not None and existing.get("pane_index", 0) >= pane:
            return existing
        in_force, sources = points_in_force_before(run_dir, entries, name, settings.method)
        eligible = window_guard.eligible_windows([name], config.decide, time_range)
        entry = window_guard.guard_windows({name: list(records)}, in_force, settings,
                                           eligible, sources=sources)[0]
        entry["pane_index"] = pane
        entry["judged_utc"] = dt.datetime.now(dt.UTC).isoformat()
        if existing is not None:
            entry["earlier_panes"] = [*existing.pop("earlier_panes", []), existing]
            entries.remove(existing)
        entries.append(entry)
        entries.sort(key=lambda e: _window_key(e["window"]))
        guard["window_states"] = window_guard.window_entries_summary(entries)
        manifest["windows"] = len(entries)
        _with_stream(manifest, stream, time_range)
        write_json(f"{run_dir}/manifest.json", manifest)
        return entry


def record_stream(run_dir: str, stream: Mapping[str, Any],
                  time_range: dict[str, str] | None) -> None:
    """Record the stream's status in the manifest (files read, dead letters, watermark)."""
    with manifest_lock(run_dir):
        manifest = read_manifest(run_dir)
        _with_stream(manifest, stream, time_range)
        write_json(f"{run_dir}/manifest.json", manifest)


def record_job(run_dir: str, job: Mapping[str, Any]) -> None:
    """Record the streaming job (its name, Flink job id and REST address) in the manifest's
    ``follow.job``, for an operator who must find or stop it."""
    with manifest_lock(run_dir):
        manifest = read_manifest(run_dir)
        manifest["follow"]["job"] = dict(job)
        write_json(f"{run_dir}/manifest.json", manifest)


def _with_stream(manifest: dict[str, Any], stream: Mapping[str, Any],
                 time_range: dict[str, str] | None) -> None:
    """Put the stream's status, row accounting and event-time range into ``manifest``, with
    when (by the clock) the watermark last moved (``watermark_moved_utc``, for
    ``costlib status --replay``)."""
    before = manifest["follow"].get("stream") or {}
    moved = before.get("watermark_moved_utc")
    if stream.get("watermark_utc") != before.get("watermark_utc"):
        moved = dt.datetime.now(dt.UTC).isoformat()
    manifest["follow"]["stream"] = {**stream, "watermark_moved_utc": moved}
    manifest["row_accounting"] = dict(stream.get("row_accounting") or {})
    if time_range is not None:
        manifest["event_time_range"] = time_range
