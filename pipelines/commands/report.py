"""``costlib report --run DIR [--out FILE] [--groups A,B] [--all-groups]``: a self-contained
HTML report of a recalibration run.

``DIR`` is a run directory (``OUTPUT/runs/<run_id>``) or a recalibrate output directory (its
``LATEST`` run). The report goes to ``DIR/report.html`` unless ``--out`` says otherwise; see
:mod:`costlib_pipelines.report` for what it shows. With more than
:data:`costlib_pipelines.report.MAX_DETAILED_GROUPS` groups only the groups that need a look get a
section (changed, fell back, coverage-limited or infeasible, held) plus those named by
``--groups``; ``--all-groups`` gives every group its section.
"""

from __future__ import annotations

import argparse

#: Beam flags (e.g. ``--impersonate_service_account``) set the output filesystem's credentials.
PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``costlib report``."""
    parser.add_argument(
        "--run", required=True,
        help="run directory (OUTPUT/runs/<run_id>) or recalibrate output directory (LATEST)",
    )
    parser.add_argument("--out", default=None,
                        help="HTML file to write (default: report.html in the run directory)")
    parser.add_argument("--groups", default="",
                        help="comma-separated groups that get a section with figures in any "
                             "case (large reports show only the groups that need a look)")
    parser.add_argument("--all-groups", action="store_true",
                        help="a section with figures for every group, however many")


def run(args: argparse.Namespace) -> int:
    """Write the report and print where; returns 0.

    A missing path or an incomplete run raises ``InputError``
    (``costlib_pipelines.cli.main`` prints it
    in one line and returns 2).
    """
    from costlib_pipelines.report import write_report

    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    path = write_report(args.run, args.out, groups=groups, all_details=args.all_groups)
    print(f"wrote {path}")
    return 0
