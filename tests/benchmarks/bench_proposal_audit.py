"""Benchmark: what auditing proposed moves costs ``costlib decide`` per row.

Run: ``PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_proposal_audit.py [--rows 200000
800000] [--repeats 3]``

Data: the decide test stream of ``tests/test_pipeline_decide.py`` (5 groups, two scores),
its operating points with a proposed point for two groups (``proposed_thresholds``, as
``tests/test_pipeline_audit_strata.py``), the audit enabled with strata relative to the point
(steps ``[2, 5]``, weights ``[0.5, 3, 10]``, fixed design). Timed: the whole ``costlib decide``
run on the FnApiRunner in process, best of ``--repeats``, with ``audit.strata.proposal_stratum``
2 and null, alternating. Printed: seconds per size and setting, the fixed cost and the cost per
row at the margin (the slope between the two sizes), and the ratio of the margins.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests directory
sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import describe
from test_pipeline_audit_strata import RELATIVE, write_points_with_proposals
from test_pipeline_decide import make_config, make_stream, write_files

from costlib_pipelines.commands.cli import main


def _config(path: Path, band: int | None) -> str:
    raw = dict(make_config(buckets=3).raw)
    raw["grid"] = {"edges": "uniform", "bins": 64, "range": [0.0, 1.0]}
    raw["audit"] = {**RELATIVE, "strata": {**RELATIVE["strata"], "proposal_stratum": band}}
    path.write_text(json.dumps(raw))
    return str(path)


def main_(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs=2, default=[200_000, 800_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-proposal-audit-"))
    ops = write_points_with_proposals(tmp / "ops.parquet")
    configs = {"proposals": _config(tmp / "p.json", 2), "none": _config(tmp / "n.json", None)}
    print(f"machine: {describe()}")
    best: dict[tuple[str, int], float] = {}
    for rows in args.rows:
        inputs = write_files(make_stream(rows, seed=1), tmp / f"in-{rows}", 4, 50_000)
        for r in range(args.repeats):
            for name, config in configs.items():
                out = tmp / f"out-{name}-{rows}-{r}"
                t0 = time.perf_counter()
                code = main(["decide", "--config", config, "--input", inputs,
                             "--operating-points", ops, "--output", str(out), "--run-id", "b"])
                seconds = time.perf_counter() - t0
                assert code == 0
                best[name, rows] = min(best.get((name, rows), float("inf")), seconds)
    small, large = args.rows
    margins = {}
    for name in configs:
        margin = (best[name, large] - best[name, small]) / (large - small)
        fixed = best[name, small] - margin * small
        margins[name] = margin
        print(f"{name:<10} {small:,} rows {best[name, small]:.2f} s, {large:,} rows "
              f"{best[name, large]:.2f} s; fixed {fixed:.2f} s, margin "
              f"{margin * 1e9:.0f} ns/row")
    print(f"margin ratio proposals / none: {margins['proposals'] / margins['none']:.3f}")


if __name__ == "__main__":
    main_()
