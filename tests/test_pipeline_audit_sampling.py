"""costlib decide with an audit sample: records equal costlib.audit._sampling on the same rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_pipeline_decide import (
    CLASSIFIERS,
    expected_threshold_decisions,
    make_config,
    make_stream,
    write_files,
    write_operating_points,
)

from costlib.audit._sampling import AuditDesign, audit_sample, audit_uniforms
from costlib_pipelines.commands.cli import main
from costlib_pipelines.decide.records import read_decisions

AUDIT = {"enabled": True, "floor": 0.05, "budget_share": 0.2,
         "strata": {"edges": [0.3, 0.6], "weights": [0.5, 1.0, 4.0]}}
DESIGN = AuditDesign(edges=(0.3, 0.6), weights=(0.5, 1.0, 4.0), floor=0.05, budget_share=0.2)
PI = [0.1, 0.2, 0.8]  # min(1, max(0.05, 0.2 * w)) by hand


def config_file(path: Path, audit=None, topk=False) -> str:
    raw = dict(make_config(topk=topk, buckets=3).raw)
    if audit is not None:
        raw["audit"] = audit
    path.write_text(json.dumps(raw))  # JSON is YAML
    return str(path)


def run_cli(tmp_path: Path, inputs: str, config: str, run_id: str, name: str,
            extra=()) -> tuple[int, Path]:
    ops = write_operating_points(tmp_path / "ops.parquet")
    out = tmp_path / f"out-{name}"
    code = main(["decide", "--config", config, "--input", inputs, "--operating-points", ops,
                 "--output", str(out), "--run-id", run_id, *extra])
    return code, out


def decisions(out: Path) -> pd.DataFrame:
    return read_decisions(str(out)).to_pandas().set_index("item_id").sort_index()


def manifest(out: Path, run_id: str) -> dict:
    return json.loads((out / "runs" / run_id / "manifest.json").read_text())


def test_audit_fields_equal_costlib_on_the_same_rows(tmp_path):
    frame = make_stream(3000, seed=11)
    inputs = write_files(frame, tmp_path / "in", 2, 150)
    code, out = run_cli(tmp_path, inputs, config_file(tmp_path / "c.yaml", AUDIT), "run-7", "a")
    assert code == 0
    got = decisions(out)
    decision, _ = expected_threshold_decisions(frame, "any")
    flagged = (decision == True).to_numpy()  # noqa: E712  (null decision: not flagged)
    scores = frame[list(CLASSIFIERS)].to_numpy()
    want = audit_sample(frame["item_id"].to_numpy(), scores, flagged, "run-7", DESIGN)
    ids = frame["item_id"].astype(str)
    assert got.loc[ids, "audit"].tolist() == want.audit.tolist()
    assert got.loc[ids, "audit_probability"].tolist() == want.audit_probability.tolist()
    # flagged rows: p = 1, never audited; rows of a group without thresholds are candidates
    assert (got.loc[ids[flagged], "audit_probability"] == 1.0).all()
    assert not got.loc[ids[flagged], "audit"].any()
    thin = ids[(frame["group"] == "g_thin").to_numpy()]
    assert got.loc[thin, "threshold_decision"].isna().all()
    assert got.loc[thin, "audit"].any() and (got.loc[thin, "audit_probability"] < 1).all()
    # counts: audited rows, and the expected count sum_h N_h pi_h from hand-computed strata
    best = np.nan_to_num(scores, nan=-np.inf).max(axis=1)
    stratum = np.where(best < 0.3, 0, np.where(best < 0.6, 1, 2))
    n_h = np.bincount(stratum[~flagged], minlength=3)
    expected = float(np.sum(n_h * np.array(PI)))
    variance = float(np.sum(n_h * np.array(PI) * (1 - np.array(PI))))
    m = manifest(out, "run-7")
    counts = m["decision_counts"]
    assert counts["audited"] == int(want.audit.sum()) == m["audit"]["audited"]
    assert counts["audit_expected"] == pytest.approx(expected, abs=1e-6)
    assert counts["audit_expected_variance"] == pytest.approx(variance, abs=1e-6)
    assert [s["unflagged"] for s in m["audit"]["strata"]] == n_h.tolist()
    assert [s["probability"] for s in m["audit"]["strata"]] == PI
    assert m["audit"]["salt"] == "run-7"
    assert abs(counts["audited"] - expected) < 3 * np.sqrt(variance)


def test_salt_from_run_id_unless_the_config_sets_one(tmp_path):
    frame = make_stream(2000, seed=12)
    inputs = write_files(frame, tmp_path / "in", 1, 500)
    default = config_file(tmp_path / "d.yaml", AUDIT)
    salted = config_file(tmp_path / "s.yaml", {**AUDIT, "salt": "fixed"})
    runs = {}
    for name, config, run_id in (("a", default, "r1"), ("b", default, "r1"),
                                 ("c", default, "r2"), ("d", salted, "r1"),
                                 ("e", salted, "r2")):
        code, out = run_cli(tmp_path, inputs, config, run_id, name)
        assert code == 0
        runs[name] = decisions(out)["audit"]
    assert runs["a"].equals(runs["b"])  # same run id: same sample
    assert not runs["a"].equals(runs["c"])  # another run id: another sample
    assert runs["d"].equals(runs["e"])  # a configured salt wins over the run id
    assert not runs["d"].equals(runs["a"])


def test_audit_does_not_depend_on_file_order_row_groups_or_workers(tmp_path):
    frame = make_stream(2000, seed=2)
    config = config_file(tmp_path / "c.yaml", AUDIT, topk=True)
    first = write_files(frame, tmp_path / "in-a", 2, 50)
    shuffled = frame.sample(frac=1.0, random_state=5).reset_index(drop=True)
    second = write_files(shuffled, tmp_path / "in-b", 4, 250)
    results = {}
    for name, inputs, extra in (
        ("a", first, ()), ("b", second, ()),
        ("c", second, ("--direct_running_mode=multi_processing", "--direct_num_workers=2")),
    ):
        code, out = run_cli(tmp_path, inputs, config, "same", name, extra)
        assert code == 0
        results[name] = (decisions(out), manifest(out, "same")["decision_counts"])
    for name in ("b", "c"):
        pd.testing.assert_frame_equal(results["a"][0], results[name][0])
        assert results["a"][1] == results[name][1]
    assert results["a"][0]["audit"].sum() > 50
    assert results["a"][0]["topk_decision"].notna().any()  # set rows carry their audit fields


def test_audit_off_when_disabled_and_groups_without_point_off(tmp_path):
    frame = make_stream(500, seed=3)
    inputs = write_files(frame, tmp_path / "in", 1, 100)
    config = config_file(tmp_path / "c.yaml", {"groups_without_point": "off"})
    code, out = run_cli(tmp_path, inputs, config, "off", "off")
    assert code == 0
    got = decisions(out)
    assert not got["audit"].any() and got["audit_probability"].isna().all()
    m = manifest(out, "off")
    assert m["audit"] == {"enabled": False} and "audited" not in m["decision_counts"]
    assert m["config"]["audit"]["enabled"] is False


def test_disabled_audit_still_floor_audits_groups_without_a_point_by_default(tmp_path):
    """Issue 21.4: no fail-closed trap. A group without a usable point (g_thin:
    insufficient_data, nothing to keep) gets a floor audit although the audit is disabled; no
    other row is audited. Truth: the audit uniforms of the ids, u < floor, by hand."""
    frame = make_stream(3000, seed=12)
    inputs = write_files(frame, tmp_path / "in", 2, 150)
    config = config_file(tmp_path / "c.yaml", {"floor": 0.3})  # enabled: false (default)
    code, out = run_cli(tmp_path, inputs, config, "first-run", "floor")
    assert code == 0
    got = decisions(out)
    ids = frame["item_id"].astype(str)
    decision, _ = expected_threshold_decisions(frame, "any")
    flagged = (decision == True).to_numpy()  # noqa: E712
    thin = (frame["group"] == "g_thin").to_numpy()
    u = audit_uniforms(frame["item_id"].to_numpy(), "first-run")
    assert got.loc[ids, "audit"].tolist() == (thin & (u < 0.3)).tolist()
    assert (got.loc[ids[thin], "audit_probability"] == 0.3).all()
    assert (got.loc[ids[flagged], "audit_probability"] == 1.0).all()
    assert got.loc[ids[~thin & ~flagged], "audit_probability"].isna().all()
    audited = int((thin & (u < 0.3)).sum())
    assert audited > 100
    m = manifest(out, "first-run")
    assert m["audit"] == {"enabled": False, "groups_without_point": {
        "salt": "first-run", "probability": 0.3, "candidates": int(thin.sum()),
        "audited": audited, "expected": round(thin.sum() * 0.3, 6),
        "variance": round(thin.sum() * 0.3 * 0.7, 6)}}
    assert m["decision_counts"]["audited"] == audited


@pytest.mark.parametrize(("audit", "key"), [
    ({"strata": {"edges": [0.3], "weights": [1.0]}}, "audit.strata.weights"),
    ({"strata": {"edges": [0.6, 0.3], "weights": [1, 1, 1]}}, "audit.strata.edges"),
    ({"floor": 0}, "audit.floor"),
    ({"budget_share": 2}, "audit.budget_share"),
    ({"sample": 0.1}, "audit"),
    ({"groups_without_point": "keep"}, "audit.groups_without_point"),
])
def test_bad_audit_config_exits_2_naming_the_key(tmp_path, capsys, audit, key):
    inputs = write_files(make_stream(100, seed=4), tmp_path / "in", 1, 100)
    code, out = run_cli(tmp_path, inputs, config_file(tmp_path / "c.yaml", audit), "x", "x")
    assert code == 2
    assert key in capsys.readouterr().err
    assert not out.exists()
