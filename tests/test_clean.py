"""``costlib clean``: incomplete runs older than an age go; nothing else ever does.

Every case is a real output directory on disk: complete runs (published or held), incomplete
runs of every age, a run directory costlib did not create, one behind a symbolic link, the run
``LATEST`` names, the run holding the lock; and the user-typed ``--output`` checked before any
filesystem call.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from pipeline_data import SMALL_CONFIG, sample_frame, write_files

from costlib_pipelines.commands.cli import main

HOUR = 3600.0


def make_run(output: Path, run_id: str, *, age: float, marker: bool = True,
             manifest: bool = False) -> Path:
    run = output / "runs" / run_id
    (run / "points").mkdir(parents=True)
    if marker:
        (run / ".costlib-run").write_text(json.dumps({"run_id": run_id}))
    (run / "points" / "part-0.parquet").write_bytes(b"x" * 10)
    if manifest:
        (run / "manifest.json").write_text(json.dumps({"run_id": run_id, "status": "complete"}))
    stamp = time.time() - age
    for path in [run, *run.rglob("*")]:
        os.utime(path, (stamp, stamp), follow_symlinks=False)
    return run


@pytest.fixture
def output(tmp_path):
    out = tmp_path / "out"
    make_run(out, "old-dead", age=30 * HOUR)
    make_run(out, "young-dead", age=0.5 * HOUR)
    make_run(out, "complete-old", age=90 * HOUR, manifest=True)
    make_run(out, "held-old", age=90 * HOUR, manifest=True)
    make_run(out, "not-ours", age=90 * HOUR, marker=False,
             manifest=False).joinpath("manifest.json").write_text("not json")
    make_run(out, "latest-broken", age=90 * HOUR)
    (out / "LATEST").write_text("latest-broken\n")
    outside = tmp_path / "elsewhere"
    make_run(outside, "victim", age=90 * HOUR)
    (out / "runs" / "linked").symlink_to(outside / "runs" / "victim")
    return out


def existing(out: Path) -> set[str]:
    return {p.name for p in (out / "runs").iterdir()}


def test_dry_run_lists_and_removes_nothing(output, capsys):
    before = existing(output)
    assert main(["clean", "--output", str(output), "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert existing(output) == before
    assert f"would remove {output}/runs/old-dead (incomplete, last written 1 d 6 h ago)" in text
    assert "1 incomplete run(s) would be removed (dry run)" in text


def test_clean_removes_only_old_incomplete_runs_costlib_made(output, tmp_path, capsys):
    assert main(["clean", "--output", str(output)]) == 0
    text = capsys.readouterr().out
    assert existing(output) == {"young-dead", "complete-old", "held-old", "not-ours",
                                "latest-broken", "linked"}
    assert (tmp_path / "elsewhere" / "runs" / "victim" / ".costlib-run").exists()
    assert "latest-broken: LATEST names it" in text  # (a link is not even listed)
    assert "last written 30 min ago, less than 1 d" in text
    assert "no .costlib-run marker" in text
    assert not (output / ".costlib-lock").exists()  # clean's own lock is released
    # a shorter age takes the young one too; complete runs stay whatever their age
    assert main(["clean", "--output", str(output), "--older-than", "10m"]) == 0
    assert existing(output) == {"complete-old", "held-old", "not-ours", "latest-broken",
                                "linked"}


def test_the_run_holding_the_lock_is_kept(output, capsys):
    lock = {"run_id": "old-dead", "command": "recalibrate", "host": socket.gethostname(),
            "pid": os.getpid(), "started_utc": "2026-01-01T00:00:00+00:00", "token": "t"}
    (output / ".costlib-lock").write_text(json.dumps(lock))
    assert main(["clean", "--output", str(output), "--older-than", "1s"]) == 0
    text = capsys.readouterr().out
    assert "old-dead: it holds the output lock" in text
    assert "old-dead" in existing(output) and "young-dead" not in existing(output)
    assert json.loads((output / ".costlib-lock").read_text())["run_id"] == "old-dead"


@pytest.mark.parametrize(("given", "error"), [
    ("{out}/*", "contains a glob character"),
    ("{out}/../out[12]", "contains a glob character"),
    ("{out}\n", "control character"),
    ("", "not a path"),
    ("{out}/missing", "no such output directory"),
    ("{out}/LATEST", "not a directory"),
    ("{out}/runs", "not a costlib output directory (no runs/)"),
])
def test_hostile_or_wrong_output_is_refused_before_anything_is_removed(output, capsys, given,
                                                                       error):
    before = existing(output)
    assert main(["clean", "--output", given.format(out=output)]) == 2
    err = capsys.readouterr().err
    assert error in err and len(err.strip().splitlines()) == 1
    assert existing(output) == before


@pytest.mark.parametrize("age", ["1", "h", "1 week", "-1h", "1h30"])
def test_a_bad_age_is_one_line(output, capsys, age):
    assert main(["clean", "--output", str(output), f"--older-than={age}"]) == 2
    err = capsys.readouterr().err
    assert "is not an age: write a number and a unit" in err and err.count("\n") == 1


def test_status_points_to_clean(output, capsys):
    main(["status", "--output", str(output)])
    text = capsys.readouterr().out
    assert "incomplete run (failed or still running): old-dead" in text
    assert f"costlib clean --output {output}" in text


@pytest.mark.parametrize("command", ["recalibrate", "decide"])
def test_a_failed_run_leaves_no_output_directory_it_created(tmp_path, capsys, command):
    """A misspelt column: exit 2, and the output directory (and its parents) the run created
    are gone; an output that existed before stays."""
    config = tmp_path / "config.yaml"
    raw = {**SMALL_CONFIG, "columns": {"weight": "weight", "group": "grup"}}
    config.write_text(yaml.safe_dump(raw))
    stream = write_files(sample_frame(2_000, seed=1), tmp_path / "in", n_files=1)
    points = tmp_path / "points"
    if command == "decide":
        good = tmp_path / "good.yaml"
        good.write_text(yaml.safe_dump(SMALL_CONFIG))
        assert main(["recalibrate", "--config", str(good), "--input", stream, "--output",
                     str(points)]) == 0
    extra = ["--operating-points", str(points)] if command == "decide" else []
    new = tmp_path / "new" / "deeper" / "out"
    assert main([command, "--config", str(config), "--input", stream, "--output", str(new),
                 *extra]) == 2
    assert "grup" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()
    there = tmp_path / "there"
    there.mkdir()
    assert main([command, "--config", str(config), "--input", stream, "--output", str(there),
                 *extra]) == 2
    assert there.is_dir() and not list(there.iterdir())


def test_clean_from_the_console_script(output):
    done = subprocess.run([str(Path(sys.executable).parent / "costlib"), "clean", "--output",
                           str(output), "--dry-run"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "would remove" in done.stdout
