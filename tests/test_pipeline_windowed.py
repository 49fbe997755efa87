"""Windowed recalibration under TestStream: on-time and late data, accumulating panes."""

import datetime as dt

import apache_beam as beam
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.test_stream import TestStream as BeamTestStream
from apache_beam.transforms.window import TimestampedValue
from pipeline_data import base_config, comparable, direct_records, sample_frame

from costlib_pipelines.recalibrate.pipeline import build_recalibrate

START = pd.Timestamp("2026-11-01", tz="UTC")
DAY = 86_400


def _seconds(ts: pd.Timestamp) -> float:
    return ts.timestamp()


def _table(rows: pd.DataFrame) -> pa.Table:
    return pa.Table.from_pandas(rows, preserve_index=False)


def test_sliding_windows_with_late_data_equal_batch_runs_per_window(tmp_path):
    config = base_config(
        methods=["graph", "hull"],
        windowing={"size_days": 3, "period_days": 1, "allowed_lateness_days": 2},
        min_rated={"positives": 3, "negatives": 3},
    )
    frame = sample_frame(24_000, seed=11)
    frame = frame[frame["event_time"] < START + pd.Timedelta(days=6)]
    frame = frame.reset_index(drop=True)
    day = ((frame["event_time"] - START) / pd.Timedelta(days=1)).astype(int)
    # Late rows: a quarter of day 2 (2026-11-03) arrives after the watermark reached 11-04 12:00,
    # i.e. after window [11-01, 11-04) closed (but within its allowed lateness of 2 days).
    late_mask = (day == 2) & (frame["item_id"] % 4 == 0)
    on_time = frame[~late_mask]

    stream = BeamTestStream()
    for d in range(6):
        rows = on_time[day[~late_mask] == d]
        for part, chunk in enumerate((rows.iloc[::2], rows.iloc[1::2])):
            stream = stream.add_elements(
                [TimestampedValue((f"day{d}", part, _table(chunk)), _seconds(START) + d * DAY)]
            )
        if d == 3:
            # Watermark at 11-04 12:00: window [11-01, 11-04) is complete and fires on time.
            stream = stream.advance_watermark_to(_seconds(START) + 3.5 * DAY)
            late = frame[late_mask]
            stream = stream.add_elements(
                [TimestampedValue(("late", 0, _table(late)), _seconds(START) + 2 * DAY)]
            )
    stream = stream.advance_watermark_to_infinity()

    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    run_dir = str(tmp_path / "run")
    with beam.Pipeline(runner=BundleBasedDirectRunner(), options=options) as pipeline:
        batches = pipeline | stream
        build_recalibrate(pipeline, [], config, run_dir, "stream", batches=batches)

    windows = sorted((tmp_path / "run" / "windows").iterdir())
    assert len(windows) == 8  # 3-day windows sliding by a day over 6 days of data
    seen_late_pane = False
    for directory in windows:
        start_text, end_text = directory.name.split("_")
        start = pd.Timestamp(dt.datetime.strptime(start_text, "%Y%m%dT%H%M%S"), tz="UTC")
        end = pd.Timestamp(dt.datetime.strptime(end_text, "%Y%m%dT%H%M%S"), tz="UTC")
        assert end - start == pd.Timedelta(days=3)
        rows = frame[(frame["event_time"] >= start) & (frame["event_time"] < end)]
        got = pq.read_table(directory / "operating_points.parquet").to_pylist()
        expected = direct_records(rows, config)
        for record in expected:
            record["window_start"] = start.to_pydatetime()
            record["window_end"] = end.to_pydatetime()
        panes = {r["pane_index"] for r in got}
        if start <= START + pd.Timedelta(days=2) < end and end <= START + pd.Timedelta(days=3.5):
            # The window [11-01, 11-04) closed before the late rows came: a late pane that
            # holds all rows of the window (accumulating), not just the late ones.
            assert max(panes) >= 1
            seen_late_pane = True
        strip = [{k: v for k, v in r.items() if k != "pane_index"} for r in got]
        for record in expected:
            record.pop("pane_index")
        assert comparable(strip) == comparable(expected), directory.name
    assert seen_late_pane
    accounting = (tmp_path / "run" / "accounting.json").read_text()
    assert f'"read": {len(frame)}' in accounting


def test_windowed_run_through_the_launcher_accounts_for_every_row(tmp_path):
    """run_recalibrate on files in windowed mode: accounting.json and the manifest's totals."""
    from pipeline_data import write_files

    from costlib_pipelines.recalibrate.pipeline import run_recalibrate

    config = base_config(methods=["graph"],
                         windowing={"size_days": 3, "period_days": 1, "allowed_lateness_days": 1})
    frame = sample_frame(6_000, seed=2)
    # pandas writes nanosecond timestamps; give them sub-microsecond digits.
    frame["event_time"] = frame["event_time"] + pd.to_timedelta(frame["item_id"] % 997, unit="ns")
    pattern = write_files(frame, tmp_path / "in", n_files=2)
    manifest = run_recalibrate(config, pattern, str(tmp_path / "out"))
    assert manifest["row_accounting"]["read"] == len(frame)
    run_dir = tmp_path / "out" / "runs" / manifest["run_id"]
    assert (run_dir / "accounting.json").exists()
    assert any((run_dir / "windows").iterdir())
