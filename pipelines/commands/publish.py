"""``costlib publish``: point OUTPUT/LATEST at a complete run (rollback or reviewed release).

Used to roll back to the previous operating points, or to release a run the publish guard held
for review. Who and why are required and recorded in the run's manifest (``publications``).
With ``--window START_END`` it releases a window of a windowed run that the guard held (or,
with ``--withdraw``, withdraws an applied one); see
:mod:`costlib_pipelines.recalibrate.window_guard`.
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
    parser.add_argument("--window", default=None, metavar="START_END",
                        help="a window of a windowed run (its directory name under windows/, "
                             "e.g. 20261101T000000_20261108T000000): release it if the guard "
                             "held it; LATEST does not move")
    parser.add_argument("--withdraw", action="store_true",
                        help="with --window: withdraw an applied window (roll it back: decide "
                             "applies the window before it again)")


def run(args: argparse.Namespace) -> int:
    from costlib_pipelines.flags import UsageError
    from costlib_pipelines.io.lock import hold_output
    from costlib_pipelines.io.runs import check_run_id
    from costlib_pipelines.recalibrate.publish import publish_run
    from costlib_pipelines.recalibrate.window_guard import check_window_name, publish_window

    if args.withdraw and args.window is None:
        raise UsageError("--withdraw needs --window START_END (the window to withdraw)")
    if args.window is not None:
        check_run_id(args.run_id)
        check_window_name(args.window)  # both names are checked before any filesystem call
        with hold_output(args.output, run_id=args.run_id, command="publish"):
            manifest = publish_window(args.output, args.run_id, args.window, by=args.by,
                                      reason=args.reason, withdraw=args.withdraw)
        entries = manifest["guard"]["windows"]
        entry = next(e for e in entries if e["window"] == args.window)
        print(f"run {args.run_id}: window {args.window} is {entry['state']}; recorded: by "
              f"{args.by}, reason {args.reason!r}")
        held = [e["window"] for e in entries if e["state"] == "held"]
        print(f"windows held now: {', '.join(held) if held else 'none'}")
        return 0
    with hold_output(args.output, run_id=args.run_id, command="publish"):
        manifest = publish_run(args.output, args.run_id, by=args.by, reason=args.reason)
    entry = manifest["publications"][-1]
    print(f"LATEST -> {args.run_id} (was {entry['previous_latest']}); recorded: by {entry['by']}, "
          f"reason {entry['reason']!r}")
    _warn_infeasible(args.output, args.run_id, manifest)
    return 0


def _warn_infeasible(output: str, run_id: str, manifest: dict) -> None:
    """What decide will apply for the run's infeasible points, one warning per group."""
    from costlib_pipelines.io.filesystems import FileSystems
    from costlib_pipelines.io.runs import read_records
    from costlib_pipelines.recalibrate.publish import infeasible_overrides

    points = f"{output.rstrip('/')}/runs/{run_id}/operating_points.parquet"
    if not FileSystems.exists(points):
        return
    method = (manifest.get("guard") or {}).get("method") or manifest["config"]["decision_method"]
    for line in infeasible_overrides(read_records(points), method):
        print(f"warning: {line}")
