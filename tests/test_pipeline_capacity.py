"""The shared review capacity in `costlib recalibrate` (issue 22): the pipeline's allocation
equals `costlib.thresholds.capacity._allocation.allocate_capacity` on grids built directly from the
same
rows, bit for bit; decide applies it; the guard holds an allocation over capacity; the config and
the flags are checked."""

from __future__ import annotations

import html
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from pipeline_data import base_config, comparable, direct_grids, direct_records, sample_frame
from pipeline_data import write_files as write_frame

from costlib.thresholds.capacity._allocation import allocate_capacity
from costlib.thresholds.capacity._group_frontiers import group_frontiers
from costlib.thresholds.capacity._split_baselines import grid_rows, split_baselines, volume_scales
from costlib.thresholds.loop._recalibration import is_sufficient
from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import ConfigError
from costlib_pipelines.decide.pipeline import run_decide
from costlib_pipelines.decide.records import read_decisions
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.recalibrate.publish import PublishRefused


@pytest.fixture(scope="module")
def frame():
    """Six groups (each market split in two), plus a thin one below min_rated."""
    frame = sample_frame(20_000, seed=1)
    frame["group"] = frame["group"].astype(str) + "_" + (frame["item_id"] % 2).astype(str)
    thin = frame.index[:8]
    frame.loc[thin, "group"] = "thin"
    frame.loc[thin, "label"] = [True, False] * 4  # 4 rated positives and negatives: too few
    frame.loc[thin, "weight"] = 1.0
    return frame


@pytest.fixture(scope="module")
def inputs(frame, tmp_path_factory):
    return write_frame(frame, tmp_path_factory.mktemp("capacity-in"), n_files=2,
                       row_group_size=3000)


def library(frame, config):
    """allocate_capacity on the groups' grids built directly from the rows (sorted, enough
    rated rows), the volume scales as the pipeline documents them, and the split baselines."""
    grids = {g: grid for g, grid in sorted(direct_grids(frame, config).items())
             if is_sufficient(grid, config.min_positives, config.min_negatives)}
    cap = config.capacity
    rows = {g: grid_rows(grid) for g, grid in grids.items()}
    scales = volume_scales(rows, period_share=cap["period_share"],
                           expected_rows=cap["expected_rows"] or None)
    share = config.max_unrated_share
    kwargs = dict(rule=config.rule, objective=cap["objective"],
                  target=config.target if cap["objective"] == "linear" else None,
                  max_unrated_share=1.0 if share is None else share,
                  # bounds of groups not in the run are only noted (groups_not_in_run)
                  min_volume={g: v for g, v in cap["min_volume"].items() if g in grids},
                  max_volume={g: v for g, v in cap["max_volume"].items() if g in grids},
                  volume_scale=scales)
    result = allocate_capacity(grids, cap["total"], **kwargs,
                               exact="auto" if cap["exact"] == "auto" else False)
    fronts = group_frontiers(grids, **kwargs)
    splits = split_baselines(fronts, {g: scales[g] * rows[g] for g in grids}, cap["total"])
    return result, scales, splits


def run(config, inputs, out, **kw):
    manifest = run_recalibrate(config, inputs, str(out), [], **kw)
    run_dir = out / "runs" / manifest["run_id"]
    return manifest, run_dir, pq.read_table(run_dir / "operating_points.parquet").to_pylist()


CONFIGS = {
    "linear-any-exact": dict(
        rule="any", capacity={"total": 40.0, "period_share": 0.5,
                              "expected_rows": {"market_b_1": 5000.0},
                              "min_volume": {"market_a_0": 5.0},
                              "max_volume": {"market_c_0": 20.0, "nowhere": 3.0}}),
    "tp-all-lagrangian": dict(
        rule="all", coverage={"max_unrated_share": 0.2},
        capacity={"total": 25.0, "objective": "true_positives", "exact": "never"}),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_pipeline_allocation_equals_the_library_bit_for_bit(frame, inputs, tmp_path, name):
    config = base_config(methods=["hull", "graph"], decision_method="capacity", **CONFIGS[name])
    expected, scales, splits = library(frame, config)
    manifest, run_dir, records = run(config, inputs, tmp_path / "out")
    # the methods' records are untouched by the capacity
    others = [r for r in records if r["method"] != "capacity"]
    assert comparable(others) == comparable(direct_records(frame, config))
    mine = {r["group"]: r for r in records if r["method"] == "capacity"}
    assert set(mine) == set(expected.groups) | {"thin"}
    assert mine["thin"]["capacity_status"] == "insufficient_data"
    assert mine["thin"]["thresholds"] is None and mine["thin"]["allocated_volume"] is None
    assert "__all__" not in mine
    for g, a in expected.groups.items():
        r = mine[g]
        assert r["thresholds"] == list(a.thresholds)  # bit for bit, floats compared exactly
        assert r["capacity_status"] == a.status
        assert r["allocated_volume"] == a.volume and r["allocated_utility"] == a.utility
        assert r["capacity_multiplier"] == expected.multiplier
        assert r["capacity"] == config.capacity["total"]
        assert r["capacity_share"] == a.volume / config.capacity["total"]
        assert r["volume_scale"] == scales[g]
        # the record's own counts are the group's grid at those thresholds, this run
        assert r["volume"] * scales[g] == pytest.approx(a.volume, rel=1e-12)
        assert r["tp"] * scales[g] == pytest.approx(a.true_positives, rel=1e-12)
    summary = manifest["capacity"]
    assert summary == json.loads((run_dir / "capacity.json").read_text())
    for key in ("multiplier", "total_volume", "total_utility", "upper_bound",
                "integrality_gap", "greedy_utility", "lagrangian_total"):
        assert summary[key] == getattr(expected, key), key
    assert summary["exact"] == expected.exact == (name == "linear-any-exact")
    assert summary["feasible"] and summary["total_volume"] <= config.capacity["total"]
    assert summary["groups_not_in_run"] == (["nowhere"] if name == "linear-any-exact" else [])
    for key, value in vars(splits).items():
        assert summary[key] == value, key
    assert summary["gain_over_equal_utility"] == expected.total_utility - splits.equal_utility
    assert summary["statuses"].get("capacity_bound", 0) > 0  # the capacity binds
    assert manifest["published"] and not manifest["guard"]["violations"]


def test_decide_applies_the_allocation(frame, inputs, tmp_path):
    config = base_config(methods=["hull"], decision_method="capacity",
                         capacity={"total": 60.0})
    _, _, records = run(config, inputs, tmp_path / "out")
    run_decide(config, inputs, str(tmp_path / "out"), str(tmp_path / "dec"), [])
    decisions = read_decisions(str(tmp_path / "dec")).to_pandas()
    mine = {r["group"]: r for r in records if r["method"] == "capacity"}
    by_item = frame.set_index("item_id")
    for group, rows in decisions.groupby("group"):
        r = mine[group]
        ids = rows["item_id"].astype(np.int64).to_numpy()
        scores = by_item.loc[ids, list(config.classifiers)].to_numpy(float)
        if r["thresholds"] is None:  # thin: not allocated, no thresholds
            assert rows["threshold_decision"].isna().all()
            continue
        fires = np.nan_to_num(scores, nan=-np.inf) >= np.asarray(r["thresholds"])
        assert np.array_equal(rows["threshold_decision"].to_numpy(bool), fires.any(axis=1)), group
        assert (rows["operating_point_method"] == "capacity").all()
        # what decide flags is the record's volume (weighted rows, rated or not)
        weight = by_item.loc[ids, "weight"].to_numpy(float)
        assert weight[fires.any(axis=1)].sum() == pytest.approx(r["volume"], rel=1e-6)


def test_guard_holds_an_allocation_over_capacity(frame, inputs, tmp_path):
    config = base_config(methods=["hull"], decision_method="capacity",
                         capacity={"total": 10.0, "min_volume": {"market_a_0": 8.0,
                                                                 "market_c_1": 8.0}})
    with pytest.raises(PublishRefused, match="capacity"):
        run_recalibrate(config, inputs, str(tmp_path / "out"), [])
    run_dir = next((tmp_path / "out" / "runs").iterdir())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert not manifest["published"] and not manifest["capacity"]["feasible"]
    assert manifest["capacity"]["multiplier"] == "inf"
    held = [v for v in manifest["guard"]["violations"] if v.startswith("capacity:")]
    assert any("more than capacity.total = 10" in v for v in held)
    assert any("no allocation fits" in v for v in held)
    records = pq.read_table(run_dir / "operating_points.parquet").to_pylist()
    used = sum(r["allocated_volume"] or 0 for r in records if r["method"] == "capacity")
    assert used > 10.0


@pytest.mark.parametrize("raw, message", [
    (dict(capacity={"total": 5.0}, decision_method="hull"),
     "capacity.total: 5 rows would be allocated, but decision_method is 'hull'"),
    (dict(capacity={"total": 5.0}, windowing={"size_days": 7}, decision_method="capacity"),
     "capacity.total: a shared capacity is allocated in batch runs only"),
    (dict(capacity={"total": 5.0}, constraints={"min_precision": 0.5},
          decision_method="capacity"),
     "not constraints.min_precision"),
    (dict(capacity={"total": 5.0, "min_volume": {"a": 3}, "max_volume": {"a": 2}},
          decision_method="capacity"),
     r"capacity.min_volume\['a'\] = 3 exceeds capacity.max_volume\['a'\] = 2"),
    (dict(capacity={"total": 5.0, "max_volume": {"__all__": 2}}), "capacity.max_volume"),
    (dict(capacity={"total": -1.0}), "capacity.total: -1.0 is less than the minimum of 0"),
    (dict(capacity={"total": 1.0, "period_share": 0}), "capacity.period_share"),
    (dict(capacity={"total": 1.0, "expected_rows": {"a": 0}}), "capacity.expected_rows.a"),
    (dict(capacity={"total": 1.0, "exact": True}), "capacity.exact"),
    (dict(capacity={"totl": 1.0}), "capacity: Additional properties"),
])
def test_config_refuses_what_the_allocation_cannot_do(raw, message):
    with pytest.raises(ConfigError, match=message):
        base_config(**raw)


def test_decision_method_capacity_needs_a_total_in_recalibrate_only():
    config = base_config(decision_method="capacity")  # decide reads the records: no total
    with pytest.raises(ConfigError, match="decision_method: 'capacity' applies"):
        config.check_recalibrate("c.yaml")
    config.with_overrides({"capacity.total": 5.0}, source="flags").check_recalibrate("flags")


CLI_CONFIG = ("classifiers: [text_model, image_model]\n"
              "target: {marginal_precision: 0.3}\ncolumns: {weight: weight}\n"
              "methods: [hull]\ndecision_method: DM\ngrid: {edges: uniform, bins: 24}\n"
              "min_rated: {positives: 5, negatives: 5}\n")


def test_capacity_flag_then_decide_applies_the_allocation(frame, inputs, tmp_path, capsys):
    """decision_method: capacity in the config, the total given as --capacity: recalibrate
    runs (the flag is applied before the check), and decide, with the same config, flags
    exactly the allocated rows: the weighted volume the allocation reports."""
    config = tmp_path / "cap.yaml"
    config.write_text(CLI_CONFIG.replace("DM", "capacity"))
    assert main(["recalibrate", "--config", str(config), "--input", inputs,
                 "--output", str(tmp_path / "o"), "--capacity", "30"]) == 0
    capsys.readouterr()
    assert main(["decide", "--config", str(config), "--input", inputs, "--operating-points",
                 str(tmp_path / "o"), "--output", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "applied the capacity points (decision_method" in out
    run_id = (tmp_path / "o" / "LATEST").read_text().strip()
    summary = json.loads((tmp_path / "o" / "runs" / run_id / "manifest.json").read_text())
    decisions = read_decisions(str(tmp_path / "d")).to_pandas()
    flagged = decisions["threshold_decision"].eq(True).to_numpy(bool)
    ids = set(decisions["item_id"][flagged].astype(int))
    weight = frame.loc[frame["item_id"].isin(ids), "weight"].sum()
    assert weight == pytest.approx(summary["capacity"]["total_volume"])
    assert weight <= 30.0


def test_capacity_with_another_decision_method_is_refused(inputs, tmp_path, capsys):
    """The silent trap: an allocation decide would ignore. Refused before anything is
    written, in one line that says the fix."""
    config = tmp_path / "graph.yaml"
    config.write_text(CLI_CONFIG.replace("DM", "hull"))
    assert main(["recalibrate", "--config", str(config), "--input", inputs,
                 "--output", str(tmp_path / "o"), "--capacity", "30"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "decision_method is 'hull'" in err and "set decision_method: capacity" in err
    assert not (tmp_path / "o").exists()


def test_decide_with_another_method_over_an_allocation_warns(inputs, tmp_path, capsys):
    """Points that hold an allocation, applied with a config of another decision_method (a
    second config for decide): applied as asked, with a warning that names the fix."""
    config = tmp_path / "cap.yaml"
    config.write_text(CLI_CONFIG.replace("DM", "capacity"))
    other = tmp_path / "hull.yaml"
    other.write_text(CLI_CONFIG.replace("DM", "hull"))
    assert main(["recalibrate", "--config", str(config), "--input", inputs,
                 "--output", str(tmp_path / "o"), "--capacity", "30"]) == 0
    capsys.readouterr()
    assert main(["decide", "--config", str(other), "--input", inputs, "--operating-points",
                 str(tmp_path / "o"), "--output", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "applied the hull points" in out
    assert ("warning: the points hold a shared-capacity allocation (method capacity), but the "
            "config's decision_method is 'hull'") in out and "decision_method: capacity" in out


def test_cli_flags(frame, inputs, tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text(CLI_CONFIG.replace("DM", "capacity"))
    base = ["recalibrate", "--config", str(config), "--input", inputs]
    assert main([*base, "--output", str(tmp_path / "o1"), "--capacity", "-3"]) == 2
    assert "--capacity" in capsys.readouterr().err
    assert main([*base, "--output", str(tmp_path / "o1"), "--capacity-objective", "f1"]) == 2
    capsys.readouterr()
    assert main([*base, "--output", str(tmp_path / "o2"), "--capacity", "30",
                 "--capacity-objective", "true_positives"]) == 0
    out = capsys.readouterr().out
    assert "capacity: " in out and "capacity.json" in out
    run_id = (tmp_path / "o2" / "LATEST").read_text().strip()
    manifest = json.loads((tmp_path / "o2" / "runs" / run_id / "manifest.json").read_text())
    assert manifest["config"]["capacity"]["total"] == 30.0
    assert manifest["capacity"]["objective"] == "true_positives"
    assert manifest["capacity"]["total_volume"] <= 30.0


def test_many_groups_gather_only_vertices_and_still_equal_the_library(tmp_path):
    """120 groups: more than the exact programme takes, so the global combine cuts every
    frontier to its hull vertices; the allocation is still the library's, bit for bit."""
    frame = sample_frame(40_000, seed=4)
    frame["group"] = frame["group"].astype(str) + "_" + (frame["item_id"] % 40).astype(str)
    inputs = write_frame(frame, tmp_path / "in", n_files=3, row_group_size=2500)
    config = base_config(methods=["hull"], decision_method="capacity",
                         min_rated={"positives": 1, "negatives": 1},
                         coverage={"max_unrated_share": None},
                         capacity={"total": 150.0, "objective": "true_positives"})
    expected, _, splits = library(frame, config)
    assert len(expected.groups) > 64 and not expected.exact
    manifest, _, records = run(config, inputs, tmp_path / "out")
    mine = {r["group"]: r for r in records if r["method"] == "capacity"}
    for g, a in expected.groups.items():
        assert mine[g]["thresholds"] == list(a.thresholds), g
        assert mine[g]["allocated_volume"] == a.volume and mine[g]["capacity_status"] == a.status
    summary = manifest["capacity"]
    assert summary["total_utility"] == expected.total_utility and not summary["exact"]
    assert summary["upper_bound"] == expected.upper_bound
    assert summary["integrality_gap"] == expected.integrality_gap >= 0
    assert summary["equal_true_positives"] == splits.equal_true_positives
    assert summary["proportional_true_positives"] == splits.proportional_true_positives
    assert summary["statuses"].get("capacity_bound", 0) > 0


def test_report_shows_the_allocation(frame, inputs, tmp_path):
    from costlib_pipelines.report.page import write_report

    config = base_config(methods=["hull"], decision_method="capacity",
                         capacity={"total": 40.0, "max_volume": {"<b>x</b>": 1.0}})
    manifest, run_dir, records = run(config, inputs, tmp_path / "out")
    page = (tmp_path / "r.html")
    write_report(str(run_dir), str(page))
    text = page.read_text()
    summary = manifest["capacity"]
    assert '<section id="capacity"><h2>Shared review capacity</h2>' in text
    assert f"{summary['total_volume']:,.2f}" in text and f"{summary['multiplier']:,.4f}" in text
    gain = summary["total_utility"] - summary["equal_utility"]
    assert f"{gain:+,.2f}" in text
    for r in records:
        if r["method"] == "capacity":
            assert f'data-key="capacity.group.{r["group"]}"' in text
            if r["reason"]:  # what holds the group there, in its row
                assert html.escape(r["reason"], quote=False) in text
    assert "capacity left unused, and why" in text
    assert html.escape(summary["unused_why"], quote=False) in text
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text  # a hostile name, escaped


def test_a_thin_group_left_out_is_held_with_its_real_rated_rows(frame, inputs, tmp_path):
    """The guard's reason for a group the allocation left out names its own rated rows (4
    positives and 4 negatives, 8 in all), why it has no thresholds and what decide does, never
    "rests on 0 rated rows"."""
    config = base_config(methods=["hull"], decision_method="capacity",
                         capacity={"total": 40.0})
    with pytest.raises(PublishRefused) as held:
        run_recalibrate(config, inputs, str(tmp_path / "out"), [], min_rated=5)
    (thin,) = [line.strip() for line in str(held.value).splitlines() if "'thin'" in line]
    assert thin == (
        "group 'thin': no thresholds of method capacity, so decide gives it null decisions "
        "(capacity_status insufficient_data: left out of the capacity allocation: its grid "
        "holds 4 rated positives and 4 rated negatives, fewer than min_rated (positives 5, "
        "negatives 5); the allocation gives such a group no thresholds (no fallback)); its own "
        "grid holds 8 rated rows (4 positives, 4 negatives); a group without thresholds is "
        "held under min_rated=5")
    assert "rest on 0" not in str(held.value)


@pytest.mark.parametrize("objective", ["linear", "true_positives"])
def test_capacity_json_the_summary_and_each_record_say_what_left_capacity_unused(
        frame, inputs, tmp_path, capsys, objective):
    """A capacity far above what the groups want: every allocated group is at its best point,
    and each record names what holds it there, which the grid confirms."""
    config = base_config(methods=["hull"], decision_method="capacity",
                         capacity={"total": 2000.0, "objective": objective})
    _, run_dir, records = run(config, inputs, tmp_path / "out")
    summary = json.loads((run_dir / "capacity.json").read_text())
    unused = summary["capacity"] - summary["total_volume"]
    assert summary["unused"] == pytest.approx(unused) and unused > 0
    assert summary["unused_why"].startswith(
        f"{summary['total_volume']:,.4g} of 2,000 rows allocated, {unused:,.4g} unused")
    mine = {r["group"]: r for r in records if r["method"] == "capacity"
            and r["capacity_status"] != "insufficient_data"}
    assert sorted(g for names in summary["held_by"].values() for g in names) == sorted(mine)
    grids = direct_grids(frame, config)
    for held_by, names in summary["held_by"].items():
        for g in names:
            r = mine[g]
            assert r["reason"].startswith(f"held by {held_by}: ")
            grid = grids[g]
            volume = grid.volume(config.rule)
            covered = grid.covered(config.rule, 0.0)
            if held_by == "volume":  # flags all the lattice can
                assert r["volume"] == pytest.approx(volume.max())
            elif held_by == "target":  # more covered rows exist, but no more utility
                assert volume[covered].max() > r["volume"]
            elif held_by == "coverage":  # the covered region ends at the point
                assert volume[covered].max() == pytest.approx(r["volume"])
                assert volume.max() > r["volume"]
            else:
                pytest.fail(f"{g}: held by {held_by} with capacity left over")
    out_cli = tmp_path / "cli"
    yaml = tmp_path / "c.yaml"
    yaml.write_text(CLI_CONFIG.replace("DM", "capacity"))
    capsys.readouterr()
    assert main(["recalibrate", "--config", str(yaml), "--input", inputs, "--output",
                 str(out_cli), "--capacity", "2000", "--capacity-objective", objective]) == 0
    printed = capsys.readouterr().out
    assert "rows allocated" in printed and "unused: the capacity does not bind" in printed
    # each group's cause, one line per group
    assert any(line.startswith("  market_a_0: held by ") for line in printed.splitlines())
    assert "  thin: left out of the capacity allocation: its grid holds" in printed
