"""costlib decide with ``audit.design: auto``: the second run is sized from the first's counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_pipeline_audit_sampling import config_file, decisions, manifest
from test_pipeline_decide import (
    CLASSIFIERS,
    expected_threshold_decisions,
    make_stream,
    write_files,
    write_operating_points,
)

from costlib_pipelines.commands.cli import main

EDGES, WEIGHTS = [0.3, 0.6], [0.5, 3.0, 10.0]
AUTO = {"enabled": True, "design": "auto", "floor": 0.001, "budget_share": 0.01,
        "strata": {"edges": EDGES, "weights": WEIGHTS}}
ROWS = 200_000


def run(tmp_path: Path, config: str, out: Path, run_id: str, seed: int) -> tuple[int, object]:
    frame = make_stream(ROWS, seed=seed)
    inputs = write_files(frame, tmp_path / f"in-{run_id}", 2, 50_000)
    ops = write_operating_points(tmp_path / "ops.parquet")
    code = main(["decide", "--config", config, "--input", inputs, "--operating-points", ops,
                 "--output", str(out), "--run-id", run_id])
    return code, frame


def unflagged_strata(frame) -> tuple[np.ndarray, np.ndarray]:
    """Per row: stratum by hand (highest score that is not null) and unflagged (not true)."""
    best = np.fmax(frame["text_model"].to_numpy(), frame["image_model"].to_numpy())
    best = np.nan_to_num(best, nan=-np.inf)
    stratum = (best >= EDGES[0]).astype(int) + (best >= EDGES[1]).astype(int)
    flagged = np.array([d is True for d in expected_threshold_decisions(frame, "any")[0]])
    return stratum, ~flagged


def test_second_run_is_sized_from_the_first_runs_counts(tmp_path):
    config = config_file(tmp_path / "c.yaml", AUTO)
    out = tmp_path / "out"
    code, first = run(tmp_path, config, out, "day-1", seed=11)
    assert code == 0
    m1 = manifest(out, "day-1")["audit"]
    # no previous run: the configured weights scaled by budget_share / max(weights) = 0.001,
    # so that no stratum exceeds the budget (the floor 0.001 lifts stratum 0's 0.0005)
    assert m1["design"] == "auto" and m1["sizing"]["counts_from"] is None
    assert "no previous decide run" in m1["sizing"]["reason"]
    assert [s["probability"] for s in m1["strata"]] == pytest.approx([0.001, 0.003, 0.01],
                                                                     rel=1e-12)
    stratum1, unflagged1 = unflagged_strata(first)
    n1 = np.bincount(stratum1[unflagged1], minlength=3)
    assert [s["unflagged"] for s in m1["strata"]] == n1.tolist()
    # the expected share is at most the budget whatever the counts (the fixed design with
    # these weights spends 4.4%: docs/audit.md)
    expected1 = np.sum(n1 * np.array([0.001, 0.003, 0.01]))
    assert expected1 <= 0.01 * n1.sum()

    code, second = run(tmp_path, config, out, "day-2", seed=12)
    assert code == 0
    m2 = manifest(out, "day-2")["audit"]
    sizing = m2["sizing"]
    assert sizing["counts_from"] == "day-1" and sizing["unflagged"] == n1.tolist()
    assert m2["budget_share"] == 0.01
    pi = np.array([s["probability"] for s in m2["strata"]])
    # the budget identity on the counts it came from, and pi_h proportional to the weights
    # where no bound binds (the Neyman solution; the floor 0.001 is below every c * w_h here)
    assert np.sum(n1 * pi) == pytest.approx(0.01 * n1.sum(), rel=1e-9)
    assert ((pi > 0.001) & (pi < 1)).all()
    np.testing.assert_allclose(pi / np.array(WEIGHTS), pi[0] / WEIGHTS[0], rtol=1e-12)
    assert sizing["expected_share"] == pytest.approx(0.01, rel=1e-9)
    # records: audit_probability is pi of the row's stratum (unflagged) or 1 (flagged)
    got = decisions(out)
    stratum2, unflagged2 = unflagged_strata(second)
    ids = second["item_id"].astype(str).to_numpy()
    want = np.where(unflagged2, pi[stratum2], 1.0)
    assert got.loc[ids, "audit_probability"].to_numpy().tolist() == want.tolist()
    assert not got.loc[ids[~unflagged2], "audit"].any()
    # the audited share of day 2 is within +-10% of the budget
    share2 = m2["audited"] / m2["unflagged"]
    assert abs(share2 - 0.01) <= 0.001, share2
    assert m2["audited"] == int(got.loc[ids, "audit"].sum())
    counts = json.loads((out / "runs" / "day-2" / "decision_counts.json").read_text())
    n2 = np.bincount(stratum2[unflagged2], minlength=3)
    assert counts["audit_expected"] == pytest.approx(float(np.sum(n2 * pi)), abs=1e-6)


def test_previous_run_with_other_strata_is_not_used(tmp_path):
    out = tmp_path / "out"
    other = {**AUTO, "strata": {"edges": [0.5], "weights": [1.0, 4.0]}}
    assert run(tmp_path, config_file(tmp_path / "a.yaml", other), out, "a", seed=1)[0] == 0
    assert run(tmp_path, config_file(tmp_path / "b.yaml", AUTO), out, "b", seed=2)[0] == 0
    sizing = manifest(out, "b")["audit"]["sizing"]
    assert sizing["counts_from"] is None and "other strata edges" in sizing["reason"]
    assert [s["probability"] for s in manifest(out, "b")["audit"]["strata"]] == pytest.approx(
        [0.001, 0.003, 0.01], rel=1e-12)  # the first-run design (weights * budget / max)


def test_fixed_design_is_the_default_and_unchanged(tmp_path):
    fixed = {k: v for k, v in AUTO.items() if k != "design"}
    out = tmp_path / "out"
    for run_id in ("a", "b"):
        assert run(tmp_path, config_file(tmp_path / "f.yaml", fixed), out, run_id, 3)[0] == 0
        audit = manifest(out, run_id)["audit"]
        assert audit["design"] == "fixed" and audit["sizing"] == {"design": "fixed"}
        assert [s["probability"] for s in audit["strata"]] == [0.005, 0.03, 0.1]


@pytest.mark.parametrize(("audit", "key"), [
    ({**AUTO, "design": "neyman"}, "audit.design"),
    ({**AUTO, "floor": 0.02}, "audit.floor"),
])
def test_bad_design_config_exits_2_naming_the_key(tmp_path, capsys, audit, key):
    inputs = write_files(make_stream(100, seed=4), tmp_path / "in", 1, 100)
    ops = write_operating_points(tmp_path / "ops.parquet")
    code = main(["decide", "--config", config_file(tmp_path / "c.yaml", audit), "--input",
                 inputs, "--operating-points", ops, "--output", str(tmp_path / "o")])
    assert code == 2
    assert key in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    assert CLASSIFIERS  # the stream's classifiers are the config's


def test_recalibrate_counts_audited_labels_and_decide_uses_them(tmp_path):
    """End to end: recalibrate records the audited positives/negatives per stratum (checked
    against the frame), and an auto-sized decide applying that run takes
    S_h = weights[h] * sqrt((P_h + r^2 Q_h) / (P_h + Q_h)) with r the target slope."""
    from pipeline_data import base_config
    from test_pipeline_audit_estimation import AUDIT as COLUMNS
    from test_pipeline_audit_estimation import audited_frame
    from test_pipeline_audit_estimation import write_files as write_rated

    frame = audited_frame(20_000, seed=5)
    recal = base_config(columns=COLUMNS, methods=["graph", "hull"], audit=AUTO)
    path = tmp_path / "recal.yaml"
    path.write_text(json.dumps(recal.raw))
    pattern = write_rated(frame, tmp_path / "rated", n_files=2, row_group_size=4000)
    ops_out = tmp_path / "ops"
    code = main(["recalibrate", "--config", str(path), "--input", pattern, "--output",
                 str(ops_out), "--run-id", "r1"])
    assert code in (0, 3)
    ops_run = ops_out / "runs" / "r1"
    acc = json.loads((ops_run / "manifest.json").read_text())["row_accounting"]
    # truth from the frame: rated rows with p < 1, stratum by the highest non-null score
    p = frame["audit_p"].to_numpy()
    audited = frame["label"].notna().to_numpy() & (p < 1)
    stratum, _ = unflagged_strata(frame.assign(group="__none__"))
    y = frame["label"].fillna(False).to_numpy(dtype=bool)
    pos = np.bincount(stratum[audited & y], minlength=3)
    neg = np.bincount(stratum[audited & ~y], minlength=3)
    # the top stratum is all flagged in this frame: no audited row there
    assert pos.sum() > 0 and (neg[:2] > 0).all() and pos[2] + neg[2] == 0
    for h in range(3):
        assert acc.get(f"audit.stratum.{h}.positives", 0) == pos[h]
        assert acc.get(f"audit.stratum.{h}.negatives", 0) == neg[h]

    config = config_file(tmp_path / "c.yaml", AUTO)
    out = tmp_path / "out"
    for run_id, seed in (("day-1", 21), ("day-2", 22)):
        stream = make_stream(20_000, seed=seed)
        inputs = write_files(stream, tmp_path / f"in-{run_id}", 1, 20_000)
        code = main(["decide", "--config", config, "--input", inputs, "--operating-points",
                     str(ops_run), "--output", str(out), "--run-id", run_id])
        assert code == 0
    audit = manifest(out, "day-2")["audit"]
    sizing = audit["sizing"]
    r = 0.3 / 0.7  # target marginal precision 0.3
    rms = np.sqrt((pos[:2] + r**2 * neg[:2]) / (pos[:2] + neg[:2]))
    rms = np.append(rms, rms.max())  # an unaudited stratum: the largest spread of the others
    np.testing.assert_allclose(sizing["spreads"], np.array(WEIGHTS) * rms, rtol=1e-12)
    assert sizing["audited_positives"] == pos.tolist()
    assert sizing["spread_source"] == "audit.strata.weights * audited labels"
    n1 = np.array(sizing["unflagged"])
    pi = np.array([s["probability"] for s in audit["strata"]])
    assert np.sum(n1 * pi) == pytest.approx(0.01 * n1.sum(), rel=1e-9)
    free = (pi > 0.001) & (pi < 1)
    ratio = pi[free] / np.asarray(sizing["spreads"])[free]
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)
