"""``costlib status`` on an output a ``--follow`` job writes: the job's state as its cluster's
REST API reports it, against a fake Flink REST server.

The server (``http.server`` on a free port) answers with canned Flink 1.19 JSON in the shapes a
real JobManager gave for a running follow job and for one whose TaskManager was SIGKILLed
(``/jobs/<id>``, ``/jobs/<id>/metrics?get=numRestarts``, ``/jobs/<id>/checkpoints``,
``/jobs/<id>/exceptions``); the cluster that is down is a port nothing listens on. Each case
checks the exact line ``costlib status`` prints and its exit code (0 healthy, 3 attention).
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from costlib_pipelines.commands.cli import main
from costlib_pipelines.commands.status import render
from costlib_pipelines.io.status import FOLLOW_RECORD, check_status

RUN_ID = "20261128T050000000000Z-1a2b3c4d"
JID = "6999a63a847620d3249eea7aadab9063"
NAME = "costlib-recalibrate-20261128t050000000000z-1a2b3c4d"
NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)  # the CLI runs judge by the clock
NO_RESOURCE = (
    "java.util.concurrent.CompletionException: org.apache.flink.runtime.jobmanager.scheduler."
    "NoResourceAvailableException: Could not acquire the minimum required resources.\n"
    "\tat java.base/java.util.concurrent.CompletableFuture.encodeThrowable(Unknown Source)\n"
    "Caused by: org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: "
    "Could not acquire the minimum required resources.\n\t... 3 more\n")
LOST = ("java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id "
        "localhost:41877-3d2c1b timed out.\n\tat org.apache.flink.runtime.jobmaster."
        "JobMaster$TaskManagerHeartbeatListener.notifyHeartbeatTimeout(JobMaster.java:1450)\n")


def ms(seconds_before_now: float) -> int:
    """A Flink timestamp (ms since the epoch) ``seconds_before_now`` before :data:`NOW`."""
    return int((NOW.timestamp() - seconds_before_now) * 1000)


def tasks(**counts: int) -> dict[str, int]:
    states = ("RUNNING", "FAILED", "CREATED", "FINISHED", "DEPLOYING", "SCHEDULED", "CANCELED",
              "CANCELING", "RECONCILING", "INITIALIZING")
    return {s: counts.get(s.lower(), 0) for s in states}


def details(state: str, *, running: int = 2, waiting: int = 0, end: int = -1) -> dict:
    """``GET /jobs/<id>``: three vertices of parallelism 2 (the follow job's shape)."""
    vertex_tasks = tasks(running=running, scheduled=waiting, canceled=2 - running - waiting)
    return {"jid": JID, "name": NAME, "state": state, "start-time": ms(3600), "end-time": end,
            "vertices": [{"id": f"v{i}", "name": f"vertex {i}", "parallelism": 2,
                          "status": state, "tasks": vertex_tasks} for i in range(3)]}


def checkpoint(seconds_ago: float | None) -> dict:
    done = None if seconds_ago is None else {
        "id": 41, "status": "COMPLETED", "trigger_timestamp": ms(seconds_ago) - 150,
        "latest_ack_timestamp": ms(seconds_ago), "state_size": 264928}
    return {"counts": {"restored": 0, "total": 42, "in_progress": 0, "completed": 41,
                       "failed": 1},
            "latest": {"completed": done, "savepoint": None, "failed": None, "restored": None}}


def exceptions(*failures: tuple[float, str]) -> dict:
    entries = [{"exceptionName": trace.split(":")[0], "stacktrace": trace,
                "timestamp": ms(ago), "taskName": None, "location": None}
               for ago, trace in failures]
    return {"root-exception": failures[0][1] if failures else None,
            "timestamp": ms(failures[0][0]) if failures else None, "all-exceptions": [],
            "truncated": False, "exceptionHistory": {"entries": entries, "truncated": False}}


def restarts(n: int) -> list[dict]:
    return [{"id": "numRestarts", "value": str(n)}]


class FakeFlink:
    """A REST server answering canned JSON per path (404 for anything else)."""

    def __init__(self) -> None:
        self.routes: dict[str, object] = {}
        routes = self.routes

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = routes.get(self.path)
                self.send_response(404 if body is None else 200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps(body if body is not None else
                                            {"errors": ["Not Found"]}).encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def job(self, job_details: dict, n_restarts: int, checkpoints: dict,
            failures: dict) -> None:
        self.routes.update({f"/jobs/{JID}": job_details,
                            f"/jobs/{JID}/metrics?get=numRestarts": restarts(n_restarts),
                            f"/jobs/{JID}/checkpoints": checkpoints,
                            f"/jobs/{JID}/exceptions": failures})

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def flink():
    server = FakeFlink()
    yield server
    server.close()


def followed_output(root, url: str | None, *, jid: str | None = JID):
    """A recalibrate output whose ``LATEST`` run follows a stream, its job at ``url``."""
    out = root / "points"
    run = out / "runs" / RUN_ID
    run.mkdir(parents=True)
    job = {"name": NAME, "flink_rest": url, "flink_job_id": jid, "note": None,
           "runner": "PortableRunner"}
    manifest = {"status": "following", "published": True, "run_id": RUN_ID,
                "command": "recalibrate", "started_utc": ms(3600),
                "follow": {"landing": "/data/rated/*.parquet", "started_utc": NOW.isoformat(),
                           "job": job, "stream": {"files_read": 12,
                                                  "watermark_utc": NOW.isoformat()}}}
    (run / "manifest.json").write_text(json.dumps(manifest))
    (out / "LATEST").write_text(RUN_ID + "\n")
    return out


def status_lines(out) -> list[str]:
    return render(check_status(str(out), now=NOW)).splitlines()


def job_line(out) -> str:
    """The line that names the job: its problem, or its ``job:`` line when healthy."""
    (line,) = [line for line in status_lines(out) if "follow job" in line]
    return line


LOCAL_CHECKS = ("tools/flink_cluster.py status --port-base {port} and the {process} log "
                "(~/.cache/costlib/flink/cluster-{port}/log/{file}.out, or --state-dir's log/)")


def checks(url: str, process: str = "TaskManager") -> str:
    return LOCAL_CHECKS.format(port=url.rsplit(":", 1)[1], process=process,
                               file=process.lower())


def test_a_running_job_shows_its_restarts_and_checkpoint_age(flink, tmp_path):
    flink.job(details("RUNNING"), 0, checkpoint(8), exceptions())
    out = followed_output(tmp_path, flink.url)
    assert status_lines(out)[0] == f"{out}: ok; LATEST = {RUN_ID}"
    assert job_line(out) == (f"  job: recalibrate follow job {JID}: RUNNING, 0 restarts so "
                             "far, last checkpoint 8 s ago")
    job = check_status(str(out), now=NOW).jobs[0]
    assert (job["state"], job["restarts"], job["checkpoint_age_seconds"], job["healthy"]) == \
        ("RUNNING", 0, 8.0, True)
    assert (job["tasks_running"], job["tasks_total"]) == (6, 6)


def test_a_job_back_after_a_restart_is_healthy_and_says_why_it_restarted(flink, tmp_path):
    # failed 5 min ago (a TaskManager lost), a checkpoint completed since: running again
    flink.job(details("RUNNING"), 1, checkpoint(4), exceptions((300, LOST)))
    out = followed_output(tmp_path, flink.url)
    assert job_line(out) == (
        f"  job: recalibrate follow job {JID}: RUNNING, 1 restart so far (the last 5 min ago "
        "— java.util.concurrent.TimeoutException: Heartbeat of TaskManager with id "
        "localhost:41877-3d2c1b timed out.), last checkpoint 4 s ago")
    assert check_status(str(out), now=NOW).healthy


def test_a_restarting_job_is_attention_in_one_line_with_flinks_root_cause(flink, tmp_path):
    # the TaskManager was killed 3 min ago and is not back: each restart finds no slot
    flink.job(details("RESTARTING", running=0), 14, checkpoint(185),
              exceptions((3, NO_RESOURCE), (13, NO_RESOURCE), (180, LOST)))
    out = followed_output(tmp_path, flink.url)
    lines = status_lines(out)
    assert lines[0] == f"{out}: ATTENTION; LATEST = {RUN_ID}"
    assert job_line(out) == (
        f"  problem: recalibrate follow job {JID}: RESTARTING (0 of 6 tasks running), "
        "14 restarts so far, the last less than a minute ago — org.apache.flink.runtime."
        "jobmanager.scheduler.NoResourceAvailableException: Could not acquire the minimum "
        "required resources.; last checkpoint 3 min ago; nothing is judged until it runs "
        f"again: check {checks(flink.url)}; it resumes from its last checkpoint once slots "
        "are free (a lost TaskManager back: tools/flink_cluster.py start --port-base "
        f"{flink.url.rsplit(':', 1)[1]})")
    assert main(["status", "--output", str(out)]) == 3


def test_a_job_waiting_for_slots_after_a_failure_is_attention(flink, tmp_path):
    # between two restarts Flink says RUNNING while its tasks wait for slots
    flink.job(details("RUNNING", running=0, waiting=2), 3, checkpoint(60),
              exceptions((20, NO_RESOURCE)))
    out = followed_output(tmp_path, flink.url)
    assert job_line(out).startswith(
        f"  problem: recalibrate follow job {JID}: RUNNING (0 of 6 tasks running), 3 restarts "
        "so far, the last less than a minute ago — org.apache.flink.runtime.jobmanager."
        "scheduler.NoResourceAvailableException: Could not acquire the minimum required "
        "resources.; last checkpoint 1 min ago; nothing is judged until it runs again")
    assert main(["status", "--output", str(out)]) == 3


def test_a_job_running_again_is_attention_until_a_checkpoint_completes(flink, tmp_path):
    flink.job(details("RUNNING"), 2, checkpoint(40), exceptions((6, NO_RESOURCE)))
    out = followed_output(tmp_path, flink.url)
    assert job_line(out) == (
        f"  problem: recalibrate follow job {JID}: RUNNING (6 of 6 tasks running), 2 restarts "
        "so far, the last less than a minute ago — org.apache.flink.runtime.jobmanager."
        "scheduler.NoResourceAvailableException: Could not acquire the minimum required "
        "resources.; last checkpoint 40 s ago; its tasks run again, but no checkpoint "
        f"completed since it failed: if that lasts, check {checks(flink.url)}")
    flink.job(details("RUNNING"), 2, checkpoint(1), exceptions((6, NO_RESOURCE)))
    assert job_line(out).startswith(f"  job: recalibrate follow job {JID}: RUNNING, 2 restarts "
                                    "so far (the last less than a minute ago — org.apache")


def test_a_failed_job_is_one_line_with_flinks_root_cause(flink, tmp_path):
    flink.job(details("FAILED", running=0, end=ms(120)), 3, checkpoint(200),
              exceptions((120, NO_RESOURCE), (150, LOST)))
    out = followed_output(tmp_path, flink.url)
    assert job_line(out) == (
        f"  problem: recalibrate follow job {JID}: FAILED 2 min ago after 3 restarts — "
        "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Could "
        "not acquire the minimum required resources.; nothing is judged until it runs again: "
        f"check {checks(flink.url)}, then start it again with costlib recalibrate --follow "
        "(same --config, --input, --output and flags)")
    assert main(["status", "--output", str(out)]) == 3
    job = check_status(str(out), now=NOW).jobs[0]
    assert (job["state"], job["restarts"], job["healthy"]) == ("FAILED", 3, False)


def test_a_cancelled_job_is_attention(flink, tmp_path):
    flink.job(details("CANCELED", running=0, end=ms(7200)), 0, checkpoint(7200), exceptions())
    out = followed_output(tmp_path, flink.url)
    assert job_line(out) == (
        f"  problem: recalibrate follow job {JID}: CANCELED 2 h ago with no restart; nothing "
        "is judged until it runs again: start it again with costlib recalibrate --follow "
        "(same --config, --input, --output and flags)")


def test_a_job_whose_checkpoints_stopped_is_attention(flink, tmp_path):
    flink.job(details("RUNNING"), 0, checkpoint(1200), exceptions())
    out = followed_output(tmp_path, flink.url)
    assert job_line(out) == (
        f"  problem: recalibrate follow job {JID}: RUNNING (6 of 6 tasks running), 0 restarts, "
        "but its last checkpoint completed 20 min ago (more than 10 min); a restart now would "
        f"go back that far: check the job's checkpoints in the web UI {flink.url}/#/job/"
        f"running/{JID}/checkpoints and {checks(flink.url)}")
    assert main(["status", "--output", str(out), "--max-checkpoint-age-minutes", "30"]) == 0


def test_a_job_without_checkpoints_is_attention(flink, tmp_path):
    flink.job(details("RUNNING"), 0, {}, exceptions())  # no statistics: checkpointing is off
    flink.routes.pop(f"/jobs/{JID}/checkpoints")
    out = followed_output(tmp_path, flink.url)
    assert job_line(out) == (
        f"  problem: recalibrate follow job {JID}: RUNNING (6 of 6 tasks running), 0 restarts, "
        "but it takes no checkpoints: a restart would start it from nothing (every landed file "
        "read again); stop it and submit it with the flags of tools/flink_cluster.py flags "
        "--streaming (--checkpointing_interval)")


def test_a_job_the_cluster_does_not_know(flink, tmp_path):
    out = followed_output(tmp_path, flink.url)  # no routes: 404
    assert job_line(out) == (
        f"  problem: recalibrate follow job {JID}: the cluster at {flink.url} does not know "
        "this job (its JobManager restarted without it, or the job was removed); nothing is "
        "judged: start it again with costlib recalibrate --follow (same --config, --input, "
        "--output and flags)")


def test_a_cluster_that_is_down_is_one_line_and_fast(tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    out = followed_output(tmp_path, url)
    began = time.monotonic()
    assert job_line(out) == (
        f"  problem: recalibrate follow job {JID}: cluster unreachable at {url} ([Errno 111] "
        "Connection refused); nothing is judged while the cluster is down: check "
        f"{checks(url, 'JobManager')}")
    assert main(["status", "--output", str(out)]) == 3
    assert time.monotonic() - began < 2.0
    assert main(["status", "--output", str(out), "--no-jobs"]) == 0  # the rest is healthy


def test_a_job_without_a_rest_address_is_noted_not_checked(tmp_path):
    out = followed_output(tmp_path, None, jid=None)
    status = check_status(str(out), now=NOW)
    assert status.healthy and status.jobs[0]["state"] is None
    assert job_line(out) == (f"  job: recalibrate follow job {NAME}: no Flink job id was "
                             "recorded (no REST address); its state is not checked")


def test_a_job_whose_id_was_not_listed_yet_is_found_by_its_name(flink, tmp_path):
    # the command gave up looking before Flink listed the job: status looks it up by name
    flink.job(details("FAILED", running=0, end=ms(60)), 3, checkpoint(90),
              exceptions((60, NO_RESOURCE)))
    flink.routes["/jobs/overview"] = {"jobs": [
        {"jid": JID, "name": NAME, "state": "FAILED", "start-time": ms(3600)},
        {"jid": "0" * 32, "name": "another-job", "state": "RUNNING", "start-time": ms(60)}]}
    out = followed_output(tmp_path, flink.url, jid=None)
    assert job_line(out).startswith(f"  problem: recalibrate follow job {JID}: FAILED 1 min ago "
                                    "after 3 restarts — org.apache.flink")
    flink.routes["/jobs/overview"]["jobs"].pop(0)  # a cluster that does not list it
    assert job_line(out).startswith(f"  problem: recalibrate follow job {NAME}: the cluster at "
                                    f"{flink.url} does not know this job")


def test_json_has_each_job(flink, tmp_path, capsys):
    flink.job(details("RESTARTING", running=0), 5, checkpoint(100), exceptions((2, NO_RESOURCE)))
    out = followed_output(tmp_path, flink.url)
    assert main(["status", "--output", str(out), "--json"]) == 3
    shown = json.loads(capsys.readouterr().out)
    (job,) = shown["jobs"]
    assert job["flink_job_id"] == JID and job["state"] == "RESTARTING"
    assert job["restarts"] == 5 and not job["healthy"] and shown["healthy"] is False
    assert job["root_cause"].startswith("org.apache.flink.runtime.jobmanager.scheduler."
                                        "NoResourceAvailableException")
    assert job["problem"] in shown["problems"]


def test_a_followed_decide_output_shows_its_job(flink, tmp_path):
    out = tmp_path / "decisions"
    (out / "files" / "day1-0a1b2c3d").mkdir(parents=True)
    (out / "files" / "day1-0a1b2c3d" / "LATEST").write_text(RUN_ID)
    (out / "files" / "day2-1a1b2c3d").mkdir(parents=True)  # being decided
    (out / "dead_letter" / "files").mkdir(parents=True)
    (out / "dead_letter" / "files" / "5e6f7a8b.json").write_text("{}")
    job = {"name": "costlib-decide-follow-20261128T050000Z", "flink_rest": flink.url,
           "flink_job_id": JID, "note": None}
    (out / FOLLOW_RECORD).write_text(json.dumps({
        "command": "decide", "landing": "/data/scores/*.parquet",
        "operating_points": "/data/points", "started_utc": NOW.isoformat(), "job": job}))
    flink.job(details("RUNNING"), 0, checkpoint(3), exceptions())
    assert status_lines(out) == [
        f"{out}: ok; deciding each file landing in /data/scores/*.parquet (decide --follow): "
        "1 file(s) decided, 1 dead-lettered",
        f"  job: decide follow job {JID}: RUNNING, 0 restarts so far, last checkpoint 3 s ago"]
    flink.job(details("FAILED", running=0, end=ms(60)), 2, checkpoint(90),
              exceptions((60, NO_RESOURCE)))
    assert job_line(out).startswith(f"  problem: decide follow job {JID}: FAILED 1 min ago "
                                    "after 2 restarts — org.apache.flink")
    assert job_line(out).endswith("nothing is decided until it runs again: check "
                                  f"{checks(flink.url)}, then start it again with costlib "
                                  "decide --follow (same --config, --input, --output and "
                                  "flags)")
    assert main(["status", "--output", str(out)]) == 3
