"""Upgrading the always-on worker in place on the local Flink cluster:
``costlib recalibrate --follow --upgrade`` stops the running job with a savepoint and starts the
new job of the same run from it.

The new version. A test cannot install another costlib between two commands, so the new
version is this costlib with a change made the way a release makes one, in the process that
submits the job (``NEW_VERSION`` below, which then runs the command line as ``costlib`` does):

- the graph gains a stateless step between the poll and the reader (``Seen``: it notes each
  landed file it passes on, in a folder of the test): new code on the workers, a new operator
  in Flink's job graph, and a record of every file the new job emits, which must be exactly
  the files landed after the upgrade (a file emitted again would be a file read twice);
- ``--poll-seconds`` and ``--settle-seconds`` change: the parameters of Flink's impulse source
  and of the stateful poller change, their state does not.

The guard settings stay as they are, so that every window's verdict can be compared with one
batch run. A change of the state's shape is not made here: Flink refuses it, and the command
refuses it before stopping anything (the second case below: a renamed step feeding the judge).

Truth: the batch windowed ``costlib recalibrate`` over all the files (FnApiRunner): each
window's last pane, its verdict and the row accounting must equal it. The files landed before
the upgrade are overwritten with a broken file once the old job is stopped: read again, they
would be dead-lettered; their rows must still count, from the restored state. A window judged
before the upgrade is judged again after it with a late file (its panes carried over), and a
window open at the upgrade keeps its partial sums.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from flink_support import ROOT, cancel_job, jobs, run_dirs, wait_for
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

#: ``costlib`` of a new version, in one process: argv is the version ("seen": a stateless step
#: added before the reader; "renamed": the reader renamed, so the judge's input is another),
#: the folder ``Seen`` notes files in, then the command line.
NEW_VERSION = '''
import os, sys
import apache_beam as beam
import costlib_pipelines.follow.recalibrate_stream as stream
from costlib_pipelines.commands.cli import main
from costlib_pipelines.follow.landing import LandedFile

version, notes, argv = sys.argv[1], sys.argv[2], sys.argv[3:]


def seen(element):
    if isinstance(element, LandedFile):
        with open(os.path.join(notes, "seen.txt"), "a") as fh:
            fh.write(element.path + "\\n")
    return element


def build_follow(pipeline, pattern, config, run_dir, run_id, columns, edges, in_force,
                 settings, *, poll_seconds, settle_seconds, landed=None):
    landed = pipeline | "Follow" >> stream.FollowLanding(pattern, poll_seconds, settle_seconds)
    if version == "seen":
        landed = landed | "Seen" >> beam.Map(seen)
    read = "Read" if version == "seen" else "ReadFiles"
    return (landed
            | read >> beam.ParDo(stream.ReadLandedFn(config, columns, edges, run_dir))
            | "Judge" >> beam.ParDo(stream.JudgeWindowsFn(config, run_dir, run_id, edges,
                                                          in_force, settings)))


stream.build_follow = build_follow
sys.exit(main(argv))
'''


@pytest.fixture(scope="module")
def days(tmp_path_factory):
    return follow_days(tmp_path_factory.mktemp("upgrade-data"))


def new_version(version: str, notes: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NEW_VERSION, version, str(notes), *args],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)


def restored_from(cluster, jid: str) -> str | None:
    url = f"http://localhost:{cluster.ports.rest}/jobs/{jid}/checkpoints"
    with urllib.request.urlopen(url, timeout=15) as response:
        return ((json.load(response).get("latest") or {}).get("restored") or {}).get(
            "external_path")


def test_an_upgrade_mid_stream_carries_the_state_over(flink_cluster, days, tmp_path):
    source, config = days
    truth: dict[str, Path] = {}  # the batch run, made while the stream runs
    batch = threading.Thread(target=lambda: truth.setdefault(
        "run", batch_reference(config, source, tmp_path)))
    batch.start()
    land, output, notes = tmp_path / "land", tmp_path / "follow", tmp_path / "notes"
    notes.mkdir()
    producer = Producer(source, land)
    jid = start_follow(flink_cluster, config, land, output)
    new_jid = None
    try:
        # before: window -1 judged; window 0 judged with day 0 and half of day 1 (day1b will
        # be late for it); window 1 open, holding day1a's rows
        producer.land_file("day0")
        producer.land_file("day1a")
        producer.watermark(2)
        # the first windows also wait for the job's workers to start (slow on a busy machine)
        wait_for(lambda: judged(output, window_name(0)), "windows -1 and 0", timeout=420)
        command = ["recalibrate", "--follow", "--upgrade", "--config", config, "--input",
                   str(land / "*.parquet"), "--output", str(output), "--poll-seconds", "2",
                   "--settle-seconds", "30", *flink_cluster.streaming_flags()]

        # a new version whose judge reads another step's output: refused, nothing stopped
        refused = new_version("renamed", notes, *command)
        assert refused.returncode == 2, refused.stderr[-3000:]
        assert "stateful steps differ" in refused.stderr and "Judge" in refused.stderr
        assert "nothing was stopped" in refused.stderr
        assert {j["jid"]: j["state"] for j in jobs(flink_cluster)}[jid] == "RUNNING"

        done = new_version("seen", notes, *command)
        assert done.returncode == 0, done.stderr[-3000:]
        follow = live_manifest(output)["follow"]
        new_jid = follow["job"]["flink_job_id"]
        (upgrade,) = follow["upgrades"]
        assert upgrade["from_job"] == jid and upgrade["to_job"] == new_jid != jid
        assert "upgrade_pending" not in follow
        assert follow["poll_seconds"] == 2.0 and follow["settle_seconds"] == 30.0
        savepoint = upgrade["savepoint"]
        assert savepoint.startswith(f"file:{run_dirs(output)[-1]}/savepoints/savepoint-")
        assert done.stdout.splitlines()[0] == (
            f"run {run_dirs(output)[-1].name} upgraded: Flink job {jid} stopped with savepoint "
            f"{savepoint}; job {new_jid} restored it and runs (2 file(s) read and watermark "
            "2026-11-03T00:00:00+00:00 carried over, none read again)")
        states = {j["jid"]: j["state"] for j in jobs(flink_cluster)}
        assert states[jid] == "FINISHED" and states[new_jid] == "RUNNING"
        assert restored_from(flink_cluster, new_jid) == savepoint

        # read again, a file landed before would be dead-lettered (and its rows missing)
        for name in ("day0", "day1a"):
            (land / f"{name}.parquet").write_bytes(b"PAR1" + b"\x00" * 64 + b"PAR1")
        producer.land_file("day1b")  # late for window 0: its second pane
        producer.land_file("day2", in_place=True)
        producer.watermark(3)
        wait_for(lambda: judged(output, window_name(0), pane=1), "the late pane of window 0")
        wait_for(lambda: judged(output, window_name(1)), "window 1")
        producer.land_file("day3")
        producer.land_file("day4")
        producer.watermark(5)
        wait_for(lambda: judged(output, window_name(3)), "windows 2 and 3")
        assert {j["jid"]: j["state"] for j in jobs(flink_cluster)}[new_jid] == "RUNNING"
    finally:
        for job in {jid, new_jid} - {None}:
            if {j["jid"]: j["state"] for j in jobs(flink_cluster)}.get(job) == "RUNNING":
                cancel_job(flink_cluster, job)
        batch.join()
    reference = truth["run"]
    final = live_manifest(output)
    run_dir = run_dirs(output)[-1]
    names = [window_name(d) for d in range(-1, DAYS - 1)]
    assert [e["window"] for e in final["guard"]["windows"]] == names
    for name in names:  # the last pane of every window: the batch run's records
        assert final_records(run_dir, name) == final_records(reference, name), name
    want = json.loads((reference / "manifest.json").read_text())
    batch_entries = {e["window"]: e for e in want["guard"]["windows"]}
    for entry in final["guard"]["windows"]:
        keys = ("pane_index", "judged_utc", "earlier_panes", "uncovered_share")
        assert without(entry, *keys) == without(batch_entries[entry["window"]], *keys)
    rows = {k: v for k, v in final["row_accounting"].items()
            if not k.startswith(("files_", "too_late"))}
    assert rows == want["row_accounting"]  # every row once: none lost, none read twice
    assert final["row_accounting"]["files_read"] == 6
    assert final["follow"]["stream"]["files_dead_lettered"] == {}
    # the new job emitted the files landed after the upgrade, each once, and no other
    emitted = (notes / "seen.txt").read_text().split()
    assert sorted(emitted) == sorted(str(land / f"{n}.parquet")
                                     for n in ("day1b", "day2", "day3", "day4"))

