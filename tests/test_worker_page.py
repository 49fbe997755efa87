"""docs/worker.md word for word: its blocks, in order, on a stream of nine days.

The page's ``/data`` is a temporary folder, its ``.venv/bin/`` this interpreter's folder, and
its cluster flags those of the test cluster (``--port-base``). The yaml block is the
``windowing`` section of a config written here (the page asks for "a config with a windowing
section"); the Python block (the writer's contract) lands each day under its own date.

The first run (two days of history, with the stream's own windowing: every window partial,
none applied) runs without an engine. The rest needs Flink streaming (``-m flink``): both
``--follow`` commands, the producer, ``costlib status`` (stale by the clock: the event times are
weeks old) and ``costlib status --replay`` (judged against the watermark: not stale).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from flink_support import cancel_job, engine_config, jobs, wait_for
from pipeline_data import write_day_files

from costlib_pipelines.recalibrate.carried_edges import SKETCH_FILE
from costlib_pipelines.recalibrate.publish import read_baseline

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "worker.md"
BIN = Path(sys.executable).parent
START = pd.Timestamp("2026-11-01", tz="UTC")
DAYS = 9


def page_blocks() -> dict[str, str]:
    """The page's runnable blocks by role, in the page's order."""
    found = re.findall(r"```(\w+)\n(.*?)```", PAGE.read_text(), re.S)
    langs = [lang for lang, _ in found]
    assert langs == ["yaml", "bash", "bash", "text", "python", "text", "bash", "text", "text",
                     "bash", "bash", "text"], langs
    names = ["windowing", "first_run", "follow", "printed", "producer", "soak", "status",
             "status_printed", "status_lost", "replay", "upgrade", "upgraded"]
    return dict(zip(names, [body for _, body in found], strict=True))


def on_this_machine(text: str, data: Path, port_base: int | None = None) -> str:
    text = text.replace("/data", str(data)).replace(".venv/bin/", f"{BIN}/")
    if port_base is not None:
        text = text.replace("tools/flink_cluster.py flags --streaming",
                            f"{ROOT}/tools/flink_cluster.py flags --streaming "
                            f"--port-base {port_base}")
    return text


def bash(script: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def page_setup(tmp_path):
    """The days (``days/day<N>.parquet``), two days of history under ``/data/history``, and
    ``config.yaml`` with the page's windowing."""
    blocks = page_blocks()
    days = tmp_path / "days"
    write_day_files(days, rows=27_000, seed=5, days=DAYS)
    data = tmp_path / "data"
    (data / "history").mkdir(parents=True)
    for day in (0, 1):
        os.link(days / f"day{day}.parquet", data / "history" / f"day{day}.parquet")
    windowing = yaml.safe_load(blocks["windowing"])
    assert set(windowing) == {"windowing"}
    engine_config(tmp_path / "config.yaml", methods=["graph"], **windowing,
                  publish={"max_threshold_change": None, "min_rated": 0},
                  audit={"enabled": True, "budget_share": 0.05, "salt": "worker-page"})
    return blocks, days, data


def run_first_step(blocks, data: Path, cwd: Path) -> dict:
    done = bash(on_this_machine(blocks["first_run"], data), cwd)
    assert done.returncode == 0, done.stderr[-3000:]
    latest = (data / "points" / "LATEST").read_text().strip()
    return json.loads((data / "points" / "runs" / latest / "manifest.json").read_text())


def test_the_pages_first_run_leaves_an_output_the_stream_starts_from(page_setup, tmp_path):
    blocks, _, data = page_setup
    manifest = run_first_step(blocks, data, tmp_path)
    # the trap: two days under seven-day windows, every window partial, none applied
    states = manifest["guard"]["window_states"]
    assert states["applied"] == 0 and states["not_eligible"] == manifest["windows"] > 0
    baseline = read_baseline(str(data / "points"))
    assert baseline.problem is None and baseline.records == []  # nothing in force, readable
    # the auto edges the stream needs are carried from this run's sketch
    assert (data / "points" / "runs" / manifest["run_id"] / SKETCH_FILE).exists()


@pytest.mark.flink
def test_the_page_word_for_word_on_flink(flink_cluster, page_setup, tmp_path):
    blocks, days, data = page_setup
    run_first_step(blocks, data, tmp_path)
    known = {j["jid"] for j in jobs(flink_cluster)}
    started = bash(on_this_machine(blocks["follow"], data, flink_cluster.ports.rest), tmp_path)
    assert started.returncode == 0, started.stderr[-3000:]
    assert "Unparseable argument" not in started.stderr, started.stderr[-3000:]
    printed = re.findall(r"^Flink job ([0-9a-f]{32}) \((costlib-[a-z0-9-]+)\)", started.stdout,
                         re.M)
    assert [name.split("-")[1] for _, name in printed] == ["recalibrate", "decide"], \
        started.stdout
    ids = [jid for jid, _ in printed]
    try:
        assert set(ids) <= {j["jid"] for j in jobs(flink_cluster)} - known
        output = data / "points"

        def live():
            run = (output / "LATEST").read_text().strip()
            return json.loads((output / "runs" / run / "manifest.json").read_text())
        assert live()["follow"]["job"]["flink_job_id"] == ids[0]
        for day in range(2, DAYS):  # the writer's contract, a day at a time
            date = (START + pd.Timedelta(days=day)).strftime("%Y-%m-%d")
            mark = (START + pd.Timedelta(days=day + 1)).isoformat()
            code = (on_this_machine(blocks["producer"], data)
                    .replace("2026-11-27", date).replace("2026-11-28T00:00:00+00:00", mark))
            exec(code, {"table": pq.read_table(days / f"day{day}.parquet")})
        last_end = f"{START + pd.Timedelta(days=DAYS):%Y%m%dT%H%M%S}"
        wait_for(lambda: any(e["window"].endswith(last_end)
                             for e in live()["guard"]["windows"]),
                 "the window ending with the last watermark", timeout=600)
        # a score file lands: decided into its own output
        hidden = data / "scores" / "_day8.parquet"
        hidden.write_bytes((days / "day8.parquet").read_bytes())
        os.rename(hidden, data / "scores" / "day8.parquet")
        wait_for(lambda: list((data / "decisions" / "files").glob("day8-*/LATEST")),
                 "the decisions of the landed score file", timeout=300)
        by_clock = bash(on_this_machine(blocks["status"], data), tmp_path)
        assert by_clock.returncode == 3, by_clock.stdout + by_clock.stderr
        assert "windows are stale" in by_clock.stdout and "h ago" in by_clock.stdout
        # the job's line, as the page shows it
        job_line = (r"^  job: recalibrate follow job ([0-9a-f]{32}): RUNNING, \d+ restarts so "
                    r"far, last checkpoint \d+ s ago$")
        assert re.search(job_line, blocks["status_printed"], re.M)
        # on a busy machine the job may have restarted (the line then says when and why) or
        # its checkpoint be a minute old: the live line has the page's shape around that
        live_line = (r"^  job: recalibrate follow job ([0-9a-f]{32}): RUNNING.*, (\d+ restarts?|"
                     r"restarts not reported) so far.*, last checkpoint \d+ (s|min) ago$")
        found = re.search(live_line, by_clock.stdout, re.M)
        assert found and found.group(1) == ids[0], by_clock.stdout
        replayed = bash(on_this_machine(blocks["replay"], data), tmp_path)
        assert "windows are stale" not in replayed.stdout, replayed.stdout
        assert "has not moved" not in replayed.stdout, replayed.stdout
        held = [e for e in live()["guard"]["windows"] if e["state"] == "held"]
        assert replayed.returncode == (3 if held else 0), replayed.stdout + replayed.stderr
        assert "in event time (replay)" in replayed.stdout
        # a new version takes over the recalibration, and the stream goes on from its state
        upgraded = bash(on_this_machine(blocks["upgrade"], data, flink_cluster.ports.rest),
                        tmp_path)
        assert upgraded.returncode == 0, upgraded.stderr[-3000:]
        said = upgraded.stdout.splitlines()[0]
        for words in (" upgraded: Flink job ", " stopped with savepoint file:",
                      " restored it and runs (7 file(s) read", " carried over, none read again)"):
            assert words in said and words.split(" (7")[0] in blocks["upgraded"], words
        new_job = live()["follow"]["job"]["flink_job_id"]
        assert new_job != ids[0] and {j["jid"]: j["state"] for j in jobs(flink_cluster)}[
            new_job] == "RUNNING"
        code = (on_this_machine(blocks["producer"], data).replace("2026-11-27", "2026-11-10")
                .replace("2026-11-28T00:00:00+00:00",
                         (START + pd.Timedelta(days=DAYS + 1)).isoformat()))
        exec(code, {"table": pq.read_table(days / "day8.parquet")})
        after_end = f"{START + pd.Timedelta(days=DAYS + 1):%Y%m%dT%H%M%S}"
        wait_for(lambda: any(e["window"].endswith(after_end)
                             for e in live()["guard"]["windows"]),
                 "the first window the new job judges", timeout=300)
        stream = live()["follow"]["stream"]
        assert stream["files_read"] == 8 and stream["files_dead_lettered"] == {}  # one more
    finally:
        for job in jobs(flink_cluster):
            if job["jid"] not in known and job["state"] not in ("FINISHED", "FAILED",
                                                                "CANCELED"):
                cancel_job(flink_cluster, job["jid"])
