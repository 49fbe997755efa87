import json

import pyarrow.parquet as pq

from costlib_pipelines.commands.cli import main


def test_demo_runs_recalibrate_and_decide_end_to_end(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--output", str(out), "--n-items", "40000"]) == 0
    printed = capsys.readouterr().out
    assert "recalibrate (FnApiRunner" in printed and "decide (" in printed
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
