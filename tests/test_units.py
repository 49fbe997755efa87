"""Units of a run's numbers: counts of rows as integers, estimates marked, money as money;
the evidence guards count rows whatever the rows weigh."""

from __future__ import annotations

import math

import pytest
from pipeline_data import base_config

from costlib_pipelines.commands.summary import points_lines
from costlib_pipelines.io.units import fmt_rows, fmt_weighted, rated_rows, weight_unit
from costlib_pipelines.recalibrate.publish import GuardSettings, guard_notes, guard_violations


@pytest.mark.parametrize(("overrides", "unit"), [
    ({"columns": {"weight": None}}, "rows"),
    ({}, "weighted rows"),  # base_config names a weight column
    ({"columns": {"weight": "weight", "audit_probability": "p"}}, "estimated rows"),
    ({"min_risk": {"fn": {"column": "amount"}, "fp": 5.0, "weight_rated_rows": True}}, "money"),
    ({"columns": {"audit_probability": "p"},
      "min_risk": {"fn": {"column": "amount"}, "fp": 5.0, "weight_rated_rows": True}},
     "estimated money"),
    ({"min_risk": {"fn": {"column": "amount"}, "fp": 5.0}}, "weighted rows"),  # decide only
])
def test_the_unit_follows_from_the_config(overrides, unit):
    assert weight_unit(base_config(**overrides)) == unit


def test_counts_are_integers_estimates_marked_money_with_cents():
    assert fmt_rows(13530.0) == "13,530"
    assert fmt_rows(None) == "?" and fmt_rows(math.nan) == "?"
    assert fmt_weighted(78846.34, "rows") == "78,846"
    assert fmt_weighted(78846.34, "estimated rows") == "~78,846"
    assert fmt_weighted(4.97718, "estimated rows") == "~4.98"
    assert fmt_weighted(13530.0, "money") == "13,530.00"
    assert fmt_weighted(127.8, "estimated money") == "~127.80"


def _record(group, *, tp, fp, precision, pos, neg, rows=None, unit="money", status="ok",
            thresholds=(0.5, 0.7), fallback=None):
    return {"group": group, "method": "graph", "status": status, "fallback_group": fallback,
            "thresholds": list(thresholds) if thresholds else None, "tp": tp, "fp": fp,
            "precision": precision, "rated_positives": pos, "rated_negatives": neg,
            "rated_positive_rows": None if rows is None else rows[0],
            "rated_negative_rows": None if rows is None else rows[1], "weight_unit": unit,
            "classifiers": ["a", "b"], "window_start": None, "point_status": "ok"}


def test_the_summary_labels_money_and_shows_rows_of_evidence():
    records = [_record("jewelry", tp=13700.0, fp=353.0, precision=13700 / 14053,
                       pos=127.8, neg=40.0, rows=(2, 10)),
               _record("__all__", tp=137000.0, fp=3530.0, precision=0.97488, pos=150000.0,
                       neg=9000.0, rows=(400, 2250))]
    text = "\n".join(points_lines(records, ["a", "b"], "graph", {"slope": 1.0}, "x.parquet"))
    assert "TP (money)" in text and "FP (money)" in text and "precision (of the money)" in text
    assert "13,700.00" in text and "137,000.00" in text and "e+" not in text
    assert "2/10" in text and "400/2,250" in text  # rows of evidence, integers
    assert "rated rows +/-: rated positive/negative rows, one each" in text


def test_the_summary_of_a_plain_run_shows_integers():
    records = [_record("de", tp=1370.0, fp=353.0, precision=0.795, pos=140.0, neg=400.0,
                       rows=(140, 400), unit="rows")]
    text = "\n".join(points_lines(records, ["a", "b"], "graph", {"slope": 1.0}, "x.parquet"))
    assert "TP (rows)" in text and "1,370" in text and "140/400" in text
    assert "money" not in text and "1370.0" not in text


def test_publish_min_rated_counts_rows_not_money():
    """2 rated frauds worth 127.8: 12 rows of evidence, fewer than min_rated 50."""
    new = [_record("jewelry", tp=100.0, fp=3.0, precision=0.9, pos=127.8, neg=40.0,
                   rows=(2, 10)),
           _record("__all__", tp=1e5, fp=3e3, precision=0.9, pos=1e5, neg=9e3,
                   rows=(400, 2250))]
    violations = guard_violations(None, new, GuardSettings(min_rated=50))
    assert violations == ["group 'jewelry': thresholds rest on the 12 rated rows (2 positives, "
                          "10 negatives) of its own grid (status ok), fewer than min_rated=50"]
    # records written before the row counts existed: their weighted totals stand in
    assert rated_rows({"rated_positives": 3.0, "rated_negatives": 4.0}) == (3.0, 4.0)


def test_a_kept_group_note_speaks_of_rows():
    new = [_record("thin", tp=1.0, fp=1.0, precision=0.5, pos=512.5, neg=80.0, rows=(3, 4),
                   status="kept")]
    [note] = guard_notes(new, GuardSettings(method="graph"))
    assert "3 rated positive and 4 rated negative rows are too few" in note


@pytest.mark.parametrize(("extra", "named"), [
    ({"constraints": {"max_volume": 100}}, "constraints.max_volume"),
    ({"constraints": {"max_false_positives": 10}}, "constraints.max_false_positives"),
    ({"objective": {"name": "precision_at_volume", "volume": 50}},
     "objective: precision_at_volume"),
    ({"capacity": {"total": 100}, "decision_method": "capacity"}, "capacity.total"),
])
def test_row_settings_in_a_money_weighted_run_are_refused_with_the_fix(extra, named):
    from costlib_pipelines.config import ConfigError

    money = {"min_risk": {"fn": {"column": "amount"}, "fp": 5.0, "weight_rated_rows": True}}
    with pytest.raises(ConfigError, match=rf"weight_rated_rows weighs every rated row .*"
                                          rf"{named}.* count rows .*set weight_rated_rows: "
                                          "false"):
        base_config(**money, **extra)
    base_config(**extra)  # the same settings without money weights are fine
