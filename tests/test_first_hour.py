"""What a new user meets in the first hour with their own stream: spellings the library takes
are taken by the config, unambiguous inputs are read, and messages say the fix."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from pipeline_data import SMALL_CONFIG, base_config, comparable, direct_records, sample_frame
from pipeline_data import write_files as write_frame

from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.recalibrate.pipeline import run_recalibrate


@pytest.mark.parametrize("alias, rule", [("or", "any"), ("and", "all")])
def test_config_takes_the_librarys_rule_spellings(alias, rule):
    config = base_config(rule=alias)
    assert config.rule == rule
    assert config.digest == base_config(rule=rule).digest  # one run config, one digest


def _run(frame, tmp_path, name):
    inputs = write_frame(frame, tmp_path / f"in-{name}", n_files=2)
    config = RunConfig.from_dict(SMALL_CONFIG)
    manifest = run_recalibrate(config, inputs, str(tmp_path / f"out-{name}"), [])
    run_dir = tmp_path / f"out-{name}" / "runs" / manifest["run_id"]
    return manifest, pq.read_table(run_dir / "operating_points.parquet").to_pylist()


def test_0_1_integer_labels_are_read_as_booleans(tmp_path):
    """Int8 0/1 with nulls (a pandas "Int8" column) gives the points of the same labels as
    booleans, which equal costlib's on the rows."""
    frame = sample_frame(6_000, seed=5)
    as_int = frame.copy()
    as_int["label"] = frame["label"].map({True: 1, False: 0}).astype("Int8")
    _, expected = _run(frame, tmp_path, "bool")
    manifest, records = _run(as_int, tmp_path, "int")
    assert comparable(records) == comparable(expected)
    assert comparable(records) == comparable(direct_records(frame, RunConfig.from_dict(
        SMALL_CONFIG)))
    assert manifest["row_accounting"]["used"] == int(frame["label"].notna().sum())


def test_an_integer_label_other_than_0_or_1_is_dead_lettered(tmp_path):
    frame = sample_frame(6_000, seed=5)
    labels = frame["label"].map({True: 1, False: 0}).astype("Int8")
    rated = np.flatnonzero(labels.notna().to_numpy())[:3]
    labels.iloc[rated] = [2, -1, 7]
    frame["label"] = labels
    manifest, _ = _run(frame, tmp_path, "bad")
    assert manifest["row_accounting"]["dead_letter_reasons"] == {"invalid_label": 3}


def test_two_ways_of_stating_the_target_say_give_exactly_one():
    with pytest.raises(ConfigError, match="give exactly one of") as info:
        base_config(target={"marginal_precision": 0.3, "fp_per_tp": 2})
    assert "marginal_precision" in str(info.value) and "fp_per_tp" in str(info.value)
    assert "too many properties" not in str(info.value)


def test_a_missing_column_lists_the_files_columns(tmp_path):
    from costlib_pipelines.io.schema import SchemaError, check_schema

    frame = sample_frame(100, seed=1)
    config = base_config(columns={"group": "country", "weight": "weight"})
    schema = pq.read_schema(write_frame(frame, tmp_path, n_files=1).replace("*", "part-0"))
    with pytest.raises(SchemaError, match="missing column 'country'") as info:
        check_schema(schema, "f.parquet", config)
    assert f"the file's columns: {', '.join(frame.columns)} (set columns." in str(info.value)


def test_recalibrate_ends_with_the_chosen_thresholds_of_the_first_groups(tmp_path, capsys):
    """12 groups: the first 9 and __all__ are listed with the decision method's thresholds as
    written in the run's records, the rest are counted, and the target is shown."""
    from costlib_pipelines.commands.cli import main

    frame = sample_frame(24_000, seed=2)
    frame["group"] = "g" + (frame["item_id"] % 12).astype(str).str.zfill(2)
    inputs = write_frame(frame, tmp_path / "in", n_files=1)
    config = tmp_path / "c.yaml"
    config.write_text("classifiers: [text_model, image_model]\ncolumns: {weight: weight}\n"
                      "target: {fp_per_tp: 2}\nmethods: [hull]\ndecision_method: hull\n"
                      "grid: {edges: uniform, bins: 16}\n"
                      "min_rated: {positives: 5, negatives: 5}\n")
    assert main(["recalibrate", "--config", str(config), "--input", inputs, "--output",
                 str(tmp_path / "o"), "--run-id", "r1"]) == 0
    out = capsys.readouterr().out
    assert "thresholds of hull per group (decision_method; target fp per tp 2)" in out
    records = pq.read_table(tmp_path / "o" / "runs" / "r1" / "operating_points.parquet")
    by_group = {r["group"]: r for r in records.to_pylist()}
    lines = out.splitlines()
    for group in [f"g{i:02d}" for i in range(9)] + ["__all__"]:
        row = next(x for x in lines if x.startswith(group + " "))
        shown = row.split()[2:4] if by_group[group]["status"] == "ok" else row.split()[3:5]
        assert shown == [f"{t:.4g}" for t in by_group[group]["thresholds"]], row
    assert not any(x.startswith(("g09 ", "g10 ", "g11 ")) for x in lines)
    assert "... 3 more group(s): all 13 in " in out


def _point_and_grids():
    from costlib.sample import generate_score_stream
    from costlib.thresholds import ThresholdGrid, decision_edges, optimize

    stream = generate_score_stream(20_000, seed=1)
    names = ["text_model", "image_model"]
    scores = np.nan_to_num(stream[names].to_numpy(), nan=-np.inf)
    labels = stream["label"]
    edges = decision_edges(scores, labels, names=names)
    grid = ThresholdGrid.from_scores(scores, labels, edges, names=names)
    point = optimize(grid, target_marginal_precision=1 / 3, rule="any", method="graph")
    a = (stream["group"] == "market_a").to_numpy()
    own = ThresholdGrid.from_scores(scores[a], labels[a], decision_edges(
        scores[a], labels[a], names=names), names=names)
    return point, grid, own


def test_an_operating_point_prints_in_one_line():
    point, _, _ = _point_and_grids()
    text = repr(point)
    assert "\n" not in text and len(text) < 300 and str(point) == text
    t = point.thresholds
    assert text.startswith(f"OperatingPoint(method='graph', rule='any', status='ok', "
                           f"thresholds=(text_model={t[0]:.4g}, image_model={t[1]:.4g}), "
                           f"tp={point.tp:.6g}, fp={point.fp:.6g}")
    assert f"curve of {len(point.curve_tp)} points" in text and ".summary()" in text


def test_different_edges_across_groups_say_how_to_get_one_lattice():
    from costlib.thresholds import Target
    from costlib.thresholds.capacity._allocation import allocate_capacity

    _, grid, own = _point_and_grids()
    with pytest.raises(ValueError, match="have different edges") as info:
        allocate_capacity({"all": grid, "market_a": own}, 10.0, target=Target(slope=0.5))
    assert "decision_edges(all_scores, all_labels)" in str(info.value)
    assert "ThresholdGrid.from_scores(group_scores, group_labels, edges)" in str(info.value)


@pytest.mark.parametrize("ids", ["int32", "string"])
def test_decisions_frame_gives_the_ids_back_in_their_type(tmp_path, ids):
    from costlib_pipelines.decide.pipeline import run_decide
    from costlib_pipelines.io import decisions_frame, operating_points_frame
    from costlib_pipelines.io.files import InputError

    frame = sample_frame(4_000, seed=6)
    frame["item_id"] = (frame["item_id"] + 2**30).astype("int32") if ids == "int32" else \
        "tx-" + frame["item_id"].astype(str)
    inputs = write_frame(frame, tmp_path / "in", n_files=2)
    config = RunConfig.from_dict(SMALL_CONFIG)
    run_recalibrate(config, inputs, str(tmp_path / "points"), [])
    run_decide(config, inputs, str(tmp_path / "points"), str(tmp_path / "dec"), [])
    decisions = decisions_frame(str(tmp_path / "dec"))
    assert decisions["item_id"].dtype == frame["item_id"].dtype
    joined = frame.merge(decisions, on="item_id", validate="one_to_one")
    assert len(joined) == len(frame)
    assert str(decisions["threshold_decision"].dtype) == "boolean"
    points = operating_points_frame(str(tmp_path / "points"))
    assert set(points["group"]) == set(frame["group"]) | {"__all__"}
    with pytest.raises(InputError, match="a decide run, not a recalibrate run"):
        operating_points_frame(str(tmp_path / "dec"))
