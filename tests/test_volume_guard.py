"""The publish guard's volume check: the flagged volume of the new points against the points in
force, both on the run's own rows, checked against a count made directly on the rows."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from pipeline_data import base_config, sample_frame, write_files

from costlib_pipelines.commands.cli import main
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.recalibrate.publish import PublishRefused
from costlib_pipelines.recalibrate.volume_guard import VolumeCheck, volume_change


@pytest.mark.parametrize(("new", "old", "ratio"), [
    (114.0, 4054.0, 4054.0 / 114.0), (4054.0, 114.0, 4054.0 / 114.0), (5.0, 5.0, 1.0),
    (0.0, 0.0, 1.0), (0.0, 3.0, math.inf), (3.0, 0.0, math.inf)])
def test_volume_change_is_the_larger_ratio(new, old, ratio):
    assert volume_change(new, old) == pytest.approx(ratio)


def test_the_message_quotes_the_volumes_the_ratio_and_the_groups_that_changed_most():
    """The issue's first run: 114 flagged against the rule in force's 4,054 (35.6x)."""
    volumes = {"jewelry": [4.0, 54.0], "travel": [100.0, 4000.0], "toys": [10.0, 0.0]}
    warn = VolumeCheck(volumes, 3.0)
    assert warn.totals == (114.0, 4054.0)
    assert warn.exceeded() and warn.violations() == []
    (note,) = warn.notes()
    assert note == ("volume: the new points would flag 114 rows of this run's input against "
                    "4,054 for the points in force on the same rows (35.6x, more than "
                    "publish.max_volume_change = 3); most changed: travel 4,000 -> 100; "
                    "jewelry 54 -> 4; toys 0 -> 10")
    held = VolumeCheck(volumes, 3.0, "hold")
    assert held.notes() == [] and held.violations() == [note]
    assert VolumeCheck(volumes, 40.0, "hold").violations() == []  # within the limit
    assert VolumeCheck(volumes, None, "hold").violations() == []  # not checked
    assert VolumeCheck(None, 3.0, "hold").summary()["compared"] is False  # nothing in force
    money = VolumeCheck(volumes, 3.0, amounts=True)
    assert money.notes()[0].startswith(
        "volume: the new points would flag rows worth 114 (regret-weighted: "
        "min_risk.weight_rated_rows) of this run's input against 4,054")
    assert money.summary()["unit"] == "amount"
    summary = held.summary()
    assert (summary["new_volume"], summary["in_force_volume"]) == (114.0, 4054.0)
    assert summary["exceeded"] and summary["change"] == pytest.approx(4054 / 114)


def _flagged_weight(frame, thresholds_by_group, classifiers):
    """Weighted rows each group's thresholds flag (rule any: a score at or above its
    threshold; a null score never fires), counted on the rows."""
    total = 0.0
    for group, rows in frame.groupby("group"):
        thresholds = thresholds_by_group[group]
        fired = np.zeros(len(rows), dtype=bool)
        for name, t in zip(classifiers, thresholds, strict=True):
            scores = rows[name].to_numpy(dtype=float)
            fired |= np.nan_to_num(scores, nan=-np.inf) >= t
        total += float(rows["weight"].to_numpy()[fired].sum())
    return total


def _thresholds(out, run_id, method="graph"):
    lines = (out / "runs" / run_id / "operating_points.jsonl").read_text().splitlines()
    return {r["group"]: [math.inf if t == "inf" else t for t in r["thresholds"]]
            for r in map(json.loads, lines) if r["method"] == method}


@pytest.fixture(scope="module")
def stream(tmp_path_factory):
    frame = sample_frame(20_000, seed=4)
    return frame, write_files(frame, tmp_path_factory.mktemp("volume-in"), n_files=2)


def test_a_run_that_flags_eight_times_more_warns_with_the_volumes_counted_on_the_rows(
        stream, tmp_path):
    frame, inputs = stream
    out = tmp_path / "out"
    open_coverage = {"max_unrated_share": None}  # the new point may flag unrated rows
    first = run_recalibrate(base_config(methods=["graph"], coverage=open_coverage), inputs,
                            str(out))
    assert first["guard"]["volume"]["compared"] is False  # nothing was in force
    config = base_config(methods=["graph"], coverage=open_coverage,
                         target={"marginal_precision": 0.05})
    second = run_recalibrate(config, inputs, str(out))
    assert second["published"]  # the default only warns
    volume = second["guard"]["volume"]
    classifiers = list(config.classifiers)
    in_force = _flagged_weight(frame, _thresholds(out, first["run_id"]), classifiers)
    new = _flagged_weight(frame, _thresholds(out, second["run_id"]), classifiers)
    assert volume["in_force_volume"] == pytest.approx(in_force, rel=1e-12)
    assert volume["new_volume"] == pytest.approx(new, rel=1e-12)
    assert new > 3 * in_force and volume["exceeded"] is True
    assert volume["change"] == pytest.approx(new / in_force)
    assert any(n.startswith(f"volume: the new points would flag {new:,.6g} rows")
               and f"against {in_force:,.6g}" in n for n in second["guard"]["notes"])


def test_on_volume_change_hold_holds_the_run_with_exit_3(stream, tmp_path, capsys):
    _, inputs = stream
    out = tmp_path / "out"
    config = tmp_path / "c.json"
    raw = base_config(methods=["graph"], coverage={"max_unrated_share": None}).raw
    config.write_text(json.dumps(raw))
    assert main(["recalibrate", "--config", str(config), "--input", inputs,
                 "--output", str(out)]) == 0
    raw = {**raw, "target": {"marginal_precision": 0.05},
           "publish": {**raw["publish"], "on_volume_change": "hold"}}
    config.write_text(json.dumps(raw))
    capsys.readouterr()
    assert main(["recalibrate", "--config", str(config), "--input", inputs,
                 "--output", str(out), "--run-id", "wide"]) == 3
    err = capsys.readouterr().err
    assert "volume: the new points would flag" in err and "max_volume_change = 3" in err
    held = json.loads((out / "runs" / "wide" / "manifest.json").read_text())
    assert held["published"] is False and held["guard"]["volume"]["exceeded"]
    # the same change within a larger limit publishes
    raw["publish"]["max_volume_change"] = 1000
    config.write_text(json.dumps(raw))
    assert main(["recalibrate", "--config", str(config), "--input", inputs,
                 "--output", str(out), "--run-id", "wide2"]) == 0


def test_a_held_run_from_other_checks_still_reports_the_volume(stream, tmp_path):
    _, inputs = stream
    out = tmp_path / "out"
    run_recalibrate(base_config(methods=["graph"]), inputs, str(out))
    config = base_config(methods=["graph"], target={"marginal_precision": 0.9})
    with pytest.raises(PublishRefused):
        run_recalibrate(config, inputs, str(out), max_threshold_change=0.0, run_id="moved")
    held = json.loads((out / "runs" / "moved" / "manifest.json").read_text())
    assert held["guard"]["volume"]["compared"] is True


def test_an_infeasible_point_counts_as_decide_applies_it():
    """A point that misses min_recall only is applied by decide once published, so its volume
    counts; a point that misses max_volume flags nothing."""
    from test_recall_bounds import grid_of, population

    from costlib.thresholds.loop import GroupResult
    from costlib.thresholds.point import optimize
    from costlib_pipelines.recalibrate.volume_guard import decision_volumes, volume_at

    scores, labels, pi, _, _ = population(60_000, 0.0015, 0.6, 0.01, seed=0)
    grid = grid_of(scores, labels, pi)
    recall = optimize(grid, target_marginal_precision=0.3, method="hull", min_recall=0.8)
    volume = optimize(grid, target_marginal_precision=0.3, method="hull", max_volume=0.5)
    assert recall.status == volume.status == "infeasible"
    for point, counted in ((recall, True), (volume, False)):
        result = GroupResult("g", "ok", 1.0, 1.0, points={"hull": point})
        _, new, old = decision_volumes("g", grid, result, "hull", "any", (0.6,))
        assert old == volume_at(grid, (0.6,), "any") > 0
        assert new == (volume_at(grid, point.thresholds, "any") if counted else 0.0)
        assert new > 0 or not counted


def test_a_first_run_against_the_rule_in_force_compares_volumes(stream, tmp_path):
    """The first run of an output, given the rule in force (--in-force), is compared with it:
    a first run is no reason to skip the check."""
    frame, inputs = stream
    rule = tmp_path / "rule"
    open_coverage = {"max_unrated_share": None}
    run_recalibrate(base_config(methods=["graph"], coverage=open_coverage), inputs, str(rule))
    config = base_config(methods=["graph"], coverage=open_coverage,
                         target={"marginal_precision": 0.05},
                         publish={"on_volume_change": "hold"})
    with pytest.raises(PublishRefused, match="volume: the new points would flag"):
        run_recalibrate(config, inputs, str(tmp_path / "first"), in_force=str(rule),
                        run_id="first")
    held = json.loads((tmp_path / "first" / "runs" / "first" / "manifest.json").read_text())
    rule_id = (rule / "LATEST").read_text().strip()
    in_force = _flagged_weight(frame, _thresholds(rule, rule_id), list(config.classifiers))
    assert held["guard"]["volume"]["in_force_volume"] == pytest.approx(in_force, rel=1e-12)
    assert held["guard"]["compared_with_run"] is None  # nothing published in this output
