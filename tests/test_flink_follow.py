"""The always-on worker on the local Flink cluster: ``costlib recalibrate --follow`` and
``costlib decide --follow`` as streaming jobs while files land, checked against batch runs.

A producer lands a day of scores at a time (renamed into place, one file written in place
half first), moves ``_WATERMARK`` to the day's end, and waits until the window it closes is
judged. Truth: the batch windowed ``costlib recalibrate`` over all the files (FnApiRunner) for
every window's records and verdict, and the batch ``costlib decide`` of each file with the same
points for its decisions. The fault test kills one of the cluster's two TaskManagers with
SIGKILL while files land and checks that nothing is lost or done twice.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from flink_support import cancel_job, decisions, jobs, run_cli, run_dirs, wait_for
from follow_support import (
    DAYS,
    Producer,
    batch_reference,
    final_records,
    follow_days,
    judged,
    live_manifest,
    start_follow,
    window_name,
    without,
)

pytestmark = pytest.mark.flink


@pytest.fixture(scope="module")
def days(tmp_path_factory):
    """Five day files (day 1 in two parts: ``day1b`` lands late) and the config."""
    return follow_days(tmp_path_factory.mktemp("follow-data"))


def start_follow_decide(cluster, config: str, land: Path, points: Path, output: Path) -> str:
    known = {j["jid"] for j in jobs(cluster)}
    done = run_cli("decide", "--follow", "--config", config, "--input", str(land / "*.parquet"),
                   "--operating-points", str(points), "--output", str(output),
                   "--poll-seconds", "1", *cluster.streaming_flags())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Unparseable argument" not in done.stderr, done.stderr[-3000:]
    jid = wait_for(lambda: next((j["jid"] for j in jobs(cluster) if j["jid"] not in known
                                 and j["state"] == "RUNNING"), None), "the decide job")
    assert f"Flink job {jid} (costlib-decide-follow-" in done.stdout, done.stdout
    return jid


def feed_days(producer: Producer, output: Path, *, during=None) -> None:
    """Day by day: the files, then the watermark, then wait for the window it closes
    (``during(day)`` runs after the files of a day land, before the wait)."""
    plan = [(["day0"], 1), (["day1a"], 2), (["day1b", "day2"], 3), (["day3"], 4), (["day4"], 5)]
    for files, day in plan:
        for name in files:
            producer.land_file(name, in_place=name == "day2")
        if during is not None:
            during(day)
        producer.watermark(day)
        # the first window also waits for the job's workers to start (slow on a busy machine)
        wait_for(lambda d=day: judged(output, window_name(d - 2)), f"window {day - 2}",
                 timeout=420 if day == 1 else 180)
        if "day1b" in files:  # late for the window of days 0-1: judged again
            wait_for(lambda: judged(output, window_name(0), pane=1), "the late pane")


def test_follow_judges_each_window_as_it_closes_and_decides_each_file(flink_cluster, days,
                                                                       tmp_path):
    source, config = days
    reference = batch_reference(config, source, tmp_path)
    land, output = tmp_path / "land", tmp_path / "follow"
    producer = Producer(source, land)
    jid = start_follow(flink_cluster, config, land, output)
    try:
        feed_days(producer, output)
        manifest = live_manifest(output)
        assert manifest["status"] == "following" and manifest["published"] is True
        # a file that is not Parquet inside (magic at both ends): dead-lettered, the job runs on
        (land / "broken.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
        wait_for(lambda: live_manifest(output)["follow"]["stream"]["files_dead_lettered"],
                 "the broken file")
        status = run_cli("status", "--output", str(output))  # 3: windows held, event times old
        assert status.returncode in (0, 3), status.stderr
        assert "dead-lettered file" in status.stdout and "broken.parquet" in status.stdout
        assert "6 file(s) read" in status.stdout, status.stdout
        assert {j["jid"]: j["state"] for j in jobs(flink_cluster)}[jid] == "RUNNING"
        # a person releases a held window while the job runs (the lock is shared)
        held = [e["window"] for e in live_manifest(output)["guard"]["windows"]
                if e["state"] == "held"]
        if held:
            done = run_cli("publish", "--output", str(output), "--run-id",
                           (output / "LATEST").read_text().strip(), "--window", held[0],
                           "--by", "tester", "--reason", "reviewed")
            assert done.returncode == 0, done.stderr
        # decisions follow the files: each equals batch decide of that file, same points
        decide_land, decided = tmp_path / "scores", tmp_path / "decided"
        scores = Producer(source, decide_land)
        decide_jid = start_follow_decide(flink_cluster, config, decide_land, output, decided)
        for name in ("day3", "day4"):
            scores.land_file(name)
        outputs = wait_for(lambda: [p for p in sorted((decided / "files").iterdir())
                                    if (p / "LATEST").exists()]
                           if len(list((decided / "files").iterdir())) == 2 else None,
                           "two decision outputs", timeout=240)
        cancel_job(flink_cluster, decide_jid)
    finally:
        cancel_job(flink_cluster, jid)
    final = live_manifest(output)
    want = json.loads((reference / "manifest.json").read_text())
    names = [window_name(d) for d in range(-1, DAYS - 1)]
    assert [e["window"] for e in final["guard"]["windows"]] == names
    for name in names:  # the last pane of every window: the batch run's records
        assert final_records(run_dirs(output)[-1], name) == final_records(reference, name), name
    batch_entries = {e["window"]: e for e in want["guard"]["windows"]}
    for entry in final["guard"]["windows"]:
        keys = ("pane_index", "judged_utc", "earlier_panes", "decision", "history", "state",
                "uncovered_share")
        assert without(entry, *keys) == without(batch_entries[entry["window"]], *keys)
        if not entry.get("decision"):  # the released window changed state by hand
            assert entry["state"] == batch_entries[entry["window"]]["state"], entry["window"]
    rows = {k: v for k, v in final["row_accounting"].items()
            if not k.startswith(("files_", "too_late"))}
    assert rows == want["row_accounting"]
    assert final["row_accounting"]["files_read"] == 6
    assert final["row_accounting"]["files_dead_lettered"] == 1
    for out in outputs:
        run_dir = run_dirs(out)[-1]
        source_file = json.loads((run_dir / "manifest.json").read_text())["inputs"][0]["path"]
        done = run_cli("decide", "--config", config, "--input", source_file,
                       "--operating-points", str(output), "--output", str(tmp_path / "one"),
                       "--run-id", run_dir.name)
        assert done.returncode == 0, done.stderr[-2000:]
        pd.testing.assert_frame_equal(decisions(run_dir),
                                      decisions(run_dirs(tmp_path / "one")[-1]))
        shutil.rmtree(tmp_path / "one")


def test_taskmanager_killed_while_files_land(flink_cluster, days, tmp_path):
    """SIGKILL of one TaskManager while rated files and score files land: both jobs resume
    from their checkpoints; every window is judged once a pane and ends as the batch run,
    every row is counted once, every score file has one decision output, complete."""
    source, config = days
    reference = batch_reference(config, source, tmp_path)
    land, output = tmp_path / "land", tmp_path / "follow"
    producer = Producer(source, land)
    jid = start_follow(flink_cluster, config, land, output)
    scores, decided = Producer(source, tmp_path / "scores"), tmp_path / "decided"
    decide_jid = start_follow_decide(flink_cluster, config, scores.land, output, decided)

    def kill_on_day(day: int) -> None:
        # score files land once a window is applied (before that, decide dead-letters them:
        # no complete window to decide with)
        if day == 3:  # day 2's files landed, not their watermark; score files just landed
            scores.land_file("day0")
            scores.land_file("day1a")
            flink_cluster.kill("taskmanager", index=1)  # one of the two
            time.sleep(2)
            flink_cluster.start_taskmanager(1)
            scores.land_file("day1b")

    try:
        feed_days(producer, output, during=kill_on_day)
        outputs = wait_for(lambda: [p for p in sorted((decided / "files").iterdir())
                                    if (p / "LATEST").exists()]
                           if len(list((decided / "files").iterdir())) == 3 else None,
                           "three decision outputs", timeout=300)
        states = {j["jid"]: j["state"] for j in jobs(flink_cluster)}
    finally:
        cancel_job(flink_cluster, decide_jid)
        cancel_job(flink_cluster, jid)
    assert states[jid] == states[decide_jid] == "RUNNING"
    final = live_manifest(output)
    names = [window_name(d) for d in range(-1, DAYS - 1)]
    assert [e["window"] for e in final["guard"]["windows"]] == names  # each window once
    for name in names:
        assert final_records(run_dirs(output)[-1], name) == final_records(reference, name), name
    want = json.loads((reference / "manifest.json").read_text())
    rows = {k: v for k, v in final["row_accounting"].items()
            if not k.startswith(("files_", "too_late"))}
    assert rows == want["row_accounting"]  # every row once, none lost or counted twice
    assert final["row_accounting"]["files_read"] == 6
    for out in outputs:  # one run per file, complete, every row of its file decided once
        (run_dir,) = run_dirs(out)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        rows_in = pq.ParquetFile(manifest["inputs"][0]["path"]).metadata.num_rows
        assert manifest["row_accounting"]["decided"] == rows_in == len(decisions(run_dir))
