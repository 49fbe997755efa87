"""SIGINT and SIGTERM during ``costlib recalibrate`` and ``costlib decide`` (local runner).

Each test starts the console script as a user does, holds it at a pause point
(:mod:`costlib_pipelines.pause`: after the lock is taken, inside a pipeline step, just before
the run is published), sends the signal once the pause point's marker file appears, and checks
the contract: exit 130 (SIGINT) or 143 (SIGTERM), no traceback, one line saying what was
interrupted, that nothing was published and that re-running is safe; ``LATEST`` unchanged, no
manifest, the lock released. No sleep decides when the signal comes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from pipeline_data import SMALL_CONFIG, sample_frame, write_files

COSTLIB = str(Path(sys.executable).parent / "costlib")
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Config, input glob and an output with run ``base`` published (decide's points)."""
    root = tmp_path_factory.mktemp("interrupts")
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(SMALL_CONFIG))
    stream = write_files(sample_frame(6_000, seed=3), root / "in", n_files=2)
    points = root / "points"
    done = subprocess.run([COSTLIB, "recalibrate", "--config", str(config), "--input", stream,
                           "--output", str(points), "--run-id", "base"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return str(config), stream, points


def interrupt_at(point: str, signum: int, argv: list[str], tmp_path: Path
                 ) -> subprocess.CompletedProcess:
    """Run ``costlib ARGV``, send ``signum`` when it reaches pause point ``point``."""
    marker = tmp_path / f"{point}.reached"
    env = {**os.environ, "COSTLIB_PAUSE_AT": f"{point}={marker}"}
    process = subprocess.Popen([COSTLIB, *argv], env=env, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            if process.poll() is not None:
                out, err = process.communicate()
                raise AssertionError(f"ended (exit {process.returncode}) before {point}: {err}")
            assert time.monotonic() < deadline, f"never reached {point}"
            time.sleep(0.02)
        process.send_signal(signum)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def interrupt_line(result: subprocess.CompletedProcess, command: str, signum: int) -> str:
    """The one interrupt line: the last of stderr; every other line is a progress line."""
    assert result.returncode == CODES[signum], result.stderr
    assert "Traceback" not in result.stderr and "KeyboardInterrupt" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines, "nothing on stderr"
    *progress, last = lines
    assert all(re.match(rf"costlib {command}: \[ *\d+\.\d s\] ", line) for line in progress), (
        result.stderr)
    assert last.startswith(f"costlib {command}: interrupted ({signal.Signals(signum).name})")
    return last


def assert_nothing_published(output: Path, run_id: str, latest_before: str | None) -> None:
    latest = output / "LATEST"
    assert (latest.read_text().strip() if latest.exists() else None) == latest_before
    assert not (output / "runs" / run_id / "manifest.json").exists()
    assert not (output / ".costlib-lock").exists()


@pytest.mark.parametrize(("point", "signum", "phase"), [
    ("recalibrate.locked", signal.SIGINT, "while preparing run r1 in "),
    ("recalibrate.optimize", signal.SIGINT, "while running the pipeline on FnApiRunner (run r1)"),
    ("recalibrate.optimize", signal.SIGTERM, "while running the pipeline on FnApiRunner"),
    ("recalibrate.publish", signal.SIGINT, "while running the pipeline on FnApiRunner"),
])
def test_recalibrate_interrupted(data, tmp_path, point, signum, phase):
    config, stream, _ = data
    output = tmp_path / "out"
    argv = ["recalibrate", "--config", config, "--input", stream, "--output", str(output),
            "--run-id", "r1"]
    line = interrupt_line(interrupt_at(point, signum, argv, tmp_path), "recalibrate", signum)
    assert phase in line
    assert line.endswith("; nothing was published; re-running is safe"), line
    assert_nothing_published(output, "r1", None)
    # re-running is safe: the same command and run id completes and publishes
    again = subprocess.run([COSTLIB, *argv], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert (output / "LATEST").read_text().strip() == "r1"


def test_sigterm_with_worker_processes_is_one_line_too(data, tmp_path):
    """``multi_processing``: the pause point is in a worker process; SIGTERM goes to the
    costlib process (as a scheduler sends it). The runner's threads whose channels close are
    silent; only the workers' usual start-up logs precede the line."""
    config, stream, _ = data
    output = tmp_path / "out"
    argv = ["recalibrate", "--config", config, "--input", stream, "--output", str(output),
            "--run-id", "mp", "--direct_running_mode=multi_processing",
            "--direct_num_workers=2"]
    result = interrupt_at("recalibrate.optimize", signal.SIGTERM, argv, tmp_path)
    assert result.returncode == 143, result.stderr
    assert "Traceback" not in result.stderr and "Exception in thread" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "costlib recalibrate: interrupted (SIGTERM) while running the pipeline on FnApiRunner "
        "(run mp); nothing was published; re-running is safe")
    assert_nothing_published(output, "mp", None)


def test_recalibrate_over_a_published_run_leaves_latest(data, tmp_path):
    config, stream, _points = data
    output = tmp_path / "out"
    argv = ["recalibrate", "--config", config, "--input", stream, "--output", str(output)]
    first = subprocess.run([COSTLIB, *argv, "--run-id", "one"], capture_output=True, text=True,
                           timeout=300)
    assert first.returncode == 0, first.stderr
    result = interrupt_at("recalibrate.publish", signal.SIGTERM, [*argv, "--run-id", "two"],
                          tmp_path)
    line = interrupt_line(result, "recalibrate", signal.SIGTERM)
    assert "nothing was published" in line
    assert_nothing_published(output, "two", "one")


def test_an_interrupt_after_the_run_published_says_so(data, tmp_path):
    """The pipeline's last stage published the run; the signal comes after: still 130, and the
    line does not claim that nothing was published."""
    config, stream, _ = data
    output = tmp_path / "out"
    argv = ["recalibrate", "--config", config, "--input", stream, "--output", str(output),
            "--run-id", "r1"]
    result = interrupt_at("recalibrate.finished", signal.SIGINT, argv, tmp_path)
    line = interrupt_line(result, "recalibrate", signal.SIGINT)
    assert "nothing was published" not in line
    assert f"published before the interrupt took effect: {output}/LATEST names r1 (was " \
           "absent)" in line
    assert (output / "runs" / "r1" / "manifest.json").exists()
    assert not (output / ".costlib-lock").exists()


@pytest.mark.parametrize(("point", "signum"), [
    ("decide.locked", signal.SIGTERM),
    ("decide.pipeline", signal.SIGINT),
    ("decide.pipeline", signal.SIGTERM),
    ("decide.commit", signal.SIGINT),
])
def test_decide_interrupted(data, tmp_path, point, signum):
    config, stream, points = data
    output = tmp_path / "decisions"
    argv = ["decide", "--config", config, "--input", stream, "--operating-points",
            str(points), "--output", str(output), "--run-id", "d1"]
    line = interrupt_line(interrupt_at(point, signum, argv, tmp_path), "decide", signum)
    assert line.endswith("; nothing was published; re-running is safe"), line
    assert_nothing_published(output, "d1", None)
    if point == "decide.commit":  # every decision was written: only the manifest is missing
        assert list((output / "runs" / "d1" / "decisions").rglob("*.parquet"))
    again = subprocess.run([COSTLIB, *argv], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    manifest = json.loads((output / "runs" / "d1" / "manifest.json").read_text())
    assert manifest["status"] == "complete"


def test_a_command_without_a_run_is_interrupted_cleanly(tmp_path):
    """``costlib status`` (no pipeline, no lock): the same contract, from the first moment
    the handlers are installed."""
    output = tmp_path / "out"
    (output / "runs").mkdir(parents=True)
    process = subprocess.Popen(
        [sys.executable, "-c",
         "import os, signal, sys; sys.argv = ['costlib', 'status', '--output', sys.argv[1]];"
         "from costlib_pipelines.commands import cli, status;"
         "run = status.run\n"
         "def paused(args):\n"
         "    os.kill(os.getpid(), signal.SIGTERM)\n"
         "    return run(args)\n"
         "status.run = paused; cli.console_main()", str(output)],
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert err == ("costlib status: interrupted (SIGTERM); nothing was published; re-running "
                   "is safe\n")


def test_flink_jobs_found_by_name_are_cancelled_through_the_rest_api():
    """:func:`costlib_pipelines.runner.cancel_after_interrupt` against a stand-in for Flink's
    REST API: the job named by ``--job_name`` (and only it) gets a cancel request; the outcome
    says it was cancelled, and when the job does not stop, that it may still run and how to
    cancel it."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from apache_beam.options.pipeline_options import PipelineOptions

    from costlib_pipelines import interrupts
    from costlib_pipelines.runner import cancel_after_interrupt, job_name_flags

    flags = job_name_flags(["--runner=PortableRunner", "--job_endpoint=localhost:1"],
                           "recalibrate", "Run_1.a")
    assert flags[-1] == "--job_name=costlib-recalibrate-run-1-a"
    assert job_name_flags([], "decide", "x") == []  # in process: no job name
    assert job_name_flags(["--runner=FlinkRunner", "--job_name=mine"], "decide", "x") == [
        "--runner=FlinkRunner", "--job_name=mine"]

    jobs = {"a1": ["costlib-recalibrate-run-1-a", "RUNNING"], "b2": ["other", "RUNNING"]}
    cancelled: list[str] = []
    stubborn = {"stop": True}

    class Rest(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            body = json.dumps({"jobs": [{"jid": j, "name": n, "state": s}
                                        for j, (n, s) in jobs.items()]}).encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def do_PATCH(self):
            jid = self.path.split("/")[2].split("?")[0]
            cancelled.append(jid)
            if stubborn["stop"]:
                jobs[jid][1] = "CANCELED"
            self.send_response(202)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Rest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        master = f"--flink_master=127.0.0.1:{server.server_port}"
        options = PipelineOptions([*flags, master])
        interrupts.reset("costlib recalibrate")
        interrupts.job_submitted("PortableRunner", None)
        cancel_after_interrupt(None, options, "PortableRunner")
        assert cancelled == ["a1"] and jobs["b2"][1] == "RUNNING"
        state = interrupts._state
        assert state.job_ended
        assert state.job_outcome == "its Flink job a1 (costlib-recalibrate-run-1-a) was cancelled"

        jobs["a1"][1], stubborn["stop"] = "RUNNING", False
        interrupts.reset("costlib recalibrate")
        interrupts.job_submitted("PortableRunner", None)
        from costlib_pipelines import runner

        original = runner._cancel_flink_jobs
        runner._cancel_flink_jobs = lambda url, name: original(url, name, wait=1.0)
        try:
            cancel_after_interrupt(None, options, "PortableRunner")
        finally:
            runner._cancel_flink_jobs = original
        assert not interrupts._state.job_ended
        assert "may still be running and may still publish: cancel it with flink cancel a1" in (
            interrupts._state.job_outcome)
        interrupts._state.signum = signal.SIGINT
        line = interrupts.message()
        assert "nothing was published yet" in line
        assert line.endswith("re-running is safe once that job has ended")
    finally:
        server.shutdown()
        interrupts.reset()


@pytest.mark.flink
def test_recalibrate_interrupted_on_flink_cancels_its_job(flink_cluster, tmp_path):
    """SIGINT while the job runs on the cluster: the Flink job is cancelled, the line says
    so, and nothing is published."""
    from flink_support import engine_config, jobs, wait_for_job_end, wait_for_running_job

    config = engine_config(tmp_path / "config.yaml",
                           grid={"edges": "uniform", "bins": 48, "range": [0.0, 1.0]})
    stream = write_files(sample_frame(240_000, seed=21), tmp_path / "in", n_files=4,
                         row_group_size=10_000)
    output = tmp_path / "out"
    known = {j["jid"] for j in jobs(flink_cluster)}
    process = subprocess.Popen(
        [COSTLIB, "recalibrate", "--config", config, "--input", stream, "--output",
         str(output), "--run-id", "flink1", *flink_cluster.beam_flags(),
         f"--flink_master=localhost:{flink_cluster.ports.rest}"],
        text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        jid = wait_for_running_job(flink_cluster, known)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, err
    line = err.splitlines()[-1]
    assert "Traceback" not in err
    assert line.endswith(f"; nothing was published; its Flink job {jid} "
                         "(costlib-recalibrate-flink1) was cancelled; re-running is safe")
    assert wait_for_job_end(flink_cluster, jid) == "CANCELED"
    assert_nothing_published(output, "flink1", None)


@pytest.mark.parametrize("then", ["raise InputError('a read failed')", "return 0",
                                  "raise RuntimeError('KeyboardInterrupt [while running x]')"])
def test_whatever_the_interrupt_turns_into_the_signal_decides(tmp_path, then):
    """Code under the command may turn the interrupt into an input error (exit 2 otherwise),
    a runner's RuntimeError (exit 1 otherwise), or swallow it and finish: the exit code is
    still 130 and stderr is the one line."""
    output = tmp_path / "out"
    (output / "runs").mkdir(parents=True)
    script = (
        "import os, signal, sys, time\n"
        "sys.argv = ['costlib', 'status', '--output', sys.argv[1]]\n"
        "from costlib_pipelines.commands import cli, status\n"
        "from costlib_pipelines.io.files import InputError\n"
        "def paused(args):\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(30)\n"
        "    except KeyboardInterrupt:\n"
        f"        {then}\n"
        "status.run = paused\n"
        "cli.console_main()\n")
    done = subprocess.run([sys.executable, "-c", script, str(output)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 130, done.stderr
    assert done.stderr == ("costlib status: interrupted (SIGINT); nothing was published; "
                           "re-running is safe\n")
