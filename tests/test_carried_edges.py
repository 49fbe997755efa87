"""Auto edges carried from the published run (issue 20: the default edges in one pass).

A run with ``grid.edges: auto`` writes the summed edge sketch of its rows; the next run of the
same output places its edges from it and counts its grids in a single pass, sketching its own
rows in that pass for the run after."""

import json
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest
from pipeline_data import (
    AUTO_CONFIG,
    CLASSIFIERS,
    comparable,
    direct_records,
    sample_frame,
    write_files,
)

from costlib.thresholds.binning._edges import decision_edges_from_sketch, with_thresholds
from costlib.thresholds.binning._score_sketch import EdgeSketch, ScoreSketch
from costlib_pipelines.config import RunConfig
from costlib_pipelines.recalibrate.carried_edges import (
    SKETCH_FILE,
    read_edge_sketches,
    sketch_table,
)
from costlib_pipelines.recalibrate.pipeline import run_recalibrate

RAW = {**AUTO_CONFIG, "publish": {"max_threshold_change": None, "min_rated": 0}}


def _library_sketches(frame, classifiers):
    """Each classifier's sketch of the rows as the grids see them, by the library alone."""
    labels = frame["label"].to_numpy(dtype=object, na_value=None)
    rated = np.array([v is not None for v in labels])
    y = np.array([bool(v) if v is not None else False for v in labels])
    weights = frame["weight"].to_numpy(dtype=float)
    out = []
    for name in classifiers:
        s = frame[name].to_numpy(dtype=float, na_value=np.nan)
        s = np.where(np.isnan(s), -np.inf, s)
        out.append(EdgeSketch.from_rows(s, y, weights, ~rated))
    return out


def _run(config, pattern, out, beam_args=()):
    manifest = run_recalibrate(config, pattern, str(out), list(beam_args))
    run_dir = out / "runs" / manifest["run_id"]
    return manifest, run_dir, pq.read_table(run_dir / "operating_points.parquet").to_pylist()


@pytest.fixture(scope="module")
def days():
    return sample_frame(20_000, seed=11), sample_frame(20_000, seed=12)


def test_second_run_carries_the_first_runs_sketch_and_counts_in_one_pass(days, tmp_path):
    first, second = days
    config = RunConfig.from_dict(RAW)
    assert config.grid.auto_edges_from == "previous_run"
    out = tmp_path / "out"
    m1, dir1, _ = _run(config, write_files(first, tmp_path / "d1"), out)
    assert m1["grid_edges"]["source"]["from"] == "this_run"  # nothing to carry yet
    truth1 = _library_sketches(first, CLASSIFIERS)
    assert read_edge_sketches(str(dir1 / SKETCH_FILE), CLASSIFIERS) == truth1

    m2, dir2, got = _run(config, write_files(second, tmp_path / "d2", n_files=4,
                                             row_group_size=1500), out)
    source = m2["grid_edges"]["source"]
    assert source == {"from": "previous_run", "run_id": m1["run_id"]}
    # the edges: placed from the first day's rows, plus the thresholds published for it
    in_force = np.array([[np.inf if t is None else t for t in r["thresholds"]]
                         for r in pq.read_table(dir1 / "operating_points.parquet").to_pylist()
                         if r["method"] == config.decision_method and r["thresholds"]],
                        dtype=float)
    for j, (recorded, sketch) in enumerate(zip(m2["grid_edges"]["edges"], truth1, strict=True)):
        expected = with_thresholds(decision_edges_from_sketch(sketch, config.n_edges),
                                   in_force[:, j])
        assert recorded == expected.tolist()
    # the grids counted on them in the same pass that sketched the second day's rows
    edges = [np.array(e) for e in m2["grid_edges"]["edges"]]
    assert comparable(got) == comparable(direct_records(second, config, edges=edges))
    assert read_edge_sketches(str(dir2 / SKETCH_FILE), CLASSIFIERS) == _library_sketches(
        second, CLASSIFIERS)


def test_this_run_places_edges_from_a_first_pass_and_still_writes_the_sketch(days, tmp_path):
    first, second = days
    config = RunConfig.from_dict(RAW)
    this_run = RunConfig.from_dict({**RAW, "grid": {"auto_edges_from": "this_run"}})
    out = tmp_path / "out"
    _run(config, write_files(first, tmp_path / "d1"), out)
    m2, dir2, _ = _run(this_run, write_files(second, tmp_path / "d2"), out)
    assert m2["grid_edges"]["source"]["from"] == "this_run"
    assert read_edge_sketches(str(dir2 / SKETCH_FILE), CLASSIFIERS) == _library_sketches(
        second, CLASSIFIERS)


def test_an_unusable_sketch_falls_back_to_a_first_pass_and_says_why(days, tmp_path):
    first, second = days
    config = RunConfig.from_dict(RAW)
    out = tmp_path / "out"
    _, dir1, _ = _run(config, write_files(first, tmp_path / "d1"), out)
    (dir1 / SKETCH_FILE).write_bytes(b"not parquet")
    m2, dir2, _ = _run(config, write_files(second, tmp_path / "d2"), out)
    source = m2["grid_edges"]["source"]
    assert source["from"] == "this_run" and SKETCH_FILE in source["note"]
    (dir2 / SKETCH_FILE).unlink()  # run 2 is the published one now
    m3, _, _ = _run(config, write_files(second, tmp_path / "d3"), out)
    assert "has no edge_sketch.parquet" in m3["grid_edges"]["source"]["note"]


def test_the_sketch_file_does_not_depend_on_sharding_or_runner(days, tmp_path):
    first, _ = days
    config = RunConfig.from_dict(RAW)
    files = []
    for name, kwargs, args in [
        ("a", {"n_files": 2, "row_group_size": 5000}, ()),
        ("b", {"n_files": 5, "row_group_size": 700, "reverse": True},
         ("--direct_running_mode=multi_processing", "--direct_num_workers=2")),
    ]:
        out = tmp_path / f"out_{name}"
        # a published run to carry from, so that the sketch is counted in the grid pass
        _run(config, write_files(first.iloc[:2000], tmp_path / f"seed_{name}"), out)
        _, run_dir, _ = _run(config, write_files(first, tmp_path / name, **kwargs), out, args)
        files.append((run_dir / SKETCH_FILE).read_bytes())
    assert files[0] == files[1]


def test_sketch_table_round_trips_empty_and_coarse_channels(tmp_path):
    rng = np.random.default_rng(3)
    s = rng.beta(0.5, 30, 5000)
    full = EdgeSketch.from_rows(s, rng.random(5000) < 0.01, capacity=256)
    empty = EdgeSketch.empty()
    assert full.scored.level > 40  # raised by the small capacity
    path = tmp_path / "sketch.parquet"
    pq.write_table(sketch_table([full, empty], ["a", "b"]), path)
    assert read_edge_sketches(str(path), ["b", "a"]) == [empty, full]
    with pytest.raises(ValueError, match=r"no sketch of classifier\(s\) \['c'\]"):
        read_edge_sketches(str(path), ["a", "c"])
    assert isinstance(full.positives, ScoreSketch)


def test_auto_edges_from_is_validated(tmp_path, capsys):
    from costlib_pipelines.commands.cli import main

    config = tmp_path / "c.json"
    config.write_text(json.dumps({**RAW, "grid": {"auto_edges_from": "yesterday"}}))
    data = write_files(sample_frame(2000, seed=1), tmp_path / "in")
    code = main(["recalibrate", "--config", str(config), "--input", data,
                 "--output", str(tmp_path / "out")])
    assert code == 2
    assert "grid.auto_edges_from" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "in")
