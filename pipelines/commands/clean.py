"""``costlib clean --output OUT [--older-than AGE] [--dry-run]``: remove incomplete runs.

A failed or interrupted run leaves ``OUT/runs/<id>/`` without a manifest; ``costlib status``
lists it as ``incomplete run``. This command removes those that are certainly dead: costlib
made them (its marker is inside), nothing in them was written for ``--older-than`` (default
24 h), ``LATEST`` does not name them and no run holds the output's lock under their id
(:mod:`costlib_pipelines.io.cleaning`). Complete runs, published or held, are never touched.
``--dry-run`` lists what would go. Exit 0 done; 2 not an output directory or a bad age.
"""

from __future__ import annotations

import argparse
import re

#: Beam flags (e.g. ``--impersonate_service_account``) set the filesystem's credentials.
PASSES_BEAM_ARGS = True

#: ``--older-than`` when not given: a day (a run still writing keeps its files younger).
DEFAULT_AGE = "24h"


_AGE = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|min|h|d)", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400}


def parse_age(text: str) -> float:
    """Seconds in an age such as ``90s``, ``30m``, ``1h``, ``1.5h`` or ``2d``.

    Raises
    ------
    argparse.ArgumentTypeError
        Anything else (the message gives the accepted forms).
    """
    found = _AGE.fullmatch(text.strip())
    if not found:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: write a number and a unit, e.g. 90s, 30m, 1h, 2d")
    return float(found.group(1)) * _UNIT_SECONDS[found.group(2).lower()]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``costlib clean``."""
    parser.add_argument("--output", required=True,
                        help="the output directory (as given to recalibrate or decide)")
    parser.add_argument("--older-than", type=parse_age, default=parse_age(DEFAULT_AGE),
                        metavar="AGE",
                        help="remove only runs with nothing written for AGE: 90s, 30m, 1h, 2d "
                             f"(default {DEFAULT_AGE})")
    parser.add_argument("--dry-run", action="store_true",
                        help="list what would be removed, remove nothing")


def run(args: argparse.Namespace) -> int:
    """Remove (or list) the incomplete runs that may go; print one line per run."""
    from costlib.message_text import human_age
    from costlib_pipelines.io.cleaning import clean_runs

    plan = clean_runs(args.output, older_than=args.older_than, dry_run=args.dry_run)
    for run_id, idle in plan.removed:
        print(f"{'would remove' if plan.dry_run else 'removed'} {plan.output}/runs/{run_id} "
              f"(incomplete, last written {human_age(idle)} ago)")
    for run_id, reason in plan.kept:
        print(f"kept {plan.output}/runs/{run_id}: {reason}")
    print(f"{plan.output}: {len(plan.removed)} incomplete run(s) "
          f"{'would be removed (dry run)' if plan.dry_run else 'removed'}, {len(plan.kept)} "
          "kept; complete runs are never removed")
    return 0
