"""``costlib report --run DIR [--out FILE] [--groups A,B] [--all-groups]``: a self-contained
HTML report of a recalibration run; ``costlib report --output OUTPUT --history [--last N]
[--groups A,B] [--all-groups] [--decisions DECIDE_OUTPUT] [--out FILE]``: one page over every
complete run of an output.

``DIR`` is a run directory (``OUTPUT/runs/<run_id>``) or a recalibrate output directory (its
``LATEST`` run). The report goes to ``DIR/report.html`` unless ``--out`` says otherwise; see
:mod:`costlib_pipelines.report.page` for what it shows. With more than
:data:`costlib_pipelines.report.page.MAX_DETAILED_GROUPS` groups only the groups that need a look
get a section (changed, fell back, coverage-limited or infeasible, held) plus those named by
``--groups``; ``--all-groups`` gives every group its section.

With ``--history`` the page covers the runs of ``OUTPUT`` in run order and goes to
``OUTPUT/history.html`` unless ``--out`` says otherwise; see
:mod:`costlib_pipelines.report.history`. ``--groups`` and ``--all-groups`` then choose the
groups that get a figure.
"""

from __future__ import annotations

import argparse

#: Beam flags (e.g. ``--impersonate_service_account``) set the output filesystem's credentials.
PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``costlib report``."""
    parser.add_argument(
        "--run", default=None,
        help="run directory (OUTPUT/runs/<run_id>) or recalibrate output directory (LATEST)",
    )
    parser.add_argument("--output", default=None,
                        help="with --history: the recalibrate output directory whose runs "
                             "the page covers")
    parser.add_argument("--history", action="store_true",
                        help="one page over every complete run of --output, in run order "
                             "(thresholds, volume, precision, recall, held runs)")
    parser.add_argument("--last", type=int, default=None,
                        help="with --history: only the newest N runs")
    parser.add_argument("--decisions", default=None,
                        help="with --history: a decide output directory; audit shares from "
                             "its runs (default: from the recalibrate manifests)")
    parser.add_argument("--out", default=None,
                        help="HTML file to write (default: report.html in the run directory; "
                             "with --history: history.html in the output directory)")
    parser.add_argument("--groups", default="",
                        help="comma-separated groups that get a section with figures in any "
                             "case (large reports show only the groups that need a look)")
    parser.add_argument("--all-groups", action="store_true",
                        help="a section with figures for every group, however many")


def _check(args: argparse.Namespace) -> None:
    """The flag combinations: ``--run`` alone, or ``--output`` with ``--history``; ``--out``
    names a file, not a directory."""
    from pathlib import Path

    from costlib_pipelines.flags import UsageError
    from costlib_pipelines.io.files import check_output_path

    if args.out is not None:
        check_output_path(args.out, what="--out")
    if args.out is not None and (args.out.endswith("/") or (
            "://" not in args.out and Path(args.out).is_dir())):
        raise UsageError(f"--out {args.out}: is a directory; give the HTML file to write "
                         "(e.g. report.html)")

    if args.history:
        if args.run is not None:
            raise UsageError("--history covers an output's runs: give --output OUTPUT, not "
                             "--run")
        if args.output is None:
            raise UsageError("--history needs --output OUTPUT (a recalibrate output directory)")
        return
    history_only = [flag for flag, value in (("--output", args.output), ("--last", args.last),
                                             ("--decisions", args.decisions))
                    if value is not None]
    if history_only:
        raise UsageError(f"{history_only[0]} goes with --history (costlib report --output "
                         "OUTPUT --history)")
    if args.run is None:
        raise UsageError("give --run DIR (one run) or --output OUTPUT --history (every run)")


def run(args: argparse.Namespace) -> int:
    """Write the report and print where; returns 0.

    A missing path or an incomplete run (or, with ``--history``, an output without a complete
    run) raises ``InputError``; a wrong flag combination ``UsageError``
    (``costlib_pipelines.commands.cli.main`` prints either in one line and returns 2).
    """
    _check(args)
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    if args.history:
        from costlib_pipelines.report.history import write_history

        path = write_history(args.output, args.out, groups=groups, last=args.last,
                             all_groups=args.all_groups, decisions=args.decisions)
    else:
        from costlib_pipelines.report.page import write_report

        path = write_report(args.run, args.out, groups=groups, all_details=args.all_groups)
    print(f"wrote {path}")
    return 0
