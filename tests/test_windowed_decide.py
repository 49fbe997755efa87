"""Windowed runs through the CLI, the complete window ``costlib decide`` applies, and the config
check of ``decision_method`` against ``methods`` (issue 9, "Safe operations").

Pipelines run on Beam's FnApiRunner in process (no Beam flags).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pipeline_data import base_config, direct_records, write_files

from costlib.sample import generate_score_stream
from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.decide.records import read_decisions
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.published_points import select_operating_points, uncovered_share
from costlib_pipelines.recalibrate.event_times import event_time_range

START = pd.Timestamp("2026-11-01", tz="UTC")
CLASSIFIERS = ["text_model", "image_model"]


def write_config(path: Path, **overrides) -> str:
    raw = {
        "columns": {"weight": "weight"},
        "classifiers": CLASSIFIERS,
        "grid": {"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
        "target": {"marginal_precision": 0.3},
        "methods": ["graph", "hull"],
        "min_rated": {"positives": 5, "negatives": 5},
    }
    raw.update(overrides)
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def stream(n: int, days: int, seed: int = 0) -> pd.DataFrame:
    frame = generate_score_stream(n, days=days, seed=seed)
    frame["weight"] = np.where(frame["item_id"] % 3 == 0, 2.5, 1.0)
    return frame


# --------------------------------------------------------------------------- config check
def test_decision_method_must_be_one_of_the_methods():
    raw = {"classifiers": CLASSIFIERS, "target": {"marginal_precision": 0.3},
           "methods": ["hull"], "decision_method": "graph"}
    with pytest.raises(ConfigError, match=r"decision_method: 'graph' is not one of methods"):
        RunConfig.from_dict(raw)
    raw["decision_method"] = "hull"
    assert RunConfig.from_dict(raw).decision_method == "hull"


def test_cli_refuses_a_decision_method_that_recalibrate_would_not_compute(tmp_path, capsys):
    pattern = write_files(stream(2000, days=3), tmp_path / "in", n_files=1)
    config = write_config(tmp_path / "c.yaml", methods=["hull"], decision_method="graph")
    code = main(["recalibrate", "--config", config, "--input", pattern,
                 "--output", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "decision_method" in err and "methods" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # refused before anything was written


# --------------------------------------------------------------------------- windowed CLI
def test_windowed_recalibrate_through_the_cli_exits_0_and_says_what_it_wrote(tmp_path, capsys):
    frame = stream(6000, days=6, seed=3)
    pattern = write_files(frame, tmp_path / "in", n_files=2)
    config = write_config(tmp_path / "c.yaml", methods=["graph"],
                          windowing={"size_days": 3, "period_days": 1,
                                     "allowed_lateness_days": 0})
    out = tmp_path / "out"
    code = main(["recalibrate", "--config", config, "--input", pattern, "--output", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    run_id = (out / "LATEST").read_text().strip()
    manifest = json.loads((out / "runs" / run_id / "manifest.json").read_text())
    windows = sorted(p.name for p in (out / "runs" / run_id / "windows").iterdir())
    # 6 days of data, 3-day windows sliding by a day: windows start on days -2 .. 5
    assert len(windows) == manifest["windows"] == 8
    assert f"{len(windows)} event-time windows" in printed
    assert "publish guard per window (compared with nothing: first run)" in printed
    assert manifest["published"] is True
    guard = manifest["guard"]
    assert [w["window"] for w in guard["windows"]] == windows  # every window, by end
    assert guard["window_states"]["held"] == 0
    # 3-day windows over 6 days: the 2 leading and 2 trailing windows are partial
    assert guard["window_states"] == {"applied": 4, "held": 0, "withdrawn": 0,
                                      "not_eligible": 4}
    times = frame["event_time"]
    assert manifest["event_time_range"]["min_utc"] == times.min().isoformat()
    assert manifest["event_time_range"]["max_utc"] == times.max().isoformat()
    assert manifest["row_accounting"]["read"] == len(frame)


# --------------------------------------------------------------------------- complete windows
WEEK = {"size_days": 7, "period_days": 1, "allowed_lateness_days": 0}
DAY = pd.Timedelta(days=1)


@pytest.fixture(scope="module")
def partial_day(tmp_path_factory):
    """10 whole days of data and the first 6 hours of an 11th, recalibrated in 7-day windows
    sliding by a day through the CLI; returns (frame, input glob, recalibrate output, tmp)."""
    tmp = tmp_path_factory.mktemp("partial_day")
    frame = stream(40_000, days=11, seed=5)
    frame = frame[frame["event_time"] < START + 10 * DAY + pd.Timedelta(hours=6)]
    frame = frame.reset_index(drop=True)
    pattern = write_files(frame, tmp / "in", n_files=2)
    config = write_config(tmp / "recal.yaml", windowing=WEEK)
    code = main(["recalibrate", "--config", config, "--input", pattern,
                 "--output", str(tmp / "recal")])
    assert code == 0
    return frame, pattern, str(tmp / "recal"), tmp


def direct_window(frame: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp) -> dict:
    """Records (method graph) computed by costlib directly on the rows of [start, end)."""
    rows = frame[(frame["event_time"] >= start) & (frame["event_time"] < end)]
    config = base_config(methods=["graph", "hull"], min_rated={"positives": 5, "negatives": 5},
                         grid={"edges": "uniform", "bins": 16, "range": [0.0, 1.0]})
    return {r["group"]: r for r in direct_records(rows, config) if r["method"] == "graph"}


def expected_flags(frame: pd.DataFrame, records: dict) -> pd.Series:
    """score >= threshold for any classifier (null scores never fire), by each group's record
    (a group without one uses __all__); null where the record has no thresholds."""
    scores = np.nan_to_num(frame[CLASSIFIERS].to_numpy(dtype=float), nan=-np.inf)
    flags = pd.Series(pd.NA, index=frame["item_id"].astype(str), dtype="boolean")
    for group, rows in frame.groupby("group"):
        thresholds = records.get(group, records["__all__"])["thresholds"]
        if thresholds is not None:
            fired = (scores[rows.index] >= np.asarray(thresholds)).any(axis=1)
            flags[rows["item_id"].astype(str).to_numpy()] = fired
    return flags


def run_decide_cli(tmp: Path, pattern: str, recal: str, name: str, capsys, **decide) -> tuple:
    config = write_config(tmp / f"{name}.yaml", windowing=WEEK, decide=decide)
    out = tmp / name
    code = main(["decide", "--config", config, "--input", pattern, "--operating-points", recal,
                 "--output", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    run_id = (out / "LATEST").read_text().strip()
    manifest = json.loads((out / "runs" / run_id / "manifest.json").read_text())
    used = manifest["operating_points"]["window"]["windows_used"]
    assert f"windows used ({manifest['operating_points']['window']['selection']}): " \
           f"[{used[0]['window_start']}, {used[0]['window_end']})" in printed
    return manifest, read_decisions(str(out)).to_pandas().set_index("item_id")


def test_recalibrate_records_the_event_time_range_it_read(partial_day):
    frame, _, recal, _ = partial_day
    run_dir = Path(recal) / "runs" / (Path(recal) / "LATEST").read_text().strip()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["event_time_range"]["min_utc"] == frame["event_time"].min().isoformat()
    assert manifest["event_time_range"]["max_utc"] == frame["event_time"].max().isoformat()
    assert manifest["event_time_range"]["row_groups_read"] == 0  # footer statistics sufficed
    # windows start on days -6 .. 10: the latest holds only the partial day
    assert manifest["windows"] == 17


def test_decide_applies_the_latest_complete_window_not_the_trailing_partial_one(partial_day,
                                                                               capsys):
    frame, pattern, recal, tmp = partial_day
    manifest, got = run_decide_cli(tmp, pattern, recal, "complete", capsys)
    start, end = START + 3 * DAY, START + 10 * DAY  # the last window inside the data
    window = manifest["operating_points"]["window"]
    assert window["selection"] == "latest_complete"
    assert [(w["window_start"], w["window_end"]) for w in window["windows_used"]] == [
        (start.isoformat(), end.isoformat())]
    assert window["latest_window"]["window_end"] == (START + 17 * DAY).isoformat()
    direct = direct_window(frame, start, end)
    want = expected_flags(frame, direct)
    assert got.loc[want.index, "threshold_decision"].astype("boolean").equals(want)
    assert got["operating_point_window_end"].dropna().unique().tolist() == [end]
    assert got["operating_point_window_end"].isna().sum() == want.isna().sum()
    # what the old rule applied: the window with the largest end, the partial day only
    partial = direct_window(frame, START + 10 * DAY, START + 17 * DAY)
    assert any(partial[g]["thresholds"] != direct[g]["thresholds"] for g in direct)


def test_decide_window_latest_applies_the_latest_window_even_when_partial(partial_day, capsys):
    frame, pattern, recal, tmp = partial_day
    manifest, got = run_decide_cli(tmp, pattern, recal, "latest", capsys, window="latest")
    start, end = START + 10 * DAY, START + 17 * DAY
    used = manifest["operating_points"]["window"]["windows_used"]
    assert [w["window_end"] for w in used] == [end.isoformat()]
    assert used[0]["uncovered_share"] > 0.9  # 6 hours of data in a 7-day window
    want = expected_flags(frame, direct_window(frame, start, end))
    assert got.loc[want.index, "threshold_decision"].astype("boolean").equals(want)
    assert set(got["operating_point_window_end"].dropna()) == {end}


def test_decide_fails_closed_when_no_window_is_complete(tmp_path, capsys):
    frame = stream(6000, days=3, seed=7)  # 3 days of data, 7-day windows
    pattern = write_files(frame, tmp_path / "in", n_files=1)
    config = write_config(tmp_path / "c.yaml", windowing=WEEK)
    assert main(["recalibrate", "--config", config, "--input", pattern,
                 "--output", str(tmp_path / "recal")]) == 0
    capsys.readouterr()
    code = main(["decide", "--config", config, "--input", pattern, "--operating-points",
                 str(tmp_path / "recal"), "--output", str(tmp_path / "dec")])
    err = capsys.readouterr().err
    assert code == 2
    assert "no complete window" in err and "decide.window: latest" in err
    assert not (tmp_path / "dec").exists()


# --------------------------------------------------------------------------- the rule's parts
@pytest.mark.parametrize(("unit", "tz", "statistics"), [
    ("ns", "UTC", True), ("ns", "UTC", False), ("ms", None, True), ("s", None, False),
    ("us", "Europe/Paris", True),
])
def test_event_time_range_from_footers_or_the_column(tmp_path, unit, tz, statistics):
    """Footer statistics (or, without them, the column) give the rows' min and max event time,
    floored to microseconds with naive times as UTC, as the pipeline reads them."""
    rng = np.random.default_rng(1)
    raw = rng.integers(1_790_000_000 * 10**9, 1_790_900_000 * 10**9, size=3000)
    times = pd.Series(pd.to_datetime(raw, unit="ns", utc=True)).dt.floor(
        {"s": "s", "ms": "ms", "us": "us", "ns": "ns"}[unit])
    values = pa.array(times.dt.tz_localize(None), pa.timestamp(unit))
    if tz is not None:
        values = pa.array(times, pa.timestamp(unit, tz))
    null = np.zeros(3000, dtype=bool)
    null[:1000] = True  # a whole row group of null times (dead-lettered, not in the range)
    null[1500] = True
    table = pa.table({"event_time": pa.array(values.to_pylist(), values.type, mask=null)})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=1000,
                   write_statistics=statistics)
    got = event_time_range([str(tmp_path / "a.parquet")], "event_time")
    kept = times[~null]
    assert got["min_utc"] == kept.min().floor("us").isoformat()
    assert got["max_utc"] == kept.max().floor("us").isoformat()
    assert got["row_groups_read"] == (1 if statistics else 3)  # the all-null group is read


def test_a_window_is_complete_when_little_of_it_lies_outside_the_data():
    read = {"min_utc": "2026-11-01T00:00:03+00:00", "max_utc": "2026-11-10T23:59:59+00:00"}
    day = dt.timedelta(days=1)
    first = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    assert uncovered_share((first, first + 7 * day), read) == pytest.approx(3 / (7 * 86_400))
    assert uncovered_share((first + 3 * day, first + 10 * day), read) == pytest.approx(
        1 / (7 * 86_400))  # the last second of 11-10
    assert uncovered_share((first + 4 * day, first + 11 * day), read) == pytest.approx(
        (86_400 + 1) / (7 * 86_400))
    assert uncovered_share((first - 7 * day, first), read) == 1.0
    config = RunConfig.from_dict({"classifiers": CLASSIFIERS, "target": {"slope": 1.0},
                                  "decide": {"max_uncovered_share": 0.0}})
    windows = {i: (first + i * day, first + (i + 7) * day) for i in range(-1, 6)}
    records = [{"group": "g", "window_start": s, "window_end": e, "rule": "any",
                "method": "graph", "classifiers": CLASSIFIERS, "thresholds": [i / 10, 0.5],
                "status": "ok", "fallback_group": None, "pane_index": 0, "run_id": "r"}
               for i, (s, e) in windows.items()]
    # strict: events at or beyond both ends; [11-04, 11-11) misses the last second of 11-10
    strict = select_operating_points(records, config, event_time_range=read)
    assert strict.get("g").thresholds == (0.2, 0.5)
    short = {"min_utc": "2026-11-03T00:00:00+00:00", "max_utc": "2026-11-08T23:59:59+00:00"}
    with pytest.raises(InputError, match=r"no complete window.*\[2026-11-06.*57\.1%"):
        select_operating_points(records, base_config(), event_time_range=short)
    tolerant = select_operating_points(records, base_config(), event_time_range=read)
    assert tolerant.get("g").window_end == first + 10 * day  # [11-05, 11-12) is 1/7 outside
    assert tolerant.get("g").thresholds == (0.3, 0.5)
    used = tolerant.details["window"]["windows_used"]
    assert [(u["window_start"], u["groups"]) for u in used] == [
        (windows[3][0].isoformat(), ["g"])]
    with pytest.raises(InputError, match="without the event-time range"):
        select_operating_points(records, base_config())


def test_report_shows_the_window_decide_applies(partial_day):
    """The report used to show each group's latest window, partial or not."""
    from costlib_pipelines.report.changes import applied_points, latest_points
    from costlib_pipelines.report.page import build_report
    from costlib_pipelines.report.runs_data import load_run

    _, _, recal, _ = partial_day
    run = load_run(recal)
    applied = applied_points(run)
    assert {p["window_end"] for p in applied.values()} == {(START + 10 * DAY).to_pydatetime()}
    assert {p["window_end"] for p in latest_points(run.records).values()} == {
        (START + 17 * DAY).to_pydatetime()}  # the partial trailing window
    assert f"Applied window {START + 3 * DAY:%Y-%m-%d %H:%M}" in build_report(run, None)
