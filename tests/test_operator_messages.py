"""Messages an operator reads: counts as integers and estimates labelled, ages in minutes,
no empty parentheses, thresholds to 4 significant digits (files keep full precision), no
``None`` where a run id belongs, and a warning for an input named twice."""

from __future__ import annotations

import datetime as dt
import json
import re
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from pipeline_data import SMALL_CONFIG, sample_frame, write_files

from costlib.message_text import ago, count_text, threshold_text, thresholds_text
from costlib.thresholds.grid._recall_bounds import RecallBounds
from costlib_pipelines.commands.cli import main
from costlib_pipelines.io.files import match_inputs
from costlib_pipelines.io.recall_fields import recall_fields
from costlib_pipelines.io.runs import points_publication
from costlib_pipelines.io.status import latest_notes
from costlib_pipelines.recalibrate.publish import GuardSettings, guard_notes


def test_the_helpers():
    assert threshold_text(0.8666666666666667) == "0.8667"
    assert threshold_text(1e-05) == "1e-05" and threshold_text(None) == "-"
    assert threshold_text(float("inf")) == "inf"
    assert thresholds_text((0.1 + 0.2, None, 0.5)) == "[0.3, -, 0.5]"
    assert count_text(1.0, "row") == "1 row" and count_text(1130.0, "row") == "1,130 rows"
    assert count_text(1130.22, "row") == "an estimated 1,130 rows"
    assert ago(5) == "less than a minute ago" and ago(3600 * 30) == "1 d 6 h ago"


def _point(found: float, audited: float):
    stratum = {"pi": 0.015, "rows": audited / 0.015, "audited": audited, "positives": found}
    bounds = RecallBounds(level=0.9, total_positives_low=30.0, total_positives_high=70.0,
                          recall_low=0.43, recall_high=0.71, positives_missed_found=found,
                          audited_missed=audited, strata=(stratum,))
    return SimpleNamespace(recall_bounds=bounds, estimated_total_positives=50.0,
                           estimated_recall=0.6, tp=30.0)


def test_the_recall_warning_says_which_numbers_are_estimates():
    weighted = recall_fields(_point(4.97718, 1130.22), None)["recall_warning"]
    assert ("the audit found an estimated 4.98 positives among an estimated 1,130 audited "
            "rows the thresholds do not flag") in weighted
    counted = recall_fields(_point(5.0, 1130.0), None)["recall_warning"]
    assert "the audit found 5 positives among 1,130 audited rows" in counted


def test_audit_advice_on_few_positives_found_says_it_is_a_first_estimate():
    """Below 10 positives found, the share an interval needs can be off by 2x either way
    (docs/audit.md's simulation): the warning says so; from 10 found on it does not."""
    thin = recall_fields(_point(5.0, 1130.0), None)
    assert thin["audit_share_needed"] is not None
    assert ("(a first estimate, resting on fewer than 10 positives found: audit at that "
            "share, then let the next run size it again)") in thin["recall_warning"]
    firm = recall_fields(_point(12.0, 1130.0), None)
    assert firm["recall_warning"] is not None and firm["audit_share_needed"] is not None
    assert "first estimate" not in firm["recall_warning"]


def _published(output, run_id: str, *, hours_ago: float, guard=None) -> None:
    run = output / "runs" / run_id
    run.mkdir(parents=True)
    finished = dt.datetime.now(dt.UTC) - dt.timedelta(hours=hours_ago)
    manifest = {"run_id": run_id, "status": "complete", "published": True,
                "finished_utc": finished.isoformat()}
    if guard is not None:
        manifest["guard"] = guard
    (run / "manifest.json").write_text(json.dumps(manifest))
    (output / "LATEST").write_text(run_id + "\n")


@pytest.mark.parametrize(("hours", "text"), [
    (0.2, "(finished 12 min ago)"), (0.001, "(finished less than a minute ago)"),
    (3.5, "(finished 3 h 30 min ago)"),
])
def test_status_says_how_long_ago_in_words(tmp_path, capsys, hours, text):
    _published(tmp_path / "out", "r1", hours_ago=hours)
    assert main(["status", "--output", str(tmp_path / "out")]) == 0
    assert text in capsys.readouterr().out


def test_a_stale_latest_in_words(tmp_path, capsys):
    _published(tmp_path / "out", "r1", hours_ago=30)
    assert main(["status", "--output", str(tmp_path / "out")]) == 3
    out = capsys.readouterr().out
    assert "LATEST is stale: run r1 finished 1 d 6 h ago (more than 26 h)" in out
    assert " h ago" not in out.replace("6 h ago", "")  # no "30 h" and no "0 h"


def _records(path, rows):
    base = {"run_id": "r1", "method": "graph", "rule": "any", "classifiers": ["s"],
            "thresholds": [0.5], "fallback_group": None, "window_start": None,
            "window_end": None, "pane_index": None, "point_status": "ok",
            "proposed_thresholds": None}
    pq.write_table(pa.Table.from_pylist([{**base, **r} for r in rows]), path)


def test_the_kept_note_has_no_empty_parentheses(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    rows = [{"group": "a", "status": "ok", "proposed_thresholds": [0.4]},
            {"group": "b", "status": "ok"}, {"group": "c", "status": "ok"},
            {"group": "d", "status": "ok"}]
    _records(run / "operating_points.parquet", rows)
    manifest = {"guard": {"method": "graph"}}
    [note] = latest_notes(str(run), manifest)
    assert note == ("graph: 0 of 4 group(s) kept their thresholds in force; 1 with a move "
                    "pending audit evidence (proposed_thresholds: a)")
    rows[1]["status"] = "kept"
    _records(run / "operating_points.parquet", rows)
    [note] = latest_notes(str(run), manifest)
    assert note.startswith("graph: 1 of 4 group(s) kept their thresholds in force (b); 1 with")
    rows[0]["proposed_thresholds"] = None
    _records(run / "operating_points.parquet", rows)
    assert latest_notes(str(run), manifest) == [
        "graph: 1 of 4 group(s) kept their thresholds in force (b)"]


def test_guard_notes_print_thresholds_to_four_digits():
    record = {"group": "market_c", "method": "graph", "status": "ok",
              "point_status": "coverage_limited",
              "thresholds": [0.8666666666666667, 0.5333333333333333], "reason": "why"}
    [note] = guard_notes([record], GuardSettings(method="graph"))
    assert note == ("group 'market_c': coverage_limited: thresholds [0.8667, 0.5333] are the "
                    "best covered point; why")


def test_recalibrate_messages_show_four_digits_and_files_keep_all(tmp_path, capsys):
    """A run with a coverage-limited group (thirds of a 16-bin lattice: 0.8666666666666667):
    nothing on stdout or stderr has more than 4 significant digits of a threshold, while the
    records keep the full value."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(SMALL_CONFIG))
    stream = write_files(sample_frame(2_000, seed=1), tmp_path / "in", n_files=1)
    assert main(["recalibrate", "--config", str(config), "--input", stream, "--output",
                 str(tmp_path / "out"), "--run-id", "r1"]) == 0
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert "coverage_limited: thresholds [0.8667, 0.5333]" in text
    assert "the best graph point (thresholds [0.8667, 0.3333]" in text
    assert not re.search(r"\d\.\d{6,}", text), text
    records = (tmp_path / "out" / "runs" / "r1" / "operating_points.jsonl").read_text()
    assert "0.8666666666666667" in records


def test_a_held_run_without_latest_is_not_named_none(tmp_path):
    run = tmp_path / "out" / "runs" / "held"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps(
        {"run_id": "held", "status": "complete", "published": False,
         "guard": {"violations": ["group a: threshold moved 0.3"]}}))
    reason = points_publication(str(run))["reason"]
    assert "None" not in reason
    assert f"not published; {tmp_path / 'out'} has no LATEST; 1 violation(s)" in reason


def test_an_input_named_twice_is_read_once_with_a_warning(tmp_path, capsys, monkeypatch):
    pattern = write_files(sample_frame(500, seed=2), tmp_path / "in", n_files=2)
    monkeypatch.chdir(tmp_path)
    one = "in/part-0.parquet"
    assert match_inputs(f"{one},{one}") == [str(tmp_path / one)]
    err = capsys.readouterr().err
    assert err == (f"warning: --input names 1 file(s) more than once, each read once: "
                   f"{tmp_path / one} by '{one}' and '{one}'; check the command line for a "
                   "repeated or overlapping input\n")
    assert len(match_inputs(f"{pattern},./{one}")) == 2  # a glob and a path overlapping
    assert "by '" in capsys.readouterr().err
    assert len(match_inputs(pattern)) == 2  # nothing repeated: no warning
    assert capsys.readouterr().err == ""
