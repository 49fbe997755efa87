"""Selective labels in ``costlib recalibrate`` (issue 10): unrated rows, objectives, constraints.

Truth comes from two independent places: direct costlib calls on the same rows
(``ThresholdGrid.from_scores`` with the unrated rows, ``recalibrate_grids``,
``operating_point_records``), and direct counting of the flagged rows of the input frame.
"""

from __future__ import annotations

import html
import itertools
import json
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from pipeline_data import (
    CLASSIFIERS,
    base_config,
    comparable,
    coverage_fields,
    direct_records,
    sample_frame,
    write_files,
)

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._sparse import grouped_histograms
from costlib_pipelines.commands.cli import main
from costlib_pipelines.decide.records import read_decisions
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.published_points import select_operating_points
from costlib_pipelines.recalibrate.grids import SumGrids
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.report.page import write_report

#: A low target: the unrestricted optimum of two groups lies below the rating floor (0.5).
LOW_TARGET = {"marginal_precision": 0.05}


@pytest.fixture(scope="module")
def frame():
    return sample_frame(30_000, seed=1)


@pytest.fixture(scope="module")
def pattern(frame, tmp_path_factory):
    return write_files(frame, tmp_path_factory.mktemp("coverage_in"), n_files=3,
                       row_group_size=4000)


def _run(config, pattern, out, beam_args=(), **kw):
    manifest = run_recalibrate(config, pattern, str(out), list(beam_args), **kw)
    run_dir = out / "runs" / manifest["run_id"]
    return manifest, pq.read_table(run_dir / "operating_points.parquet").to_pylist()


def flagged_counts(frame, classifiers, thresholds, groups=None):
    """``(volume, unrated)`` of the rows the thresholds flag (rule any), counted on the frame."""
    rows = frame if groups is None else frame[frame["group"].isin(groups)]
    scores = rows[list(classifiers)].to_numpy(dtype=float, na_value=np.nan)
    fires = np.nan_to_num(scores, nan=-np.inf) >= np.asarray(thresholds)[None, :]
    flagged = fires.any(axis=1)
    weights = rows["weight"].to_numpy()
    unrated = rows["label"].isna().to_numpy()
    return float(weights[flagged].sum()), float(weights[flagged & unrated].sum())


def _groups_of(record, frame):
    return None if record["group"] == "__all__" else [record["group"]]


CONFIGS = {
    "share_0_low_target": {"target": LOW_TARGET, "coverage": {"max_unrated_share": 0.0}},
    "f1_share_0.2_capacity": {"objective": {"name": "f1"}, "coverage": {"max_unrated_share": 0.2},
                              "constraints": {"max_volume": 2000}},
    "precision_at_volume": {"objective": {"name": "precision_at_volume", "volume": 800},
                            "coverage": {"max_unrated_share": 0.0},
                            "constraints": {"min_precision": 0.2}},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_points_with_unrated_rows_equal_costlib_directly(frame, pattern, tmp_path, name):
    config = base_config(**CONFIGS[name])
    manifest, got = _run(config, pattern, tmp_path / "out")
    assert comparable(got) == comparable(direct_records(frame, config))
    acc = manifest["row_accounting"]
    assert acc["read"] == len(frame) == acc["used"] + acc["unrated"] + acc["dead_lettered"]
    assert acc["unrated"] == int(frame["label"].isna().sum()) > 0
    share = config.max_unrated_share
    for record in got:  # volume and unrated weight at the point, counted on the input rows
        volume, unrated = flagged_counts(frame, config.classifiers, record["thresholds"],
                                         _groups_of(record, frame))
        assert (record["volume"], record["unrated"]) == (volume, unrated), record["group"]
        assert unrated <= share * volume
        assert record["max_unrated_share"] == share
        assert record["objective"] == config.objective["name"]


def test_multi_processing_gives_the_same_points(frame, pattern, tmp_path):
    config = base_config(**CONFIGS["share_0_low_target"])
    _, got = _run(config, pattern, tmp_path / "out",
                  ["--direct_running_mode=multi_processing", "--direct_num_workers=2"])
    assert comparable(got) == comparable(direct_records(frame, config))


def test_share_0_keeps_points_in_the_rated_region_where_the_old_grid_did_not(frame, pattern,
                                                                           tmp_path):
    guarded = base_config(target=LOW_TARGET, coverage={"max_unrated_share": 0.0})
    _, points = _run(guarded, pattern, tmp_path / "guarded")
    limited = [r for r in points if r["point_status"] == "coverage_limited"]
    assert limited, "the low target must push some unrestricted optimum below the rating floor"
    for record in points:
        _, unrated = flagged_counts(frame, guarded.classifiers, record["thresholds"],
                                    _groups_of(record, frame))
        assert unrated == 0.0 and record["coverage"] == 1.0, record
    for record in limited:  # the better point it refused flags unrated rows, as recorded
        _, unrated = flagged_counts(frame, guarded.classifiers,
                                    record["unrestricted_thresholds"], _groups_of(record, frame))
        assert unrated == record["unrestricted_unrated"] > 0
        assert record["reason"] and "unrated" in record["reason"]
    # The defect: the old behaviour (coverage not enforced; the grid of rated rows only picks
    # the same points) chooses thresholds that flag rows nobody rated.
    old = base_config(target=LOW_TARGET, coverage={"max_unrated_share": None})
    _, old_points = _run(old, pattern, tmp_path / "old")
    outside = []
    for record in old_points:
        _, unrated = flagged_counts(frame, old.classifiers, record["thresholds"],
                                    _groups_of(record, frame))
        assert record["unrated"] == unrated and record["point_status"] == "ok"
        if unrated > 0:
            outside.append((record["group"], record["method"]))
    assert outside and {(r["group"], r["method"]) for r in limited} >= set(outside)
    rated_only = direct_records(frame[frame["label"].notna()], old)
    key = ("group", "method", "thresholds", "tp", "fp", "objective_value")
    assert sorted(tuple(map(str, (r[k] for k in key))) for r in old_points) == sorted(
        tuple(map(str, (r[k] for k in key))) for r in rated_only)


# ---------------------------------------------------------------------------- through the CLI
def _write_config(path, config_or_raw):
    raw = config_or_raw if isinstance(config_or_raw, dict) else config_or_raw.raw
    path.write_text(json.dumps(raw))  # JSON is YAML
    return str(path)


def _recalibrate(config_path, pattern, out, *extra):
    return main(["recalibrate", "--config", config_path, "--input", pattern, "--output",
                 str(out), "--run-id", "r1", *extra])


def test_cli_objective_and_share_flag_equal_costlib_and_decide_applies_limited_points(
        frame, pattern, tmp_path, capsys):
    # The config leaves coverage unenforced; the flag sets it to 0 (and the digest with it).
    config_path = _write_config(tmp_path / "c.yaml", base_config(
        target=LOW_TARGET, coverage={"max_unrated_share": None}))
    assert _recalibrate(config_path, pattern, tmp_path / "out", "--max_unrated_share=0") == 0
    assert "note: group" in capsys.readouterr().out  # coverage_limited points are listed
    run_dir = tmp_path / "out" / "runs" / "r1"
    got = pq.read_table(run_dir / "operating_points.parquet").to_pylist()
    expected_config = base_config(target=LOW_TARGET, coverage={"max_unrated_share": 0.0})
    assert comparable(got) == comparable(direct_records(frame, expected_config))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["published"] and manifest["config_digest"] == expected_config.digest
    limited = sorted(r["group"] for r in got
                     if r["method"] == "graph" and r["point_status"] == "coverage_limited")
    assert limited and manifest["guard"]["violations"] == []
    assert [n.split("'")[1] for n in manifest["guard"]["notes"]] == limited
    # decide applies the coverage-limited thresholds (the safe ones)
    out = tmp_path / "decisions"
    assert main(["decide", "--config", config_path, "--input", pattern, "--operating-points",
                 str(tmp_path / "out"), "--output", str(out), "--run-id", "d1"]) == 0
    decisions = read_decisions(str(out)).to_pandas().set_index("item_id").sort_index()
    graph = {r["group"]: r["thresholds"] for r in got if r["method"] == "graph"}
    scores = np.nan_to_num(frame[list(expected_config.classifiers)].to_numpy(), nan=-np.inf)
    thresholds = np.array([graph[g] for g in frame["group"]])
    expected = pd.Series((scores >= thresholds).any(axis=1), index=frame["item_id"].astype(str))
    assert decisions["threshold_decision"].astype(bool).equals(expected.sort_index())
    decide_manifest = json.loads((out / "runs" / "d1" / "manifest.json").read_text())
    assert decide_manifest["operating_points"]["groups_coverage_limited"] == limited


def test_cli_infeasible_constraint_holds_the_run(pattern, tmp_path, capsys):
    # No flagged row weighs less than 1: a capacity of 0.5 cannot be met by any point.
    config = base_config(objective={"name": "f1"}, constraints={"max_volume": 0.5},
                         coverage={"max_unrated_share": 0.0})
    config_path = _write_config(tmp_path / "c.yaml", config)
    assert _recalibrate(config_path, pattern, tmp_path / "out") == 3
    err = capsys.readouterr().err
    assert "held for review" in err and "point is infeasible" in err and "max_volume" in err
    manifest = json.loads((tmp_path / "out" / "runs" / "r1" / "manifest.json").read_text())
    assert not manifest["published"] and not (tmp_path / "out" / "LATEST").exists()
    records = pq.read_table(tmp_path / "out" / "runs" / "r1" / "operating_points.parquet")
    assert set(records.column("point_status").to_pylist()) == {"infeasible"}


def test_decide_gives_infeasible_groups_null_decisions():
    config = base_config()
    records = [_hand_record("market_a", [0.7, 0.8], "infeasible"),
               _hand_record("market_b", [0.6, 0.9], "coverage_limited"),
               _hand_record("__all__", [0.5, 0.5], "infeasible")]
    chosen = select_operating_points(records, config)
    assert chosen.get("market_a").thresholds is None  # fail closed
    assert chosen.get("market_b").thresholds == (0.6, 0.9)
    assert chosen.get("market_c").thresholds is None  # the __all__ default is infeasible too
    assert chosen.details["groups_infeasible"] == ["__all__", "market_a"]
    with pytest.raises(InputError, match="unknown point_status 'maybe'"):
        select_operating_points([_hand_record("market_a", [0.7, 0.8], "maybe")], config)


def _hand_record(group, thresholds, point_status):
    return {"group": group, "window_start": None, "window_end": None, "rule": "any",
            "method": "graph", "classifiers": list(CLASSIFIERS), "thresholds": thresholds,
            "status": "ok", "fallback_group": None, "pane_index": 0, "run_id": "r",
            **coverage_fields(point_status)}


@pytest.mark.parametrize(("section", "value", "key"), [
    ("objective", {"name": "f2"}, "objective.name"),
    ("objective", {"name": "fbeta", "beta": 0}, "objective.beta"),
    ("objective", {"name": "precision_at_volume"}, "objective.volume"),
    ("constraints", {"min_precision": 1.5}, "constraints.min_precision"),
    ("constraints", {"max_volume": -1}, "constraints.max_volume"),
    ("constraints", {"max_fp": 3}, "constraints"),
    ("coverage", {"max_unrated_share": 2}, "coverage.max_unrated_share"),
])
def test_bad_values_exit_2_naming_the_key(pattern, tmp_path, capsys, section, value, key):
    raw = {**base_config().raw, section: value}
    assert _recalibrate(_write_config(tmp_path / "c.yaml", raw), pattern, tmp_path / "o") == 2
    err = capsys.readouterr().err
    assert f"{key}:" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "half"])
def test_share_flag_refuses_values_outside_0_1(pattern, tmp_path, capsys, value):
    config_path = _write_config(tmp_path / "c.yaml", base_config())
    assert _recalibrate(config_path, pattern, tmp_path / "o", f"--max-unrated-share={value}") == 2
    assert "--max-unrated-share" in capsys.readouterr().err


class _Rows(HTMLParser):
    """Table rows of a report: their data-* attributes and cell texts."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[dict, list[str]]] = []
        self._in_cell = False

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append((dict(attrs), []))
        elif tag == "td" and self.rows:
            self.rows[-1][1].append("")
            self._in_cell = True

    def handle_endtag(self, tag):
        if tag == "td":
            self._in_cell = False

    def handle_data(self, data):
        if self._in_cell:
            self.rows[-1][1][-1] += data


def test_report_shows_volume_coverage_and_point_status(frame, pattern, tmp_path):
    config = base_config(target=LOW_TARGET, coverage={"max_unrated_share": 0.0})
    manifest, got = _run(config, pattern, tmp_path / "out")
    path = write_report(str(tmp_path / "out" / "runs" / manifest["run_id"]))
    parser = _Rows()
    parser.feed(Path(path).read_text())
    per_method = {(a["data-group"], a["data-method"]): cells for a, cells in parser.rows
                  if "data-method" in a}
    overview = {a["data-group"]: cells for a, cells in parser.rows
                if "data-group" in a and "data-method" not in a}
    for record in got:
        cells = per_method[(record["group"], record["method"])]
        volume, coverage, point = cells[-3:]
        assert float(volume.replace(",", "")) == record["volume"]
        assert coverage == f"{record['coverage']:.3f}"
        assert point.startswith(record["point_status"].replace("_", " "))
        if record["point_status"] == "coverage_limited":
            assert record["reason"] in point
        if record["method"] == "graph":  # the overview: before the note column
            assert overview[record["group"]][-4:-2] == cells[-3:-1]
            # the per-method table adds the resolution check under the point's status
            assert cells[-1] == overview[record["group"]][-2] + (
                "finer lattice: no better" if record["finer_bound"] <= record["objective_value"]
                else f"finer lattice ≤ {record['finer_bound']:.4g} "
                     f"(here {record['objective_value']:.4g})")
    notes = manifest["guard"]["notes"]
    assert notes  # the coverage-limited points, listed by the guard and shown in the report
    text = Path(path).read_text()
    assert "Publish guard notes:" in text
    assert all(html.escape(note) in text for note in notes)


def test_sum_grids_merges_2_and_3_channel_partials_exactly_in_any_order():
    rng = np.random.default_rng(5)
    config = base_config()
    edges = tuple(config.fixed_edges())
    n = 3000
    scores = rng.random((n, 2))
    truth = rng.random(n) < 0.3
    weights = rng.choice([1.0, 2.5, 0.125], size=n)
    rated = rng.random(n) < 0.6
    rated[:1000] = True  # the first batch has no unrated row: a 2-channel partial
    batches = [slice(0, 1000), slice(1000, 2200), slice(2200, n)]
    partials = []
    for part in batches:
        mask = None if rated[part].all() else ~rated[part]
        counts = grouped_histograms(np.zeros(part.stop - part.start, dtype=np.intp),
                                    scores[part], truth[part], weights[part], edges,
                                    unrated=mask)[0]
        partials.append((edges, counts, int(rated[part].sum())))
    assert [p[1].channels for p in partials] == [2, 3, 3]
    labels = np.where(rated, truth, None).astype(object)
    expected = ThresholdGrid.from_scores(scores, labels, edges, weights)
    combine = SumGrids(config)
    for order in itertools.permutations(range(3)):
        accs = []
        for i in order:  # one accumulator per partial, compacted as before a shuffle
            acc = combine.add_input(combine.create_accumulator(), partials[i])
            accs.append(combine.compact(acc))
        merged = combine.merge_accumulators([accs[0], combine.merge_accumulators(accs[1:])])
        grid = combine.extract_output(merged)
        assert grid == expected and grid.has_unrated
        single = combine.create_accumulator()
        for i in order:
            single = combine.add_input(single, partials[i])
        assert combine.extract_output(single) == expected
    # Only unrated rows: no grid (no operating point), like a group without rows.
    only_unrated = (edges, partials[2][1], 0)
    assert combine.extract_output(combine.add_input(None, only_unrated)) is None


def test_windowed_points_with_unrated_rows_equal_costlib_per_window(frame, pattern, tmp_path):
    config = base_config(
        target=LOW_TARGET, coverage={"max_unrated_share": 0.0}, methods=["graph", "hull"],
        windowing={"size_days": 4, "period_days": 2, "allowed_lateness_days": 0},
        plausibility={"event_time_max": "2030-01-01T00:00:00Z"},
    )
    manifest = run_recalibrate(config, pattern, str(tmp_path / "out"), [])
    run_dir = tmp_path / "out" / "runs" / manifest["run_id"]
    files = sorted(run_dir.glob("windows/*/operating_points.parquet"))
    assert len(files) == manifest["windows"] > 1
    limited = 0
    for path in files:
        got = pq.read_table(path).to_pylist()
        start, end = got[0]["window_start"], got[0]["window_end"]
        rows = frame[(frame["event_time"] >= start) & (frame["event_time"] < end)]
        expected = direct_records(rows, config)
        for record in expected:
            record.update(window_start=start, window_end=end)
        drop = ("pane_index",)
        assert [{k: v for k, v in r.items() if k not in drop} for r in comparable(got)] == [
            {k: v for k, v in r.items() if k not in drop} for r in comparable(expected)]
        limited += sum(r["point_status"] == "coverage_limited" for r in got)
    assert limited > 0


def test_beta_without_the_fbeta_objective_is_refused(frame, pattern, tmp_path, capsys):
    """``--beta`` (or a config file's ``objective.beta``) would be ignored by any objective
    but fbeta: exit 2 naming both, nothing written."""
    config_path = _write_config(tmp_path / "c.yaml", base_config())  # linear, beta 1.0
    for extra, whence in ((["--beta", "2"], f"objective.name in {config_path}"),
                          (["--objective", "f1", "--beta", "2"], "--objective")):
        assert _recalibrate(config_path, pattern, tmp_path / "bad", *extra) == 2
        err = capsys.readouterr().err
        assert "--beta 2 applies to --objective fbeta only" in err and whence in err
        assert not (tmp_path / "bad").exists()
    written = base_config(objective={"name": "linear", "beta": 2.0})
    fbeta_file = _write_config(tmp_path / "fbeta.yaml",
                               base_config(objective={"name": "fbeta", "beta": 2.0}))
    for config, code in ((_write_config(tmp_path / "linear.yaml", written.raw), 2),
                         (fbeta_file, 0)):
        assert _recalibrate(config, pattern, tmp_path / "out", "--beta", "3") == code
    err = capsys.readouterr().err
    assert "linear.yaml: objective.beta: 2 applies to objective.name fbeta only, but " \
           "objective.name is linear" in err
    got = pq.read_table(tmp_path / "out" / "runs" / "r1" / "operating_points.parquet")
    assert {(r["objective"], r["objective_beta"]) for r in got.to_pylist()} == {("fbeta", 3.0)}


def test_volume_without_the_precision_at_volume_objective_is_refused(frame, pattern, tmp_path,
                                                                     capsys):
    """``--volume`` (or a config file's ``objective.volume``) is read by precision_at_volume
    only: with another objective exit 2 naming both, nothing written; with it the run uses
    the volume."""
    config_path = _write_config(tmp_path / "c.yaml", base_config())  # linear, volume null
    assert _recalibrate(config_path, pattern, tmp_path / "bad", "--volume", "50") == 2
    err = capsys.readouterr().err
    assert "--volume 50 applies to --objective precision_at_volume only" in err
    assert f"objective.name in {config_path}" in err and not (tmp_path / "bad").exists()
    written = _write_config(tmp_path / "linear.yaml",
                            base_config(objective={"name": "linear", "volume": 50.0}).raw)
    assert _recalibrate(written, pattern, tmp_path / "bad") == 2
    assert "linear.yaml: objective.volume: 50 applies to objective.name precision_at_volume " \
           "only, but objective.name is linear" in capsys.readouterr().err
    assert _recalibrate(config_path, pattern, tmp_path / "out", "--objective",
                        "precision_at_volume", "--volume", "50") == 0
    got = pq.read_table(tmp_path / "out" / "runs" / "r1" / "operating_points.parquet")
    assert {r["objective"] for r in got.to_pylist()} == {"precision_at_volume"}


def test_cli_objective_and_constraint_flags_override_the_config(frame, pattern, tmp_path,
                                                                capsys):
    config_path = _write_config(tmp_path / "c.yaml", base_config())
    assert _recalibrate(config_path, pattern, tmp_path / "out", "--objective", "f1",
                        "--min_precision=0.4", "--max-volume", "400") == 0
    got = pq.read_table(tmp_path / "out" / "runs" / "r1" / "operating_points.parquet")
    expected = base_config(objective={"name": "f1"},
                           constraints={"min_precision": 0.4, "max_volume": 400.0})
    assert comparable(got.to_pylist()) == comparable(direct_records(frame, expected))
    assert {r["objective"] for r in got.to_pylist()} == {"f1"}
    assert all(r["volume"] <= 400 for r in got.to_pylist() if r["thresholds"] is not None)
    # a flag combination the schema refuses: exit 2 naming the key, nothing written
    assert _recalibrate(config_path, pattern, tmp_path / "bad", "--objective",
                        "precision_at_volume") == 2
    assert "objective.volume" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
    assert _recalibrate(config_path, pattern, tmp_path / "bad", "--min-precision", "1.5") == 2
