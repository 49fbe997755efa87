"""A Flink job that fails: one line and exit 4, Flink's root cause, and a lock that records the
job — against a stand-in for Flink's REST API (no cluster; the engine test that kills the only
TaskManager is in ``test_flink_faults.py``).

- Flink's root cause: the newest entry of ``/jobs/<id>/exceptions`` on one line, its first line
  and innermost cause; the job found by its name, never an older job of the same name.
- The line a failed job prints (:func:`costlib_pipelines.engine_failure.report`): the job, the
  root cause, what was left, what to check, the failure log that holds the traceback.
- ``costlib recalibrate`` through the command line's edge, its job "submitted" to the stand-in:
  exit 4 and one line; ``LATEST`` unchanged, the lock released, the traceback in the run's
  ``failure.log``; Flink's FAILED trusted when Beam's job service still says RUNNING; a Python
  traceback from the workers stays a bug (exit 1).
- The lock records the job: while Flink says it runs, the next run (and ``costlib unlock``) is
  refused with one line naming the job and how to cancel it, even if the submitter is dead;
  once it ended, the lock is taken over (another host's only after a grace period).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from pipeline_data import SMALL_CONFIG, sample_frame, write_files

from costlib_pipelines import flink_rest, interrupts
from costlib_pipelines.io.lock import latest_text, read_lock

TIMEOUT_TRACE = """org.apache.flink.runtime.JobException: Recovery is suppressed by \
FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=3, backoffTimeMS=5000)
\tat org.apache.flink.runtime.executiongraph.failover.ExecutionFailureHandler.handleFailure(\
ExecutionFailureHandler.java:219)
\tat java.base/java.lang.Thread.run(Thread.java:840)
Caused by: org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Could \
not acquire the minimum required resources.
\t... 32 more
Caused by: java.util.concurrent.TimeoutException: Timeout has occurred: 30000 ms
\t... 33 more
"""
ROOT_CAUSE = ("org.apache.flink.runtime.JobException: Recovery is suppressed by "
              "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=3, "
              "backoffTimeMS=5000), caused by java.util.concurrent.TimeoutException: Timeout has "
              "occurred: 30000 ms")
BEAM_FAILED = ("Pipeline BeamApp-root-1128-5e2c failed in state FAILED: "
               "java.util.concurrent.TimeoutException: Timeout has occurred: 30000 ms")


class StandInFlink:
    """Flink's REST API as costlib asks it: ``/jobs/overview``, ``/jobs/<id>``,
    ``/jobs/<id>/exceptions``, ``PATCH /jobs/<id>?mode=cancel``; ``jobs`` is mutable."""

    def __init__(self) -> None:
        self.jobs: dict[str, dict] = {}
        self.exceptions: dict[str, list[dict]] = {}
        self.cancelled: list[str] = []
        stand_in = self

        class Rest(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: object = None) -> None:
                data = json.dumps(body).encode() if body is not None else b""
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                parts = self.path.strip("/").split("/")
                if parts == ["jobs", "overview"]:
                    return self._send(200, {"jobs": [{"jid": j, **v}
                                                     for j, v in stand_in.jobs.items()]})
                if len(parts) >= 2 and parts[0] == "jobs" and parts[1] in stand_in.jobs:
                    jid = parts[1]
                    if parts[2:] == ["exceptions"]:
                        entries = stand_in.exceptions.get(jid, [])
                        return self._send(200, {"exceptionHistory": {"entries": entries,
                                                                     "truncated": False}})
                    if not parts[2:]:
                        return self._send(200, {"jid": jid, **stand_in.jobs[jid]})
                return self._send(404, {"errors": ["Not found"]})

            def do_PATCH(self):
                jid = self.path.split("/")[2].split("?")[0]
                stand_in.cancelled.append(jid)
                stand_in.jobs[jid]["state"] = "CANCELED"
                self._send(202, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Rest)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.master = f"127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add(self, jid: str, name: str, state: str, start: int = 1000,
            end: float = -1) -> None:
        self.jobs[jid] = {"name": name, "state": state, "start-time": start, "end-time": end}


@pytest.fixture
def flink():
    stand_in = StandInFlink()
    yield stand_in
    stand_in.server.shutdown()


@pytest.fixture(autouse=True)
def fresh_interrupt_records():
    interrupts.reset()
    yield
    interrupts.reset()


# --------------------------------------------------------------------------- Flink's REST API

def test_root_cause_is_the_newest_failure_first_line_and_innermost_cause(flink):
    flink.add("a1", "costlib-recalibrate-r1", "FAILED")
    flink.exceptions["a1"] = [
        {"timestamp": 5, "stacktrace": "java.lang.Exception: an older restart\n\tat x.y(z)"},
        {"timestamp": 9, "stacktrace": TIMEOUT_TRACE},
    ]
    assert flink_rest.root_cause(flink.url, "a1") == ROOT_CAUSE
    text = flink_rest.exceptions_text(flink.url, "a1")
    assert text.index("Recovery is suppressed") < text.index("an older restart")
    # no "Caused by": the first line alone; no failure: None; an unknown job: None
    assert flink_rest.describe_trace("java.lang.OutOfMemoryError: Java heap space\n\tat a") == (
        "java.lang.OutOfMemoryError: Java heap space")
    # exceptions that only wrap the next one on their line are left out (Flink 1.19's slot
    # timeout, as the engine test sees it)
    assert flink_rest.describe_trace(
        "java.util.concurrent.CompletionException: java.util.concurrent.CompletionException: "
        "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Slot "
        "request bulk is not fulfillable!\n\tat a\nCaused by: java.util.concurrent."
        "TimeoutException: Timeout has occurred: 30000 ms\n") == (
        "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: Slot "
        "request bulk is not fulfillable!, caused by java.util.concurrent.TimeoutException: "
        "Timeout has occurred: 30000 ms")
    flink.add("b2", "other", "RUNNING")
    assert flink_rest.root_cause(flink.url, "b2") is None
    assert flink_rest.job_state(flink.url, "nope") is None


def test_a_job_is_found_by_name_newest_first_never_one_from_before(flink):
    name = "costlib-recalibrate-r1"
    flink.add("old", name, "FAILED", start=100)
    flink.add("mine", name, "RUNNING", start=200)
    flink.add("other", "costlib-decide-r1", "RUNNING", start=300)
    assert flink_rest.find_job(flink.url, name)["jid"] == "mine"
    assert flink_rest.find_job(flink.url, name, exclude={"mine", "old"}) is None
    assert flink_rest.rest_url({"flink_master": "[auto]"}) is None
    assert flink_rest.rest_url({"flink_master": "h:8081/"}) == "http://h:8081"


def test_an_unreachable_rest_api_is_a_rest_error():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(flink_rest.RestError):
        flink_rest.jobs(f"http://127.0.0.1:{port}")


# --------------------------------------------------------------------------- the one line

def test_the_line_names_job_cause_what_was_left_what_to_check_and_the_log(tmp_path):
    from costlib_pipelines.engine_failure import EngineFailed, report

    output = tmp_path / "out"
    (output / "runs" / "r1").mkdir(parents=True)
    (output / "LATEST").write_text("r0\n")
    interrupts.output_held(str(output), "r1", latest_text, read_lock)
    try:
        raise RuntimeError(BEAM_FAILED)
    except RuntimeError as beam:
        failed = EngineFailed(runner="PortableRunner", job_name="costlib-recalibrate-r1",
                              flink_job_id="a1", state="FAILED", root_cause=ROOT_CAUSE,
                              rest_url="http://localhost:18081",
                              log_dir=str(output / "runs" / "r1"),
                              details=["ERROR the job service's message"])
        failed.__cause__ = beam
    line = report(failed, "costlib recalibrate")
    log = output / "runs" / "r1" / "failure.log"
    assert line == (
        "costlib recalibrate: Flink job a1 (costlib-recalibrate-r1) ended FAILED; Flink's root "
        f"cause: {ROOT_CAUSE}; nothing was published, the lock of {output} was released; check "
        "the job's exceptions at http://localhost:18081/#/job/completed/a1/exceptions and the "
        "TaskManagers (local cluster: tools/flink_cluster.py status --port-base 18081; "
        "TaskManager logs ~/.cache/costlib/flink/cluster-18081/log/taskmanager-*.out, or "
        "--state-dir's log/); re-running is safe once the cluster is healthy; full traceback "
        f"in {log}")
    assert "\n" not in line
    text = log.read_text()
    assert "Traceback (most recent call last)" in text and BEAM_FAILED in text
    assert "ERROR the job service's message" in text

    # LATEST moved since the lock was taken: the line says so instead of "nothing"
    (output / "LATEST").write_text("r1\n")
    remote = EngineFailed(runner="PortableRunner", root_cause="x", rest_url="http://h:8081")
    line = report(remote, "costlib decide")
    assert f"published before the job failed: {output}/LATEST names r1 (was r0)" in line
    assert "their logs (Flink's web UI, Task Managers; on Kubernetes: kubectl logs)" in line
    assert line.split("full traceback in ")[1].startswith("/")  # no run directory: a temp file
    os.unlink(line.split("full traceback in ")[1])


def test_only_a_failure_of_the_engine_is_one():
    from costlib_pipelines.engine_failure import engine_error

    assert engine_error(RuntimeError(BEAM_FAILED)) == (
        "BeamApp-root-1128-5e2c", "FAILED",
        "java.util.concurrent.TimeoutException: Timeout has occurred: 30000 ms")
    python_error = (BEAM_FAILED + "\nTraceback (most recent call last):\n  File \"x.py\"\n"
                    "ZeroDivisionError: division by zero")
    assert engine_error(RuntimeError(python_error)) is None
    assert engine_error(ValueError("something else")) is None


# --------------------------------------------------------------------------- through the CLI

@pytest.fixture
def stream(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(SMALL_CONFIG))
    return str(config), write_files(sample_frame(2_000, seed=5), tmp_path / "in", n_files=1)


class FakeResult:
    """Beam's result of a submitted job: ``wait_until_finish`` does what ``finish`` says."""

    def __init__(self, finish):
        self.finish = finish
        self.job_id = "BeamApp-root-1128-5e2c"

    def wait_until_finish(self):
        return self.finish()

    def cancel(self):
        pass


def submit_to(monkeypatch, flink: StandInFlink, finish, jid: str = "f1") -> list[dict]:
    """Make ``run_to_end`` in recalibrate submit to the stand-in: the job appears in Flink
    under its ``--job_name``, and Beam's job service does what ``finish(name)`` says. Returns
    the lock records seen while the job ran."""
    from costlib_pipelines import runner
    from costlib_pipelines.recalibrate import pipeline as recalibrate_pipeline

    seen: list[dict] = []

    class FakePipeline:
        def __init__(self, options, output):
            self.options, self.output = options, output

        def run(self):
            name = self.options.get_all_options(drop_default=True)["job_name"]
            flink.add(jid, name, "RUNNING", start=2000)

            def wait():
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:  # until the lock shows the Flink job id
                    holder = json.loads((Path(self.output) / ".costlib-lock").read_text())
                    if (holder.get("job") or {}).get("flink_job_id"):
                        seen.append(holder)
                        break
                    time.sleep(0.05)
                return finish(name)

            return FakeResult(wait)

    real = runner.run_to_end

    def run_to_end(pipeline, runner_name, **kwargs):
        output = str(Path(kwargs["log_dir"]).parent.parent)
        return real(FakePipeline(pipeline.options, output), runner_name, **kwargs)

    monkeypatch.setattr(recalibrate_pipeline, "run_to_end", run_to_end)
    monkeypatch.setattr(runner._FlinkWatch, "POLL", 0.1)
    monkeypatch.setattr(runner._FlinkWatch, "LAG", 0.5)
    return seen


def recalibrate(stream, output: Path, flink: StandInFlink, capsys, run_id: str = "r1"):
    from costlib_pipelines.commands.cli import main

    config, glob = stream
    code = main(["recalibrate", "--config", config, "--input", glob, "--output", str(output),
                 "--run-id", run_id, "--runner=PortableRunner", "--job_endpoint=localhost:1",
                 f"--flink_master={flink.master}"])
    return code, capsys.readouterr().err


def test_a_failed_flink_job_exits_4_with_one_line(stream, tmp_path, flink, monkeypatch,
                                                  capsys):
    def fail(name):
        flink.jobs["f1"]["state"] = "FAILED"
        flink.exceptions["f1"] = [{"timestamp": 9, "stacktrace": TIMEOUT_TRACE}]
        # Beam's job service logs the Java error on the root logger, then raises
        record = logging.LogRecord("root", logging.ERROR, "/x/apache_beam/runners/portability/"
                                   "portable_runner.py", 1, "java.lang.Error: 30 lines", None,
                                   None)
        logging.getLogger().handle(record)
        raise RuntimeError(BEAM_FAILED)

    seen = submit_to(monkeypatch, flink, fail)
    output = tmp_path / "out"
    code, err = recalibrate(stream, output, flink, capsys)
    assert code == 4
    lines = [line for line in err.splitlines() if not line.startswith("costlib recalibrate: [")]
    assert len(lines) == 1, err
    assert lines[0].startswith("costlib recalibrate: Flink job f1 (costlib-recalibrate-r1) "
                               f"ended FAILED; Flink's root cause: {ROOT_CAUSE}; nothing was "
                               f"published, the lock of {output} was released; check ")
    assert "30 lines" not in err and "Traceback" not in err
    log = output / "runs" / "r1" / "failure.log"
    assert lines[0].endswith(f"full traceback in {log}")
    assert "java.lang.Error: 30 lines" in log.read_text()
    assert BEAM_FAILED in log.read_text() and "Recovery is suppressed" in log.read_text()
    # what was left: nothing published, no manifest, the lock released
    assert not (output / "LATEST").exists() and not (output / ".costlib-lock").exists()
    assert not (output / "runs" / "r1" / "manifest.json").exists()
    # while it ran, the lock recorded the job
    assert seen and seen[0]["job"] == {"runner": "PortableRunner", "flink_rest": flink.url,
                                       "job_name": "costlib-recalibrate-r1",
                                       "flink_job_id": "f1"}


def test_flink_is_trusted_when_beams_job_service_still_says_running(
        stream, tmp_path, flink, monkeypatch, capsys):
    hang = threading.Event()

    def running_for_ever(name):
        flink.jobs["f1"]["state"] = "FAILED"
        flink.exceptions["f1"] = [{"timestamp": 9, "stacktrace": TIMEOUT_TRACE}]
        hang.wait(60)  # the job service never says the job ended

    submit_to(monkeypatch, flink, running_for_ever)
    started = time.monotonic()
    code, err = recalibrate(stream, tmp_path / "out", flink, capsys)
    hang.set()
    assert code == 4, err
    assert time.monotonic() - started < 30
    assert f"Flink job f1 (costlib-recalibrate-r1) ended FAILED; Flink's root cause: {ROOT_CAUSE}" \
        in err
    log = (tmp_path / "out" / "runs" / "r1" / "failure.log").read_text()
    assert "Beam's job service still reported it running" in log


def test_a_python_error_in_the_workers_stays_a_bug(stream, tmp_path, flink, monkeypatch,
                                                   capsys):
    def python_error(name):
        flink.jobs["f1"]["state"] = "FAILED"
        raise RuntimeError(BEAM_FAILED + "\nTraceback (most recent call last):\n  File "
                           "\"costlib/x.py\", line 1\nZeroDivisionError: division by zero")

    submit_to(monkeypatch, flink, python_error)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        recalibrate(stream, tmp_path / "out", flink, capsys)
    assert not (tmp_path / "out" / ".costlib-lock").exists()


def test_a_python_error_only_flink_reports_is_not_an_engine_failure(
        stream, tmp_path, flink, monkeypatch, capsys):
    """Beam's message names only the Java wrapper; Flink's exceptions hold the workers' Python
    traceback: an input error there is exit 2 with its one line, anything else a bug."""
    harness = ("java.lang.RuntimeException: Error received from SDK harness for instruction 7: "
               "Traceback (most recent call last):\n  File \"apache_beam/runners/worker.py\", "
               "line 1, in process\n{error}\n\n\tat org.apache.beam.Runner.run(Runner.java:1)")

    def python_error(error, jid="f1"):
        def finish(name):
            flink.jobs[jid]["state"] = "FAILED"
            flink.exceptions[jid] = [{"timestamp": 9,
                                      "stacktrace": harness.format(error=error)}]
            raise RuntimeError("Pipeline BeamApp-x failed in state FAILED: "
                               "java.lang.RuntimeException: Error received from SDK harness")
        return finish

    submit_to(monkeypatch, flink, python_error(
        "costlib_pipelines.io.files.InputError: in.parquet: column 'score' is text"))
    code, err = recalibrate(stream, tmp_path / "out", flink, capsys)
    assert code == 2
    assert "costlib recalibrate: error: in.parquet: column 'score' is text" in err

    submit_to(monkeypatch, flink, python_error("ZeroDivisionError: division by zero", "f2"),
              jid="f2")  # a new job of the same name (run id r1 again): f1 is not this run's
    with pytest.raises(RuntimeError, match="Flink's exceptions of job f2") as bug:
        recalibrate(stream, tmp_path / "out2", flink, capsys)
    assert "ZeroDivisionError: division by zero" in str(bug.value)


# --------------------------------------------------------------------------- the lock

def dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def write_lock(output: Path, flink: StandInFlink, *, jid: str | None = "o1",
               host: str | None = None, pid: int | None = None) -> None:
    output.mkdir(parents=True, exist_ok=True)
    (output / ".costlib-lock").write_text(json.dumps({
        "run_id": "orphan", "command": "recalibrate", "host": host or socket.gethostname(),
        "pid": pid or dead_pid(), "started_utc": "2026-11-28T04:00:00+00:00", "token": "t",
        "job": {"runner": "PortableRunner", "flink_rest": flink.url,
                "job_name": "costlib-recalibrate-orphan", "flink_job_id": jid}}))


def test_a_lock_whose_job_runs_refuses_even_when_its_submitter_died(tmp_path, flink, capsys):
    from costlib_pipelines.io.lock import OutputLocked, acquire, break_lock

    output = tmp_path / "out"
    flink.add("o1", "costlib-recalibrate-orphan", "RUNNING")
    write_lock(output, flink)
    with pytest.raises(OutputLocked) as refused:
        acquire(str(output), run_id="next", command="recalibrate")
    message = str(refused.value)
    assert "\n" not in message
    assert f"whose Flink job o1 (costlib-recalibrate-orphan) is still RUNNING at {flink.url}" \
        in message
    assert f"curl -X PATCH '{flink.url}/jobs/o1?mode=cancel'" in message
    assert "flink cancel o1" in message
    with pytest.raises(OutputLocked, match=r"still RUNNING .*nothing removed"):
        break_lock(str(output), "orphan")
    from costlib_pipelines.commands.cli import main

    main(["status", "--output", str(output)])  # names the job the lock records
    assert (f"locked by run orphan (recalibrate, since 2026-11-28T04:00:00+00:00; Flink job o1 "
            f"at {flink.url})") in capsys.readouterr().out
    assert json.loads((output / ".costlib-lock").read_text())["run_id"] == "orphan"

    # the submitter died before Flink showed the job: found by its name
    write_lock(output, flink, jid=None)
    with pytest.raises(OutputLocked, match=r"whose Flink job o1 .* is still RUNNING"):
        acquire(str(output), run_id="next", command="recalibrate")

    # cancelled (as the message says): the next run takes the lock over
    flink.jobs["o1"].update(state="CANCELED", **{"end-time": time.time() * 1000})
    lock = acquire(str(output), run_id="next", command="recalibrate")
    assert json.loads((output / ".costlib-lock").read_text())["token"] == lock.token


@pytest.mark.parametrize("state", ["FINISHED", "FAILED", "CANCELED", None])
def test_a_lock_whose_job_ended_is_taken_over(tmp_path, flink, state):
    from costlib_pipelines.io.lock import acquire

    output = tmp_path / "out"
    if state is not None:  # None: the cluster does not know the job (restarted without it)
        flink.add("o1", "costlib-recalibrate-orphan", state, end=time.time() * 1000)
    write_lock(output, flink)
    lock = acquire(str(output), run_id="next", command="recalibrate")
    assert json.loads((output / ".costlib-lock").read_text())["run_id"] == "next"
    assert lock.local


def test_a_live_submitter_or_another_hosts_recent_job_keeps_its_lock(tmp_path, flink):
    from costlib_pipelines.io.lock import FOREIGN_GRACE, OutputLocked, acquire

    output = tmp_path / "out"
    flink.add("o1", "costlib-recalibrate-orphan", "FINISHED", end=time.time() * 1000)
    write_lock(output, flink, pid=os.getpid())  # job ended, its submitter still finishing
    with pytest.raises(OutputLocked, match="locked by run 'orphan'"):
        acquire(str(output), run_id="next", command="recalibrate")
    write_lock(output, flink, host="another-host")  # ended just now on another host
    with pytest.raises(OutputLocked, match="locked by run 'orphan'"):
        acquire(str(output), run_id="next", command="recalibrate")
    flink.jobs["o1"]["end-time"] = (time.time() - FOREIGN_GRACE - 5) * 1000
    acquire(str(output), run_id="next", command="recalibrate")


def test_a_lock_whose_flink_cannot_be_asked_refuses_and_unlock_still_removes_it(tmp_path):
    from costlib_pipelines.io.lock import OutputLocked, acquire, break_lock

    class Gone:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    output = tmp_path / "out"
    write_lock(output, Gone)  # type: ignore[arg-type]
    with pytest.raises(OutputLocked) as refused:
        acquire(str(output), run_id="next", command="recalibrate")
    assert "could not be checked" in str(refused.value)
    assert f"costlib unlock --output {output} --run-id orphan" in str(refused.value)
    assert break_lock(str(output), "orphan")["run_id"] == "orphan"
    assert not (output / ".costlib-lock").exists()
