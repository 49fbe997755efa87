"""Windowed recalibration sharded by group (issue 12): the window files do not depend on the
shard count, the fallback crosses shards, no GroupByKey input holds more than one shard's
groups, and a late firing of one shard re-assembles its window with the others unchanged.

TestStream pipelines run on Beam's BundleBasedDirectRunner (streaming).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import apache_beam as beam
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.test_stream import TestStream as BeamTestStream
from apache_beam.transforms import trigger
from apache_beam.transforms.window import FixedWindows, TimestampedValue
from pipeline_data import base_config, comparable, direct_grids, direct_records

from costlib.sample import generate_score_stream
from costlib.thresholds.loop._recalibration import ALL_GROUPS, GroupResult, apply_fallback
from costlib_pipelines.io.files import parquet_bytes
from costlib_pipelines.io.records import (
    PN_CURVE_SCHEMA,
    arrow_schema,
    operating_point_records,
    point_settings,
    records_to_jsonl,
    records_to_table,
)
from costlib_pipelines.recalibrate import window_shards
from costlib_pipelines.recalibrate.in_force import InForce
from costlib_pipelines.recalibrate.optimizing import optimize_one
from costlib_pipelines.recalibrate.pipeline import build_recalibrate

START = pd.Timestamp("2026-11-01", tz="UTC")
DAY = 86_400
WINDOWING = {"size_days": 2, "period_days": 1, "allowed_lateness_days": 2}


def _frame(n: int, groups, seed: int, days: int = 4) -> pd.DataFrame:
    frame = generate_score_stream(n, groups=groups, prevalence=0.03, days=days, seed=seed)
    frame["weight"] = np.where(frame["item_id"] % 3 == 0, 2.5, 1.0)
    return frame


def _thin(frame: pd.DataFrame, group: str, keep: int = 3) -> pd.DataFrame:
    """``group`` keeps only ``keep`` rated rows (below min_rated): a thin group."""
    rated = frame.index[(frame["group"] == group) & frame["label"].notna()]
    return frame.drop(rated[keep:]).reset_index(drop=True)


def _options() -> PipelineOptions:
    options = PipelineOptions()
    options.view_as(StandardOptions).streaming = True
    return options


def _day(frame: pd.DataFrame) -> pd.Series:
    return ((frame["event_time"] - START) / pd.Timedelta(days=1)).astype(int)


def _stream(frame: pd.DataFrame, late_mask: pd.Series | None = None) -> BeamTestStream:
    """Each day's rows in two batches at that day's start; with ``late_mask``, those rows
    (of day 1) arrive after the watermark passed day 2.5 (window [day 0, day 2) closed)."""
    late_mask = pd.Series(False, index=frame.index) if late_mask is None else late_mask
    day = _day(frame)
    stream = BeamTestStream()
    for d in sorted(day.unique()):
        rows = frame[(day == d) & ~late_mask]
        for part, chunk in enumerate((rows.iloc[::2], rows.iloc[1::2])):
            table = pa.Table.from_pandas(chunk, preserve_index=False)
            stream = stream.add_elements(
                [TimestampedValue((f"day{d}", part, table), START.timestamp() + d * DAY)])
        if d == 2 and late_mask.any():
            stream = stream.advance_watermark_to(START.timestamp() + 2.5 * DAY)
            late = pa.Table.from_pandas(frame[late_mask], preserve_index=False)
            stream = stream.add_elements(
                [TimestampedValue(("late", 0, late), START.timestamp() + 1 * DAY)])
    return stream.advance_watermark_to_infinity()


def _run(tmp: Path, config, stream: BeamTestStream, *, in_force=None, tap=None) -> Path:
    run_dir = tmp / "run"
    with beam.Pipeline(runner=BundleBasedDirectRunner(), options=_options()) as pipeline:
        batches = pipeline | stream
        build_recalibrate(pipeline, [], config, str(run_dir), "stream", batches=batches,
                          in_force=in_force)
        if tap is not None:
            tap(pipeline)
    return run_dir


def _window_files(run_dir: Path) -> dict[str, dict[str, bytes]]:
    return {
        w.name: {name: (w / name).read_bytes() for name in
                 ("operating_points.parquet", "operating_points.jsonl", "pn_curves.parquet")}
        for w in sorted((run_dir / "windows").iterdir())
    }


def _window_bounds(name: str) -> tuple[pd.Timestamp, pd.Timestamp]:
    start, end = (pd.Timestamp(dt.datetime.strptime(t, "%Y%m%dT%H%M%S"), tz="UTC")
                  for t in name.split("_"))
    return start, end


# --------------------------------------------------------------------------- independent truth
def test_window_files_are_the_same_for_every_shard_count_and_equal_batch_runs(tmp_path,
                                                                              monkeypatch):
    groups = [f"g{i:02d}" for i in range(9)]
    frame = _thin(_frame(9000, groups, seed=5), "g04")
    late_mask = (_day(frame) == 1) & (frame["item_id"] % 3 == 0)
    config = base_config(methods=["graph", "hull"], windowing=WINDOWING,
                         min_rated={"positives": 3, "negatives": 3})
    files = {}
    for shards in (1, 3, 7):
        monkeypatch.setattr(window_shards, "SHARDS", shards)
        run_dir = _run(tmp_path / f"s{shards}", config, _stream(frame, late_mask))
        files[shards] = _window_files(run_dir)
    assert len(files[1]) == 5  # 2-day windows sliding by a day over 4 days of data
    assert files[3] == files[1] and files[7] == files[1]  # byte for byte

    seen_late = seen_fallback = False
    for name, written in files[1].items():
        table = pq.read_table(pa.BufferReader(written["operating_points.parquet"]))
        # Exactly what one write of all the window's rows writes (one Parquet row group)...
        schema = arrow_schema("operating_point.json")
        assert parquet_bytes(table.cast(schema)) == written["operating_points.parquet"]
        curves = pq.read_table(pa.BufferReader(written["pn_curves.parquet"]))
        assert parquet_bytes(curves.cast(PN_CURVE_SCHEMA)) == written["pn_curves.parquet"]
        got = table.to_pylist()
        # ... the JSON lines are the same records, line for line ...
        assert records_to_jsonl(got).encode() == written["operating_points.jsonl"]
        # ... sorted by group, then method as the records are built ...
        assert [r["group"] for r in got] == sorted(r["group"] for r in got)
        # ... and equal to costlib called directly on the window's rows.
        start, end = _window_bounds(name)
        rows = frame[(frame["event_time"] >= start) & (frame["event_time"] < end)]
        expected = direct_records(rows, config)
        for record in expected:
            record.update(window_start=start.to_pydatetime(), window_end=end.to_pydatetime())
        strip = [{k: v for k, v in r.items() if k != "pane_index"} for r in got]
        for record in expected:
            record.pop("pane_index")
        assert comparable(strip) == comparable(expected), name
        seen_late |= max(r["pane_index"] for r in got) >= 1
        seen_fallback |= any(r["status"] == "fallback" for r in got)
    assert seen_late and seen_fallback


# --------------------------------------------------------------------------- fallback
def _thin_group_in_another_shard(shards: int) -> str:
    home = window_shards.window_shard_of(ALL_GROUPS, shards)
    return next(g for g in (f"thin{i}" for i in range(100))
                if window_shards.window_shard_of(g, shards) != home)


@pytest.mark.parametrize("fallback, in_force, status", [
    ("all_groups", False, "fallback"),
    ("none", True, "kept"),
    ("none", False, "insufficient_data"),
])
def test_a_thin_group_in_another_shard_than_all_groups_gets_its_fallback(
        tmp_path, monkeypatch, fallback, in_force, status):
    shards = 7
    monkeypatch.setattr(window_shards, "SHARDS", shards)
    thin = _thin_group_in_another_shard(shards)
    frame = _thin(_frame(3000, ["g00", "g01", thin], seed=8, days=1), thin, keep=2)
    config = base_config(methods=["graph", "hull"], fallback=fallback,
                         windowing={"size_days": 1, "period_days": 1,
                                    "allowed_lateness_days": 0},
                         min_rated={"positives": 3, "negatives": 3})
    thresholds = (0.625, 0.875)  # on the 24-bin grid's edges
    force = InForce(by_group={thin: thresholds}, default=None, source="test") if in_force else None
    run_dir = _run(tmp_path, config, _stream(frame), in_force=force)
    [window] = _window_files(run_dir).values()
    records = pq.read_table(pa.BufferReader(window["operating_points.parquet"])).to_pylist()
    by = {(r["group"], r["method"]): r for r in records}
    for method in config.methods:
        record, parent = by[(thin, method)], by[(ALL_GROUPS, method)]
        assert record["status"] == status
        assert parent["status"] == "ok"
        if status == "fallback":
            assert record["thresholds"] == parent["thresholds"]
            assert record["fallback_group"] == ALL_GROUPS
        elif status == "kept":
            assert record["thresholds"] == list(thresholds)
        else:
            assert record["thresholds"] is None or all(
                t is None for t in record["thresholds"])
    assert sum(r["group"] == ALL_GROUPS for r in records) == len(config.methods)  # once


# --------------------------------------------------------------------------- no single key
class _TapFn(beam.DoFn):
    """Writes, per GroupByKey input element, the key and the group results it carries."""

    def __init__(self, directory: str, label: str):
        self.directory, self.label = directory, label

    def start_bundle(self):
        self.lines = []

    def process(self, element):
        key, value = element
        own = []
        if isinstance(value, tuple) and value and isinstance(value[0], GroupResult):
            if len(value) < 3 or value[2]:  # parent-only copies carry no group of the key
                own.append(value[0].group)
        self.lines.append(json.dumps({"label": self.label, "key": repr(key), "groups": own,
                                      "value": type(value).__name__}))

    def finish_bundle(self):
        if self.lines:
            path = Path(self.directory) / f"{uuid.uuid4().hex}.jsonl"
            path.write_text("\n".join(self.lines) + "\n")


def _tap_group_by_keys(directory: Path):
    def tap(pipeline):
        found = []

        class Visitor(beam.pipeline.PipelineVisitor):
            def enter_composite_transform(self, node):
                self.visit_transform(node)

            def visit_transform(self, node):
                if isinstance(node.transform, beam.GroupByKey) and all(
                        node.full_label != label for label, _ in found):
                    found.append((node.full_label, node.main_inputs[next(iter(node.main_inputs))]))

        pipeline.visit(Visitor())
        for i, (label, pcoll) in enumerate(found):
            _ = pcoll | f"Tap{i}" >> beam.ParDo(_TapFn(str(directory), label))
        return found

    return tap


def test_no_group_by_key_input_holds_more_than_one_shards_groups(tmp_path, monkeypatch):
    shards = 6
    monkeypatch.setattr(window_shards, "SHARDS", shards)
    groups = [f"group-{i:02d}" for i in range(40)]
    frame = _frame(8000, groups, seed=3, days=1)
    config = base_config(methods=["graph"], fallback="all_groups",
                         windowing={"size_days": 1, "period_days": 1,
                                    "allowed_lateness_days": 0},
                         min_rated={"positives": 1, "negatives": 1})
    taps = tmp_path / "taps"
    taps.mkdir()
    run_dir = _run(tmp_path, config, _stream(frame), tap=_tap_group_by_keys(taps))
    lines = [json.loads(line) for path in taps.iterdir() for line in path.read_text().split("\n")
             if line]
    labels = {line["label"] for line in lines}
    assert any("PerShard" in label for label in labels)
    assert any("PerWindow" in label for label in labels)
    per_key: dict[tuple[str, str], set[str]] = {}
    for line in lines:
        per_key.setdefault((line["label"], line["key"]), set()).update(line["groups"])
    carried = set().union(*per_key.values())
    assert carried == {*groups, ALL_GROUPS}  # every group's result went through a GroupByKey
    for (label, key), names in per_key.items():
        homes = {window_shards.window_shard_of(g, shards) for g in names}
        assert len(homes) <= 1, (label, key, sorted(names))
    peak = max(len(names) for names in per_key.values())
    assert peak < len(groups) // 2  # the old single key held all 41
    # The per-window assembly's input is shard ids only.
    assert {line["value"] for line in lines if "PerWindow" in line["label"]} == {"int"}
    [window] = _window_files(run_dir).values()
    records = pq.read_table(pa.BufferReader(window["operating_points.parquet"])).to_pylist()
    assert [r["group"] for r in records] == sorted([*groups, ALL_GROUPS])


# --------------------------------------------------------------------------- late shard
def _result(config, frame: pd.DataFrame, group: str):
    rows = frame.assign(group=group) if group == ALL_GROUPS else frame[frame["group"] == group]
    return optimize_one(config, group, direct_grids(rows, config)[group])


def _expected(config, newest: dict, start, end) -> list[dict]:
    """One worker holding every group's newest result: fallback, records sorted by group."""
    results = apply_fallback({g: r for g, (r, _) in newest.items()}, fallback=config.fallback)
    records = []
    for group in sorted(results):
        records += operating_point_records(
            results[group], rule=config.rule, classifiers=config.classifiers,
            target_marginal_precision=config.target.marginal_precision, run_id="stream",
            config_digest=config.digest, window_start=start, window_end=end,
            pane_index=newest[group][1], settings=point_settings(config))
    return records


@pytest.mark.parametrize("late_group", ["late", ALL_GROUPS])
def test_a_late_firing_re_assembles_its_window_with_the_other_shards_unchanged(
        tmp_path, late_group):
    shards = 5
    config = base_config(methods=["graph", "hull"], min_rated={"positives": 3, "negatives": 3})
    home = window_shards.window_shard_of(ALL_GROUPS, shards)
    names = [f"n{i:02d}" for i in range(30)]
    late = next(g for g in names if window_shards.window_shard_of(g, shards) != home)
    thin = next(g for g in names if window_shards.window_shard_of(g, shards) not in
                (home, window_shards.window_shard_of(late, shards)))
    others = [g for g in names[:8] if g not in (late, thin)]
    groups = [*others, late, thin]
    frame = _thin(_frame(6000, groups, seed=2, days=1), thin, keep=2)
    early = frame[frame["item_id"] % 2 == 0]  # the on-time rows; all rows arrive late
    on_time = {g: (_result(config, early, g), 0) for g in [*groups, ALL_GROUPS]}
    changed = late if late_group == "late" else ALL_GROUPS
    newest = {**on_time, changed: (_result(config, frame, changed), 1)}
    assert newest[changed][0].points != on_time[changed][0].points  # the late pane differs

    t0 = START.timestamp()
    stream = (BeamTestStream()
              .add_elements([TimestampedValue(("results", v), t0 + 60) for v in on_time.values()])
              .advance_watermark_to(t0 + 1.5 * DAY)  # the window [day 0, day 1) fired on time
              .add_elements([TimestampedValue(("results", newest[changed]), t0 + 120)])
              .advance_watermark_to_infinity())
    run_dir = tmp_path / "run"
    with beam.Pipeline(runner=BundleBasedDirectRunner(), options=_options()) as pipeline:
        _ = (pipeline | stream
             | beam.WindowInto(FixedWindows(DAY),
                               trigger=trigger.AfterWatermark(late=trigger.AfterCount(1)),
                               accumulation_mode=trigger.AccumulationMode.ACCUMULATING,
                               allowed_lateness=DAY)
             | window_shards.WriteWindows(config, str(run_dir), "stream", shards=shards))
    start, end = START.to_pydatetime(), (START + pd.Timedelta(days=1)).to_pydatetime()
    [window] = _window_files(run_dir).values()
    expected = _expected(config, newest, start, end)
    assert window["operating_points.parquet"] == parquet_bytes(
        records_to_table(expected, "operating_point.json"))
    assert window["operating_points.jsonl"] == records_to_jsonl(expected).encode()
    got = pq.read_table(pa.BufferReader(window["operating_points.parquet"])).to_pylist()
    panes = {r["group"]: r["pane_index"] for r in got}
    assert panes == {g: int(g == changed) for g in [*groups, ALL_GROUPS]}
    fallen = {r["method"]: r["thresholds"] for r in got if r["group"] == thin}
    parent = {r["method"]: r["thresholds"] for r in got if r["group"] == ALL_GROUPS}
    assert fallen == parent  # the thin group (its own shard) has the newest parent's points
    # The shard files are left for later firings; the launcher deletes them at the end, with
    # what a failed assembly may have left behind.
    leftover = next(run_dir.glob("windows/*")) / "operating_points.parquet.0123abcd.tmp"
    leftover.write_bytes(b"partial")
    assert window_shards.remove_window_shards(str(run_dir)) == 1
    assert not list(run_dir.glob("windows/*/shards"))
    assert not leftover.exists()
    assert sorted(p.name for p in leftover.parent.iterdir()) == [
        "operating_points.jsonl", "operating_points.parquet", "pn_curves.parquet"]


def test_a_finished_windowed_run_has_no_shard_files_left(tmp_path):
    from pipeline_data import write_files

    from costlib_pipelines.recalibrate.pipeline import run_recalibrate

    config = base_config(methods=["graph"], windowing=WINDOWING)
    pattern = write_files(_frame(3000, ["a", "b", "c"], seed=1, days=2), tmp_path / "in",
                          n_files=1)
    manifest = run_recalibrate(config, pattern, str(tmp_path / "out"))
    run_dir = tmp_path / "out" / "runs" / manifest["run_id"]
    assert manifest["windows"] == 3
    assert not [f for f in manifest["outputs"] if "/shards/" in f]
    assert not list(run_dir.glob("windows/*/shards"))
    for window in (run_dir / "windows").iterdir():
        assert sorted(p.name for p in window.iterdir()) == [
            "operating_points.jsonl", "operating_points.parquet", "pn_curves.parquet"]
