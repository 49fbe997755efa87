"""The default (auto) edges in windowed mode (issue 25): every window of a run shares them,
carried from the published run or placed by a first pass over the run's input; a windowed run
equals batch runs over each window's rows bit for bit."""

import datetime as dt
import shutil

import apache_beam as beam
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.test_stream import TestStream as BeamTestStream
from pipeline_data import (
    AUTO_CONFIG,
    comparable,
    direct_records,
    sample_frame,
    write_files,
)

from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.recalibrate.pipeline import build_recalibrate, run_recalibrate

RAW = {**AUTO_CONFIG, "min_rated": {"positives": 3, "negatives": 3},
       "publish": {"max_threshold_change": None, "min_rated": 0}}
WINDOWING = {"size_days": 3, "period_days": 1, "allowed_lateness_days": 1}


def _window_bounds(directory):
    start_text, end_text = directory.name.split("_")
    parse = lambda text: pd.Timestamp(dt.datetime.strptime(text, "%Y%m%dT%H%M%S"), tz="UTC")  # noqa: E731
    return parse(start_text), parse(end_text)


def _records(path):
    out = []
    for r in pq.read_table(path).to_pylist():
        out.append({k: v for k, v in r.items()
                    if k not in ("window_start", "window_end", "pane_index", "run_id",
                                 "config_digest")})
    return comparable(out)


@pytest.fixture(scope="module")
def frames():
    frame = sample_frame(16_000, seed=21)
    first = frame[frame["event_time"] < frame["event_time"].min() + pd.Timedelta(days=3)]
    return sample_frame(8_000, seed=5), first.reset_index(drop=True)


def test_windowed_config_defaults_to_auto_and_refuses_quantile_edges():
    assert RunConfig.from_dict({**RAW, "windowing": WINDOWING}).grid.edges == "auto"
    with pytest.raises(ConfigError, match=r"grid\.edges: quantile edges are not supported"):
        RunConfig.from_dict({**RAW, "windowing": WINDOWING, "grid": {"edges": "quantile"}})


def test_windowed_run_with_carried_edges_equals_batch_runs_per_window(frames, tmp_path):
    previous, frame = frames
    batch = RunConfig.from_dict(RAW)
    windowed = RunConfig.from_dict({**RAW, "windowing": WINDOWING})
    seeded = tmp_path / "seeded"
    run_recalibrate(batch, write_files(previous, tmp_path / "prev"), str(seeded))
    shutil.copytree(seeded, tmp_path / "out")
    manifest = run_recalibrate(windowed, write_files(frame, tmp_path / "in", n_files=2),
                               str(tmp_path / "out"))
    assert manifest["grid_edges"]["source"]["from"] == "previous_run"
    windows = sorted((tmp_path / "out" / "runs" / manifest["run_id"] / "windows").iterdir())
    assert len(windows) >= 3
    for i, directory in enumerate(windows[:3]):
        start, end = _window_bounds(directory)
        rows = frame[(frame["event_time"] >= start) & (frame["event_time"] < end)]
        out = tmp_path / f"batch_{i}"
        shutil.copytree(seeded, out)  # the same published run to carry edges from
        m = run_recalibrate(batch, write_files(rows, tmp_path / f"rows_{i}"), str(out))
        assert m["grid_edges"]["edges"] == manifest["grid_edges"]["edges"]
        expected = _records(out / "runs" / m["run_id"] / "operating_points.parquet")
        assert _records(directory / "operating_points.parquet") == expected, directory.name


def test_first_windowed_run_places_shared_edges_by_a_first_pass(frames, tmp_path):
    _, frame = frames
    windowed = RunConfig.from_dict({**RAW, "windowing": WINDOWING})
    manifest = run_recalibrate(windowed, write_files(frame, tmp_path / "in"), str(tmp_path / "o"))
    entry = manifest["grid_edges"]
    assert entry["recipe"] == "auto" and entry["source"]["from"] == "this_run"
    edges = [np.array(e) for e in entry["edges"]]
    assert all(e.size <= windowed.n_edges for e in edges)
    directory = sorted((tmp_path / "o" / "runs" / manifest["run_id"] / "windows").iterdir())[1]
    start, end = _window_bounds(directory)
    rows = frame[(frame["event_time"] >= start) & (frame["event_time"] < end)]
    strip = lambda records: [{k: v for k, v in r.items() if k != "config_digest"}  # noqa: E731
                             for r in records]
    expected = [{k: v for k, v in r.items() if k not in ("window_start", "window_end",
                                                          "pane_index", "run_id")}
                for r in direct_records(rows, RunConfig.from_dict(RAW), edges=edges)]
    got = _records(directory / "operating_points.parquet")
    assert strip(got) == strip(comparable(expected))


def test_a_stream_without_a_run_to_carry_from_is_refused(tmp_path):
    windowed = RunConfig.from_dict({**RAW, "windowing": WINDOWING})
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    with pytest.raises(ConfigError, match="auto edges on a stream need edges carried"):
        pipeline = beam.Pipeline(runner=BundleBasedDirectRunner(), options=options)
        batches = pipeline | BeamTestStream().advance_watermark_to_infinity()
        build_recalibrate(pipeline, [], windowed, str(tmp_path / "run"), "s", batches=batches)
