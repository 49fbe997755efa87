"""The publish guard per window of a windowed recalibration (issue 25).

A TestStream run (BundleBasedDirectRunner, on-time and late panes) is committed by the same step
the launcher uses (``publish_windowed_run``); ``costlib decide``, ``status`` and ``publish``
then run through the CLI (``costlib_pipelines.commands.cli.main``, in process). The truth is
independent of the window guard: a sequence of *batch* ``costlib recalibrate`` runs over each
window's rows (their publish guard, with ``LATEST`` as the points in force), rated-row counts
taken from the frame, and threshold decisions computed with numpy from costlib's records on
the window's rows.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import apache_beam as beam
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.test_stream import TestStream as BeamTestStream
from apache_beam.transforms.window import TimestampedValue
from pipeline_data import base_config, comparable, direct_records, write_files

from costlib.sample import generate_score_stream
from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import load_config
from costlib_pipelines.decide.records import read_decisions
from costlib_pipelines.io.preflight import preflight
from costlib_pipelines.io.published_points import select_operating_points
from costlib_pipelines.io.runs import RunDirectory, load_operating_points
from costlib_pipelines.io.status import check_status
from costlib_pipelines.recalibrate.event_times import event_time_range
from costlib_pipelines.recalibrate.manifest import PublishSpec, publish_windowed_run
from costlib_pipelines.recalibrate.pipeline import build_recalibrate
from costlib_pipelines.recalibrate.publish import GuardSettings, read_baseline
from costlib_pipelines.recalibrate.window_guard import guard_windows

START = pd.Timestamp("2026-11-01", tz="UTC")
DAY_S = 86_400
DAY = pd.Timedelta(days=1)
CLASSIFIERS = ["text_model", "image_model"]
#: Slack that keeps the (2026) test windows from being stale by the wall clock in CLI calls.
NO_STALENESS = ["--window-slack-hours", "1000000"]


def raw_config(**overrides) -> dict:
    raw = {
        "columns": {"weight": "weight"},
        "classifiers": CLASSIFIERS,
        "grid": {"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
        "target": {"marginal_precision": 0.3},
        "methods": ["graph"],
        "min_rated": {"positives": 5, "negatives": 5},
        # points in force change the lattice and keep thin groups: off, so a batch run over a
        # window's rows is the window's run whatever was published before
        "in_force": {"add_to_edges": False, "keep_when_insufficient": False},
    }
    raw.update(overrides)
    return raw


def write_config(path: Path, **overrides) -> str:
    path.write_text(yaml.safe_dump(raw_config(**overrides)))
    return str(path)


def window_name(start: pd.Timestamp, end: pd.Timestamp) -> str:
    return f"{start:%Y%m%dT%H%M%S}_{end:%Y%m%dT%H%M%S}"


def rows_of(frame: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    return frame[(frame["event_time"] >= start) & (frame["event_time"] < end)]


def run_stream(frame: pd.DataFrame, config_path: str, out: Path, run_id: str, *,
               late_day: int | None = None, watermark_days: float = 0.0) -> dict:
    """Recalibrate ``frame`` day by day through a TestStream; rows of ``late_day`` with an item
    id divisible by 4 arrive after the watermark reached ``watermark_days`` (a late pane).
    Committed by ``publish_windowed_run`` as the launcher does; returns the manifest."""
    config = load_config(config_path)
    paths = [write_files(frame, out.parent / f"{run_id}-files", n_files=1)
             .replace("*.parquet", "part-0.parquet")]
    inputs = preflight(paths, config, windowed=True)
    day = ((frame["event_time"] - START) / DAY).astype(int)
    late = (day == late_day) & (frame["item_id"] % 4 == 0) if late_day is not None else (
        pd.Series(False, index=frame.index))
    stream = BeamTestStream()
    for d in sorted(day.unique()):
        rows = frame[(day == d) & ~late]
        for part, chunk in enumerate((rows.iloc[::2], rows.iloc[1::2])):
            table = pa.Table.from_pandas(chunk, preserve_index=False)
            stream = stream.add_elements(
                [TimestampedValue((f"day{d}", part, table), START.timestamp() + d * DAY_S)])
        if late_day is not None and d == int(watermark_days):
            stream = stream.advance_watermark_to(START.timestamp() + watermark_days * DAY_S)
            table = pa.Table.from_pandas(frame[late], preserve_index=False)
            stream = stream.add_elements(
                [TimestampedValue(("late", 0, table), START.timestamp() + late_day * DAY_S)])
    stream = stream.advance_watermark_to_infinity()
    run = RunDirectory(str(out), config.digest, run_id)
    baseline = read_baseline(str(out))
    run.prepare()
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with beam.Pipeline(runner=BundleBasedDirectRunner(), options=options) as pipeline:
        build_recalibrate(pipeline, [], config, run.run_dir, run_id, batches=pipeline | stream)
    spec = PublishSpec(
        output=str(out), run_id=run_id, inputs=inputs, runner="BundleBasedDirectRunner",
        started_utc=dt.datetime.now(dt.UTC).isoformat(),
        settings=GuardSettings(max_threshold_change=config.publish.max_threshold_change,
                               min_rated=config.publish.min_rated,
                               method=config.decision_method),
        override=None, baseline=baseline)
    return publish_windowed_run(run, config, spec, inputs,
                                event_time_range(paths, config.columns["event_time"]))


def shifted_stream() -> pd.DataFrame:
    """6 days; from day 4 on every score is pushed up (the thresholds move)."""
    frame = generate_score_stream(40_000, days=6, seed=21)
    frame["weight"] = np.where(frame["item_id"] % 3 == 0, 2.5, 1.0)
    day = ((frame["event_time"] - START) / DAY).astype(int)
    for column in CLASSIFIERS:
        frame.loc[day >= 4, column] = frame.loc[day >= 4, column] ** 0.4
    return frame.reset_index(drop=True)


def expected_flags(frame: pd.DataFrame, records: dict) -> pd.Series:
    """score >= threshold for any classifier (numpy), by each group's record."""
    scores = np.nan_to_num(frame[CLASSIFIERS].to_numpy(dtype=float), nan=-np.inf)
    flags = pd.Series(pd.NA, index=frame["item_id"].astype(str), dtype="boolean")
    for group, rows in frame.groupby("group"):
        thresholds = records.get(group, records["__all__"])["thresholds"]
        if thresholds is not None:
            flags[rows["item_id"].astype(str).to_numpy()] = (
                scores[rows.index] >= np.asarray(thresholds)).any(axis=1)
    return flags


WINDOWING = {"size_days": 2, "period_days": 1, "allowed_lateness_days": 2}
GUARD = {"max_threshold_change": 0.15, "min_rated": 0}
#: The complete windows of 6 days of data in 2-day windows sliding by a day (the chain).
COMPLETE = [(START + d * DAY, START + (d + 2) * DAY) for d in range(5)]


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """The shifted stream recalibrated through a TestStream with a late pane for window
    [day 0, day 2); returns (frame, tmp, output, manifest, config path)."""
    tmp = tmp_path_factory.mktemp("window_guard")
    frame = shifted_stream()
    config = write_config(tmp / "windowed.yaml", windowing=WINDOWING, publish=GUARD)
    out = tmp / "recal"
    manifest = run_stream(frame, config, out, "stream", late_day=1, watermark_days=2.5)
    return frame, tmp, out, manifest, config


def states(manifest: dict) -> dict[str, str]:
    return {w["window"]: w["state"] for w in manifest["guard"]["windows"]}


def test_held_windows_agree_with_batch_runs_over_each_windows_rows(guarded):
    frame, tmp, out, manifest, _ = guarded
    got = states(manifest)
    names = [window_name(s, e) for s, e in COMPLETE]
    # the partial windows at both ends (day 0 only, day 5 only) are outside the chain
    assert got[window_name(START - DAY, START + DAY)] == "not_eligible"
    assert got[window_name(START + 5 * DAY, START + 7 * DAY)] == "not_eligible"
    assert manifest["published"] is True
    assert (out / "LATEST").read_text().strip() == "stream"
    # truth: batch runs over each complete window's rows in turn, guarded by LATEST
    batch = write_config(tmp / "batch.yaml", publish=GUARD)
    expected = {}
    for i, (start, end) in enumerate(COMPLETE):
        files = write_files(rows_of(frame, start, end), tmp / f"batch-in-{i}", n_files=1)
        code = main(["recalibrate", "--config", batch, "--input", files,
                     "--output", str(tmp / "batch"), "--run-id", f"w{i}"])
        assert code in (0, 3)
        expected[names[i]] = "applied" if code == 0 else "held"
    assert {n: got[n] for n in names} == expected
    # the data was built so that the move after day 4 is held: the test is not vacuous
    assert list(expected.values()) == ["applied", "applied", "applied", "held", "held"]
    held = {w["window"]: w for w in manifest["guard"]["windows"] if w["state"] == "held"}
    batch_held = json.loads((tmp / "batch" / "runs" / "w3" / "manifest.json").read_text())
    assert held[names[3]]["violations"] == batch_held["guard"]["violations"]
    assert all("thresholds moved by" in v for v in held[names[4]]["violations"])
    assert held[names[4]]["compared_with"] == {f"window {names[2]}": 4}


def test_the_late_pane_is_guarded_with_every_row_of_its_window(guarded):
    frame, _, out, manifest, _ = guarded
    start, end = COMPLETE[0]
    records = pq.read_table(out / "runs" / "stream" / "windows" / window_name(start, end)
                            / "operating_points.parquet").to_pylist()
    assert max(r["pane_index"] for r in records) >= 1  # a late pane rewrote the window
    config = base_config(methods=["graph"], grid={"edges": "uniform", "bins": 16,
                                                   "range": [0.0, 1.0]})
    direct = direct_records(rows_of(frame, start, end), config)
    keys = ("group", "method", "status", "thresholds", "tp", "fp", "rated_positives",
            "rated_negatives")
    assert comparable([{k: r[k] for k in keys} for r in records]) == comparable(
        [{k: r[k] for k in keys} for r in direct])
    assert states(manifest)[window_name(start, end)] == "applied"


def test_the_cli_on_files_gives_the_same_verdicts_and_exits_3(guarded, capsys):
    frame, tmp, _, manifest, config = guarded
    files = write_files(frame, tmp / "files", n_files=2)
    code = main(["recalibrate", "--config", config, "--input", files,
                 "--output", str(tmp / "cli"), "--run-id", "files"])
    err = capsys.readouterr().err
    assert code == 3
    held = [window_name(s, e) for s, e in COMPLETE[3:]]
    assert "the guard holds 2 window(s)" in err and all(f"window {n}" in err for n in held)
    cli = json.loads((tmp / "cli" / "runs" / "files" / "manifest.json").read_text())
    assert cli["published"] is True  # the run is published; its held windows are skipped
    assert states(cli) == states(manifest)


def decide(tmp: Path, config: str, out: Path, name: str, frame: pd.DataFrame, capsys):
    files = write_files(frame, tmp / f"decide-in-{name}", n_files=1)
    code = main(["decide", "--config", config, "--input", files, "--operating-points",
                 str(out), "--output", str(tmp / name)])
    printed = capsys.readouterr().out
    assert code == 0
    run_id = (tmp / name / "LATEST").read_text().strip()
    manifest = json.loads((tmp / name / "runs" / run_id / "manifest.json").read_text())
    decisions = read_decisions(str(tmp / name)).to_pandas().set_index("item_id")
    return printed, manifest, decisions


def status(out: Path, capsys) -> tuple[int, str]:
    code = main(["status", "--output", str(out), *NO_STALENESS])
    return code, capsys.readouterr().out


def test_decide_status_and_publish_through_the_cli(guarded, capsys):
    frame, tmp, out, _, config = guarded
    names = [window_name(s, e) for s, e in COMPLETE]
    sample = frame.iloc[::7].reset_index(drop=True)
    grid = base_config(methods=["graph"], grid={"edges": "uniform", "bins": 16,
                                                 "range": [0.0, 1.0]})

    def direct(i: int) -> dict:
        return {r["group"]: r for r in direct_records(rows_of(frame, *COMPLETE[i]), grid)}

    # decide applies the last applied window, [day 2, day 4), and says why
    printed, manifest, got = decide(tmp, config, out, "decide-held", sample, capsys)
    used = manifest["operating_points"]["window"]["windows_used"]
    assert [u["window_end"] for u in used] == [COMPLETE[2][1].isoformat()]
    assert all(f"window {n} is held" in printed for n in names[3:])
    want = expected_flags(sample, direct(2))
    assert got.loc[want.index, "threshold_decision"].astype("boolean").equals(want)
    assert direct(2) != direct(4)  # the held window would decide otherwise

    code, text = status(out, capsys)
    assert code == 3 and all(f"window {n} is held" in text for n in names[3:])

    # a person releases the newest window: decide applies it; the other stays held
    assert main(["publish", "--output", str(out), "--run-id", "stream", "--window", names[4],
                 "--by", "ana", "--reason", "score change was a model release"]) == 0
    assert f"window {names[4]} is applied" in capsys.readouterr().out
    code, text = status(out, capsys)
    assert code == 3 and f"window {names[3]} is held" in text
    assert f"window {names[4]} is held" not in text
    printed, manifest, got = decide(tmp, config, out, "decide-released", sample, capsys)
    assert [u["window_end"] for u in manifest["operating_points"]["window"]["windows_used"]] \
        == [COMPLETE[4][1].isoformat()]
    want = expected_flags(sample, direct(4))
    assert got.loc[want.index, "threshold_decision"].astype("boolean").equals(want)

    assert main(["publish", "--output", str(out), "--run-id", "stream", "--window", names[3],
                 "--by", "ana", "--reason", "reviewed"]) == 0
    capsys.readouterr()
    assert status(out, capsys)[0] == 0
    recorded = json.loads((out / "runs" / "stream" / "manifest.json").read_text())
    entry = next(w for w in recorded["guard"]["windows"] if w["window"] == names[3])
    assert entry["decision"]["by"] == "ana" and entry["history"][-1]["previous_state"] == "held"

    # roll back: withdraw the newest window; the one before it is applied again
    assert main(["publish", "--output", str(out), "--run-id", "stream", "--window", names[4],
                 "--withdraw", "--by", "ben", "--reason", "false positives spiked"]) == 0
    capsys.readouterr()
    records, source = load_operating_points(str(out), windows="usable")
    chosen = select_operating_points(records, load_config(config), source=source,
                                     event_time_range=recalibration_range(out))
    assert {g: list(t.thresholds) for g, t in chosen.by_group.items()} == {
        g: r["thresholds"] for g, r in direct(3).items()}
    assert status(out, capsys)[0] == 0  # withdrawn by a person: not an alert


def recalibration_range(out: Path) -> dict:
    run_id = (out / "LATEST").read_text().strip()
    return json.loads((out / "runs" / run_id / "manifest.json").read_text())["event_time_range"]


def test_publish_window_refuses_hostile_names_and_wrong_states(guarded, capsys):
    _, _, out, _, _ = guarded
    base = ["publish", "--output", str(out), "--run-id", "stream", "--by", "x", "--reason", "y"]
    for window in ("../../etc", "20261101T000000_20261103T000000/..", ""):
        assert main([*base, "--window", window]) == 2
        assert "is not a window name" in capsys.readouterr().err
    assert main([*base, "--withdraw"]) == 2
    assert "--withdraw needs --window" in capsys.readouterr().err
    missing = window_name(START + 20 * DAY, START + 22 * DAY)
    assert main([*base, "--window", missing]) == 2
    assert f"no window {missing}" in capsys.readouterr().err
    partial = window_name(START - DAY, START + DAY)  # not eligible: outside the chain
    assert main([*base, "--window", partial]) == 2
    assert "is not_eligible" in capsys.readouterr().err


def test_a_window_with_too_few_rated_rows_is_held(tmp_path, capsys):
    frame = generate_score_stream(30_000, days=4, seed=5)
    frame["weight"] = 1.0
    frame["group"] = "market"  # one group: its rated rows are the window's
    day = ((frame["event_time"] - START) / DAY).astype(int)
    thin = (day == 2) & (frame["item_id"] % 10 != 0)  # day 2 keeps a tenth of its rows
    frame = frame[~thin].reset_index(drop=True)
    day = ((frame["event_time"] - START) / DAY).astype(int)
    rated = frame["label"].notna().groupby(day).sum()
    min_rated = float(rated.min() + rated.drop(rated.idxmin()).min()) / 2
    assert rated.idxmin() == 2  # truth from the frame: only day 2 is below min_rated
    config = write_config(tmp_path / "c.yaml", publish={"min_rated": min_rated},
                          windowing={"size_days": 1, "period_days": 1,
                                     "allowed_lateness_days": 0})
    out = tmp_path / "out"
    manifest = run_stream(frame, config, out, "thin")
    got = states(manifest)
    expected = {window_name(START + d * DAY, START + (d + 1) * DAY):
                "held" if rated[d] < min_rated else "applied" for d in range(4)}
    assert got == expected
    entry = next(w for w in manifest["guard"]["windows"] if w["state"] == "held")
    positives = int(frame["label"].eq(True)[day == 2].sum())  # truth from the frame
    rows = f"{rated[2]:g} rated rows ({positives:g} positives, {rated[2] - positives:g} negatives)"
    assert entry["violations"] == [
        f"group '__all__': thresholds rest on the {rows} of its own grid (status ok), fewer "
        f"than min_rated={min_rated:g}",
        f"group 'market': thresholds rest on the {rows} of its own grid (status ok), fewer "
        f"than min_rated={min_rated:g}"]
    code = main(["status", "--output", str(out), *NO_STALENESS])
    assert code == 3 and "held by the publish guard" in capsys.readouterr().out


def test_status_says_when_windows_are_stale(guarded):
    out = guarded[2]
    newest_end = max(e for _, e in COMPLETE)
    due = newest_end + pd.Timedelta(days=1 + 2, hours=6)  # period + lateness + 6 h slack
    fresh = check_status(str(out), max_age_hours=1e6, now=(due - pd.Timedelta(hours=1))
                         .to_pydatetime())
    assert not any("stale" in p for p in fresh.problems)
    assert fresh.newest_window["next_window_due_utc"] == due.isoformat()
    stale = check_status(str(out), max_age_hours=1e6,
                         now=(due + pd.Timedelta(hours=2)).to_pydatetime())
    assert any(p.startswith("windows are stale") and "due 2 h ago" in p
               for p in stale.problems)


def record(group: str, thresholds, *, rated: float = 100.0) -> dict:
    return {"group": group, "method": "graph", "window_start": None, "status": "ok",
            "thresholds": thresholds, "classifiers": ["a"], "rated_positives": rated / 2,
            "rated_negatives": rated / 2, "fallback_group": None, "run_id": "r",
            "window_end": None}


def test_the_chain_compares_each_group_with_its_last_applied_window():
    names = ["20261101T000000_20261102T000000", "20261102T000000_20261103T000000",
             "20261103T000000_20261104T000000", "20261104T000000_20261105T000000"]
    windows = {
        names[0]: [record("g", [0.5]), record("h", [0.5])],
        names[1]: [record("g", [0.9])],                       # g jumps: held
        names[2]: [record("g", [0.55]), record("h", [0.95])],  # g vs window 0: ok; h jumps
        names[3]: [record("h", [0.52])],                      # h vs window 0: ok
    }
    in_force = [record("g", [0.48])]
    settings = GuardSettings(max_threshold_change=0.1)
    eligible = dict.fromkeys(names, 0.0)
    got = guard_windows(windows, in_force, settings, eligible)
    assert [e["state"] for e in got] == ["applied", "held", "held", "applied"]
    assert got[0]["compared_with"] == {"run r": 1}  # h had nothing in force: not compared
    assert got[2]["compared_with"] == {f"window {names[0]}": 2}
    # a group missing from a window is no violation; a window outside the chain changes nothing
    got = guard_windows(windows, in_force, settings, {n: 0.0 for n in names if n != names[0]})
    assert [e["state"] for e in got] == ["not_eligible", "held", "applied", "held"]


def test_decide_gives_a_group_without_an_applied_window_the_points_in_force_before():
    from costlib_pipelines.io.runs import CARRIED

    config = load_config_dict(raw_config(windowing=WINDOWING, decide={"window": "latest"}))
    start, end = COMPLETE[0]

    def point(group, thresholds, **extra):
        return {"group": group, "method": "graph", "rule": "any", "classifiers": CLASSIFIERS,
                "thresholds": thresholds, "status": "ok", "fallback_group": None,
                "run_id": "this", "window_start": start.to_pydatetime(),
                "window_end": end.to_pydatetime(), "pane_index": 0, **extra}

    records = [point("g0", [0.2, 0.3]), point("__all__", [0.5, 0.5]),
               point("g1", [0.7, 0.8], run_id="before", window_start=None, window_end=None,
                     pane_index=None, **{CARRIED: "before"}),
               point("g0", [0.9, 0.9], run_id="before", **{CARRIED: "before"})]
    chosen = select_operating_points(records, config, source="test")
    assert chosen.get("g0").thresholds == (0.2, 0.3)  # its applied window wins
    assert chosen.get("g1").thresholds == (0.7, 0.8)  # no window: the points in force before
    assert chosen.details["window"]["groups_in_force_before"] == {"g1": "before"}


def load_config_dict(raw: dict):
    from costlib_pipelines.config import RunConfig

    return RunConfig.from_dict(raw)


def _replayed_copy(guarded, tmp_path, stream: dict | None) -> Path:
    """The guarded output copied, its ``LATEST`` manifest made a followed stream's (``stream``:
    the stream's status) or left a batch run's (None)."""
    import shutil

    out = tmp_path / "recal"
    shutil.copytree(guarded[2], out)
    if stream is not None:
        run = out / "runs" / (out / "LATEST").read_text().strip()
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["follow"] = {"landing": "/land/*.parquet", "started_utc": "2026-01-01T00:00:00",
                              "stream": stream}
        manifest.pop("finished_utc")  # a live run has not finished
        (run / "manifest.json").write_text(json.dumps(manifest))
    return out


def test_status_replay_judges_windows_against_the_watermark_not_the_clock(guarded, tmp_path):
    """A backfill replayed weeks later: by the clock every window is stale; with --replay the
    stream's watermark is the clock. Due time: newest end + period (1 d) + lateness (2 d) +
    6 h slack."""
    newest_end = max(e for _, e in COMPLETE)
    due = newest_end + pd.Timedelta(days=3, hours=6)
    now = (due + pd.Timedelta(days=30)).to_pydatetime()
    moved = (now - dt.timedelta(hours=1)).isoformat()

    def status(watermark, *, replay, moved=moved):
        out = _replayed_copy(guarded, tmp_path / f"{watermark}-{replay}-{moved}"[:60],
                             {"watermark_utc": watermark.isoformat(),
                              "watermark_moved_utc": moved})
        return check_status(str(out), max_age_hours=26, now=now, replay=replay)

    on_time = due - pd.Timedelta(hours=1)
    assert any(p.startswith("windows are stale") and "due 720 h ago" in p
               for p in status(on_time, replay=False).problems)
    healthy = status(on_time, replay=True)
    assert not any(p.startswith("windows are stale") or "has not moved" in p
                   for p in healthy.problems), healthy.problems
    late = status(due + pd.Timedelta(hours=2), replay=True)
    assert any(p.startswith("windows are stale") and "due 2 h before the stream's watermark"
               in p for p in late.problems), late.problems
    # the watermark stopped moving: watermark time cannot show it, the clock can
    stalled = status(on_time, replay=True, moved=(now - dt.timedelta(hours=30)).isoformat())
    assert any("has not moved for" in p and "more than 26 h" in p for p in stalled.problems)


def test_status_replay_of_a_batch_windowed_run_uses_its_newest_event_time(guarded, tmp_path):
    out = _replayed_copy(guarded, tmp_path, None)
    manifest = json.loads((out / "runs" / (out / "LATEST").read_text().strip()
                           / "manifest.json").read_text())
    newest_event = dt.datetime.fromisoformat(manifest["event_time_range"]["max_utc"])
    now = newest_event + dt.timedelta(days=60)
    by_clock = check_status(str(out), max_age_hours=1e6, now=now)
    assert any(p.startswith("windows are stale") for p in by_clock.problems)
    replayed = check_status(str(out), max_age_hours=1e6, now=now, replay=True)
    newest_end = max(e for _, e in COMPLETE)
    expected_late = (newest_event - newest_end.to_pydatetime()
                     - dt.timedelta(days=3, hours=6)).total_seconds() / 3600
    stale = [p for p in replayed.problems if p.startswith("windows are stale")]
    assert bool(stale) == (expected_late > 0), (stale, expected_late)
    assert replayed.newest_window["judged_against"].startswith("before the newest event time")
