"""``costlib status`` on the outputs of the two ``--follow`` jobs, on the local Flink cluster:
RUNNING with a checkpoint age, then the TaskManager SIGKILLed and not brought back.

With ``tools/flink_cluster.py flags --streaming`` (restarts without limit, 5 s apart) Flink
never fails the jobs: each restart finds no slot and the job stays RESTARTING, its restarts
climbing. ``status`` must say so in one line with Flink's root cause, and exit 3. The
TaskManager is started again at the end (the cluster is shared by the session's engine tests),
and the jobs then run again and ``status`` is healthy.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest
from flink_support import COSTLIB, cancel_job, engine_config, run_cli, wait_for

pytestmark = pytest.mark.flink


def job_of(output: Path) -> str:
    """The Flink job id the ``--follow`` command recorded for ``output``."""
    record = output / "follow.json"
    if record.exists():  # decide --follow
        return json.loads(record.read_text())["job"]["flink_job_id"]
    run = (output / "LATEST").read_text().strip()
    manifest = json.loads((output / "runs" / run / "manifest.json").read_text())
    return manifest["follow"]["job"]["flink_job_id"]


def rest(cluster, path: str):
    with urllib.request.urlopen(f"http://localhost:{cluster.ports.rest}{path}",
                                timeout=15) as response:
        return json.load(response)


def status(output: Path) -> subprocess.CompletedProcess:
    return run_cli("status", "--output", str(output), timeout=60)


def test_status_shows_the_follow_jobs_and_a_taskmanager_killed_for_good(flink_cluster,
                                                                        tmp_path):
    config = engine_config(
        tmp_path / "follow.yaml", methods=["graph"],
        grid={"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
        windowing={"size_days": 2, "period_days": 1, "allowed_lateness_days": 2},
        publish={"max_threshold_change": 0.2, "min_rated": 0})
    rated, scores = tmp_path / "rated", tmp_path / "scores"
    rated.mkdir()
    scores.mkdir()
    points, decided = tmp_path / "points", tmp_path / "decided"
    flags = flink_cluster.streaming_flags()
    # the two submissions overlap (decide --follow starts once the followed run is published)
    recalibrate = subprocess.Popen(
        [COSTLIB, "recalibrate", "--follow", "--config", config, "--input",
         str(rated / "*.parquet"), "--output", str(points), *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (points / "LATEST").exists() or recalibrate.poll() is not None,
             "the followed run")
    decide = subprocess.Popen(
        [COSTLIB, "decide", "--follow", "--config", config, "--input",
         str(scores / "*.parquet"), "--operating-points", str(points), "--output",
         str(decided), *flags], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for command in (recalibrate, decide):
        out, err = command.communicate(timeout=300)
        assert command.returncode == 0, out + err[-3000:]
    jobs = {points: job_of(points), decided: job_of(decided)}
    roles = {points: ("recalibrate", "judged"), decided: ("decide", "decided")}
    port = flink_cluster.ports.rest
    taskmanagers = range(flink_cluster.layout.taskmanagers)
    try:
        # both running, each with a checkpoint: status is healthy and says so
        def healthy(output: Path):
            done = status(output)
            return done if done.returncode == 0 and "last checkpoint" in done.stdout else None
        for output, jid in jobs.items():
            done = wait_for(lambda o=output: healthy(o), f"{output.name}'s job running with a "
                            "checkpoint", timeout=180, poll=2)
            assert re.search(rf"^  job: {roles[output][0]} follow job {jid}: RUNNING, 0 "
                             r"restarts so far, last checkpoint \d+ s ago$", done.stdout,
                             re.MULTILINE), done.stdout

        # every TaskManager, for good: not started again until the end (with one of two
        # left, a job could take its slot and run on)
        for index in taskmanagers:
            flink_cluster.kill("taskmanager", index=index)

        def restarted(jid: str) -> bool:
            values = rest(flink_cluster, f"/jobs/{jid}/metrics?get=numRestarts")
            return int(values[0]["value"]) >= 2
        for output, jid in jobs.items():
            wait_for(lambda j=jid: restarted(j), f"{jid} restarting", timeout=120, poll=1)
            assert rest(flink_cluster, f"/jobs/{jid}")["state"] not in ("FAILED", "CANCELED")
            done = status(output)
            assert done.returncode == 3, done.stdout + done.stderr
            assert done.stdout.splitlines()[0].startswith(f"{output}: ATTENTION; ")
            (line,) = [t for t in done.stdout.splitlines() if f"follow job {jid}" in t]
            role, verb = roles[output]
            assert re.fullmatch(
                rf"  problem: {role} follow job {jid}: (RESTARTING|RUNNING|CREATED) \(0 of \d+ "
                r"tasks running\), \d+ restarts so far, the last [^—]+ — .*"
                r"NoResourceAvailableException.*; last checkpoint .+ ago; nothing is "
                rf"{verb} until it runs again: check tools/flink_cluster.py status --port-base "
                rf"{port} and the TaskManager log .*; it resumes from its last checkpoint "
                r"once slots are free \(a lost TaskManager back: tools/flink_cluster.py "
                rf"start --port-base {port}\)", line), line
    finally:
        for index in taskmanagers:
            flink_cluster.start_taskmanager(index)
        flink_cluster.wait_healthy(180)
    try:
        # the TaskManager back: the jobs resume from their checkpoints and status is healthy
        for output, jid in jobs.items():
            done = wait_for(lambda o=output: healthy(o), f"{output.name}'s job back",
                            timeout=180, poll=2)
            assert re.search(rf"^  job: {roles[output][0]} follow job {jid}: RUNNING, \d+ "
                             r"restarts so far \(the last .+\), last checkpoint \d+ s ago$",
                             done.stdout, re.MULTILINE), done.stdout
    finally:
        for jid in jobs.values():
            cancel_job(flink_cluster, jid)
