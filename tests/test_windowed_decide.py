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
from pipeline_data import write_files

from costlib.sample import generate_score_stream
from pipelines.cli import main
from pipelines.config import ConfigError, RunConfig

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
