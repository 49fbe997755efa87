"""``costlib publish``: point OUTPUT/LATEST at a complete run (rollback or reviewed release).

Used to roll back to the previous operating points, or to release a run the publish guard held
for review. Who and why are required and recorded in the run's manifest (``publications``).
"""

from __future__ import annotations

import argparse

#: Beam flags (e.g. ``--impersonate_service_account``) set the output filesystem's credentials.
PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", required=True, help="the recalibrate output directory")
    parser.add_argument("--run-id", required=True, help="the complete run to publish")
    parser.add_argument("--by", required=True, help="who publishes (recorded)")
    parser.add_argument("--reason", required=True, help="why (recorded)")


def run(args: argparse.Namespace) -> int:
    from costlib_pipelines.output_lock import hold_output
    from costlib_pipelines.publish import publish_run

    with hold_output(args.output, run_id=args.run_id, command="publish"):
        manifest = publish_run(args.output, args.run_id, by=args.by, reason=args.reason)
    entry = manifest["publications"][-1]
    print(f"LATEST -> {args.run_id} (was {entry['previous_latest']}); recorded: by {entry['by']}, "
          f"reason {entry['reason']!r}")
    return 0
