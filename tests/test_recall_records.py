"""The recall interval in the run config, the operating point records and the report.

Truth: the exact bound of an audit that finds no missed positive (``-ln 0.05 / π`` by hand),
and the config schema's stated ranges.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from test_recall_bounds import grid_of, population

from costlib.thresholds import optimize, point_at
from costlib_pipelines.config import ConfigError, load_config
from costlib_pipelines.io.recall_fields import recall_fields
from costlib_pipelines.io.records import records_to_table
from costlib_pipelines.report.group_section import _estimated_recall

EXAMPLE = Path(__file__).resolve().parents[1] / "schemas" / "example_config.yaml"


@pytest.fixture(scope="module")
def thin_audit():
    """60,000 rows, 0.15% positives, thresholds at 0.6, a 1% audit that finds no missed one."""
    scores, labels, pi, truth, flagged = population(60_000, 0.0015, 0.6, 0.01, seed=0)
    return grid_of(scores, labels, pi), float(np.sum(truth & flagged))


def _config(tmp_path, **recall):
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["recall"] = {**raw["recall"], **recall}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(str(path))


def test_the_recall_section_defaults_and_reaches_optimize(tmp_path):
    config = _config(tmp_path)
    assert config.recall == {"bound": "lower", "level": 0.9, "interval": "exact",
                             "max_width": 0.2, "target_half_width": 0.05}
    spec = config.decision
    assert spec.recall_bound == "lower" and spec.recall_level == 0.9
    assert _config(tmp_path, bound="point").decision.recall_bound == "point"


@pytest.mark.parametrize(("key", "value"), [("bound", "upper"), ("level", 1.0),
                                            ("interval", "normal"), ("max_width", 0),
                                            ("target_half_width", 0.5)])
def test_bad_recall_settings_name_the_key(tmp_path, key, value):
    with pytest.raises(ConfigError, match=rf"recall\.{key}"):
        _config(tmp_path, **{key: value})


def test_records_carry_the_exact_interval_the_evidence_and_a_warning(thin_audit):
    grid, caught = thin_audit
    point = point_at(grid, [0.6], target_marginal_precision=0.3)
    fields = recall_fields(point, None)
    upper = caught - math.log(0.05) / 0.01  # Garwood, nothing found
    assert fields["recall_interval"] == "exact"
    assert fields["estimated_recall"] == 1.0
    assert fields["estimated_total_positives_ci_high"] == pytest.approx(upper, rel=1e-5)
    assert fields["estimated_recall_ci_low"] == pytest.approx(caught / upper, rel=1e-5)
    assert fields["estimated_recall_ci_high"] == 1.0
    assert fields["audit_missed_positives_found"] == 0.0
    assert fields["audit_missed_audited"] > 500
    assert fields["audit_strata_pi"] == [pytest.approx(0.01, rel=1e-6)]
    assert fields["audit_strata_positives"] == [0.0]
    assert "wider than recall.max_width 0.2" in fields["recall_warning"]
    assert "found 0 positives" in fields["recall_warning"]
    need = fields["audit_share_needed"]
    assert need is not None and need > 0.01  # a bigger audit than the 1% in force
    # a wider allowed width: no warning
    assert recall_fields(point, None, {"max_width": 0.9})["recall_warning"] is None


def test_the_record_table_accepts_the_new_fields(thin_audit):
    from costlib.thresholds.loop._recalibration import GroupResult
    from costlib_pipelines.io.records import operating_point_records

    grid, _ = thin_audit
    point = optimize(grid, target_marginal_precision=0.3, method="hull")
    result = GroupResult(group="__all__", status="ok", rated_positives=grid.total_positives,
                         rated_negatives=grid.total_negatives, points={"hull": point},
                         intervals={"hull": None})
    records = operating_point_records(result, rule="any", classifiers=("s",),
                                      target_marginal_precision=0.3, run_id="r",
                                      config_digest="d")
    table = records_to_table(records, "operating_point.json")
    row = table.to_pylist()[0]
    assert row["recall_interval"] == "exact"
    assert row["audit_strata_rows"] and row["recall_warning"]
    assert row["estimated_recall_ci_low"] <= row["estimated_recall"] <= row[
        "estimated_recall_ci_high"]


def test_the_report_shows_the_evidence_and_the_warning(thin_audit):
    grid, _ = thin_audit
    fields = recall_fields(point_at(grid, [0.6], target_marginal_precision=0.3), None)
    parts = _estimated_recall(fields)
    texts = [str(p.get("text", p.get("value", ""))) for p in parts]
    assert any(t.startswith("audit below: 0 positives in") for t in texts)
    assert any(t.startswith("audit for the target width:") for t in texts)
    warn = [p for p in parts if p.get("css") == "note warn"]
    assert warn and "wider than recall.max_width" in warn[0]["title"]
    assert parts[0]["interval"].startswith("[0.19")


def test_min_recall_bound_is_recorded(tmp_path):
    from costlib_pipelines.io.records import _settings_fields, point_settings

    config = _config(tmp_path)
    settings = point_settings(config)
    assert _settings_fields(settings)["recall_bound"] is None  # no min_recall
    settings["constraints"] = {**settings["constraints"], "min_recall": 0.8}
    assert _settings_fields(settings)["recall_bound"] == "lower"


def test_the_history_shows_the_evidence_behind_each_runs_recall(thin_audit):
    from costlib_pipelines.report.history import _recall_evidence

    grid, _ = thin_audit
    fields = recall_fields(point_at(grid, [0.6], target_marginal_precision=0.3), None)
    (note,) = _recall_evidence(fields)
    assert note["text"].startswith("0 found in") and note["text"].endswith("· wide")
    assert note["css"] == "note warn" and "wider than" in note["title"]
    assert _recall_evidence({"estimated_recall": 0.5}) == []  # an older record
