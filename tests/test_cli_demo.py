import json

from pipelines.cli import main


def test_demo_prints_operating_points_and_writes_them(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--output", str(out), "--n-items", "60000", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "ALL" in printed and "graph" in printed and "hull" in printed
    lines = (out / "operating_points.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    groups = {r["group"] for r in records}
    assert groups == {"market_a", "market_b", "market_c", "ALL"}
    assert {r["method"] for r in records} == {"graph", "analytic", "hull", "bucket"}
    for r in records:
        assert len(r["thresholds"]) == 2
        assert r["tp"] <= r["rated_positives"] and r["fp"] <= r["rated_negatives"]
    # The hull objective bounds every other method's, per group.
    for g in groups:
        best = max(r["objective"] for r in records if r["group"] == g)
        hull = next(r for r in records if r["group"] == g and r["method"] == "hull")
        assert hull["objective"] == best
