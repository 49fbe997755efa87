"""Windowed runs through the CLI, the complete window ``costlib decide`` applies, and the config
check of ``decision_method`` against ``methods`` (issue 9, "Safe operations").

Pipelines run on Beam's FnApiRunner in process (no Beam flags).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from pipeline_data import base_config, direct_records, write_files

from costlib.sample import generate_score_stream
from pipelines.cli import main
from pipelines.config import ConfigError, RunConfig
from pipelines.decide import read_decisions

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
    assert "no publish guard" in printed
    assert manifest["guard"] is None and manifest["published"] is True
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


def run_decide_cli(tmp: Path, pattern: str, recal: str, name: str, **decide) -> tuple:
    config = write_config(tmp / f"{name}.yaml", windowing=WEEK, decide=decide)
    out = tmp / name
    code = main(["decide", "--config", config, "--input", pattern, "--operating-points", recal,
                 "--output", str(out)])
    assert code == 0
    run_id = (out / "LATEST").read_text().strip()
    manifest = json.loads((out / "runs" / run_id / "manifest.json").read_text())
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


def test_decide_applies_the_latest_complete_window_not_the_trailing_partial_one(partial_day):
    frame, pattern, recal, tmp = partial_day
    manifest, got = run_decide_cli(tmp, pattern, recal, "complete")
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


def test_decide_window_latest_applies_the_latest_window_even_when_partial(partial_day):
    frame, pattern, recal, tmp = partial_day
    manifest, got = run_decide_cli(tmp, pattern, recal, "latest", window="latest")
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
