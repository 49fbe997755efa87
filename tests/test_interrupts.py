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


def test_recalibrate_over_a_published_run_leaves_latest(data, tmp_path):
    config, stream, points = data
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
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert err == ("costlib status: interrupted (SIGTERM); nothing was published; re-running "
                   "is safe\n")
