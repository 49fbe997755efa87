"""Benchmark: the audited share of ``costlib decide`` runs with ``audit.design: auto``.

Run: ``PYTHONPATH=. .venv/bin/python tests/benchmarks/bench_audit_design.py [--rows 200000]
[--runs 3]``

Data: the decide test stream of ``tests/test_pipeline_decide.py`` (5 groups, two uniform
scores, fixed operating points), a new seed per run, written to one output directory, with
strata ``[0.3, 0.6]``, weights ``[0.5, 3, 10]``, ``budget_share 0.01``, floor 0.001 (the
config of ``tests/test_pipeline_audit_sizing.py``). The first run has no previous counts and
uses the fixed design; each later run is sized from the one before. Printed per run: audited
rows, unflagged rows, the audited share, the expected share ``sum_h N_h pi_h / N`` under the
run's design, and ``pi_h``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests directory

from test_pipeline_audit_sampling import config_file, manifest
from test_pipeline_audit_sizing import AUTO
from test_pipeline_decide import make_stream, write_files, write_operating_points

from costlib_pipelines.commands.cli import main


def main_(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-audit-design-"))
    config = config_file(tmp / "c.yaml", AUTO)
    ops = write_operating_points(tmp / "ops.parquet")
    print(f"{'run':>5} {'audited':>8} {'unflagged':>10} {'share':>7} {'expected':>8}  pi_h")
    for i in range(args.runs):
        run_id = f"run-{i + 1}"
        inputs = write_files(make_stream(args.rows, seed=11 + i), tmp / f"in-{i}", 2, 50_000)
        code = main(["decide", "--config", config, "--input", inputs, "--operating-points",
                     ops, "--output", str(tmp / "out"), "--run-id", run_id])
        if code:
            raise SystemExit(code)
        audit = manifest(tmp / "out", run_id)["audit"]
        pi = [round(s["probability"], 6) for s in audit["strata"]]
        print(f"{run_id:>5} {audit['audited']:>8,} {audit['unflagged']:>10,} "
              f"{audit['audited'] / audit['unflagged']:>7.4f} "
              f"{audit['expected'] / audit['unflagged']:>8.4f}  {pi} "
              f"({audit['sizing'].get('counts_from') or 'fixed: no previous counts'})")


if __name__ == "__main__":
    main_()
