"""Health of a published output: is ``OUTPUT/LATEST`` there, published, fresh, and not behind
a held run (or, for a windowed run, a held or stale window)? The alert behind ``costlib status``
(exit 0 healthy, 3 needs a person).

A scheduler runs it after each recalibration (and on its own schedule), so an operator hears of
a run the publish guard held, of a ``LATEST`` that stopped moving (recalibration failing or not
scheduled), and of a broken ``LATEST`` — instead of finding out from stale decisions.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from costlib.message_text import ago
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.lock import read_lock
from costlib_pipelines.io.recall_floor import misses_only_min_recall
from costlib_pipelines.io.runs import latest_run_id, list_runs, read_operating_points

__all__ = ["FOLLOW_RECORD", "OutputStatus", "check_status", "latest_notes", "replay_clock"]

#: The record ``costlib decide --follow`` leaves at the top of its output: what it follows and
#: its streaming job (the output has no ``LATEST`` of its own: one per decided file).
FOLLOW_RECORD = "follow.json"


@dataclass
class OutputStatus:
    """What :func:`check_status` found; ``problems`` empty means healthy."""

    output: str
    latest: str | None
    latest_finished_utc: str | None
    age_hours: float | None
    max_age_hours: float
    problems: list[str] = field(default_factory=list)
    held_runs: list[dict[str, Any]] = field(default_factory=list)
    held_windows: list[dict[str, Any]] = field(default_factory=list)
    newest_window: dict[str, Any] | None = None
    incomplete_runs: list[str] = field(default_factory=list)
    lock: dict[str, Any] | None = None
    #: What ``LATEST``'s run published with, worth knowing but not a reason to alert
    #: (:func:`latest_notes`); they do not change the exit code.
    notes: list[str] = field(default_factory=list)
    #: Each follow job of the output (``recalibrate --follow``'s in ``LATEST``'s manifest,
    #: ``decide --follow``'s in :data:`FOLLOW_RECORD`) as the cluster reports it
    #: (:class:`~costlib_pipelines.follow_jobs.JobHealth` as a dict).
    jobs: list[dict[str, Any]] = field(default_factory=list)
    #: A ``decide --follow`` output: its :data:`FOLLOW_RECORD` with the files decided so far.
    followed_decisions: dict[str, Any] | None = None

    @property
    def healthy(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "healthy": self.healthy}


def _parse_utc(text: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


def replay_clock(manifest: dict[str, Any]) -> tuple[dt.datetime | None, str]:
    """The time a replayed backfill's windows are judged against, and what it is: a followed
    stream's watermark (``follow.stream.watermark_utc``), else the newest event time the run
    read (``event_time_range.max_utc``); None before either is known."""
    stream = (manifest.get("follow") or {}).get("stream") or {}
    if isinstance(manifest.get("follow"), dict):
        return _parse_utc(stream.get("watermark_utc")), "the stream's watermark"
    return (_parse_utc((manifest.get("event_time_range") or {}).get("max_utc")),
            "the newest event time read")


def _check_replay_watermark(status: OutputStatus, manifest: dict[str, Any],
                            now: dt.datetime) -> None:
    """A replayed stream whose watermark stopped moving (by the clock) for more than
    ``max_age_hours``: the producer or the job stalled, which watermark time cannot show."""
    follow = manifest.get("follow")
    if not isinstance(follow, dict):
        return
    stream = follow.get("stream") or {}
    moved = _parse_utc(stream.get("watermark_moved_utc") or follow.get("started_utc"))
    if moved is None:
        return
    hours = (now - moved).total_seconds() / 3600
    if hours > status.max_age_hours:
        status.problems.append(
            f"the replayed stream's watermark ({stream.get('watermark_utc') or 'not set yet'}) "
            f"has not moved for {ago(hours * 3600).removesuffix(' ago')} (more than "
            f"{status.max_age_hours:g} h): is the producer or the job stalled?")


def _check_windows(status: OutputStatus, manifest: dict[str, Any], now: dt.datetime,
                   slack_hours: float, replay: bool = False) -> None:
    """Held and stale windows of ``LATEST``'s windowed run (one with a window guard); with
    ``replay``, staleness is judged against :func:`replay_clock` rather than ``now``."""
    guard = manifest.get("guard")
    windowing = manifest.get("windowing")
    if not isinstance(guard, dict) or not isinstance(guard.get("windows"), list) or not windowing:
        return
    run_id = manifest.get("run_id", status.latest)
    for entry in guard["windows"]:
        if entry["state"] == "held":
            status.held_windows.append({"run_id": run_id, "window": entry["window"],
                                        "violations": entry["violations"]})
            status.problems.append(
                f"run {run_id}: window {entry['window']} is held by the publish guard "
                f"({len(entry['violations'])} violation(s): {'; '.join(entry['violations'])}); "
                "decide applies the window before it; release it with costlib publish "
                f"--output {status.output} --run-id {run_id} --window {entry['window']} --by "
                "NAME --reason TEXT")
    chained = [e for e in guard["windows"] if e["state"] != "not_eligible"]
    if not chained:
        return
    newest = max(chained, key=lambda e: e["window_end"])
    end = dt.datetime.fromisoformat(newest["window_end"])
    allowed = dt.timedelta(days=windowing["period_days"] + windowing["allowed_lateness_days"],
                           hours=slack_hours)
    clock, against = now, "ago"
    if replay:
        clock, what = replay_clock(manifest)
        against = f"before {what} ({clock.isoformat() if clock else 'not known yet'}; replay)"
    status.newest_window = {"window": newest["window"], "window_end": newest["window_end"],
                            "state": newest["state"],
                            "next_window_due_utc": (end + allowed).isoformat(),
                            "judged_against": "clock" if not replay else against}
    if clock is None:
        return
    late_hours = round((clock - end - allowed).total_seconds() / 3600, 2)
    if late_hours > 0:
        status.problems.append(
            f"windows are stale: the newest window decide could apply, {newest['window']} "
            f"(run {run_id}), ended {newest['window_end']}; a new one was due {late_hours:g} h "
            f"{against} (period {windowing['period_days']:g} d + allowed lateness "
            f"{windowing['allowed_lateness_days']:g} d + {slack_hours:g} h slack)")


#: Point statuses worth a note, and what they mean for decide (``point_status`` of a record).
_POINT_NOTES = {
    "infeasible": "no point meets the constraints (costlib decide gives them null decisions)",
    # (points that miss min_recall only have a note of their own: decide applies them)
    "coverage_limited": "a better point flags more unrated rows than coverage allows",
    "resolution_limited": "the lattice may hide a better point (finer candidate thresholds)",
}


def latest_notes(run_dir: str, manifest: dict[str, Any]) -> list[str]:
    """Notes on a published recalibrate run (none for a decide run): the publish guard off or
    its notes, and, per status of the decision method's records (batch runs), the groups
    that kept their thresholds (with how many have a move pending evidence:
    ``proposed_thresholds``), have no point, or whose point is infeasible, coverage- or
    resolution-limited."""
    guard = manifest.get("guard")
    if not isinstance(guard, dict):
        return []
    notes = follow_notes(manifest)
    if guard.get("off"):
        notes.append("publish guard off: published without checks on threshold moves or rated "
                     "rows (publish.max_threshold_change, publish.min_rated)")
    notes.extend(str(n) for n in guard.get("notes") or [])
    path = f"{run_dir}/operating_points.parquet"
    method = guard.get("method")
    if method is None or not FileSystems.exists(path):
        return notes  # a windowed run (per-window records) or no records: guard notes only
    from costlib.thresholds.loop import ALL_GROUPS  # numpy and the engine: only for records

    try:
        records = [r for r in read_operating_points(path) if r["method"] == method
                   and r["group"] != ALL_GROUPS]
    except InputError as exc:
        return [*notes, f"operating points unreadable: {exc}"]

    def groups(names: list[str]) -> str:
        shown = ", ".join(sorted(names)[:5])
        return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    kept = [r["group"] for r in records if r["status"] == "kept"]
    pending = [r["group"] for r in records if r.get("proposed_thresholds") is not None]
    if kept or pending:
        parts = [f"{len(kept)} of {len(records)} group(s) kept their thresholds in force"
                 + (f" ({groups(kept)})" if kept else "")]
        if pending:
            parts.append(f"{len(pending)} with a move pending audit evidence "
                         f"(proposed_thresholds: {groups(pending)})")
        notes.append(f"{method}: " + "; ".join(parts))
    none = [r["group"] for r in records if r["status"] == "insufficient_data"]
    if none:
        notes.append(f"{method}: {len(none)} group(s) without a point (insufficient_data; "
                     f"costlib decide gives them null decisions): {groups(none)}")
    below = [r["group"] for r in records if misses_only_min_recall(r)]
    if below:
        notes.append(f"{method}: {len(below)} group(s) infeasible, no point meets min_recall "
                     "(costlib decide applies their nearest point, the highest recall the "
                     f"rated region allows): {groups(below)}")
    for point_status, meaning in _POINT_NOTES.items():
        hit = [r["group"] for r in records if r.get("point_status") == point_status
               and r["group"] not in below]
        if hit:
            notes.append(f"{method}: {len(hit)} group(s) {point_status}, {meaning}: "
                         f"{groups(hit)}")
    return notes


def follow_notes(manifest: dict[str, Any]) -> list[str]:
    """What a followed stream's live run says of the stream: files read, the producer's
    watermark, and each file dead-lettered whole, with why."""
    follow = manifest.get("follow")
    if not isinstance(follow, dict):
        return []
    stream = follow.get("stream") or {}
    notes = [f"following {follow.get('landing')}: {stream.get('files_read', 0)} file(s) read, "
             f"watermark {stream.get('watermark_utc') or 'not set yet'}"
             + (f", {stream['watermarks_waiting']} waiting for files"
                if stream.get("watermarks_waiting") else "")]
    too_late = (stream.get("row_accounting") or {}).get("too_late.rated_rows", 0)
    if too_late:
        notes.append(f"{too_late} rated row(s) landed after their windows' allowed lateness "
                     "(counted, not used)")
    named = stream.get("files_dead_lettered") or {}
    for source, reason in sorted(named.items()):
        notes.append(f"dead-lettered file {source}: {reason}")
    unnamed = stream.get("files_dead_lettered_total", len(named)) - len(named)
    if unnamed > 0:
        notes.append(f"{unnamed} earlier dead-lettered file(s) (their records: dead_letter/files/ "
                     "in the run)")
    return notes


def _check_job(status: OutputStatus, role: str, job: Any, max_checkpoint_age_minutes: float,
               now: dt.datetime) -> None:
    """Ask the cluster about a recorded follow job; a job that needs a person is a problem."""
    if not isinstance(job, dict):
        return
    from costlib_pipelines.follow_jobs import check_job

    health = check_job(role, job, max_checkpoint_age_minutes=max_checkpoint_age_minutes,
                       now=now)
    status.jobs.append(health.as_dict())
    if health.problem:
        status.problems.append(health.problem)


def _followed_decisions(output: str) -> dict[str, Any] | None:
    """A ``decide --follow`` output's record, with the files decided (an output with a
    ``LATEST``) and dead-lettered so far; None for any other output."""
    path = f"{output}/{FOLLOW_RECORD}"
    if not FileSystems.exists(path):
        return None
    try:
        with FileSystems.open(path) as fh:
            record = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable ({exc}); decide --follow rewrites it when "
                         "started again") from exc
    if not isinstance(record, dict):
        raise InputError(f"{path}: not a JSON object; decide --follow rewrites it when "
                         "started again")

    def count(pattern: str) -> int:
        return sum(len(r.metadata_list) for r in FileSystems.match([f"{output}/{pattern}"]))
    return {**record, "files_decided": count("files/*/LATEST"),
            "files_dead_lettered": count("dead_letter/files/*.json")}


def check_status(
    output: str, *, max_age_hours: float = 26.0, now: dt.datetime | None = None,
    window_slack_hours: float = 6.0, replay: bool = False, check_jobs: bool = True,
    max_checkpoint_age_minutes: float = 10.0,
) -> OutputStatus:
    """Check ``output``'s ``LATEST`` (a recalibrate or decide output directory).

    Problems (any one makes the output unhealthy): ``LATEST`` missing, unreadable, or naming a
    missing or incomplete run, or a run that is not published; a complete run that finished
    after ``LATEST``'s run and is held for review; ``LATEST``'s run finished more than
    ``max_age_hours`` before ``now``. For a windowed ``LATEST`` run also: a window the
    publish guard held (not released); stale windows, when ``now`` is later than the end of
    the newest window ``costlib decide`` could apply plus the windowing's period and allowed
    lateness plus ``window_slack_hours`` (a new window should have closed by then).
    ``replay`` (a backfill being replayed: event times in the past): windows are stale when
    :func:`replay_clock` (a followed stream's watermark, or the newest event time a batch run
    read) rather than ``now`` is that much later; a followed stream whose watermark has not
    moved for ``max_age_hours`` by the clock is a problem instead.
    Incomplete run directories (failed or running) and the
    output lock are reported, not counted as problems.

    With ``check_jobs``, each follow job the output records (a followed ``LATEST`` run's
    ``follow.job``; a ``decide --follow`` output's :data:`FOLLOW_RECORD`, which has no
    ``LATEST`` of its own) is asked of its cluster's REST API
    (:func:`costlib_pipelines.follow_jobs.check_job`): a job that does not run (failed,
    cancelled, restarting, unknown to the cluster, the cluster unreachable) or whose last
    checkpoint is older than ``max_checkpoint_age_minutes`` is a problem.

    Raises
    ------
    InputError
        ``output`` does not exist.
    """
    output = output.rstrip("/")
    if not FileSystems.exists(output):
        raise InputError(f"{output}: no such output directory")
    now = now or dt.datetime.now(dt.UTC)
    complete, incomplete = list_runs(output)
    status = OutputStatus(output=output, latest=None, latest_finished_utc=None,
                          age_hours=None, max_age_hours=max_age_hours,
                          incomplete_runs=incomplete, lock=read_lock(output))
    if status.lock:
        status.lock = {k: v for k, v in status.lock.items() if k != "token"}
    try:
        status.latest = latest_run_id(output)
    except InputError as exc:
        status.problems.append(str(exc))
    latest_manifest = complete.get(status.latest) if status.latest else None
    followed = _followed_decisions(output) if status.latest is None else None
    if followed is not None:  # decide --follow: one LATEST per decided file, none at the top
        status.followed_decisions = followed
        if check_jobs:
            _check_job(status, "decide follow job", followed.get("job"),
                       max_checkpoint_age_minutes, now)
        return status
    if status.latest is None and not status.problems:
        status.problems.append(f"{output}/LATEST is missing: nothing is published")
    elif status.latest is not None and latest_manifest is None:
        status.problems.append(f"{output}/LATEST names run {status.latest}, which is missing or "
                               "incomplete")
    finished = None
    if latest_manifest is not None:
        if latest_manifest.get("published") is False:
            status.problems.append(f"LATEST names run {status.latest}, which is not published")
        finished = _parse_utc(latest_manifest.get("finished_utc"))
        status.latest_finished_utc = latest_manifest.get("finished_utc")
        if finished is not None:
            status.age_hours = round((now - finished).total_seconds() / 3600, 2)
            if status.age_hours > max_age_hours:
                status.problems.append(
                    f"LATEST is stale: run {status.latest} finished "
                    f"{ago(status.age_hours * 3600)} (more than {max_age_hours:g} h)")
        _check_windows(status, latest_manifest, now, window_slack_hours, replay)
        if replay:
            _check_replay_watermark(status, latest_manifest, now)
        status.notes = latest_notes(f"{output}/runs/{status.latest}", latest_manifest)
        follow = latest_manifest.get("follow")
        if check_jobs and isinstance(follow, dict):
            _check_job(status, "recalibrate follow job", follow.get("job"),
                       max_checkpoint_age_minutes, now)
    for run_id, manifest in sorted(complete.items()):
        run_finished = _parse_utc(manifest.get("finished_utc"))
        newer = finished is None or (run_finished is not None and run_finished > finished)
        if manifest.get("published") is False and newer:
            violations = (manifest.get("guard") or {}).get("violations", [])
            status.held_runs.append({"run_id": run_id, "finished_utc":
                                     manifest.get("finished_utc"), "violations": violations})
            status.problems.append(
                f"run {run_id} is held for review ({len(violations)} violation(s)); release it "
                f"with costlib publish --output {output} --run-id {run_id} --by NAME --reason "
                "TEXT, or fix its input")
    return status


