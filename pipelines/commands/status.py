"""``costlib status --output OUT``: exit 0 when ``LATEST`` is fresh and published, else 3.

The alert a scheduler runs after every recalibration: it exits 3 (and says why) for a run held
by the publish guard, a ``LATEST`` older than ``--max-age-hours``, a missing or broken
``LATEST``, and for a windowed ``LATEST`` run a held window or stale windows (see
``--window-slack-hours``); for an output a ``--follow`` job writes, also when that job does not
run on its cluster (failed, cancelled, restarting, the cluster unreachable) or its last
checkpoint is older than ``--max-checkpoint-age-minutes``; 2 when ``OUT`` does not exist.
``--json`` prints the full status for dashboards.
"""

from __future__ import annotations

import argparse
import json
import shlex
from typing import TYPE_CHECKING

from costlib_pipelines.commands.arguments import number_in
from costlib_pipelines.commands.exit_codes import HELD, OK

if TYPE_CHECKING:
    from costlib_pipelines.io.status import OutputStatus

#: Beam flags (e.g. ``--impersonate_service_account``) set the output filesystem's credentials.
PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``costlib status``."""
    parser.add_argument("--output", required=True,
                        help="a recalibrate (or decide) output directory")
    parser.add_argument("--max-age-hours", type=number_in(0, low_open=True), default=26.0,
                        help="LATEST older than this is stale (default 26: a daily run plus "
                             "slack)")
    parser.add_argument("--window-slack-hours", type=number_in(0), default=6.0, metavar="H",
                        help="windowed runs: windows are stale when no window newer than the "
                             "newest one decide could apply ended within the windowing's "
                             "period + allowed lateness + H hours (default 6: time for the "
                             "data to land and the run to finish)")
    parser.add_argument("--replay", action="store_true",
                        help="a backfill is being replayed (event times in the past): judge "
                             "window staleness against the followed stream's watermark (or a "
                             "batch run's newest event time) instead of the clock; a stream "
                             "whose watermark has not moved for --max-age-hours is a problem")
    parser.add_argument("--max-checkpoint-age-minutes", type=number_in(0, low_open=True),
                        default=10.0, metavar="M",
                        help="follow jobs: a running job whose last completed checkpoint is "
                             "older than this (or that has none M minutes after it started) "
                             "needs attention (default 10; the jobs checkpoint every 10 s)")
    parser.add_argument("--no-jobs", action="store_true",
                        help="do not ask the cluster's REST API about the output's follow jobs")
    parser.add_argument("--json", action="store_true", help="print the status as JSON")


def run(args: argparse.Namespace) -> int:
    """Print the status; 0 healthy, 3 held/stale/broken (``InputError``: exit 2)."""
    from costlib_pipelines.io.status import check_status

    status = check_status(args.output, max_age_hours=args.max_age_hours,
                          window_slack_hours=args.window_slack_hours, replay=args.replay,
                          check_jobs=not args.no_jobs,
                          max_checkpoint_age_minutes=args.max_checkpoint_age_minutes)
    if args.json:
        print(json.dumps(status.as_dict(), indent=2, sort_keys=True))
    else:
        print(render(status))
    return OK if status.healthy else HELD


def render(status: OutputStatus) -> str:
    """The status as ``costlib status`` prints it: the verdict and ``LATEST`` on the first
    line, then a line per problem, healthy follow job, note and the rest."""
    lines: list[str] = []
    say = lines.append
    state = "ok" if status.healthy else "ATTENTION"
    say(f"{status.output}: {state}; {_latest(status)}")
    for problem in status.problems:
        say(f"  problem: {problem}")
    for job in status.jobs:  # a job that needs a person is one of the problems above
        if job["problem"] is None:
            say(f"  job: {job['line']}")
    for note in status.notes:  # about what LATEST published, not about a held run
        say(f"  note (LATEST {status.latest}): {note}")
    if status.newest_window:
        w = status.newest_window
        clock = "" if w["judged_against"] == "clock" else " in event time (replay)"
        say(f"  newest window: {w['window']} ({w['state']}); the next one is due by "
            f"{w['next_window_due_utc']}{clock}")
    for run_id in status.incomplete_runs:
        say(f"  incomplete run (failed or still running): {run_id}")
    if status.incomplete_runs:
        say(f"  remove incomplete runs nothing wrote to for a day with: costlib clean "
            f"--output {shlex.quote(status.output)} (--dry-run lists them, --older-than "
            "sets the age)")
    if status.lock:
        job = status.lock.get("job") or {}
        where = (f"; Flink job {job.get('flink_job_id') or job.get('job_name')} at "
                 f"{job['flink_rest']}" if isinstance(job, dict) and job.get("flink_rest")
                 else "")
        say(f"  locked by run {status.lock.get('run_id')} ({status.lock.get('command')}, "
            f"since {status.lock.get('started_utc')}{where})")
    return "\n".join(lines)


def _latest(status: OutputStatus) -> str:
    """What ``LATEST`` names, in words (the problems say what is wrong with it)."""
    from costlib_pipelines.io.filesystems import FileSystems

    if status.followed_decisions is not None:
        followed = status.followed_decisions
        return (f"deciding each file landing in {followed.get('landing')} (decide --follow): "
                f"{followed['files_decided']} file(s) decided, "
                f"{followed['files_dead_lettered']} dead-lettered")
    if status.latest is None:
        if FileSystems.exists(f"{status.output}/LATEST"):
            return "LATEST names no usable run"
        if FileSystems.exists(f"{status.output}/runs"):
            return "nothing is published yet (no LATEST)"
        root = status.output.rstrip("/")
        nested = sorted(m.path.rsplit("/", 1)[0] for r in FileSystems.match(
            [f"{root}/*/LATEST"]) for m in r.metadata_list)
        hint = f"; outputs one level down: {', '.join(nested)}" if nested else ""
        return f"nothing is published yet (no LATEST, no runs/){hint}"
    if status.age_hours is None:  # the run is missing or incomplete, or has no finish time
        return f"LATEST = {status.latest}"
    from costlib.message_text import ago

    return f"LATEST = {status.latest} (finished {ago(status.age_hours * 3600)})"
