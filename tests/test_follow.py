"""Following a landing directory, without an engine: the writer's contract, the window book,
and the streaming graph fed on the FnApiRunner (the Flink runs are in test_flink_follow.py).

Truth: Beam's own ``SlidingWindows`` for which windows hold a bucket; the batch windowed
``costlib recalibrate`` over the same files for every window's records and verdict; the batch
``costlib decide`` of a file for its decisions.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections import Counter
from pathlib import Path

import apache_beam as beam
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.transforms.window import SlidingWindows, WindowFn
from apache_beam.utils.timestamp import Timestamp
from flink_support import COSTLIB, decisions, engine_config, records, run_dirs
from follow_support import Adding
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_data import write_day_files

from costlib_pipelines.config import load_config
from costlib_pipelines.follow.decide_stream import decide_landed, decided_name
from costlib_pipelines.follow.landing import (
    LandedFile,
    WatermarkMark,
    list_landed,
    parse_watermark,
    read_watermark,
)
from costlib_pipelines.follow.recalibrate_stream import start_follow
from costlib_pipelines.follow.window_book import FilePartials, WindowBook
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.recalibrate.publish import PublishRefused

DAY_US = 86_400_000_000
START = pd.Timestamp("2026-11-01", tz="UTC")


# ----------------------------------------------------------------------------- the contract
def test_only_complete_files_under_their_final_name_count(tmp_path):
    table = pa.table({"x": [1, 2, 3]})
    pq.write_table(table, tmp_path / "a.parquet")
    pq.write_table(table, tmp_path / "_staging.parquet")
    pq.write_table(table, tmp_path / ".hidden.parquet")
    pq.write_table(table, tmp_path / "b.parquet.tmp")
    data = (tmp_path / "a.parquet").read_bytes()
    (tmp_path / "half.parquet").write_bytes(data[: len(data) // 2])
    now = time.time()
    assert [f.path for f in list_landed(str(tmp_path / "*.parquet"), settle_seconds=60,
                                        now=now)] == [str(tmp_path / "a.parquet")]
    later = list_landed(str(tmp_path / "*.parquet"), settle_seconds=60, now=now + 61)
    assert [(os.path.basename(f.path), f.complete) for f in later] == [
        ("a.parquet", True), ("half.parquet", False)]
    (tmp_path / "half.parquet").write_bytes(data)  # the writer finished: complete now
    assert all(f.complete for f in list_landed(str(tmp_path / "*.parquet"),
                                               settle_seconds=60, now=now))


def test_the_watermark_file(tmp_path):
    assert read_watermark(str(tmp_path)) is None
    (tmp_path / "_WATERMARK").write_text("2026-11-02")
    assert read_watermark(str(tmp_path)) == parse_watermark("2026-11-02T00:00:00+00:00")
    assert read_watermark(str(tmp_path)) == (START.value // 1000) + DAY_US
    (tmp_path / "_WATERMARK").write_text("2026-11-0")  # half written: read again next poll
    assert read_watermark(str(tmp_path)) is None


# ----------------------------------------------------------------------------- the window book
@given(st.integers(-40, 40), st.sampled_from([(2, 1), (3, 1), (7, 1), (4, 2), (1, 1)]))
def test_the_windows_of_a_bucket_are_beams_sliding_windows(day, geometry):
    size, period = geometry
    book = WindowBook(size * DAY_US, period * DAY_US, 0)
    bucket = day * period * DAY_US
    beam_windows = SlidingWindows(size * 86_400, period * 86_400).assign(
        WindowFn.AssignContext(Timestamp(micros=bucket)))
    assert sorted(book.windows_of(bucket)) == sorted(int(w.start.micros) for w in beam_windows)


def partials(path: str, day: int, rows: int = 1) -> FilePartials:
    return FilePartials(path, grids=[(day * DAY_US, "g", (None, None, rows))],
                        accounting=Counter(read=rows, used=rows))


def test_a_watermark_waits_for_every_file_listed_with_it():
    book, adding = WindowBook(2 * DAY_US, DAY_US, DAY_US), Adding()
    book.add_mark(3 * DAY_US, ("a", "b"))
    assert book.advance() == []
    book.add_file(partials("a", 0), adding, adding)
    assert book.advance() == [] and book.watermark_us is None
    book.add_file(partials("b", 1), adding, adding)
    assert book.advance() == [-DAY_US, 0, DAY_US]  # windows ending 1, 2 and 3 days in
    assert book.add_file(partials("b", 1), adding, adding) == []  # a file counts once
    assert book.window_sums(0, adding, adding) == {"g": (2, None)}


def test_late_files_judge_their_windows_again_until_the_allowed_lateness():
    book, adding = WindowBook(2 * DAY_US, DAY_US, DAY_US), Adding()
    book.add_file(partials("a", 0), adding, adding)
    book.add_mark(2 * DAY_US, ("a",))
    for start in book.advance():
        book.next_pane(start)
    assert book.add_file(partials("late", 1, rows=5), adding, adding) == [0]  # a late pane
    assert book.window_sums(0, adding, adding) == {"g": (6, None)}
    book.add_mark(4 * DAY_US, ())
    book.advance()
    book.expire()
    assert book.add_file(partials("too-late", 0, rows=7), adding, adding) == []
    assert book.accounting["too_late.rated_rows"] == 7


@settings(max_examples=30, deadline=None)
@given(st.randoms(use_true_random=False))
def test_the_judged_windows_and_sums_do_not_depend_on_arrival_order(rng):
    """Files and watermarks in any order: the windows judged on time and their sums are
    those of the order in which every file arrives before its watermark."""
    files = [(f"f{i}", i % 5, i + 1) for i in range(8)]
    marks = [(d * DAY_US, tuple(f for f, day, _ in files if day < d)) for d in range(1, 6)]

    def run(events):
        book, adding = WindowBook(2 * DAY_US, DAY_US, 10 * DAY_US), Adding()
        sums = {}
        for kind, item in events:
            if kind == "file":
                late = book.add_file(partials(item[0], item[1], item[2]), adding, adding)
            else:
                book.add_mark(*item)
                late = []
            for start in [*late, *book.advance()]:
                book.next_pane(start)
                sums[start] = book.window_sums(start, adding, adding)
        return sums

    ordered = run([("file", f) for f in files] + [("mark", m) for m in marks])
    events = [("file", f) for f in files] + [("mark", m) for m in marks]
    rng.shuffle(events)
    assert run(events) == ordered


# ----------------------------------------------------------------------------- the graph
@pytest.fixture(scope="module")
def day_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("follow-local")
    land = root / "land"
    write_day_files(land, rows=24_000, seed=8)
    (land / "broken.parquet").write_bytes(b"PAR1" + b"\x00" * 32 + b"PAR1")
    config = engine_config(
        root / "w.yaml", methods=["graph"],
        grid={"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
        windowing={"size_days": 2, "period_days": 1, "allowed_lateness_days": 1},
        publish={"max_threshold_change": 0.2, "min_rated": 0},
        in_force={"add_to_edges": False, "keep_when_insufficient": False},
        audit={"enabled": True, "budget_share": 0.05, "salt": "follow-local"})
    return land, config


def test_the_followed_stream_equals_the_batch_windowed_run(day_files, tmp_path):
    land, config_path = day_files
    config = load_config(config_path)
    good = [p for p in sorted(land.glob("day*.parquet"))]
    batch_in = tmp_path / "batch_in"
    batch_in.mkdir()
    for path in good:
        os.link(path, batch_in / path.name)
    try:
        run_recalibrate(config, str(batch_in / "*.parquet"), str(tmp_path / "batch"))
    except PublishRefused:
        pass  # held windows: the run is published, decide skips them
    landed = list_landed(str(land / "*.parquet"), settle_seconds=60)
    watermark = (START.value // 1000) + 5 * DAY_US
    elements = [*landed, WatermarkMark(watermark, tuple(f.path for f in landed))]
    random.Random(3).shuffle(elements)  # the judge waits for the files its watermark lists
    started = start_follow(config, str(land / "*.parquet"), str(tmp_path / "follow"),
                           landed=lambda p: p | beam.Create(elements, reshuffle=False))
    started["result"].wait_until_finish()
    batch, follow = run_dirs(tmp_path / "batch")[-1], Path(started["run_dir"])
    names = sorted(p.name for p in (follow / "windows").iterdir())
    assert len(names) == 5  # the sixth window ends after the watermark: not final
    for name in names:
        assert records(follow / "windows" / name) == records(batch / "windows" / name), name
    want = json.loads((batch / "manifest.json").read_text())
    got = json.loads((follow / "manifest.json").read_text())
    entries = {e["window"]: e for e in want["guard"]["windows"]}
    for entry in got["guard"]["windows"]:
        keys = ("pane_index", "judged_utc", "uncovered_share")
        expected = {k: v for k, v in entries[entry["window"]].items() if k not in keys}
        assert {k: v for k, v in entry.items() if k not in keys} == expected
    accounting = {k: v for k, v in got["row_accounting"].items()
                  if not k.startswith(("files_", "too_late"))}
    assert accounting == want["row_accounting"]
    assert got["row_accounting"]["files_dead_lettered"] == 1
    dead = [json.loads(p.read_text()) for p in (follow / "dead_letter" / "files").iterdir()]
    assert [d["source"] for d in dead] == [str(land / "broken.parquet")]
    assert got["status"] == "following" and (tmp_path / "follow" / "LATEST").read_text(
        ).strip() == follow.name


def test_each_landed_file_is_decided_once_as_batch_decide_does(day_files, tmp_path):
    land, config_path = day_files
    config = load_config(config_path)
    points = tmp_path / "points"
    try:
        run_recalibrate(config, str(land / "day[0-2].parquet"), str(points))
    except PublishRefused:
        pass
    landed = LandedFile(str(land / "day3.parquet"), 0)
    first = decide_landed(config, landed, str(points), str(tmp_path / "out"))
    again = decide_landed(config, landed, str(points), str(tmp_path / "out"))
    assert first["status"] == "decided" and again["status"] == "decided_before"
    out = tmp_path / "out" / "files" / decided_name(landed.path)
    assert [p.name for p in run_dirs(out)] == [decided_name(landed.path)]
    import subprocess

    done = subprocess.run([COSTLIB, "decide", "--config", config_path, "--input", landed.path,
                           "--operating-points", str(points), "--output", str(tmp_path / "one"),
                           "--run-id", decided_name(landed.path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    pd.testing.assert_frame_equal(decisions(run_dirs(out)[-1]),
                                  decisions(run_dirs(tmp_path / "one")[-1]))
    broken = decide_landed(config, LandedFile(str(land / "broken.parquet"), 0), str(points),
                           str(tmp_path / "out"))
    assert broken["status"] == "dead_lettered" and "broken.parquet" in broken["reason"]


@pytest.mark.parametrize("pattern, words", [
    ("{tmp}/missing/*.parquet", "does not exist"),
    ("{tmp}/*/x.parquet", "glob in the file name"),
    ("gs://bucket/land/*.parquet", "local"),
])
def test_follow_refuses_a_bad_landing_glob_before_any_job(day_files, tmp_path, pattern, words):
    import subprocess

    _, config = day_files
    done = subprocess.run([COSTLIB, "recalibrate", "--follow", "--config", config, "--input",
                           pattern.format(tmp=tmp_path), "--output", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "o" / "LATEST").exists()


class _State:
    """Beam's ReadModifyWriteState, in memory (the judge driven one element at a time)."""

    def __init__(self):
        self.value = None

    def read(self):
        return self.value

    def write(self, value):
        self.value = value


def test_late_panes_and_retired_windows_end_as_the_batch_run(tmp_path):
    """Day by day with one file late and the allowed lateness passing: every window's last
    pane equals the batch windowed run over all files, and a retired window is never judged
    again (its buckets are gone)."""
    from costlib_pipelines.follow.live_run import start_live_run
    from costlib_pipelines.follow.recalibrate_stream import JudgeWindowsFn, ReadLandedFn
    from costlib_pipelines.io.runs import RunDirectory
    from costlib_pipelines.recalibrate.pipeline import needed_columns
    from costlib_pipelines.recalibrate.publish import GuardSettings

    days = tmp_path / "days"
    write_day_files(days, rows=24_000, seed=11, split_day=1)
    config = load_config(engine_config(
        tmp_path / "c.yaml", methods=["graph"],
        grid={"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
        windowing={"size_days": 2, "period_days": 1, "allowed_lateness_days": 2},
        publish={"max_threshold_change": 0.2, "min_rated": 0},
        in_force={"add_to_edges": False, "keep_when_insufficient": False}))
    try:
        run_recalibrate(config, str(days / "*.parquet"), str(tmp_path / "batch"))
    except PublishRefused:
        pass
    run = RunDirectory(str(tmp_path / "follow"), config.digest)
    run.prepare()
    settings = GuardSettings(0.2, 0, "graph")
    start_live_run(run, config, settings=settings, baseline_run=None, carried=None,
                   follow={}, in_force={}, grid_edges=None, runner="test")
    edges = config.fixed_edges()
    reader = ReadLandedFn(config, needed_columns(config, windowed=True), edges, run.run_dir)
    judge = JudgeWindowsFn(config, run.run_dir, run.run_id, edges, None, settings)
    reader.setup()
    judge.setup()
    state, landed, judged = _State(), [], []
    plan = [(["day0"], 1), (["day1a"], 2), (["day1b", "day2"], 3), (["day3"], 4), (["day4"], 5)]
    for files, day in plan:
        for name in files:
            landed.append(str(days / f"{name}.parquet"))
            element = next(reader.process(LandedFile(landed[-1], 0)))
            judged += list(judge.process(element, state))
        mark = WatermarkMark((START.value // 1000) + day * DAY_US, tuple(landed))
        landed = []  # a mark lists the files emitted since the previous one
        judged += list(judge.process(("judge", mark), state))
    panes = [(e["window"][:8], e["pane_index"]) for e in judged]
    assert panes == [("20261031", 0), ("20261101", 0), ("20261101", 1), ("20261102", 0),
                     ("20261103", 0), ("20261104", 0)]
    batch, follow = run_dirs(tmp_path / "batch")[-1], Path(run.run_dir)
    for name in sorted(p.name for p in (follow / "windows").iterdir()):
        want = [{k: v for k, v in r.items() if k != "pane_index"}
                for r in records(batch / "windows" / name)]
        got = records(follow / "windows" / name)
        assert [{k: v for k, v in r.items() if k != "pane_index"} for r in got] == want, name
    assert {r["pane_index"] for r in records(follow / "windows" / judged[2]["window"])} == {1}


def test_follow_starts_from_a_first_windowed_run_that_applied_no_window(day_files, tmp_path):
    """The page's first step with the stream's own config: a batch windowed run over the first
    day (both its windows partial: not eligible, none applied) publishes a run that applies
    nothing. ``--follow`` starts from it: nothing is in force (as from an empty output), the
    auto edges are carried from its sketch, and the stream's windows equal a batch windowed
    run over every file with the same edges and nothing in force."""
    import yaml

    land, uniform_config = day_files
    raw = yaml.safe_load(Path(uniform_config).read_text())
    raw["grid"] = {"edges": "auto"}
    config_path = tmp_path / "auto.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    config = load_config(str(config_path))
    first = tmp_path / "first"
    first.mkdir()
    os.link(land / "day0.parquet", first / "day0.parquet")
    points = tmp_path / "points"
    done = subprocess_cli("recalibrate", "--config", str(config_path), "--input",
                          str(first / "*.parquet"), "--output", str(points))
    assert done.returncode == 0, done.stderr[-2000:]
    first_run = run_dirs(points)[-1]
    manifest = json.loads((first_run / "manifest.json").read_text())
    assert manifest["published"] is True
    assert manifest["guard"]["window_states"] == {"applied": 0, "held": 0, "withdrawn": 0,
                                                  "not_eligible": 2}
    before = tmp_path / "before"
    shutil.copytree(points, before)
    good = [LandedFile(str(p), 0) for p in sorted(land.glob("day[1-4].parquet"))]
    elements = [*good, WatermarkMark((START.value // 1000) + 5 * DAY_US,
                                     tuple(f.path for f in good))]
    started = start_follow(config, str(land / "*.parquet"), str(points),
                           landed=lambda p: p | beam.Create(elements, reshuffle=False))
    started["result"].wait_until_finish()
    follow = Path(started["run_dir"])
    live = json.loads((follow / "manifest.json").read_text())
    assert live["in_force"]["source"] is None and "applied no window" in live["in_force"]["note"]
    assert live["grid_edges"]["source"]["from"] == "previous_run"
    assert live["guard"]["compared_with_run"] == first_run.name
    assert live["guard"]["previous_run_unreadable"] is None
    assert not (follow / "points_in_force.parquet").exists()
    # truth: a batch windowed run over the same files into the output as it was before the
    # stream (the same carried edges, nothing in force)
    batch_in = tmp_path / "batch_in"
    batch_in.mkdir()
    for landed in good:
        os.link(landed.path, batch_in / Path(landed.path).name)
    done = subprocess_cli("recalibrate", "--config", str(config_path), "--input",
                          str(batch_in / "*.parquet"), "--output", str(before))
    assert done.returncode in (0, 3), done.stderr[-2000:]
    batch_manifest = json.loads((run_dirs(before)[-1] / "manifest.json").read_text())
    assert batch_manifest["grid_edges"]["edges"] == live["grid_edges"]["edges"]
    assert batch_manifest["guard"]["previous_run_unreadable"] is None
    batch = run_dirs(before)[-1]
    names = sorted(p.name for p in (follow / "windows").iterdir())
    assert names and set(names) <= {p.name for p in (batch / "windows").iterdir()}
    want = {e["window"]: e for e in json.loads(
        (batch / "manifest.json").read_text())["guard"]["windows"]}
    for entry in live["guard"]["windows"]:
        name = entry["window"]
        assert records(follow / "windows" / name) == records(batch / "windows" / name), name
        assert entry["state"] == want[name]["state"] and entry["compared_with"] == \
            want[name]["compared_with"], name


def subprocess_cli(*args: str):
    import subprocess

    return subprocess.run([COSTLIB, *args], capture_output=True, text=True, timeout=600)
