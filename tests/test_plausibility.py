"""Plausibility accounting (issue 9): reserved group, score range, event times, duplicate item
ids, and the accounting counters as Beam metrics. Counts are checked against pandas on the same
frame; runs go through the CLI where the user sees the defect.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from apache_beam.metrics.metric import MetricsFilter
from pipeline_data import SMALL_CONFIG as BASE
from pipeline_data import sample_frame, write_files

from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.pipeline import build_decide
from costlib_pipelines.io.accounting import CountDuplicateIds
from costlib_pipelines.io.batches import validate_batch
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.plausibility import Plausibility
from costlib_pipelines.io.published_points import select_operating_points
from costlib_pipelines.io.runs import RunDirectory, load_operating_points
from costlib_pipelines.recalibrate.pipeline import build_recalibrate, run_recalibrate
from costlib_pipelines.runner import make_pipeline


def _raw(**overrides) -> dict:
    return {**BASE, **overrides}


def _config_file(tmp_path, **overrides) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(_raw(**overrides)))
    return str(path)


def _recalibrate(tmp_path, inputs: str, config: str, out: str = "out") -> int:
    return main(["recalibrate", "--config", config, "--input", inputs,
                 "--output", str(tmp_path / out), "--run-id", "r1"])


def _decide(tmp_path, inputs: str, config: str, ops: str = "out") -> int:
    return main(["decide", "--config", config, "--input", inputs, "--operating-points",
                 str(tmp_path / ops), "--output", str(tmp_path / "dec"), "--run-id", "d1"])


def _manifest(tmp_path, out: str = "out", run_id: str = "r1") -> dict:
    return json.loads((tmp_path / out / "runs" / run_id / "manifest.json").read_text())


def _accounting(tmp_path, out: str = "out", run_id: str = "r1") -> dict:
    return json.loads((tmp_path / out / "runs" / run_id / "accounting.json").read_text())


def _valid(frame: pd.DataFrame) -> pd.Series:
    """Rows the pipeline keeps (sample frames only break these rules where a test says so)."""
    unscored = frame["text_model"].isna() & frame["image_model"].isna()
    return frame["group"].ne("__all__") & ~(frame["label"].notna() & unscored)


def _operating_points(tmp_path, out: str) -> list[dict]:
    rows = pq.read_table(tmp_path / out / "runs" / "r1" / "operating_points.parquet").to_pylist()
    drop = ("run_id", "config_digest")
    return sorted(({k: v for k, v in r.items() if k not in drop} for r in rows),
                  key=lambda r: (r["group"], r["method"]))


# --------------------------------------------------------------------------- reserved group
def test_a_group_named_all_is_dead_lettered_not_merged_into_the_all_groups_grid(
        tmp_path, capsys):
    frame = sample_frame(6000, seed=11)
    reserved = frame.index[frame["label"].notna()][:40].union(frame.index[:25])
    frame.loc[reserved, "group"] = "__all__"
    frame.loc[reserved, "label"] = True  # enough to move the all-groups grid if merged
    pattern = write_files(frame, tmp_path / "in", n_files=2, row_group_size=1000)
    config = _config_file(tmp_path)
    assert _recalibrate(tmp_path, pattern, config) == 0, capsys.readouterr().err
    acc = _manifest(tmp_path)["row_accounting"]
    assert acc["dead_letter_reasons"] == {"reserved_group": len(reserved)}
    assert acc["read"] == len(frame)
    assert acc["used"] == int((frame["label"].notna() & _valid(frame)).sum())

    # The same run without those rows gives the same operating points, __all__ included.
    clean = write_files(frame.drop(reserved), tmp_path / "clean", n_files=2,
                        row_group_size=1000)
    assert _recalibrate(tmp_path, clean, config, out="out_clean") == 0
    assert _operating_points(tmp_path, "out") == _operating_points(tmp_path, "out_clean")

    assert _decide(tmp_path, pattern, config) == 0, capsys.readouterr().err
    decided = _manifest(tmp_path, "dec", "d1")["row_accounting"]
    assert decided["dead_letter_reasons"] == {"reserved_group": len(reserved)}
    assert decided["decided"] == len(frame) - len(reserved)


# --------------------------------------------------------------------------- score range
def _scaled(frame: pd.DataFrame, rows, factor: float) -> pd.DataFrame:
    frame = frame.copy()
    frame.loc[rows, "text_model"] = frame.loc[rows, "text_model"] * factor
    return frame


def test_scores_far_outside_the_grid_range_hold_the_run(tmp_path, capsys):
    frame = sample_frame(6000, seed=12)
    frame = _scaled(frame, frame.index, 1000.0)  # scores 0..1000 against range [0, 1]
    pattern = write_files(frame, tmp_path / "in", n_files=2)
    code = _recalibrate(tmp_path, pattern, _config_file(tmp_path))
    err = capsys.readouterr().err
    assert code == 3  # old code: 0, thresholds [0, 0] published
    assert "held for review" in err and "plausibility:" in err
    assert "plausibility.score_range" in err and "grid.range" in err  # the keys to set
    assert "None" not in err and "no run of this output is published yet" in err
    assert not (tmp_path / "out" / "LATEST").exists()
    manifest = _manifest(tmp_path)
    above = int((_valid(frame) & (frame["text_model"] > 1.0)).sum())
    assert above > 0.9 * len(frame)
    assert manifest["published"] is False
    assert manifest["plausibility"] == {"score_above_range.text_model": above,
                                        "score_outside_range": above}
    assert any(v.startswith(f"plausibility: {above:,} of {len(frame):,} rows with a score "
                            "outside the plausible range")
               for v in manifest["guard"]["violations"])


def test_a_small_share_outside_the_range_is_counted_and_reported(tmp_path, capsys):
    frame = sample_frame(6000, seed=13)
    frame = _scaled(frame, frame.index[::400], 30.0)  # 15 rows (0.25%): some land above 1
    frame.loc[frame.index[7], "image_model"] = -0.5
    pattern = write_files(frame, tmp_path / "in", n_files=3, row_group_size=700)
    assert _recalibrate(tmp_path, pattern, _config_file(tmp_path)) == 0, \
        capsys.readouterr().err
    valid = _valid(frame)
    above = int((valid & (frame["text_model"] > 1)).sum())
    below = int((valid & (frame["image_model"] < 0)).sum())
    outside = int((valid & ((frame["text_model"] > 1) | (frame["image_model"] < 0))).sum())
    assert above > 0 and below == 1
    # The CLI summary shows them per classifier (before: only accounting.json did).
    assert (f"plausibility: {outside} rows with a score outside [0, 1] (image_model {below} "
            f"below; text_model {above} above): counted only") in capsys.readouterr().out
    manifest = _manifest(tmp_path)
    assert manifest["published"] is True
    assert manifest["plausibility"] == {"score_above_range.text_model": above,
                                        "score_below_range.image_model": below,
                                        "score_outside_range": outside}
    accounting = _accounting(tmp_path)  # extra counters, not buckets: rows stay used/unrated
    assert accounting["plausibility.score_outside_range"] == outside
    acc = manifest["row_accounting"]
    assert acc["used"] + acc["unrated"] + acc["dead_lettered"] == acc["read"] == len(frame)
    assert acc["dead_lettered"] == 0

    assert main(["report", "--run", str(tmp_path / "out")]) == 0
    html = next((tmp_path / "out" / "runs" / "r1").glob("*.html")).read_text()
    assert (f'<tr data-key="plausibility.score_above_range.text_model"><td>'
            f'score_above_range.text_model</td><td>{above}</td>') in html


def test_scores_outside_the_range_can_be_dead_lettered(tmp_path, capsys):
    frame = sample_frame(6000, seed=14)
    rated = frame.index[frame["label"].notna()]
    frame = _scaled(frame, rated[:10], 1e6)
    pattern = write_files(frame, tmp_path / "in", n_files=2)
    config = _config_file(tmp_path, plausibility={"scores_outside_range": "dead_letter"})
    assert _recalibrate(tmp_path, pattern, config) == 0, capsys.readouterr().err
    outside = int((_valid(frame) & (frame["text_model"] > 1)).sum())
    assert (f"plausibility: {outside} rows with a score outside [0, 1] (text_model {outside} "
            "above): dead-lettered") in capsys.readouterr().out
    acc = _manifest(tmp_path)["row_accounting"]
    assert acc["dead_letter_reasons"] == {"score_outside_range": outside}
    assert acc["used"] == int((_valid(frame) & frame["label"].notna()).sum()) - outside
    dead = pq.read_table(tmp_path / "out" / "runs" / "r1" / "dead_letter").to_pandas()
    assert sorted(dead["item_id"]) == sorted(frame.loc[frame["text_model"] > 1, "item_id"])


def test_decide_says_how_many_scores_were_outside_the_range(tmp_path, capsys):
    frame = sample_frame(6000, seed=14)
    config = _config_file(tmp_path)
    assert _recalibrate(tmp_path, write_files(frame, tmp_path / "in", n_files=1), config) == 0
    odd = _scaled(frame, frame.index[:25], 1e3)
    capsys.readouterr()
    assert _decide(tmp_path, write_files(odd, tmp_path / "odd", n_files=1), config) == 0
    outside = int((_valid(odd) & (odd["text_model"] > 1)).sum())
    assert outside > 0
    assert (f"plausibility: {outside} rows with a score outside [0, 1] (text_model {outside} "
            "above): counted only: they are decided like any other row") in \
        capsys.readouterr().out


def test_error_mode_names_file_row_group_and_column(tmp_path, capsys):
    frame = sample_frame(3000, seed=15)
    frame = _scaled(frame, frame.index[2500:2501], 1e3)
    pattern = write_files(frame, tmp_path / "in", n_files=1, row_group_size=1000)
    config = _config_file(tmp_path, plausibility={"scores_outside_range": "error"})
    code = _recalibrate(tmp_path, pattern, config)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert (f"error: {tmp_path / 'in' / 'part-0.parquet'}: row group 2: column(s) "
            "'text_model': 1 row(s) with a score outside the plausible range [0, 1]") in last


def test_explicit_edges_check_only_a_configured_score_range(tmp_path, capsys):
    frame = _scaled(sample_frame(3000, seed=16), [3, 4], 50.0)
    pattern = write_files(frame, tmp_path / "in", n_files=1)
    grid = {"edges": "explicit", "values": [[0.1, 0.3, 0.5], [0.2, 0.4]]}
    assert _recalibrate(tmp_path, pattern, _config_file(tmp_path, grid=grid)) == 0
    assert _manifest(tmp_path)["plausibility"] == {}
    config = _config_file(tmp_path, grid=grid, plausibility={"score_range": [0, 1]})
    assert _recalibrate(tmp_path, pattern, config, out="out2") == 0, capsys.readouterr().err
    expected = int((frame["text_model"] > 1).sum())
    assert _manifest(tmp_path, "out2")["plausibility"]["score_outside_range"] == expected == 2


def test_decide_stops_when_most_scores_are_outside_the_range(tmp_path, capsys):
    frame = sample_frame(3000, seed=17)
    good = write_files(frame, tmp_path / "good", n_files=1)
    config = _config_file(tmp_path)
    assert _recalibrate(tmp_path, good, config) == 0
    bad = write_files(_scaled(frame, frame.index, 100.0), tmp_path / "bad", n_files=1)
    code = _decide(tmp_path, bad, config)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2  # old code: 0, every row flagged
    assert "run d1 not committed: plausibility:" in last
    assert not (tmp_path / "dec" / "LATEST").exists()


def test_plausibility_settings_are_validated():
    with pytest.raises(Exception, match="score_range: need low < high"):
        Plausibility.from_config(RunConfig.from_dict(
            _raw(plausibility={"score_range": [1, 0]})))
    with pytest.raises(Exception, match="event_time_min"):
        RunConfig.from_dict(_raw(plausibility={"event_time_min": "yesterday"}))


# --------------------------------------------------------------------------- event times
def _with_ms_event_times(frame: pd.DataFrame, seconds_rows) -> pa.Table:
    """Event times as a millisecond column; ``seconds_rows`` hold epoch *seconds* instead."""
    ms = frame["event_time"].astype("int64").to_numpy() // 1_000_000
    ms[seconds_rows] //= 1000
    table = pa.Table.from_pandas(frame.drop(columns="event_time"), preserve_index=False)
    return table.append_column("event_time", pa.array(ms).cast(pa.timestamp("ms", "UTC")))


def test_epoch_seconds_in_a_millisecond_column_are_dead_lettered(tmp_path):
    # Through run_recalibrate: the CLI's summary of a windowed run fails on its own (it reads
    # manifest["guard"], which windowed manifests do not have; reported, not in this change).
    frame = sample_frame(6000, seed=18)
    seconds_rows = np.arange(0, 6000, 500)  # 12 rows (0.2%): windows in 1970 if read
    (tmp_path / "in").mkdir()
    path = str(tmp_path / "in" / "a.parquet")
    pq.write_table(_with_ms_event_times(frame, seconds_rows), path)
    windowing = {"size_days": 2, "period_days": 1, "allowed_lateness_days": 1}
    config = RunConfig.from_dict(_raw(windowing=windowing))
    manifest = run_recalibrate(config, path, str(tmp_path / "out"), run_id="r1")
    assert manifest["row_accounting"]["dead_letter_reasons"] == {
        "implausible_event_time": len(seconds_rows)}
    assert manifest["plausibility"] == {"event_time_before_range": len(seconds_rows),
                                        "event_time_outside_range": len(seconds_rows)}
    windows = sorted(p.name for p in (tmp_path / "out" / "runs" / "r1" / "windows").iterdir())
    assert windows and all(w.startswith("2026") for w in windows)  # old code: 1970 windows

    # Mostly implausible: the windowed run is not committed (InputError: exit 2 in the CLI).
    pq.write_table(_with_ms_event_times(frame, np.arange(6000)), path)
    with pytest.raises(InputError, match="not committed: plausibility: 6,000 of 6,000 rows "
                                         "with an event time outside the plausible range"):
        run_recalibrate(config, path, str(tmp_path / "out2"), run_id="r1")
    assert not (tmp_path / "out2" / "LATEST").exists()


def test_event_times_after_the_configured_end_are_counted(tmp_path):
    frame = sample_frame(2000, seed=19)
    table = _with_ms_event_times(frame, [])
    config = RunConfig.from_dict(_raw(plausibility={
        "event_time_max": "2026-11-05T00:00:00Z", "event_times_outside_range": "count",
        "max_implausible_share": None}))
    batch = validate_batch(table, config, source="t", row_group=0, windowed=True)
    late = int((frame["event_time"] > pd.Timestamp("2026-11-05", tz="UTC")).sum())
    assert 0 < late < len(frame)
    assert batch.accounting["plausibility.event_time_after_range"] == late
    assert batch.valid_rows.size == len(frame)  # counted, not dead-lettered


# --------------------------------------------------------------------------- duplicates
@pytest.mark.parametrize("as_string", [False, True])
def test_duplicate_item_ids_are_counted_per_group_across_files_and_row_groups(
        tmp_path, capsys, as_string):
    frame = sample_frame(6000, seed=20)
    again = frame.iloc[100:400].copy()  # same (group, item_id): duplicates, other file
    other_group = frame.iloc[500:560].copy()
    other_group["group"] = np.where(other_group["group"] == "market_a", "market_b", "market_a")
    twice = frame.iloc[1000:1010].copy()  # a third occurrence of the same ids
    frame = pd.concat([frame, again, other_group, again.iloc[:10], twice],
                      ignore_index=True)
    if as_string:
        frame["item_id"] = "id-" + frame["item_id"].astype(str)
    pattern = write_files(frame, tmp_path / "in", n_files=3, row_group_size=900)
    config = _config_file(tmp_path, plausibility={"count_duplicate_item_ids": True})
    assert _recalibrate(tmp_path, pattern, config) == 0, capsys.readouterr().err
    duplicated = frame.duplicated(["group", "item_id"])
    expected = {f"duplicate_item_id.{g}": int(n)
                for g, n in frame[duplicated].groupby("group").size().items()}
    assert sum(expected.values()) == 300 + 10 + 10
    plausibility = _manifest(tmp_path)["plausibility"]
    assert plausibility == {"duplicate_item_id": 320, **expected}
    # and the command's summary says so, with the share and the groups
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "repeat an item id" in x)
    assert line.startswith(f"warning: 320 rows repeat an item id read before in their group "
                           f"(plausibility.count_duplicate_item_ids) ({320 / len(frame):.1%} of "
                           f"{len(frame):,} read) in ")
    top = max(expected, key=expected.get)
    assert f"{top.split('.', 1)[1]} {expected[top]:,}" in line


def test_duplicate_counting_combines_exactly_in_any_order():
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 5000, 20_000).astype(np.uint64)
    expected = keys.size - np.unique(keys).size
    fn = CountDuplicateIds()
    parts = np.array_split(keys, 37)
    accs = []
    for chunk in np.array_split(np.arange(len(parts)), 5):
        acc = fn.create_accumulator()
        for i in chunk:
            acc = fn.add_input(acc, np.sort(parts[i]))
        accs.append(fn.compact(acc) if len(accs) % 2 else acc)
    assert fn.extract_output(fn.merge_accumulators(accs[::-1])) == expected


def test_duplicate_counting_is_refused_with_windowing(tmp_path, capsys):
    frame = sample_frame(1000, seed=21)
    pattern = write_files(frame, tmp_path / "in", n_files=1)
    config = _config_file(tmp_path, plausibility={"count_duplicate_item_ids": True},
                          windowing={"size_days": 2, "period_days": 1})
    assert _recalibrate(tmp_path, pattern, config) == 2
    assert "count_duplicate_item_ids is not supported with windowing" in \
        capsys.readouterr().err


# --------------------------------------------------------------------------- Beam metrics
def _metrics(result) -> dict[str, int]:
    counters = result.metrics().query(MetricsFilter().with_namespace("costlib"))["counters"]
    totals: dict[str, int] = {}
    for counter in counters:
        name = counter.key.metric.name
        totals[name] = totals.get(name, 0) + counter.committed
    return totals


def test_accounting_counters_are_beam_metrics_with_the_same_totals(tmp_path):
    frame = sample_frame(6000, seed=22)
    frame.loc[frame.index[:7], "group"] = "__all__"
    frame.loc[frame.index[10:13], "weight"] = -1.0
    frame = _scaled(frame, frame.index[20:25], 100.0)
    frame = pd.concat([frame, frame.iloc[3000:3050]], ignore_index=True)
    write_files(frame, tmp_path / "in", n_files=2, row_group_size=1000)
    paths = sorted(str(p) for p in (tmp_path / "in").glob("*.parquet"))
    config = RunConfig.from_dict(_raw(plausibility={"count_duplicate_item_ids": True}))

    run = RunDirectory(str(tmp_path / "out"), config.digest, "r1")
    pipeline = make_pipeline([])
    build_recalibrate(pipeline, paths, config, run.run_dir, run.run_id)
    result = pipeline.run()
    result.wait_until_finish()
    accounting = run.read_json("accounting.json")
    assert accounting["read"] == len(frame)
    assert accounting["dead_letter.reserved_group"] == 7
    assert accounting["dead_letter.invalid_weight"] == 3
    assert accounting["plausibility.score_above_range.text_model"] > 0
    assert accounting["plausibility.duplicate_item_id"] == 50
    assert _metrics(result) == accounting

    run.commit({"status": "complete", "published": True})
    records, _ = load_operating_points(run.run_dir)
    thresholds = select_operating_points(records, config)
    decide_run = RunDirectory(str(tmp_path / "dec"), config.digest, "d1")
    pipeline = make_pipeline([])
    build_decide(pipeline, paths, config, thresholds, decide_run)
    result = pipeline.run()
    result.wait_until_finish()
    decided = decide_run.read_json("accounting.json")
    assert decided["decided"] == len(frame) - 7  # weights and labels play no part in decide
    outside = int(((frame["group"] != "__all__") & (frame["text_model"] > 1)).sum())
    assert decided["plausibility.score_outside_range"] == outside == 5
    assert _metrics(result) == decided
