"""Faults on a real Flink cluster: no partial run is ever published.

Each test runs a ``costlib`` command on the cluster (``flink_cluster`` fixture) and, once its
Flink job is running, kills a process with SIGKILL:

* one of the two **TaskManagers** (:data:`KILLED`) during ``recalibrate`` and during
  ``decide``; the test then starts it again (what Kubernetes or a supervisor does), and Flink's
  restart strategy (fixed delay, 3 attempts) may finish the job; kept down, the job at
  parallelism 2 cannot get its second slot and fails;
* the **submitting** ``costlib recalibrate`` process; the job goes on without it on the cluster.

Whatever the outcome, the output is checked against the same command on the FnApiRunner,
undisturbed: either the run completed and what it published equals the undisturbed run, or
it did not and ``LATEST`` still names the run published before, the broken run has no
manifest, and its lock is released or stale (taken over by the next run); then a re-run of the
same input publishes exactly the undisturbed run's points (decisions, for ``decide``).

The config makes a batch run's points independent of the runs published before it (a fixed
lattice instead of edges carried from the published run; ``in_force.add_to_edges`` and
``keep_when_insufficient`` off), so a run published by a job whose submitter died does not
change what the re-run computes. Carried edges on Flink are tested in
``test_flink_pipelines.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from flink_support import (
    COSTLIB,
    decisions,
    engine_config,
    jobs,
    latest,
    records,
    run_cli,
    wait_for_job_end,
    wait_for_running_job,
)
from pipeline_data import sample_frame, write_files

pytestmark = pytest.mark.flink

#: Seconds a job runs before the kill: inside its first stages, well before its end (with the
#: environment cache and the preloaded worker pool a test job's tasks run for a few seconds
#: only, about 6 s on a quiet machine).
KILL_AFTER = 1.0

#: The TaskManager the tests kill: one of the two, the other keeps running.
KILLED = 1


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """Two batches of scores large enough that a Flink job runs for tens of seconds."""
    root = tmp_path_factory.mktemp("fault-input")
    frame = sample_frame(240_000, seed=21)
    first, second = frame.iloc[:120_000], frame.iloc[120_000:].reset_index(drop=True)
    config = engine_config(
        root / "config.yaml", grid={"edges": "uniform", "bins": 48, "range": [0.0, 1.0]},
        in_force={"add_to_edges": False, "keep_when_insufficient": False})
    return (config, write_files(first, root / "first", n_files=4, row_group_size=10_000),
            write_files(second, root / "second", n_files=4, row_group_size=10_000))


def published_run(output: Path) -> Path | None:
    name = latest(output)
    return output / "runs" / name if name else None


def exceptions(cluster, jid: str) -> list:
    url = f"http://localhost:{cluster.ports.rest}/jobs/{jid}/exceptions"
    with urllib.request.urlopen(url, timeout=15) as response:
        return json.load(response).get("exceptionHistory", {}).get("entries", [])


def kill_taskmanager_during(cluster, argv: list[str]) -> tuple[int, str, str]:
    """Run ``costlib ARGV`` on the cluster, SIGKILL TaskManager :data:`KILLED` once its job
    runs, start it again; returns the exit code, stderr and the Flink job's id."""
    known = {j["jid"] for j in jobs(cluster)}
    process = subprocess.Popen([COSTLIB, *argv, *cluster.beam_flags()], text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        jid = wait_for_running_job(cluster, known)
        time.sleep(KILL_AFTER)
        assert process.poll() is None, "the job ended before the kill"
        cluster.kill("taskmanager", index=KILLED)
        time.sleep(3)
        cluster.start_taskmanager(KILLED)
        _, err = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    cluster.wait_healthy(120)
    assert exceptions(cluster, jid), "the kill did not reach the job"
    print(f"TaskManager killed during {argv[0]}: exit {process.returncode}, job "
          f"{wait_for_job_end(cluster, jid)}")
    return process.returncode, err, jid


def assert_not_published(output: Path, run_id: str, before: str | None) -> None:
    """The broken run is not published and left no manifest; its lock is not held live."""
    assert latest(output) == before
    assert not (output / "runs" / run_id / "manifest.json").exists()
    lock = output / ".costlib-lock"
    if lock.exists():  # stale: its process is gone, the next run takes it over
        holder = json.loads(lock.read_text())
        assert holder["run_id"] == run_id
        with pytest.raises(ProcessLookupError):
            os.kill(holder["pid"], 0)


def published_before_and_undisturbed(stream, tmp_path: Path) -> tuple[Path, list[dict]]:
    """The output the test disturbs, with run ``before`` (the first batch) published on the
    FnApiRunner; and the records of run ``after`` (the second batch) computed undisturbed on
    the FnApiRunner over the same history."""
    config, first, second = stream
    want_out, out = tmp_path / "undisturbed", tmp_path / "flink"
    for output in (want_out, out):
        done = run_cli("recalibrate", "--config", config, "--input", first, "--output",
                       str(output), "--run-id", "before")
        assert done.returncode == 0, done.stderr[-2000:]
    done = run_cli("recalibrate", "--config", config, "--input", second, "--output",
                   str(want_out), "--run-id", "after")
    assert done.returncode == 0, done.stderr[-2000:]
    return out, records(want_out / "runs" / "after")


def assert_rerun_publishes(cluster, config: str, second: str, out: Path, want) -> None:
    """A re-run of run ``after`` on the cluster publishes exactly the undisturbed records."""
    rerun = run_cli("recalibrate", "--config", config, "--input", second, "--output", str(out),
                    "--run-id", "after", *cluster.beam_flags())
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert latest(out) == "after"
    assert records(out / "runs" / "after") == want


def test_taskmanager_killed_during_recalibrate(flink_cluster, stream, tmp_path):
    config, _, second = stream
    out, want = published_before_and_undisturbed(stream, tmp_path)

    code, err, _ = kill_taskmanager_during(
        flink_cluster, ["recalibrate", "--config", config, "--input", second,
                        "--output", str(out), "--run-id", "after"])
    if code == 0:  # Flink restarted the job on the new TaskManager and it completed
        assert latest(out) == "after"
        assert records(out / "runs" / "after") == want
    else:
        assert "Traceback" in err or "failed" in err.lower()
        assert_not_published(out, "after", "before")
        assert_rerun_publishes(flink_cluster, config, second, out, want)


def test_taskmanager_lost_for_good_fails_the_run_and_publishes_nothing(
        flink_cluster, stream, tmp_path):
    """One of the two TaskManagers lost for good: Flink's restarts find no second slot and the
    job fails; the run is not published (or, when its publishing step had ended before the
    kill, the line says it was, and it is the whole run), its lock is released, and once the
    TaskManager is back a re-run publishes the undisturbed points."""
    config, _, second = stream
    out, want = published_before_and_undisturbed(stream, tmp_path)
    known = {j["jid"] for j in jobs(flink_cluster)}
    process = subprocess.Popen(
        [COSTLIB, "recalibrate", "--config", config, "--input", second, "--output", str(out),
         "--run-id", "after", *flink_cluster.beam_flags()],
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        jid = wait_for_running_job(flink_cluster, known)
        time.sleep(KILL_AFTER)
        flink_cluster.kill("taskmanager", index=KILLED)
        _, err = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
        flink_cluster.start_taskmanager(KILLED)
        flink_cluster.wait_healthy(120)
    assert wait_for_job_end(flink_cluster, jid) == "FAILED"
    # Exit 4 (the engine failed) with one line: the Flink job, its root cause, what was left,
    # what to check; the traceback is in the run's failure log, not on the terminal.
    assert process.returncode == 4, err[-3000:]
    lines = [line for line in err.splitlines()  # besides the progress lines
             if line.strip() and not re.match(r"costlib recalibrate: \[ *\d+\.\d s\] ", line)]
    assert len(lines) == 1, err[-3000:]
    line = lines[0]
    print(line)
    assert line.startswith(f"costlib recalibrate: Flink job {jid} (costlib-recalibrate-after) "
                           "ended FAILED; Flink's root cause: ")
    assert "Exception" in line and "Traceback" not in line and "CompletionException" not in line
    assert f"tools/flink_cluster.py status --port-base {flink_cluster.ports.rest}" in line
    log = out / "runs" / "after" / "failure.log"
    assert line.endswith(f"full traceback in {log}")
    assert "Traceback (most recent call last)" in log.read_text()
    if latest(out) == "after":  # a short job's publishing step ended before the kill failed it
        assert (f"published before the job failed: {out}/LATEST names after (was before), "
                f"the lock of {out} was released") in line
        manifest = json.loads((out / "runs" / "after" / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["published"]
        assert records(out / "runs" / "after") == want  # what was published is the whole run
    else:
        assert f"nothing was published, the lock of {out} was released" in line
        assert_not_published(out, "after", "before")
    assert not (out / ".costlib-lock").exists()  # the submitter lived: it released its lock
    assert_rerun_publishes(flink_cluster, config, second, out, want)


def test_taskmanager_killed_during_decide(flink_cluster, stream, tmp_path):
    config, first, second = stream
    points = tmp_path / "points"
    done = run_cli("recalibrate", "--config", config, "--input", first, "--output", str(points))
    assert done.returncode == 0, done.stderr[-2000:]
    args = ["decide", "--config", config, "--input", second, "--operating-points", str(points)]
    done = run_cli(*args, "--output", str(tmp_path / "undisturbed"), "--run-id", "d")
    assert done.returncode == 0, done.stderr[-2000:]
    want = decisions(tmp_path / "undisturbed" / "runs" / "d")

    out = tmp_path / "flink"
    code, _, _ = kill_taskmanager_during(flink_cluster, [*args, "--output", str(out),
                                                           "--run-id", "d"])
    if code == 0:
        pd.testing.assert_frame_equal(decisions(out / "runs" / "d"), want)
        assert latest(out) == "d"
    else:
        assert_not_published(out, "d", None)
        rerun = run_cli(*args, "--output", str(out), "--run-id", "d",
                        *flink_cluster.beam_flags())
        assert rerun.returncode == 0, rerun.stderr[-2000:]
        pd.testing.assert_frame_equal(decisions(out / "runs" / "d"), want)
        assert latest(out) == "d"


def test_submitter_killed_during_recalibrate(flink_cluster, stream, tmp_path):
    config, first, second = stream
    want_out, out = tmp_path / "undisturbed", tmp_path / "flink"
    done = run_cli("recalibrate", "--config", config, "--input", second, "--output",
                   str(want_out), "--run-id", "again")
    assert done.returncode == 0, done.stderr[-2000:]
    want = records(want_out / "runs" / "again")
    done = run_cli("recalibrate", "--config", config, "--input", first, "--output", str(out),
                   "--run-id", "before")
    assert done.returncode == 0, done.stderr[-2000:]

    known = {j["jid"] for j in jobs(flink_cluster)}
    process = subprocess.Popen(
        [COSTLIB, "recalibrate", "--config", config, "--input", second, "--output", str(out),
         "--run-id", "orphan", *flink_cluster.beam_flags()],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    jid = wait_for_running_job(flink_cluster, known)
    time.sleep(KILL_AFTER)
    process.kill()
    process.wait()
    # The job goes on without its submitter: until it ends, nothing is published (read before
    # the job's state: a short job may have ended and published already, never before it ended)
    early = latest(out)
    state = wait_for_job_end(flink_cluster, jid)
    assert early == "before" or state == "FINISHED", (early, state)
    print(f"submitter killed: job {state}, LATEST {latest(out)}")
    if state == "FINISHED" and latest(out) == "orphan":  # the job published a complete run
        manifest = json.loads((out / "runs" / "orphan" / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["published"]
        assert records(out / "runs" / "orphan") == want
    else:
        assert latest(out) == "before"
        assert not (out / "runs" / "orphan" / "manifest.json").exists()
    # The dead submitter's lock is stale: the next run takes it over and publishes.
    rerun = run_cli("recalibrate", "--config", config, "--input", second, "--output", str(out),
                    "--run-id", "again", *flink_cluster.beam_flags())
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert latest(out) == "again"
    assert records(out / "runs" / "again") == want
    assert not (out / ".costlib-lock").exists()
