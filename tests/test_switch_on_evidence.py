"""Switching a group on needs evidence too (issue 21): a group without thresholds in force,
on a grid with audit rows, gets the method's point only when the evidence rule, measured from
flagging nothing, supports it.

Truth is independent of the rule: every row of the simulated populations has a label, so the
net gain ``TP - r FP`` of the method's point on the whole population says whether switching on
would have paid.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from pipeline_data import base_config, comparable, direct_records, write_files

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop import InForcePolicy
from costlib.thresholds.loop._bootstrap import BootstrapGrids
from costlib.thresholds.loop._recalibration import apply_fallback, optimize_group
from costlib.thresholds.point._target import resolve_target
from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.records import operating_point_records, pn_curve_records

TARGET = resolve_target(target_marginal_precision=0.2)
SLOPE = 0.2 / 0.8
EDGES = [np.linspace(0.05, 0.95, 19)]


def rare_events(n, prevalence, seed):
    """One classifier, positives' scores beta(5, 2), negatives' beta(2, 5)."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < prevalence
    scores = np.where(truth, rng.beta(5, 2, n), rng.beta(2, 5, n))
    return np.clip(scores, 0.0, 0.999)[:, None], truth


def first_run_grid(scores, truth, pi, seed):
    """Nothing flagged yet: every row audited with probability ``pi`` (the floor audit of a
    group without a point, or a first decide run's uniform audit)."""
    audited = np.random.default_rng([seed, 1]).random(len(truth)) < pi
    labels = np.where(audited, truth, None).astype(object)
    grid = ThresholdGrid.from_scores(scores, labels, EDGES,
                                     audit_probabilities=np.full(len(truth), pi))
    return grid, int((audited & truth).sum())


def true_net(scores, truth, thresholds):
    flagged = scores[:, 0] >= thresholds[0]
    return float((flagged & truth).sum() - SLOPE * (flagged & ~truth).sum())


#: ``min_rated`` counts rows, one each whatever they weigh: one heavy audited positive is one
#: row, and ``min_rated`` of 10 stops it before the evidence rule is asked. These tests ask the
#: rule itself, so one rated row of each class is enough here.
MIN_ROWS = 1


def group(grid, in_force=None, bootstrap=None, **policy):
    return optimize_group("g", grid, methods=["hull"], target=TARGET, rule="any",
                          min_positives=MIN_ROWS, min_negatives=MIN_ROWS, in_force=in_force,
                          bootstrap=bootstrap, policy=InForcePolicy(**policy))


def test_one_heavy_audited_positive_does_not_switch_a_group_on():
    """The failure this rule prevents: at a 0.1% floor audit, one audited positive (weight
    1000) made the group's point; on the whole population that point loses."""
    scores, truth = rare_events(60_000, 0.002, 3)
    grid, audited_positives = first_run_grid(scores, truth, 0.001, 3)
    assert audited_positives == 1
    before = group(grid, evidence_z=None)  # the rule off: what was published before
    chosen = before.points["hull"]
    assert before.status == "ok" and math.isfinite(chosen.thresholds[0])
    assert true_net(scores, truth, chosen.thresholds) < 0  # it would have lost

    result = group(grid)
    assert result.status == "insufficient_data"
    assert result.points == {"hull": None} and result.intervals == {"hull": None}
    why = result.withheld["hull"]
    assert why.startswith("not switched on: no thresholds in force")
    assert "one audited row" in why
    assert f"the method's point: ({chosen.thresholds[0]:.4g})" in why
    # min_rated counts rows: one audited positive (weight 1000) is one row, too few for 10
    assert grid.total_positives >= 10 and grid.positive_rows == 1
    thin = optimize_group("g", grid, methods=["hull"], target=TARGET, rule="any",
                          min_positives=10, min_negatives=10, policy=InForcePolicy(
                              evidence_z=None))
    assert thin.status == "insufficient_data" and thin.points == {"hull": None}
    assert (thin.rated_positive_rows, thin.rated_positives) == (1, grid.total_positives)


def test_clear_evidence_switches_the_group_on():
    """A larger audit of a more frequent event: the point is published, and it pays."""
    scores, truth = rare_events(20_000, 0.03, 5)
    grid, audited_positives = first_run_grid(scores, truth, 0.2, 5)
    assert audited_positives > 50
    result = group(grid)
    assert result.status == "ok" and not result.withheld
    point = result.points["hull"]
    assert math.isfinite(point.thresholds[0])
    assert true_net(scores, truth, point.thresholds) > 0
    # the gain over flagging nothing is the point's own objective (O(off) = 0)
    assert point.tp - SLOPE * point.fp > 0


def test_the_bound_is_measured_from_flagging_nothing():
    """Withheld exactly when no cell of the curve has a positive lower bound of its gain over
    the all-off tuple: the same verdict as the rule with "off" given as thresholds in force."""
    verdicts = set()
    for seed in range(12):  # 2-11 audited positives: some switched on, some not
        scores, truth = rare_events(20_000, 0.03, seed)
        grid, _ = first_run_grid(scores, truth, 0.015, seed)
        fresh = group(grid)
        verdicts.add(fresh.status)
        from_off = group(grid, in_force=(math.inf,))
        kept_off = from_off.points["hull"] is not None and not math.isfinite(
            from_off.points["hull"].thresholds[0])
        assert (fresh.status == "insufficient_data") == kept_off, seed
        if fresh.status == "ok":
            assert fresh.points["hull"].thresholds == from_off.points["hull"].thresholds
            assert true_net(scores, truth, fresh.points["hull"].thresholds) > 0  # it pays
    assert verdicts == {"ok", "insufficient_data"}


def test_no_audit_rows_or_rule_off_or_nothing_to_flag_publish_as_before():
    scores, truth = rare_events(2_000, 0.1, 7)
    flagged = scores[:, 0] >= 0.5
    labels = np.where(flagged, truth, None).astype(object)
    rated_only = ThresholdGrid.from_scores(scores, labels, EDGES)  # no audit: no evidence rule
    assert group(rated_only).status == "ok"
    assert group(rated_only).points["hull"] is not None
    # a method whose own point flags nothing is published as such (nothing to switch on):
    # every positive scores below the lowest candidate threshold, negatives everywhere
    rng = np.random.default_rng(8)
    low = np.where(truth, 0.01, rng.random(len(truth)))[:, None]
    grid, _ = first_run_grid(low, truth, 0.5, 7)
    result = group(grid)
    assert result.status == "ok" and not result.withheld
    assert result.points["hull"].thresholds == (math.inf,)


def test_switch_on_evidence_false_publishes_the_method_point_as_before():
    scores, truth = rare_events(60_000, 0.002, 3)
    grid, _ = first_run_grid(scores, truth, 0.001, 3)
    free = group(grid, switch_on_evidence=False)
    assert free.status == "ok" and not free.withheld
    assert free.points["hull"].thresholds == group(grid, evidence_z=None).points["hull"].thresholds
    # groups with thresholds in force keep the evidence rule either way
    kept = group(grid, in_force=(math.inf,), switch_on_evidence=False)
    assert kept.points["hull"].thresholds == (math.inf,)


def test_min_gain_z_with_a_bootstrap_takes_precedence_as_documented():
    """With ``min_gain_z`` and replicates the bootstrap rule decides moves, and it judges
    only groups with thresholds in force: a first run publishes the method's point."""
    scores, truth = rare_events(60_000, 0.002, 3)
    audited = np.random.default_rng([3, 1]).random(len(truth)) < 0.001
    labels = np.where(audited, truth, None).astype(object)
    pi = np.full(len(truth), 0.001)
    grid = ThresholdGrid.from_scores(scores, labels, EDGES, audit_probabilities=pi)
    boot = BootstrapGrids.from_scores(scores, labels, EDGES, np.arange(len(truth)),
                                      n_replicates=20, audit_probabilities=pi)
    with_boot = group(grid, bootstrap=boot, min_gain_z=1.0)
    assert with_boot.status == "ok" and not with_boot.withheld
    assert with_boot.points["hull"].thresholds == group(
        grid, evidence_z=None).points["hull"].thresholds
    assert group(grid, min_gain_z=1.0).status == "insufficient_data"  # no replicates: evidence_z


def test_a_census_of_rows_flagged_before_can_refute_a_switch_on():
    """Rows a past point flagged (rated with ``π = 1``, all negatives, 0.8-1) and ten audited
    positives of weight 1000 at 0.85-0.95: the audit supports flagging from 0.85, the census of
    that region refutes it. Without the census review the group is switched on."""
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.uniform(0.8, 0.999, 300), rng.uniform(0.85, 0.95, 10),
                             rng.uniform(0.0, 0.5, 40)])[:, None]
    labels = np.repeat([False, True, False], [300, 10, 40]).astype(object)
    pi = np.repeat([1.0, 0.001], [300, 50])
    grid = ThresholdGrid.from_scores(scores, labels, EDGES, audit_probabilities=pi)
    refuted = group(grid)
    assert refuted.status == "insufficient_data"
    assert refuted.withheld["hull"].startswith(
        "not switched on: no thresholds in force, and the census of the region the move would "
        "change refutes it")
    assert group(grid, census_review=False).points["hull"].thresholds == (0.85,)


def test_a_withheld_group_falls_back_to_a_supported_parent_and_records_say_why():
    scores, truth = rare_events(60_000, 0.002, 3)
    grid, _ = first_run_grid(scores, truth, 0.001, 3)
    thin = group(grid)
    assert thin.status == "insufficient_data"
    big_scores, big_truth = rare_events(20_000, 0.03, 5)
    parent_grid, _ = first_run_grid(big_scores, big_truth, 0.2, 5)
    parent = optimize_group("__all__", parent_grid, methods=["hull"], target=TARGET, rule="any",
                            min_positives=10, min_negatives=10)
    out = apply_fallback({"g": thin, "__all__": parent})
    assert out["g"].status == "fallback"
    assert out["g"].points["hull"].thresholds == parent.points["hull"].thresholds
    [fell_back] = operating_point_records(out["g"], rule="any", classifiers=("s",),
                                          target_marginal_precision=0.2, run_id="r",
                                          config_digest="d")
    assert fell_back["thresholds"] == list(parent.points["hull"].thresholds)
    assert fell_back["reason"].startswith(thin.withheld["hull"])  # why it took the parent's
    alone = apply_fallback({"g": thin}, fallback="none")["g"]
    [record] = operating_point_records(alone, rule="any", classifiers=("s",),
                                       target_marginal_precision=0.2, run_id="r",
                                       config_digest="d")
    assert record["thresholds"] is None and record["status"] == "insufficient_data"
    assert record["reason"] == thin.withheld["hull"]


@pytest.mark.parametrize("z", [0.0, 1.645])
def test_at_z_zero_a_positive_estimate_is_enough_without_the_one_row_margin(z):
    """z = 0 without the margin: any cell with a positive estimated gain switches the group on
    (the rule reduces to "the estimate beats flagging nothing")."""
    scores, truth = rare_events(60_000, 0.002, 3)
    grid, _ = first_run_grid(scores, truth, 0.001, 3)
    result = group(grid, evidence_z=z, one_row_margin=False)
    estimate = group(grid, evidence_z=None).points["hull"]
    gain = estimate.tp - SLOPE * estimate.fp
    if z == 0.0:
        assert gain > 0 and result.status == "ok"
    else:
        assert result.status == "insufficient_data"


def _first_run_frame():
    """Two markets on a first run (nothing flagged, every row audited): ``new`` at the floor
    (one audited positive of weight 1000), ``busy`` with a 20% audit of a frequent event."""
    parts = []
    for name, n, prevalence, pi, seed in (("new", 60_000, 0.002, 0.001, 3),
                                          ("busy", 20_000, 0.03, 0.2, 5)):
        scores, truth = rare_events(n, prevalence, seed)
        audited = np.random.default_rng([seed, 1]).random(n) < pi
        parts.append(pd.DataFrame({
            "group": name, "item_id": np.arange(n) + (0 if name == "new" else 10**6),
            "text_model": scores[:, 0], "image_model": np.nan,
            "label": pd.array(np.where(audited, truth, None), dtype="boolean"),
            "weight": 1.0, "audit_p": pi}))
    return pd.concat(parts, ignore_index=True)


def test_first_recalibrate_run_withholds_the_unsupported_group_like_the_library(tmp_path):
    frame = _first_run_frame()
    config = base_config(columns={"weight": "weight", "audit_probability": "audit_p"},
                         grid={"edges": "explicit", "values": [EDGES[0].tolist()] * 2},
                         target={"marginal_precision": 0.2}, methods=["hull"],
                         decision_method="hull",
                         min_rated={"positives": MIN_ROWS, "negatives": MIN_ROWS},
                         fallback="none")
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config.raw))
    pattern = write_files(frame, tmp_path / "in", n_files=2)
    out = tmp_path / "out"
    code = main(["recalibrate", "--config", str(path), "--input", pattern, "--output", str(out),
                 "--run-id", "r1"])
    assert code == 0
    got = pq.read_table(out / "runs" / "r1" / "operating_points.parquet").to_pylist()
    by_group = {r["group"]: r for r in got}
    new, busy = by_group["new"], by_group["busy"]
    assert new["thresholds"] is None and new["status"] == "insufficient_data"
    assert new["reason"].startswith("not switched on: no thresholds in force")
    assert busy["status"] == "ok" and busy["thresholds"][0] < math.inf
    # the reason as data: exactly the records whose method did not switch the group on
    assert [(r["group"], r["reason_code"]) for r in got if r["reason_code"] is not None] == [
        ("new", "not_switched_on")]
    assert comparable(got) == comparable(direct_records(frame, config))
    # the report says why the group has no thresholds (not "too few rated rows")
    assert main(["report", "--run", str(out / "runs" / "r1"), "--all-groups"]) == 0
    page = (out / "runs" / "r1" / "report.html").read_text()
    assert "Not switched on (" in page and "not switched on: no thresholds in force" in page
    assert "Too few rated rows" not in page
    off = RunConfig.from_dict({**config.raw, "in_force": {"switch_on_evidence": False}})
    path.write_text(json.dumps(off.raw))
    assert main(["recalibrate", "--config", str(path), "--input", pattern, "--output",
                 str(tmp_path / "off"), "--run-id", "r1"]) == 0
    got_off = pq.read_table(tmp_path / "off" / "runs" / "r1" /
                            "operating_points.parquet").to_pylist()
    assert {r["group"]: r["status"] for r in got_off} == {"new": "ok", "busy": "ok",
                                                          "__all__": "ok"}
    assert comparable(got_off) == comparable(direct_records(frame, off))


def test_a_group_switched_on_by_one_method_only_writes_records_and_curves_of_that_one():
    """Methods choose different points, so one may switch a group on while another may not:
    status ok with one method's point None. Records give that method no thresholds and its
    reason; PN curves are written for the methods with a point only."""
    scores, truth = rare_events(20_000, 0.03, 5)
    grid, _ = first_run_grid(scores, truth, 0.2, 5)
    both = optimize_group("g", grid, methods=["hull", "graph"], target=TARGET, rule="any",
                          min_positives=10, min_negatives=10)
    assert both.status == "ok" and both.points["graph"] is not None
    mixed = replace(both, points={**both.points, "graph": None},
                    intervals={**both.intervals, "graph": None},
                    withheld={"graph": "not switched on: no thresholds in force, and …"})
    records = {r["method"]: r for r in operating_point_records(
        mixed, rule="any", classifiers=("s",), target_marginal_precision=0.2, run_id="r",
        config_digest="d")}
    assert records["graph"]["thresholds"] is None
    assert records["graph"]["reason"] == mixed.withheld["graph"]
    assert (records["graph"]["reason_code"], records["hull"]["reason_code"]) == (
        "not_switched_on", None)
    assert records["hull"]["thresholds"] == list(both.points["hull"].thresholds)
    assert [c["method"] for c in pn_curve_records(mixed)] == ["hull"]
