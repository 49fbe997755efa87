"""Operations that cannot be misused: run ids, flags, the guard failing closed, the output lock,
exit codes and ``costlib status`` — each through the CLI where the user meets it."""

from __future__ import annotations

import datetime as dt
import io
import json
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from pipeline_data import sample_frame, write_files

from costlib_pipelines.commands import exit_codes
from costlib_pipelines.commands.cli import main, parse_command_line
from costlib_pipelines.commands.progress import Progress
from costlib_pipelines.flags import UsageError, normalise_spellings
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.lock import LOCK_NAME, acquire, release
from costlib_pipelines.io.runs import MARKER, check_run_id
from costlib_pipelines.io.status import check_status
from costlib_pipelines.recalibrate.publish import Baseline, read_baseline

CONFIG = {
    "columns": {"weight": "weight"},
    "classifiers": ["text_model", "image_model"],
    "rule": "any",
    "grid": {"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
    "target": {"marginal_precision": 0.3},
    "methods": ["graph", "hull"],
    "decision_method": "graph",
    "min_rated": {"positives": 5, "negatives": 5},
}


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    """A small score stream on disk and its config file."""
    root = tmp_path_factory.mktemp("stream")
    pattern = write_files(sample_frame(6000, seed=3), root / "in", n_files=2,
                          row_group_size=1500)
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    return {"input": pattern, "config": str(config)}


def recalibrate(stream, output, *extra) -> int:
    return main(["recalibrate", "--config", stream["config"], "--input", stream["input"],
                 "--output", str(output), *extra])


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file below ``directory`` with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- run ids
@pytest.mark.parametrize("bad", ["..", "../..", ".", "a/b", "/abs", "", "-x", "x" * 129,
                                 "a\\b", "runs/../x", "ü"])
def test_invalid_run_ids_are_refused(bad):
    with pytest.raises(InputError, match="not a valid run id"):
        check_run_id(bad)


@pytest.mark.parametrize("good", ["2026-11-22", "retry.2", "A_b-3", "x" * 128])
def test_valid_run_ids(good):
    assert check_run_id(good) == good


@pytest.mark.parametrize("bad", ["..", "../..", "."])
def test_run_id_that_is_a_path_deletes_nothing(stream, tmp_path, capsys, bad):
    """``--run-id ..`` once wiped the whole output (and ``../..`` its parent)."""
    parent = tmp_path / "parent"
    output = parent / "out"
    assert recalibrate(stream, output, "--run-id", "first") == 0
    (parent / "unrelated.txt").write_text("keep me")
    (output / "notes.txt").write_text("keep me too")
    before = snapshot(parent)
    for command in (["recalibrate", "--config", stream["config"], "--input", stream["input"],
                     "--output", str(output), "--run-id", bad],
                    ["decide", "--config", stream["config"], "--input", stream["input"],
                     "--operating-points", str(output), "--output", str(output),
                     "--run-id", bad],
                    ["publish", "--output", str(output), "--run-id", bad, "--by", "me",
                     "--reason", "test"]):
        assert main(command) == 2
        assert "not a valid run id" in capsys.readouterr().err
        assert snapshot(parent) == before


def test_a_directory_costlib_did_not_create_is_never_replaced(stream, tmp_path, capsys):
    output = tmp_path / "out"
    foreign = output / "runs" / "mine"
    foreign.mkdir(parents=True)
    (foreign / "precious.csv").write_text("data")
    assert recalibrate(stream, output, "--run-id", "mine") == 2
    assert "costlib did not create it" in capsys.readouterr().err
    assert (foreign / "precious.csv").read_text() == "data"
    # A run directory costlib made (marker) is replaced whole by a re-run with its id.
    assert recalibrate(stream, output, "--run-id", "ours") == 0
    (output / "runs" / "ours" / "stale.txt").write_text("x")
    assert recalibrate(stream, output, "--run-id", "other") == 0
    assert recalibrate(stream, output, "--run-id", "ours") == 0
    assert (output / "runs" / "ours" / MARKER).exists()
    assert not (output / "runs" / "ours" / "stale.txt").exists()


def test_a_file_that_is_not_operating_points_is_exit_2(stream, tmp_path, capsys):
    score_file = sorted(Path(stream["input"]).parent.glob("*.parquet"))[0]
    for points in (score_file, stream["config"]):
        code = main(["decide", "--config", stream["config"], "--input", stream["input"],
                     "--operating-points", str(points), "--output", str(tmp_path / "d")])
        assert code == 2
    err = capsys.readouterr().err
    assert "not an operating points file (no column 'run_id'" in err
    assert "config.yaml: no manifest.json" in err  # neither operating points nor a run


def test_an_output_of_the_wrong_kind_or_without_latest_is_named(stream, tmp_path, capsys):
    recal, dec = tmp_path / "recal", tmp_path / "dec"

    def decide(points: Path) -> int:
        return main(["decide", "--config", stream["config"], "--input", stream["input"],
                     "--operating-points", str(points), "--output", str(dec)])

    assert recalibrate(stream, recal, "--run-id", "held", "--min-rated", "1e9") == 3
    assert not (recal / "LATEST").exists()
    capsys.readouterr()
    assert decide(recal) == 2
    assert f"nothing is published in {recal} yet (no LATEST)" in capsys.readouterr().err
    assert recalibrate(stream, recal, "--run-id", "first") == 0
    assert decide(recal) == 0
    run_dir = dec / "runs" / (dec / "LATEST").read_text().strip()
    capsys.readouterr()
    for code in (main(["report", "--run", str(dec)]), main(["report", "--run", str(run_dir)]),
                 decide(dec)):
        assert code == 2
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 3
    for error in errors:
        assert f"{run_dir}: this is a decide output" in error
        assert "give a recalibrate output's run" in error


def test_latest_holding_a_path_is_never_followed(stream, tmp_path, capsys):
    output = tmp_path / "out"
    assert recalibrate(stream, output, "--run-id", "first") == 0
    (output / "LATEST").write_text("../../etc\n")
    code = main(["decide", "--config", stream["config"], "--input", stream["input"],
                 "--operating-points", str(output), "--output", str(tmp_path / "dec")])
    assert code == 2
    assert "LATEST holds '../../etc'" in capsys.readouterr().err


# --------------------------------------------------------------------------- flags
def test_misspelt_guard_flag_is_refused_with_the_closest_match(stream, tmp_path, capsys):
    """It used to go to Beam, which discarded it, and the run published with exit 0."""
    output = tmp_path / "out"
    assert recalibrate(stream, output, "--max-threshhold-change=0.001") == 2
    err = capsys.readouterr().err
    assert "unknown flag --max-threshhold-change" in err
    assert "did you mean --max-threshold-change?" in err
    assert not output.exists() or not (output / "runs").exists()  # nothing ran


@pytest.mark.parametrize("spelling", [["--max-threshold-change=0.0", "--min-rated", "1e9"],
                                      ["--max_threshold_change=0.0", "--min_rated", "1e9"]])
def test_both_spellings_of_the_guard_flags_hold_the_run(stream, tmp_path, spelling):
    output = tmp_path / "out"
    assert recalibrate(stream, output, "--run-id", "first") == 0
    # another objective moves the thresholds (publishing unchanged ones is never held)
    assert recalibrate(stream, output, "--run-id", "second", "--objective", "f1",
                       *spelling) == 3
    manifest = json.loads((output / "runs" / "second" / "manifest.json").read_text())
    assert manifest["published"] is False
    assert manifest["guard"]["min_rated"] == 1e9
    assert (output / "LATEST").read_text().strip() == "first"


def test_spellings_are_normalised_only_for_the_commands_own_flags():
    own = {"--run-id", "--max-threshold-change"}
    argv = ["--run_id=x", "--max_threshold_change", "0.1", "--direct_num_workers=2", "--",
            "--run_id"]
    assert normalise_spellings(argv, own) == [
        "--run-id=x", "--max-threshold-change", "0.1", "--direct_num_workers=2", "--",
        "--run_id"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--runner", "bogus"], "--runner=bogus: unknown runner"),
    (["--runner=DataflowRuner"], "did you mean DataflowRunner?"),
    (["--runner=os.path"], "not an Apache Beam PipelineRunner class"),
    (["--runner=nowhere.Runner"], "cannot import it"),
    (["--flink_mastr=localhost:8081"], "did you mean --flink_master?"),
    (["--direct_num_workers=two"], "invalid int value"),
    (["-x"], "single-dash"),
    (["stray.parquet"], "quote a glob"),
])
def test_bad_beam_arguments_are_refused_before_any_input_is_read(tmp_path, capsys, extra,
                                                                   message):
    # The input does not exist and the config is not read: the command line fails first.
    code = main(["recalibrate", "--config", str(tmp_path / "none.yaml"), "--input",
                 str(tmp_path / "none" / "*.parquet"), "--output", str(tmp_path / "o"),
                 *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1  # one line, no traceback
    assert not (tmp_path / "o").exists()


def test_known_beam_flags_pass_through_unchanged():
    args = parse_command_line([
        "recalibrate", "--config", "c.yaml", "--input", "x", "--output", "o",
        "--runner=PortableRunner", "--job_endpoint=localhost:8099",
        "--environment_type=LOOPBACK", "--experiments=a", "--experiments=b",
        "--direct_running_mode", "multi_processing"])
    assert args.beam_args == ["--runner=PortableRunner", "--job_endpoint=localhost:8099",
                              "--environment_type=LOOPBACK", "--experiments=a",
                              "--experiments=b", "--direct_running_mode", "multi_processing"]


def test_commands_without_beam_flags_suggest_their_own(capsys):
    assert main(["report", "--run", "r", "--outt", "x"]) == 2
    assert "did you mean --out?" in capsys.readouterr().err
    assert main(["status", "--output", "x", "--max_age_hours", "1", "--bogus"]) == 2


# --------------------------------------------------------------------------- the guard fails closed
def test_guard_holds_when_the_published_run_cannot_be_read(stream, tmp_path, capsys):
    """It used to publish with no comparison and no message."""
    output = tmp_path / "out"
    assert recalibrate(stream, output, "--run-id", "first",
                       "--max-threshold-change", "0.5") == 0
    (output / "runs" / "first" / "operating_points.parquet").write_bytes(b"garbage")
    assert recalibrate(stream, output, "--run-id", "second",
                       "--max-threshold-change", "0.5") == 3
    manifest = json.loads((output / "runs" / "second" / "manifest.json").read_text())
    assert manifest["published"] is False
    assert "cannot compare with the published run" in manifest["guard"]["violations"][0]
    assert "first" in manifest["guard"]["previous_run_unreadable"]
    assert (output / "LATEST").read_text().strip() == "first"
    assert "held for review" in capsys.readouterr().err


def test_guard_holds_when_latest_vanished_next_to_published_runs(stream, tmp_path):
    output = tmp_path / "out"
    assert recalibrate(stream, output, "--run-id", "first") == 0
    (output / "LATEST").unlink()
    baseline = read_baseline(str(output))
    assert baseline.run_id is None and "LATEST is missing" in baseline.problem
    assert recalibrate(stream, output, "--run-id", "second") == 3
    assert not (output / "LATEST").exists()


def test_a_first_run_into_an_empty_output_publishes(tmp_path):
    assert read_baseline(str(tmp_path / "nothing")) == Baseline(None, None, None)


def test_guard_holds_when_latest_moved_while_the_run_ran(stream, tmp_path, monkeypatch):
    output = tmp_path / "out"
    assert recalibrate(stream, output, "--run-id", "first") == 0
    assert recalibrate(stream, output, "--run-id", "second") == 0
    # This run read its baseline when LATEST named "first"; by its publish stage another run
    # ("second") had published.
    stale = read_baseline(str(output))
    stale = Baseline(stale.records, "first")
    monkeypatch.setattr("costlib_pipelines.recalibrate.pipeline.read_baseline",
                        lambda _output: stale)
    assert recalibrate(stream, output, "--run-id", "third") == 3
    manifest = json.loads((output / "runs" / "third" / "manifest.json").read_text())
    assert any("LATEST moved from first to second" in v
               for v in manifest["guard"]["violations"])
    assert (output / "LATEST").read_text().strip() == "second"


# --------------------------------------------------------------------------- the output lock
def test_a_second_run_into_a_locked_output_is_refused(stream, tmp_path, capsys):
    output = tmp_path / "out"
    lock = acquire(str(output), run_id="busy", command="recalibrate")
    try:
        assert recalibrate(stream, output, "--run-id", "second") == 2
        err = capsys.readouterr().err
        assert "locked by run 'busy'" in err and f"pid {os.getpid()}" in err
        assert not (output / "runs").exists()
    finally:
        release(lock)
    assert not (output / LOCK_NAME).exists()
    assert recalibrate(stream, output, "--run-id", "second") == 0
    assert not (output / LOCK_NAME).exists()  # released after the run


def test_the_lock_message_names_the_unlock_command_that_removes_it(stream, tmp_path, capsys):
    output = tmp_path / "out"
    output.mkdir()
    (output / LOCK_NAME).write_text(json.dumps({  # a driver on a machine that is gone
        "run_id": "lost", "command": "recalibrate", "host": "gone.example", "pid": 1,
        "started_utc": "2026-01-01T00:00:00+00:00", "token": "t"}))
    assert recalibrate(stream, output, "--run-id", "next") == 2
    err = capsys.readouterr().err.strip()
    assert "delete" not in err
    command = err.partition("remove its lock with: ")[2]
    assert command == f"costlib unlock --output {output} --run-id lost"
    assert main(shlex.split(command)[1:]) == 0  # the command as given works
    assert recalibrate(stream, output, "--run-id", "next") == 0
    (output / LOCK_NAME).write_text("not json")  # names no run: unlock cannot remove it
    assert recalibrate(stream, output, "--run-id", "third") == 2
    err = capsys.readouterr().err
    assert f"delete {output / LOCK_NAME} (the lock names no run to unlock)" in err


def test_a_lock_left_by_a_dead_process_is_taken_over(stream, tmp_path):
    output = tmp_path / "out"
    output.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (output / LOCK_NAME).write_text(json.dumps({
        "run_id": "killed", "command": "recalibrate", "host": socket.gethostname(),
        "pid": int(dead.stdout), "started_utc": "2026-01-01T00:00:00+00:00", "token": "t"}))
    assert recalibrate(stream, output, "--run-id", "next") == 0
    assert not (output / LOCK_NAME).exists()


def test_the_lock_is_released_when_a_run_fails(stream, tmp_path):
    output = tmp_path / "out"
    assert main(["recalibrate", "--config", stream["config"], "--input",
                 str(tmp_path / "missing" / "*.parquet"), "--output", str(output)]) == 2
    assert not (output / LOCK_NAME).exists()


def test_another_processs_lock_is_never_released():
    lock = acquire("/tmp/costlib-test-lock-" + str(os.getpid()), run_id="a", command="c")
    try:
        other = type(lock)(path=lock.path, token="someone-else", local=True)
        release(other)
        assert os.path.exists(lock.path)
    finally:
        release(lock)
        os.rmdir(os.path.dirname(lock.path))


def test_an_unwritable_output_fails_before_reading_input(stream, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the output directory should be")
    assert recalibrate(stream, blocker / "out") == 2
    assert "cannot create the output directory" in capsys.readouterr().err


# --------------------------------------------------------------------------- exit codes
def test_bad_row_group_is_exit_2_in_one_line_also_from_worker_processes(stream, tmp_path,
                                                                       capsys):
    points = tmp_path / "recal"
    assert recalibrate(stream, points) == 0
    source = sorted(Path(stream["input"]).parent.glob("*.parquet"))[0]
    table = pq.read_table(source)
    good = tmp_path / "good.parquet"
    pq.write_table(table, good, row_group_size=1500, compression="zstd")
    data = bytearray(good.read_bytes())
    offset = pq.ParquetFile(good).metadata.row_group(1).column(3).data_page_offset
    for i in range(offset + 20, offset + 60):
        data[i] ^= 0x5A
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "bad.parquet").write_bytes(bytes(data))
    for extra in ([], ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]):
        code = main(["decide", "--config", stream["config"], "--input",
                     str(tmp_path / "in" / "*.parquet"), "--operating-points", str(points),
                     "--output", str(tmp_path / "dec"), *extra])
        lines = [line for line in capsys.readouterr().err.splitlines()
                 if not line.startswith("costlib decide: [")]  # progress lines of slow runs
        assert code == 2, lines
        assert lines[-1].startswith("costlib decide: error: ")
        assert "bad.parquet: row group 1: cannot be read" in lines[-1]
        if not extra:  # in process: nothing else; worker processes log on their own
            assert len(lines) == 1
    # The console script, with a thread pool of workers still winding down at exit (an abort,
    # exit 134, was reported after the error line once): exit 2 and the error last.
    costlib = Path(sys.executable).with_name("costlib")
    done = subprocess.run([costlib, "decide", "--config", stream["config"], "--input",
                           str(tmp_path / "in" / "*.parquet"), "--operating-points", str(points),
                           "--output", str(tmp_path / "dec"),
                           "--direct_running_mode=multi_threading", "--direct_num_workers=2"],
                          capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "row group 1: cannot be read" in done.stderr.splitlines()[-1]


def test_classify_reads_user_errors_out_of_a_workers_traceback():
    text = ("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
            "costlib_pipelines.io.files.InputError: f.parquet: row group 3 cannot be read (bad\n"
            "page header)\n")
    assert exit_codes.classify(RuntimeError(text)) == (
        2, "f.parquet: row group 3 cannot be read (bad; page header)")
    suffixed = text.replace("header)\n", "header) [while running 'Decide/ParDo(DecideFn)']\n")
    assert exit_codes.classify(RuntimeError(suffixed)) == exit_codes.classify(RuntimeError(text))
    assert exit_codes.classify(RuntimeError("ZeroDivisionError: division by zero")) is None
    assert exit_codes.classify(KeyError("guard")) is None


def test_console_script_exit_codes(stream, tmp_path):
    costlib = Path(sys.executable).with_name("costlib")
    version = subprocess.run([costlib, "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("costlib ")
    bad = subprocess.run([costlib, "recalibrate", "--config", stream["config"], "--input",
                          stream["input"], "--output", str(tmp_path), "--run-id", ".."],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    help_ = subprocess.run([costlib, "reproduce", "robles2020", "--help"],
                           capture_output=True, text=True)
    assert help_.returncode == 0 and "gen-0.5%" in help_.stdout


def test_a_reader_that_goes_away_keeps_the_commands_exit_code(tmp_path):
    """``costlib status --json | head -c 100``: exit 3 (held), no BrokenPipeError traceback."""
    output = tmp_path / "out"
    output.mkdir()  # nothing published: status exits 3
    costlib = Path(sys.executable).with_name("costlib")
    proc = subprocess.Popen([costlib, "status", "--output", str(output), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader has gone before the command prints anything
    err = proc.stderr.read()
    assert proc.wait() == 3, err
    assert "Traceback" not in err and "BrokenPipeError" not in err


class _ClosedPipe(io.StringIO):
    """A stdout whose reader has gone: every write and flush raises ``BrokenPipeError``."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize(("argv", "code"), [
    (["status", "--output", "{tmp}", "--json"], 3),
    (["demo", "--output", "{tmp}/demo", "--n-items", "1000", "--no-plots"], 0),
])
def test_the_console_script_finishes_the_command_when_stdout_breaks(argv, code, tmp_path,
                                                                    monkeypatch, capsys):
    """A print that meets a closed pipe mid-command: the command still finishes (the demo's
    decide step runs) and exits with its own code."""
    from costlib_pipelines.commands import cli

    class Exited(Exception):
        pass

    def exit_(status: int) -> None:
        raise Exited(status)

    monkeypatch.setattr(sys, "argv", ["costlib", *(a.format(tmp=tmp_path) for a in argv)])
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    monkeypatch.setattr(cli.os, "_exit", exit_)
    with pytest.raises(Exited) as exited:
        cli.console_main()
    assert exited.value.args == (code,)
    assert "Traceback" not in capsys.readouterr().err
    if argv[0] == "demo":
        assert (tmp_path / "demo" / "decide" / "LATEST").exists()


@pytest.mark.parametrize("argv", [["demo", "--n-items", "-5"], ["demo", "--bins", "0"],
                                  ["demo", "--target-marginal-precision", "1.5"],
                                  ["status", "--output", "x", "--max-age-hours", "-1"],
                                  ["recalibrate", "--config", "c", "--input", "i", "--output",
                                   "o", "--min-rated", "-3"]])
def test_out_of_range_arguments_are_exit_2(argv, capsys):
    assert main(argv) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_demo_never_overwrites_a_directory_it_did_not_create(tmp_path, capsys):
    (tmp_path / "config.yaml").write_text("mine")
    assert main(["demo", "--output", str(tmp_path), "--n-items", "1000", "--no-plots"]) == 2
    assert "not a costlib demo output" in capsys.readouterr().err
    assert (tmp_path / "config.yaml").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_override_without_who_and_why_is_exit_2(stream, tmp_path, capsys):
    assert recalibrate(stream, tmp_path / "o", "--override-guard") == 2
    assert "--override-by NAME and --override-reason" in capsys.readouterr().err
    assert main(["publish", "--output", str(tmp_path / "o"), "--run-id", "x", "--by", " ",
                 "--reason", "r"]) == 2


def test_log_level_and_progress(stream, tmp_path):
    root = logging.getLogger()
    level = root.level
    try:
        assert recalibrate(stream, tmp_path / "o", "--log-level", "info") == 0
        assert root.level == logging.INFO
    finally:
        root.setLevel(level)
    assert main(["status", "--output", str(tmp_path / "o"), "--log-level", "loud"]) == 2
    stream_ = io.StringIO()
    with Progress("costlib test", stream_, quiet_for=0.05, interval=0.05) as progress:
        progress("phase one")
        time.sleep(0.2)
        progress("phase two")
        time.sleep(0.1)
    lines = stream_.getvalue().splitlines()
    assert lines[0].startswith("costlib test: [") and lines[0].endswith("phase one")
    assert any(line.endswith("phase one (still running)") for line in lines)
    assert any(line.endswith("] phase two") for line in lines)
    assert lines[-1].endswith("finished")
    quiet = io.StringIO()
    with Progress("costlib test", quiet, quiet_for=5) as progress:
        progress("fast")
    assert quiet.getvalue() == ""


def test_manifest_holds_the_runs_duration(stream, tmp_path):
    assert recalibrate(stream, tmp_path / "o", "--run-id", "r") == 0
    manifest = json.loads((tmp_path / "o" / "runs" / "r" / "manifest.json").read_text())
    started = dt.datetime.fromisoformat(manifest["started_utc"])
    finished = dt.datetime.fromisoformat(manifest["finished_utc"])
    assert manifest["seconds"] == round((finished - started).total_seconds(), 3) > 0
    assert main(["report", "--run", str(tmp_path / "o")]) == 0
    html = (tmp_path / "o" / "runs" / "r" / "report.html").read_text()
    assert f"({manifest['seconds']} s on FnApiRunner)" in html  # it showed "? s"


# --------------------------------------------------------------------------- costlib status
def test_status_healthy_held_stale_and_broken(stream, tmp_path, capsys):
    output = tmp_path / "out"
    assert main(["status", "--output", str(output)]) == 2  # no such output
    output.mkdir()
    capsys.readouterr()
    assert main(["status", "--output", str(output)]) == 3  # nothing published
    first_line = capsys.readouterr().out.splitlines()[0]
    assert first_line == f"{output}: ATTENTION; nothing is published yet (no LATEST, no runs/)"
    # the parent of outputs (e.g. costlib demo's directory) points at them
    assert recalibrate(stream, output / "inner", "--run-id", "first") == 0
    capsys.readouterr()
    assert main(["status", "--output", str(output)]) == 3
    assert capsys.readouterr().out.splitlines()[0].endswith(
        f"nothing is published yet (no LATEST, no runs/); outputs one level down: "
        f"{output}/inner")
    shutil.rmtree(output / "inner")
    assert recalibrate(stream, output, "--run-id", "first") == 0
    capsys.readouterr()
    assert main(["status", "--output", str(output)]) == 0
    assert "ok; LATEST = first" in capsys.readouterr().out
    # stale: the same output checked a day and a half later
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=36)
    stale = check_status(str(output), now=later)
    assert not stale.healthy and "LATEST is stale" in stale.problems[0]
    # held: a newer run the guard kept back
    assert recalibrate(stream, output, "--run-id", "second", "--min-rated", "1e9",
                       "--objective", "f1") == 3  # moved thresholds on too few rated rows
    capsys.readouterr()
    assert main(["status", "--output", str(output), "--json"]) == 3
    status = json.loads(capsys.readouterr().out)
    assert status["healthy"] is False and status["latest"] == "first"
    assert [h["run_id"] for h in status["held_runs"]] == ["second"]
    # released by a person: healthy again
    assert main(["publish", "--output", str(output), "--run-id", "second", "--by", "ops",
                 "--reason", "reviewed"]) == 0
    assert main(["status", "--output", str(output)]) == 0
    # broken LATEST
    (output / "LATEST").write_text("gone\n")
    capsys.readouterr()
    assert main(["status", "--output", str(output)]) == 3
    printed = capsys.readouterr().out
    assert "names run gone, which is missing" in printed
    assert printed.splitlines()[0] == f"{output}: ATTENTION; LATEST = gone"  # no "finished ?"


def test_parse_command_line_refuses_without_running(tmp_path):
    with pytest.raises(UsageError):
        parse_command_line(["decide", "--config", "c", "--input", "i", "--operating-points",
                            "p", "--output", "o", "--runner=Nope"])
    with pytest.raises(SystemExit):
        parse_command_line(["decide", "--config", "c"])  # required flags missing


# --------------------------------------------------------------------------- costlib unlock
def test_unlock_removes_only_the_named_dead_runs_lock(tmp_path, capsys):
    output = tmp_path / "out"
    assert main(["unlock", "--output", str(output), "--run-id", "x"]) == 0  # not locked
    lock = acquire(str(output), run_id="alive", command="recalibrate")
    try:
        assert main(["unlock", "--output", str(output), "--run-id", "other"]) == 2
        assert "held by run 'alive'" in capsys.readouterr().err
        assert main(["unlock", "--output", str(output), "--run-id", "alive"]) == 2
        assert "still running" in capsys.readouterr().err  # this very process
        assert main(["unlock", "--output", str(output), "--run-id", "../x"]) == 2
        assert (output / LOCK_NAME).exists()
    finally:
        release(lock)
    # a lock written by a driver on a machine that is gone
    (output / LOCK_NAME).write_text(json.dumps({
        "run_id": "lost", "command": "recalibrate", "host": "gone-worker-7", "pid": 1,
        "started_utc": "2026-01-01T00:00:00+00:00", "token": "t"}))
    assert main(["unlock", "--output", str(output), "--run-id", "lost"]) == 0
    assert "removed the lock of run lost" in capsys.readouterr().out
    assert not (output / LOCK_NAME).exists()


def test_beam_flags_set_the_output_filesystems_credentials(stream, tmp_path):
    from apache_beam.io.filesystems import FileSystems
    from apache_beam.options.pipeline_options import GoogleCloudOptions

    output = tmp_path / "out"
    assert recalibrate(stream, output, "--run-id", "r") == 0
    try:
        assert main(["status", "--output", str(output),
                     "--impersonate_service_account=launcher@p.iam.gserviceaccount.com"]) == 0
        options = FileSystems._pipeline_options.view_as(GoogleCloudOptions)
        assert options.impersonate_service_account == "launcher@p.iam.gserviceaccount.com"
        assert main(["status", "--output", str(output), "--impersonate_servce_account=x"]) == 2
    finally:
        FileSystems.set_options(None)


def test_status_notes_what_latest_published_with(tmp_path, capsys):
    """Notes (exit code unchanged) on LATEST's run, from its manifest and the decision method's
    records: guard off, kept groups and the moves pending evidence, groups without a point,
    infeasible / coverage- / resolution-limited points; other methods' records are ignored."""
    import pyarrow.parquet as pq
    from test_pipeline_decide import op_record

    from costlib_pipelines.io.records import records_to_table

    run = tmp_path / "out" / "runs" / "r1"
    run.mkdir(parents=True)
    records = [op_record("a", "kept", [0.5, 0.5]), op_record("b", "kept", [0.4, 0.4]),
               op_record("c", "ok", [0.3, 0.3]), op_record("d", "insufficient_data", None),
               op_record("e", "ok", [0.6, 0.6]), op_record("__all__", "ok", [0.5, 0.5]),
               op_record("f", "kept", [0.5, 0.5], method="hull")]
    records[0]["proposed_thresholds"] = [0.2, float("inf")]
    records[2]["proposed_thresholds"] = [0.25, 0.3]  # moved part way
    records[4]["point_status"] = "resolution_limited"
    pq.write_table(records_to_table(records, "operating_point.json"),
                   run / "operating_points.parquet")
    finished = dt.datetime.now(dt.UTC).isoformat()
    (run / "manifest.json").write_text(json.dumps({
        "run_id": "r1", "published": True, "finished_utc": finished,
        "guard": {"off": True, "method": "graph", "notes": ["kept the thresholds in force: x"],
                  "violations": []}}))
    (tmp_path / "out" / "LATEST").write_text("r1\n")
    assert main(["status", "--output", str(tmp_path / "out")]) == 0  # notes do not alert
    printed = capsys.readouterr().out
    notes = [line[len("  note (LATEST r1): "):] for line in printed.splitlines()
             if line.startswith("  note")]
    assert all(line.startswith("  note (LATEST r1): ") for line in printed.splitlines()
               if line.startswith("  note"))
    assert notes[0].startswith("publish guard off")
    assert notes[1] == "kept the thresholds in force: x"
    assert notes[2] == ("graph: 2 of 5 group(s) kept their thresholds in force (a, b); 2 with a "
                        "move pending audit evidence (proposed_thresholds: a, c)")
    assert notes[3].startswith("graph: 1 group(s) without a point") and notes[3].endswith(": d")
    assert notes[4].startswith("graph: 1 group(s) resolution_limited") and notes[4].endswith(": e")
    assert len(notes) == 5
    assert main(["status", "--output", str(tmp_path / "out"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == notes
