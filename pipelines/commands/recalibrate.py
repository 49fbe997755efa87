"""``costlib recalibrate``: Parquet score streams -> operating points per group.

Beam flags not declared here (``--runner``, ``--flink_master``, ``--project``, ...) are passed
through to Beam; with no ``--runner`` the pipeline runs locally on the FnApiRunner (offline).
"""

from __future__ import annotations

import argparse

PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="YAML run config (see schemas/)")
    parser.add_argument("--input", required=True, help="Parquet glob(s), comma-separated")
    parser.add_argument("--output", required=True, help="output directory (local or gs://...)")
    parser.add_argument("--run-id", default=None, help="run id (default: UTC time + config hash)")


def run(args: argparse.Namespace) -> int:
    from pipelines.config import load_config
    from pipelines.recalibrate import run_recalibrate

    config = load_config(args.config)
    manifest = run_recalibrate(
        config, args.input, args.output, args.beam_args, run_id=args.run_id
    )
    acc = manifest["row_accounting"]
    reasons = ", ".join(f"{k}={v}" for k, v in acc["dead_letter_reasons"].items()) or "none"
    print(
        f"run {manifest['run_id']}: read {acc['read']:,} rows = used {acc.get('used', 0):,} "
        f"+ unrated {acc.get('unrated', 0):,} + dead-lettered {acc['dead_lettered']:,} "
        f"({reasons}); {manifest['seconds']} s on {manifest['runner']}"
    )
    print(f"operating points: {args.output.rstrip('/')}/runs/{manifest['run_id']}/"
          "operating_points.parquet (and .jsonl); manifest.json written last")
    return 0
