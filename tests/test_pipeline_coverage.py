"""Selective labels in ``costlib recalibrate`` (issue 10): unrated rows, objectives, constraints.

Truth comes from two independent places: direct costlib calls on the same rows
(``ThresholdGrid.from_scores`` with the unrated rows, ``recalibrate_grids``,
``operating_point_records``), and direct counting of the flagged rows of the input frame.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
from pipeline_data import base_config, comparable, direct_records, sample_frame, write_files

from pipelines.recalibrate import run_recalibrate

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
    old = base_config(target=LOW_TARGET)
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
