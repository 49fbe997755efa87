"""Thresholds in force (issue 11): on the lattice, and kept for thin groups instead of switched off.

Truth: direct counting of flagged rows (``brute_cell``), exhaustive search over every lattice
point, and the pipeline's own records read back by ``costlib decide``.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from coverage_data import brute_cell, brute_flags
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_data import CLASSIFIERS, base_config

from costlib.thresholds.binning._edges import uniform_edges, with_thresholds
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop import InForcePolicy
from costlib.thresholds.loop._bootstrap import BootstrapGrids, hash_item_ids, poisson_counts
from costlib.thresholds.loop._move_evidence import move_evidence
from costlib.thresholds.loop._recalibration import ALL_GROUPS, optimize_group, recalibrate_grids
from costlib.thresholds.point._operating_point import point_at
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._target import resolve_target
from costlib_pipelines.commands.cli import main
from costlib_pipelines.config import ConfigError
from costlib_pipelines.decide.pipeline import run_decide
from costlib_pipelines.decide.records import read_decisions
from costlib_pipelines.io.records import arrow_schema, records_to_table
from costlib_pipelines.recalibrate.in_force import InForce, edges_with_in_force
from costlib_pipelines.recalibrate.pipeline import run_recalibrate

START = (0.9, 0.9)  # not an edge of 24 uniform bins on [0, 1] (0.913 is the next one above)


# --------------------------------------------------------------------------- library
@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1, 2, allow_nan=False), min_size=0, max_size=6),
       st.integers(0, 2**31 - 1))
def test_added_edges_keep_every_old_cell_count(extra, seed):
    """Counts at every old threshold are unchanged by added edges, and every added threshold
    is a candidate whose counts equal direct counting of the rows."""
    rng = np.random.default_rng(seed)
    scores = rng.random((300, 2))
    labels = rng.random(300) < 0.3
    old = uniform_edges(0.0, 1.0, 9)
    new = [with_thresholds(old, extra), with_thresholds(old, extra[::-1])]
    a = ThresholdGrid.from_scores(scores, labels, [old, old])
    b = ThresholdGrid.from_scores(scores, labels, new)
    tp_a, fp_a = a.counts("any")
    tp_b, fp_b = b.counts("any")
    pos = [np.searchsorted(b.thresholds[j], a.thresholds[j]) for j in range(2)]
    assert np.array_equal(tp_b[np.ix_(*pos)], tp_a)
    assert np.array_equal(fp_b[np.ix_(*pos)], fp_a)
    for t in extra:
        assert t in set(b.thresholds[0]) and t in set(b.thresholds[1])
        point = point_at(b, (t, t), target_marginal_precision=0.3)
        truth = np.ones(300, dtype=bool)
        tp, fp, _, _ = brute_cell(scores, labels, truth, None, (t, t), "any")
        assert (point.tp, point.fp, point.details["exact"]) == (tp, fp, True)


def test_with_thresholds_refuses_nan_and_ignores_off():
    base = uniform_edges(0.0, 1.0, 5)
    assert np.array_equal(with_thresholds(base, [np.inf, 0.5]), base)
    with pytest.raises(ValueError, match="finite or \\+inf"):
        with_thresholds(base, [np.nan])
    with pytest.raises(ValueError, match="finite or \\+inf"):
        with_thresholds(base, [-np.inf])


def test_point_at_off_the_lattice_flags_a_subset_and_says_so():
    rng = np.random.default_rng(3)
    scores = rng.random((2000, 2))
    truth = rng.random(2000) < 0.2
    rated = brute_flags(scores, (0.5, 0.6), "any") | (rng.random(2000) < 0.1)
    labels = np.where(rated, truth, None).astype(object)
    edges = [uniform_edges(0, 1, 11)] * 2
    grid = ThresholdGrid.from_scores(scores, labels, edges)
    point = point_at(grid, (0.55, np.inf), target_marginal_precision=0.3)
    assert point.details["exact"] is False
    above = edges[0][6]  # the first candidate >= 0.55 (0.6 up to rounding)
    assert point.thresholds == (above, np.inf)
    tp, fp, unrated, volume = brute_cell(scores, truth, rated, None, (above, np.inf), "any")
    assert (point.tp, point.fp, point.unrated, point.volume) == (tp, fp, unrated, volume)
    assert point.objective == pytest.approx(tp - (0.3 / 0.7) * fp)
    with pytest.raises(ValueError, match="one value per classifier"):
        point_at(grid, (0.5,), target_marginal_precision=0.3)


def _thin_and_rich(rng):
    edges = [uniform_edges(0, 1, 11)] * 2
    rich_scores = rng.random((4000, 2))
    rich = ThresholdGrid.from_scores(rich_scores, rng.random(4000) < rich_scores[:, 0], edges)
    thin = ThresholdGrid.from_scores(rng.random((3, 2)), np.array([True, False, False]), edges)
    return edges, rich, thin


def test_thin_group_keeps_its_thresholds_in_force_only_without_a_usable_parent():
    rng = np.random.default_rng(0)
    edges, rich, thin = _thin_and_rich(rng)
    target = resolve_target(0.3)
    in_force = {"thin": (edges[0][7], edges[1][8]), ALL_GROUPS: (0.5, 0.5)}
    common = {"methods": ["hull", "graph"], "target": target, "min_positives": 5,
              "min_negatives": 5, "in_force": in_force}
    # parent ok and fallback on: the parent's fresh point wins
    results = recalibrate_grids({"thin": thin, "rich": rich}, **common)
    assert results["thin"].status == "fallback"
    # fallback off: the thin group keeps its own thresholds, evaluated on its own grid
    results = recalibrate_grids({"thin": thin, "rich": rich}, fallback="none", **common)
    kept = results["thin"]
    assert kept.status == "kept" and kept.fallback_group is None
    for method in ("hull", "graph"):
        point = kept.points[method]
        assert point.thresholds == in_force["thin"] and point.method == method
        assert (point.tp, point.fp) == (thin.counts("any")[0][7, 8], thin.counts("any")[1][7, 8])
    assert results["rich"].status == "ok"  # enough rows: optimised, thresholds in force unused
    # no thresholds in force for the group: as before
    results = recalibrate_grids({"thin": thin, "rich": rich}, fallback="none",
                                **{**common, "in_force": {}})
    assert results["thin"].status == "insufficient_data"
    assert results["thin"].points == {"hull": None, "graph": None}


# --------------------------------------------------------------------------- pipeline
def _rows(n: int, seed: int, start=START):
    """Rows of two groups scored by two classifiers; rated = flagged by ``start`` (no audit)."""
    rng = np.random.default_rng(seed)
    group = np.where(rng.random(n) < 0.5, "a", "b")
    y = rng.random(n) < 0.03
    latent = rng.standard_normal((n, 2)) + 3.0 * y[:, None]
    scores = 1 / (1 + np.exp(-(latent - 2.0)))
    rated = brute_flags(scores, start, "any")
    frame = pd.DataFrame({"group": group, "item_id": np.arange(n), "text_model": scores[:, 0],
                          "image_model": scores[:, 1], "weight": 1.0})
    frame["label"] = pd.array(np.where(rated, y, None), dtype="boolean")
    return frame, scores, y, rated


def _points_file(path, thresholds_by_group, classifiers=CLASSIFIERS):
    unset = {f.name: None for f in arrow_schema("operating_point.json")}
    records = [{
        **unset, "objective": "linear", "group": group, "rule": "any", "method": "hull",
        "classifiers": list(classifiers), "thresholds": list(t),
        "target_marginal_precision": 0.3, "rated_positives": 0.0, "rated_negatives": 0.0,
        "status": "ok", "point_status": "ok", "pane_index": 0, "run_id": "by-hand",
        "config_digest": "by-hand",
    } for group, t in thresholds_by_group.items()]
    pq.write_table(records_to_table(records, "operating_point.json"), path)
    return str(path)


def _config(**overrides):
    raw = {"methods": ["hull"], "decision_method": "hull",
           "publish": {"max_threshold_change": None, "min_rated": 0}, **overrides}
    return base_config(**raw)


def _records(out, manifest):
    return pq.read_table(out / "runs" / manifest["run_id"] / "operating_points.parquet").to_pylist()


@pytest.fixture(scope="module")
def selective(tmp_path_factory):
    frame, scores, y, rated = _rows(20_000, seed=5)
    path = tmp_path_factory.mktemp("in_force") / "rated.parquet"
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
    return frame, scores, y, rated, str(path)


def test_recalibrate_never_publishes_below_the_thresholds_in_force(selective, tmp_path):
    """Ratings only where (0.9, 0.9) flags: the published point is worth at least as much on
    the rated rows as keeping (0.9, 0.9) (counted directly), and without the thresholds in
    force on the lattice it is worth less (0.913 is the nearest covered edge)."""
    frame, scores, y, _, path = selective
    start = _points_file(tmp_path / "start.parquet", {ALL_GROUPS: START})
    slope = 0.3 / 0.7

    def utility(thresholds, sel):
        flagged = brute_flags(scores[sel], thresholds, "any")
        return float(np.sum(flagged & y[sel]) - slope * np.sum(flagged & ~y[sel]))

    results = {}
    for name, add in (("on", True), ("off", False)):
        config = _config(min_rated={"positives": 0, "negatives": 0},
                         in_force={"add_to_edges": add})
        out = tmp_path / name
        manifest = run_recalibrate(config, path, str(out), [], run_id="r1", in_force=start)
        results[name] = {r["group"]: r for r in _records(out, manifest)}
        if add:
            assert manifest["in_force"]["edges_added"] == {"text_model": 1, "image_model": 1}
            assert manifest["in_force"]["source"] == start
    for group in ("a", "b"):
        sel = (frame["group"] == group).to_numpy()
        keep = utility(START, sel)
        assert utility(results["on"][group]["thresholds"], sel) >= keep
        assert utility(results["off"][group]["thresholds"], sel) < keep


def test_thin_groups_keep_their_thresholds_and_decide_applies_them(selective, tmp_path):
    """min_rated above what (0.9, 0.9) rated: every group keeps (0.9, 0.9) (status kept), the
    guard notes it, and decide flags exactly what (0.9, 0.9) flags; with keep off the groups
    get no thresholds and decide flags nothing (the fail-closed trap this avoids)."""
    frame, scores, _, rated, path = selective
    start = _points_file(tmp_path / "start.parquet", {ALL_GROUPS: START})
    many = {"positives": 10**6, "negatives": 10**6}
    config = _config(min_rated=many)
    out = tmp_path / "kept"
    manifest = run_recalibrate(config, path, str(out), [], run_id="r1", in_force=start)
    records = {r["group"]: r for r in _records(out, manifest)}
    assert {g: r["status"] for g, r in records.items()} == dict.fromkeys(["a", "b", ALL_GROUPS],
                                                                         "kept")
    for group, record in records.items():
        assert record["thresholds"] == list(START)
        sel = np.ones(len(frame), bool) if group == ALL_GROUPS else (frame["group"] == group)
        tp, fp, _, _ = brute_cell(scores[sel], frame["label"].fillna(False).to_numpy(bool)[sel],
                                  rated[sel], None, START, "any")
        assert (record["tp"], record["fp"]) == (tp, fp)
    assert any("kept the thresholds in force" in n for n in manifest["guard"]["notes"])
    scores_only = tmp_path / "scores.parquet"
    pq.write_table(pa.Table.from_pandas(frame.drop(columns=["label"]), preserve_index=False),
                   scores_only)
    run_decide(config, str(scores_only), str(out), str(tmp_path / "decide"), [], run_id="d1")
    decisions = read_decisions(str(tmp_path / "decide")).to_pandas()
    decisions = decisions.set_index(decisions["item_id"].astype(np.int64))
    flagged = decisions.loc[frame["item_id"], "threshold_decision"].to_numpy(dtype=bool)
    assert np.array_equal(flagged, brute_flags(scores, START, "any"))

    off = _config(min_rated=many, in_force={"keep_when_insufficient": False})
    manifest = run_recalibrate(off, path, str(tmp_path / "off"), [], run_id="r1", in_force=start)
    assert {r["status"] for r in _records(tmp_path / "off", manifest)} == {"insufficient_data"}


def test_the_published_run_is_the_default_and_a_kept_run_is_not_held(selective, tmp_path):
    """Second run without --in-force: the first run's published points are in force; kept and
    unchanged, a group is no min_rated violation."""
    _, _, _, _, path = selective
    config = _config(min_rated={"positives": 10**6, "negatives": 10**6},
                     publish={"max_threshold_change": 0.05, "min_rated": 10**6})
    out = tmp_path / "out"
    start = _points_file(tmp_path / "start.parquet", {ALL_GROUPS: START})
    with pytest.raises(Exception, match="min_rated"):  # first run: nothing published to keep
        run_recalibrate(config, path, str(out), [], run_id="r1", in_force=start)
    main(["publish", "--output", str(out), "--run-id", "r1", "--by", "test", "--reason", "t"])
    manifest = run_recalibrate(config, path, str(out), [], run_id="r2")
    assert manifest["published"] and manifest["guard"]["violations"] == []
    assert manifest["in_force"]["source"].endswith("runs/r1")
    assert {r["status"] for r in _records(out, manifest)} == {"kept"}


def test_bad_in_force_sources_exit_2(selective, tmp_path, capsys):
    _, _, _, _, path = selective
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(_config().raw))
    common = ["recalibrate", "--config", str(config_path), "--input", path]
    assert main([*common, "--output", str(tmp_path / "o1"),
                 "--in-force", str(tmp_path / "missing.parquet")]) == 2
    assert "not found" in capsys.readouterr().err
    other = _points_file(tmp_path / "other.parquet", {ALL_GROUPS: (0.5, 0.5, 0.5)},
                         classifiers=("x", "y", "z"))
    assert main([*common, "--output", str(tmp_path / "o2"), "--in-force", other]) == 2
    assert "classifiers" in capsys.readouterr().err


def test_too_many_thresholds_in_force_are_a_config_error(tmp_path):
    config = _config(in_force={"max_added_edges": 2})
    in_force = InForce(by_group={g: (0.01 * i + 0.001, np.inf) for i, g in enumerate("abc")},
                       default=None, source="test")
    with pytest.raises(ConfigError, match="max_added_edges"):
        edges_with_in_force(config.fixed_edges(), in_force, config)
    on_edge = float(config.fixed_edges()[0][12])
    edges, added = edges_with_in_force(config.fixed_edges(),
                                       InForce({}, (on_edge, 0.9001), "t"), config)
    assert added == {"text_model": 0, "image_model": 1} and 0.9001 in edges[1]


# --------------------------------------------------------------------------- moving on evidence
def _noisy_grids(seed: int, n: int = 3000, replicates: int = 30):
    rng = np.random.default_rng(seed)
    scores = rng.random((n, 2))
    labels = rng.random(n) < scores.mean(axis=1) ** 2
    edges = [uniform_edges(0, 1, 9)] * 2
    ids = np.arange(n)
    grid = ThresholdGrid.from_scores(scores, labels, edges)
    boot = BootstrapGrids.from_scores(scores, labels, edges, ids, n_replicates=replicates)
    return scores, labels, ids, edges, grid, boot


def test_move_evidence_gain_and_se_equal_direct_counting():
    """Gain = objective difference counted on the rows; se = sd over replicates of the same
    difference counted on the rows with each replicate's Poisson multipliers."""
    scores, labels, ids, edges, grid, boot = _noisy_grids(1)
    target = resolve_target(0.3)
    slope = target.slope
    chosen = optimize(grid, target=target, method="hull")
    in_force = (edges[0][7], np.inf)
    ev = move_evidence(grid, boot, chosen, in_force, z=1.0, target=target, rule="any",
                       method="hull")

    def utility(thresholds, w):
        flagged = brute_flags(scores, thresholds, "any")
        return float(np.sum(w[flagged & labels]) - slope * np.sum(w[flagged & ~labels]))

    ones = np.ones(len(labels))
    assert ev.gain == pytest.approx(utility(chosen.thresholds, ones) - utility(in_force, ones))
    hashed = hash_item_ids(ids)
    diffs = [utility(chosen.thresholds, poisson_counts(hashed, r).astype(float))
             - utility(in_force, poisson_counts(hashed, r).astype(float))
             for r in range(boot.n_replicates)]
    assert ev.se == pytest.approx(float(np.std(diffs, ddof=1)))
    assert ev.move == (ev.gain > ev.se)
    assert ev.kept.thresholds == in_force


def test_move_evidence_keeps_on_a_tie_and_refuses_bad_arguments():
    _, _, _, _, grid, boot = _noisy_grids(2)
    target = resolve_target(0.3)
    chosen = optimize(grid, target=target, method="hull")
    same = move_evidence(grid, boot, chosen, chosen.thresholds, z=0.0, target=target,
                         rule="any", method="hull")
    assert (same.gain, same.se, same.move) == (0.0, 0.0, False)
    with pytest.raises(ValueError, match="z must be"):
        move_evidence(grid, boot, chosen, chosen.thresholds, z=-1.0, target=target, rule="any",
                      method="hull")


def test_small_gains_keep_the_thresholds_in_force_and_large_ones_move():
    """z = 0 always takes a strictly better optimum; a huge z keeps the thresholds in force
    (status kept, reason with gain and se) unless they are already optimal."""
    _, _, _, edges, grid, boot = _noisy_grids(3)
    target = resolve_target(0.3)
    best = optimize(grid, target=target, method="hull")
    in_force = (edges[0][8], edges[1][8])
    common = {"methods": ["hull"], "target": target, "rule": "any", "bootstrap": boot,
              "in_force": in_force}
    moved = optimize_group("g", grid, min_positives=0, min_negatives=0,
                           policy=InForcePolicy(min_gain_z=0.0), **common)
    assert moved.status == "ok" and moved.points["hull"].thresholds == best.thresholds
    held = optimize_group("g", grid, min_positives=0, min_negatives=0,
                          policy=InForcePolicy(min_gain_z=1e9), **common)
    assert held.status == "kept" and held.points["hull"].thresholds == in_force
    assert "bootstrap se" in held.points["hull"].reason
    assert held.points["hull"].details["move_evidence"]["z"] == 1e9
    plain = optimize_group("g", grid, min_positives=0, min_negatives=0, **common)
    assert plain.status == "ok" and plain.points["hull"].thresholds == best.thresholds


def test_min_gain_z_needs_bootstrap_replicates():
    with pytest.raises(ConfigError, match=r"bootstrap\.replicates >= 2"):
        _config(in_force={"min_gain_z": 1.0})
    assert _config(in_force={"min_gain_z": 1.0},
                   bootstrap={"replicates": 5}).policy.min_gain_z == 1.0


def test_in_force_records_whether_its_source_is_the_published_run(selective, tmp_path, capsys):
    """--in-force a held run (what decide --allow-unpublished applies): recalibrate uses it,
    records ``published: false`` with the reason and prints a note; the published run records
    true without a note; a hand-made file outside any output, unknown (None)."""
    _, _, _, _, path = selective
    start = _points_file(tmp_path / "start.parquet", {ALL_GROUPS: START})
    held_config = _config(publish={"max_threshold_change": None, "min_rated": 10**9})
    out = tmp_path / "out"
    with pytest.raises(Exception, match="min_rated"):
        run_recalibrate(held_config, path, str(out), [], run_id="r1", in_force=start)
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(_config().raw))
    common = ["recalibrate", "--config", str(config_path), "--input", path]
    held = str(out / "runs" / "r1")
    assert main([*common, "--output", str(tmp_path / "o1"), "--run-id", "a",
                 "--in-force", held]) == 0
    printed = capsys.readouterr().out
    assert f"note: --in-force {held}: run r1 is held for review by the publish guard" in printed
    entry = json.loads((tmp_path / "o1" / "runs" / "a" / "manifest.json").read_text())["in_force"]
    assert entry["published"] is False and "held" in entry["published_reason"]

    main(["publish", "--output", str(out), "--run-id", "r1", "--by", "test", "--reason", "t"])
    assert main([*common, "--output", str(tmp_path / "o2"), "--run-id", "b",
                 "--in-force", held]) == 0
    assert "note: --in-force" not in capsys.readouterr().out
    entry = json.loads((tmp_path / "o2" / "runs" / "b" / "manifest.json").read_text())["in_force"]
    assert entry["published"] is True

    manifest = run_recalibrate(_config(), path, str(tmp_path / "o3"), [], run_id="c",
                               in_force=start)
    assert manifest["in_force"]["published"] is None
