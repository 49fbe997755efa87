"""Per-row costs in the pipelines: decide's minimum-risk decisions vs direct numpy, and
cost-weighted recalibration vs costlib on rows weighted by their regret."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from pipeline_data import base_config, comparable, direct_records, sample_frame, write_files
from test_pipeline_decide import decide, make_config, make_stream

from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.io.min_risk import CostSpec, MinRiskSettings
from costlib_pipelines.recalibrate.pipeline import run_recalibrate

MIN_RISK = {"fn": {"column": "amount"}, "fp": 5.0, "tp": {"column": "fee", "scale": 0.5}}


def _decide_config(min_risk):
    raw = dict(make_config(topk=True).raw)
    raw["min_risk"] = min_risk
    return RunConfig.from_dict(raw)


def _with_costs(frame, seed=0):
    rng = np.random.default_rng(seed)
    frame = frame.copy()
    amount = rng.lognormal(3.0, 1.0, size=len(frame))
    amount[rng.random(len(frame)) < 0.03] = np.nan  # null amount: no min-risk decision
    frame["amount"] = amount
    frame["fee"] = np.full(len(frame), 2.0)
    return frame


def test_decide_minimum_risk_equals_direct_numpy(tmp_path):
    frame = _with_costs(make_stream(2000, seed=4))
    manifest, got = decide(tmp_path, frame, _decide_config(MIN_RISK))
    p, amount = frame["probability"].to_numpy(), frame["amount"].to_numpy()
    cost_flag = p * 1.0 + (1 - p) * 5.0  # tp = 0.5 x fee 2.0
    cost_pass = p * amount
    usable = ~np.isnan(p) & ~np.isnan(amount)
    want = np.where(usable, cost_flag < cost_pass, False)
    ids = frame["item_id"].astype(str)
    got = got.loc[ids]
    assert got["min_risk_decision"].isna().to_numpy().tolist() == (~usable).tolist()
    np.testing.assert_array_equal(got["min_risk_decision"][usable].astype(bool), want[usable])
    np.testing.assert_allclose(got["expected_cost"][usable].astype(float),
                               np.minimum(cost_flag, cost_pass)[usable], rtol=1e-12)
    assert 0 < want.sum() < usable.sum()  # the scenario flags some rows and passes others
    counts = manifest["decision_counts"]
    assert counts["min_risk_flagged"] == int(want.sum())
    assert counts["min_risk_null.no_probability"] == int(np.isnan(p).sum())
    assert counts["min_risk_null.invalid_cost"] == int((~np.isnan(p) & np.isnan(amount)).sum())
    # the other decisions are still made for every row, on both the fast and the top-k path
    assert got["topk_decision"].notna().sum() > 0
    assert len(got) == len(frame)


def test_decide_without_min_risk_has_null_fields(tmp_path):
    _, got = decide(tmp_path, make_stream(300, seed=5), make_config())
    assert got["min_risk_decision"].isna().all() and got["expected_cost"].isna().all()


def test_decide_missing_cost_column_names_it(tmp_path):
    frame = make_stream(300, seed=6)
    with pytest.raises(Exception, match=r"'amount' \(min_risk\.fn\) is missing"):
        decide(tmp_path, frame, _decide_config(MIN_RISK))


def test_min_risk_config_validation():
    with pytest.raises(ConfigError, match=r"columns\.probability"):
        raw = dict(make_config().raw)
        raw["min_risk"] = {"fn": 1.0, "fp": 1.0}
        from costlib_pipelines.io.min_risk import decide_settings
        decide_settings(RunConfig.from_dict(raw))
    with pytest.raises(ConfigError, match="min_risk"):
        _decide_config({"fn": "amount", "fp": 1.0})  # a bare string is not a cost
    with pytest.raises(ConfigError, match="min_risk"):
        _decide_config({"fp": 1.0})  # fn is required
    settings = MinRiskSettings.from_config(_decide_config(MIN_RISK))
    assert settings.fn == CostSpec("fn", column="amount")
    assert settings.tp == CostSpec("tp", column="fee", scale=0.5)
    assert settings.tn == CostSpec("tn", value=0.0)
    assert settings.input_columns() == ["amount", "fee"]


def _recalibrate_against_regret_weights(frame, regret, config, tmp_path):
    """Recalibrate ``frame`` with ``config`` (money-weighted rated rows) and check its points
    against the library's on rows weighted by ``regret`` by hand; ``(manifest, its records)``."""
    weighted = frame.copy()
    weighted["weight"] = frame["weight"].to_numpy() * regret
    expected = comparable(direct_records(weighted, config))
    pattern = write_files(frame, tmp_path / "in", n_files=2, row_group_size=1000)
    manifest = run_recalibrate(config, pattern, str(tmp_path / "out"), [])
    run_dir = tmp_path / "out" / "runs" / manifest["run_id"]
    got = pq.read_table(run_dir / "operating_points.parquet").to_pylist()
    assert comparable(got) == expected
    return manifest, got


@pytest.mark.usefixtures("single_blas_thread")
def test_recalibrate_weights_rated_rows_by_their_regret(tmp_path):
    frame = sample_frame(6000, seed=2)
    rng = np.random.default_rng(1)
    frame["amount"] = rng.lognormal(3.0, 1.0, size=len(frame))
    min_risk = {"fn": {"column": "amount"}, "fp": 4.0, "tp": 1.0, "weight_rated_rows": True}
    config = base_config(min_risk=min_risk, target={"slope": 1.0})
    positive = frame["label"].fillna(False).to_numpy(dtype=bool)
    regret = np.where(positive, frame["amount"].to_numpy() - 1.0, 4.0)
    _, got = _recalibrate_against_regret_weights(frame, regret, config, tmp_path)
    expected = comparable(got)
    # and it is not what counts give
    plain = comparable(direct_records(frame, base_config(target={"slope": 1.0})))
    assert [r["thresholds"] for r in plain] != [r["thresholds"] for r in expected]


@pytest.mark.usefixtures("single_blas_thread")
def test_negative_regret_rows_weigh_zero_and_are_counted(tmp_path):
    """A fraud cheaper than its review (amount 3, fee 5: C_FN - C_TP < 0) is never worth
    flagging for its cost: it weighs 0, the run goes on, and the rows are counted."""
    frame = sample_frame(6000, seed=3)
    rng = np.random.default_rng(7)
    frame["amount"] = rng.lognormal(2.5, 1.0, size=len(frame))  # many below the fee of 5
    min_risk = {"fn": {"column": "amount"}, "fp": 5.0, "tp": 5.0, "weight_rated_rows": True}
    config = base_config(min_risk=min_risk, target={"slope": 1.0})
    positive = frame["label"].fillna(False).to_numpy(dtype=bool)
    cheap = positive & (frame["amount"].to_numpy() < 5.0)
    assert cheap.sum() >= 10  # the scenario has cheap frauds
    regret = np.where(positive, np.maximum(frame["amount"].to_numpy() - 5.0, 0.0), 5.0)
    manifest, got = _recalibrate_against_regret_weights(frame, regret, config, tmp_path)
    accounting = manifest["row_accounting"]
    assert accounting["min_risk.negative_regret.rated_positive"] == int(cheap.sum())
    assert "min_risk.negative_regret.rated_negative" not in accounting
    # zero-weight rows are no evidence: min_rated counts the positives worth more than 0
    everything = next(r for r in got if r["group"] == "__all__")
    assert everything["rated_positive_rows"] == int((positive & ~cheap).sum())
    assert everything["weight_unit"] == "money"


def test_recalibrate_refuses_a_null_regret(tmp_path):
    """A missing amount is an unknown cost, not a small one: the run stops and names it."""
    frame = sample_frame(2000, seed=3)
    frame["amount"] = 100.0
    frame.loc[frame.index[frame["label"].fillna(False).astype(bool)][:1], "amount"] = np.nan
    config = base_config(min_risk={"fn": {"column": "amount"}, "fp": 1.0,
                                   "weight_rated_rows": True})
    pattern = write_files(frame, tmp_path / "in", n_files=1, row_group_size=1000)
    with pytest.raises(Exception, match=r"null or non-finite cost regret .*columns \['amount'"):
        run_recalibrate(config, pattern, str(tmp_path / "out"), [])


def test_decide_min_risk_without_probability_exits_2_before_writing(tmp_path, capsys):
    import json

    from test_pipeline_decide import write_operating_points

    from costlib_pipelines.commands.cli import main

    raw = dict(make_config().raw)
    raw["min_risk"] = {"fn": 1.0, "fp": 1.0}
    raw["columns"] = {**raw["columns"], "probability": None, "set_id": None}
    (tmp_path / "c.yaml").write_text(json.dumps(raw))
    pattern = write_files(make_stream(300, seed=7), tmp_path / "in", n_files=1)
    ops = write_operating_points(tmp_path / "ops.parquet")
    out = tmp_path / "out"
    assert main(["decide", "--config", str(tmp_path / "c.yaml"), "--input", pattern,
                 "--operating-points", ops, "--output", str(out)]) == 2
    assert "min_risk: decisions by minimum risk need columns.probability" in (
        capsys.readouterr().err)
    assert not out.exists()


@pytest.mark.usefixtures("single_blas_thread")
def test_min_rated_counts_rows_not_money(tmp_path):
    """A tiny group with 2 rated frauds worth 500 each has 998 of money on its positive side,
    but 2 rows of evidence: min_rated (20 positives) sends it to the all-groups thresholds."""
    frame = sample_frame(6000, seed=2)
    rng = np.random.default_rng(1)
    frame["amount"] = rng.lognormal(3.0, 1.0, size=len(frame))
    tiny = frame[frame["label"].notna()].head(40).copy()
    tiny["group"] = "jewelry"
    tiny["item_id"] = np.arange(10**6, 10**6 + len(tiny))
    tiny["weight"] = 1.0
    tiny["label"] = pd.array([True, True] + [False] * (len(tiny) - 2), dtype="boolean")
    tiny["amount"] = 500.0
    frame = pd.concat([frame, tiny], ignore_index=True)
    min_risk = {"fn": {"column": "amount"}, "fp": 4.0, "tp": 1.0, "weight_rated_rows": True}
    config = base_config(min_risk=min_risk, target={"slope": 1.0},
                         min_rated={"positives": 20, "negatives": 20})
    pattern = write_files(frame, tmp_path / "in", n_files=2, row_group_size=1000)
    manifest = run_recalibrate(config, pattern, str(tmp_path / "out"), [])
    run_dir = tmp_path / "out" / "runs" / manifest["run_id"]
    got = [r for r in pq.read_table(run_dir / "operating_points.parquet").to_pylist()
           if r["group"] == "jewelry"]
    assert {r["status"] for r in got} == {"fallback"}
    assert {r["rated_positive_rows"] for r in got} == {2}
    assert {r["rated_negative_rows"] for r in got} == {len(tiny) - 2}
    assert {r["rated_positives"] for r in got} == {2 * (500.0 - 1.0)}  # money: 998 >= 20
    assert {r["weight_unit"] for r in got} == {"money"}
