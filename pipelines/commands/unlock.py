"""``costlib unlock --output OUT --run-id ID``: remove the lock a dead run left behind.

A run holds ``OUTPUT/.costlib-lock`` while it works (:mod:`costlib_pipelines.io.lock`). If its
process died without releasing it (its machine was lost; on a local path a lock of a dead
process of the same host is taken over by itself), the next run into ``OUT`` is refused until
the lock goes. This command removes it only when it names run ``ID`` — the run you checked is
gone (``costlib status`` shows the holder) — and never while that run's process still runs on
this host. Exit 0 removed or not locked; 2 held by another run or a live process.
"""

from __future__ import annotations

import argparse

#: Beam flags (e.g. ``--impersonate_service_account``) set the filesystem's credentials.
PASSES_BEAM_ARGS = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``costlib unlock``."""
    parser.add_argument("--output", required=True, help="the output directory")
    parser.add_argument("--run-id", required=True,
                        help="the run that holds the lock (as costlib status shows it)")


def run(args: argparse.Namespace) -> int:
    """Remove the lock of run ``--run-id``; ``OutputLocked`` (exit 2) for any other holder."""
    from costlib_pipelines.io.lock import break_lock
    from costlib_pipelines.io.runs import check_run_id

    holder = break_lock(args.output, check_run_id(args.run_id))
    if holder is None:
        print(f"{args.output}: not locked")
    else:
        print(f"{args.output}: removed the lock of run {holder.get('run_id')} "
              f"({holder.get('command')}, pid {holder.get('pid')} on {holder.get('host')}, "
              f"since {holder.get('started_utc')})")
    return 0
