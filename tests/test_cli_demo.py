import json

import pyarrow.parquet as pq
import yaml

from costlib_pipelines.commands.cli import main


def test_demo_runs_recalibrate_and_decide_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--output", str(out), "--n-items", "40000"]) == 0
    printed = capsys.readouterr().out
    assert "recalibrate (FnApiRunner" in printed and "decide (" in printed
    # the first screen: the decision method's points only, the target, what to try next
    assert "thresholds of graph per group (decision_method; target marginal precision" in printed
    assert "mp_left" not in printed and "mean k per set" not in printed
    assert f"next: costlib report --run {out / 'recalibrate'}" in printed
    latest = (out / "recalibrate" / "LATEST").read_text().strip()
    run_dir = out / "recalibrate" / "runs" / latest
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["row_accounting"]["read"] == 40_000
    records = pq.read_table(run_dir / "operating_points.parquet").to_pylist()
    assert {r["group"] for r in records} == {"market_a", "market_b", "market_c", "__all__"}
    assert {r["method"] for r in records} == {"graph", "analytic", "hull", "bucket"}
    # The hull objective bounds every other method's, per group (own grids only).
    slope = 0.3 / 0.7
    for group in {r["group"] for r in records}:
        rows = [r for r in records if r["group"] == group and r["status"] == "ok"]
        if rows:
            best = max(r["tp"] - slope * r["fp"] for r in rows)
            hull = next(r for r in rows if r["method"] == "hull")
            assert hull["tp"] - slope * hull["fp"] == best
    decide_latest = (out / "decide" / "LATEST").read_text().strip()
    decide_manifest = json.loads(
        (out / "decide" / "runs" / decide_latest / "manifest.json").read_text()
    )
    assert decide_manifest["row_accounting"]["read"] == 40_000
    assert sorted(p.name for p in (out / "plots").glob("pn_*.png")) == [
        "pn___all__.png", "pn_market_a.png", "pn_market_b.png", "pn_market_c.png"
    ]
    # The config the demo writes is the short one a user would write (commented, the keys that
    # matter), and it resolves to exactly the config the run recorded and hashed.
    written = (out / "config.yaml").read_text().splitlines()
    assert len(written) < 25 and written[0].startswith("#")
    assert {line.split(":")[0] for line in written if line[:1].isalpha()} == {
        "columns", "classifiers", "rule", "target", "methods", "min_rated"}
    assert main(["config", "--resolved", str(out / "config.yaml")]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved == manifest["config"] == decide_manifest["config"]
    assert len(resolved) > 20


def test_demo_audit_loop_rates_what_decide_asked_for_and_recalibrates_with_the_weights(
        tmp_path, capsys):
    """--audit-loop: the rated day holds labels exactly on the rows decide flagged or audited
    (their truth, by the generator with the same seed), audit_probability on every row equal to
    the decision record's; the recalibration reads it as audit data (estimated recall inside its
    interval, min_recall recorded) with the published points in force."""
    import numpy as np
    import pandas as pd

    from costlib.sample import generate_score_stream
    from costlib_pipelines.decide.records import read_decisions

    out = tmp_path / "demo"
    code = main(["demo", "--output", str(out), "--n-items", "30000", "--no-plots",
                 "--audit-loop", "--min-recall", "0.5"])
    printed = capsys.readouterr().out
    assert code in (0, 3), printed
    rated = pq.read_table(out / "day2" / "rated").to_pandas()
    decisions = read_decisions(str(out / "day2" / "decide")).to_pandas()
    decisions.index = decisions["item_id"].astype(np.int64)
    d = decisions.loc[rated["item_id"].to_numpy()]
    to_rate = (d["threshold_decision"].fillna(False) | d["audit"]).to_numpy(dtype=bool)
    assert 0 < d["audit"].sum() < len(d) and to_rate.sum() > d["audit"].sum()
    truth = generate_score_stream(30000, seed=8, start="2026-11-15", first_item_id=30000,
                                  truth=True, rating_floor=2.0)
    truth = truth.set_index("item_id").loc[rated["item_id"], "truth"].to_numpy()
    labels = rated["label"]
    assert labels.notna().to_numpy().tolist() == to_rate.tolist()
    assert labels[to_rate].astype(bool).tolist() == truth[to_rate].tolist()
    np.testing.assert_array_equal(rated["audit_probability"].to_numpy(),
                                  d["audit_probability"].to_numpy())
    assert (rated["item_id"] >= 30000).all() and not pd.isna(rated["audit_probability"]).any()
    runs = sorted((out / "recalibrate" / "runs").glob("day2-*"))
    assert len(runs) == 1
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    # recalibrate counts audited rows drawn with p < 1 (the nearest step is a census, p = 1),
    # including rows no classifier scored (positives no threshold can flag: part of P-hat)
    scored = rated[["text_model", "image_model"]].notna().any(axis=1).to_numpy()
    accounting = manifest["row_accounting"]
    # the second day's config is short too, and is the config that run used
    assert len((out / "day2" / "config.yaml").read_text().splitlines()) < 30
    capsys.readouterr()
    assert main(["config", "--resolved", str(out / "day2" / "config.yaml")]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == manifest["config"]
    sampled = d["audit"].to_numpy() & (d["audit_probability"].to_numpy() < 1)
    assert accounting["audit.audited"] == int(sampled.sum())
    assert (sampled & ~scored).any() and accounting["dead_lettered"] == 0
    first = [p.name for p in (out / "recalibrate" / "runs").iterdir()
             if not p.name.startswith("day2-")]
    assert manifest["in_force"]["source"].endswith(f"runs/{first[0]}")  # the published points
    records = [r for r in pq.read_table(runs[0] / "operating_points.parquet").to_pylist()
               if r["method"] == "graph" and r["thresholds"] is not None]
    assert records and all(r["min_recall"] == 0.5 for r in records)
    with_interval = [r for r in records if r["estimated_recall_ci_low"] is not None]
    assert with_interval  # (a group kept for too few rated rows has no interval)
    for r in with_interval:  # kept points too: their interval is at their own thresholds
        assert r["estimated_recall_ci_low"] <= r["estimated_recall"] <= r[
            "estimated_recall_ci_high"], r["group"]
    from costlib_pipelines.commands.decide import audit_line

    decide_run = next((out / "day2" / "decide" / "runs").iterdir())
    decide_manifest = json.loads((decide_run / "manifest.json").read_text())
    assert audit_line(decide_manifest["audit"]) in printed.splitlines()  # as costlib decide
    assert "est. recall" in printed
    assert "found below" in printed and "audit share for ±0.05" in printed
    table = printed.split("est. recall", 1)[1]
    for r in with_interval:  # P^, an estimated count: an integer with thousands separators
        assert f" {round(r['estimated_total_positives']):,} " in table, r["group"]
    assert "e+" not in table
    for r in with_interval:  # the exact interval and the evidence behind it
        assert r["recall_interval"] == "exact" and r["recall_bound"] == "lower"
        assert r["audit_missed_audited"] is not None and r["audit_strata_pi"]
        assert r["estimated_total_positives_ci_high"] >= r["estimated_total_positives"]


def test_text_tables_show_missing_values_as_a_dash():
    from costlib.text_table import format_table

    text = format_table([["a", None, float("nan"), float("inf"), 0.123456]],
                        ["g", "ci", "x", "t", "v"])
    assert text.splitlines()[2].split() == ["a", "-", "-", "off", "0.1235"]


def test_text_tables_never_write_large_numbers_in_scientific_notation():
    from costlib.text_table import format_table

    text = format_table([[13712.5, 9999.4, 123456.7, -45678.9]], ["a", "b", "c", "d"])
    assert text.splitlines()[2].split() == ["13712", "9999", "123457", "-45679"]
    assert "e+" not in text


def test_config_resolved_prints_every_default_and_is_its_own_resolution(tmp_path, capsys):
    """``costlib config --resolved``: the schema's defaults filled in (the same as loading the
    config), a fixed point when fed back, and exit 2 naming the file for a bad config."""
    from costlib_pipelines.config import load_config

    short = tmp_path / "short.yaml"
    short.write_text("classifiers: [a, b]\ntarget: {fp_per_tp: 4}\n")
    assert main(["config", str(short)]) == 0
    assert load_config(short).digest in capsys.readouterr().out
    assert main(["config", "--resolved", str(short)]) == 0
    resolved = yaml.safe_load(capsys.readouterr().out)
    assert resolved == load_config(short).raw
    assert resolved["columns"]["label"] == "label" and resolved["methods"] == ["graph", "hull"]
    full = tmp_path / "full.yaml"
    full.write_text(yaml.safe_dump(resolved, sort_keys=False))
    assert load_config(full).raw == resolved and load_config(full).digest == load_config(
        short).digest
    bad = tmp_path / "bad.yaml"
    bad.write_text("classifiers: [a]\n")
    assert main(["config", "--resolved", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: invalid run config" in err and "target" in err
