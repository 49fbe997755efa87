"""``grid.edges: auto`` in ``costlib recalibrate`` (issue 20): the library's default edges, from
the first pass's sketches, identical whatever the file order, row-group size and runner."""

import json

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

from costlib.thresholds.binning._edges import decision_edges
from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.recalibrate.pipeline import run_recalibrate

RAW = AUTO_CONFIG


@pytest.fixture(scope="module")
def frame():
    return sample_frame(30_000, seed=4)


def _library_edges(frame, config):
    scores = frame[list(config.classifiers)].to_numpy(dtype=float, na_value=np.nan)
    scores = np.where(np.isnan(scores), -np.inf, scores)
    return decision_edges(scores, frame["label"].to_numpy(dtype=object, na_value=None),
                          frame["weight"].to_numpy(dtype=float), n_edges=config.n_edges)


def _run(config, pattern, out, beam_args=()):
    manifest = run_recalibrate(config, pattern, str(out), list(beam_args))
    run_dir = out / "runs" / manifest["run_id"]
    return manifest, pq.read_table(run_dir / "operating_points.parquet").to_pylist()


def test_a_config_without_a_grid_section_gets_the_librarys_default_edges(frame, tmp_path):
    config = RunConfig.from_dict(RAW)
    assert config.grid.edges == "auto" and config.n_edges == 128
    edges = _library_edges(frame, config)
    expected = comparable(direct_records(frame, config, edges=edges))
    a = write_files(frame, tmp_path / "a", n_files=3, row_group_size=4000)
    b = write_files(frame.sample(frac=1.0, random_state=9), tmp_path / "b", n_files=4,
                    row_group_size=1700, reverse=True)
    manifest_a, got_a = _run(config, a, tmp_path / "out_a")
    manifest_b, got_b = _run(config, b, tmp_path / "out_b",
                             ["--direct_running_mode=multi_processing",
                              "--direct_num_workers=2"])
    assert comparable(got_a) == expected
    assert comparable(got_b) == expected
    recorded = manifest_a["grid_edges"]
    assert recorded["recipe"] == "auto" and recorded["n_edges"] == 128
    assert recorded["classifiers"] == list(CLASSIFIERS)
    for got, e in zip(recorded["edges"], edges, strict=True):
        assert got == e.tolist()  # bit for bit, as JSON floats
    assert manifest_b["grid_edges"] == recorded
    assert all(r["finer_bound"] is None or r["finer_bound"] >= r["objective_value"]
               for r in got_a)


def test_uniform_edges_are_recorded_too(frame, tmp_path):
    config = RunConfig.from_dict({**RAW, "grid": {"edges": "uniform", "bins": 8}})
    manifest, _ = _run(config, write_files(frame, tmp_path / "in"), tmp_path / "out")
    assert manifest["grid_edges"]["recipe"] == "uniform"
    assert manifest["grid_edges"]["edges"][0] == np.linspace(0, 1, 8).tolist()


def test_windowed_configs_get_auto_edges_and_refuse_quantile_edges():
    windowing = {"size_days": 1, "period_days": 1}
    config = RunConfig.from_dict({**RAW, "windowing": windowing})
    assert config.grid.edges == "auto" and config.n_edges == 128
    with pytest.raises(ConfigError, match=r"grid\.edges: quantile edges are not supported"):
        RunConfig.from_dict({**RAW, "windowing": windowing, "grid": {"edges": "quantile"}})


@pytest.mark.parametrize(("grid", "key"), [
    ({"edges": "finest"}, "grid.edges"),
    ({"edges": "auto", "bins": 3}, "grid.bins"),
    ({"edges": "auto", "bins": 0}, "grid.bins"),
    ({"edges": "auto", "bins": "many"}, "grid.bins"),
])
def test_bad_edge_settings_exit_2_naming_the_key(frame, tmp_path, capsys, grid, key):
    raw = {**RAW, "grid": grid}
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(raw))  # JSON is YAML
    pattern = write_files(frame.head(2000), tmp_path / "in", n_files=1)
    code = main(["recalibrate", "--config", str(path), "--input", pattern, "--output",
                 str(tmp_path / "out"), "--runner", "FnApiRunner"])
    assert code == 2
    assert key in capsys.readouterr().err


def test_report_shows_the_resolution_check_of_every_point(frame, tmp_path):
    from costlib_pipelines.report.page import build_report
    from costlib_pipelines.report.runs_data import load_run

    config = RunConfig.from_dict({**RAW, "grid": {"edges": "uniform", "bins": 6}})
    manifest, records = _run(config, write_files(frame, tmp_path / "in"), tmp_path / "out")
    text = build_report(load_run(str(tmp_path / "out" / "runs" / manifest["run_id"])), None)
    bounds = [r["finer_bound"] for r in records if r["finer_bound"] is not None]
    assert bounds and text.count('class="note resolution"') == len(bounds)
    assert any(r["finer_bound"] > r["objective_value"] for r in records
               if r["finer_bound"] is not None)  # 6 uniform edges are coarse
    assert "finer lattice ≤" in text and "a bound, not an estimate" in text
