"""Removing incomplete runs: what ``costlib clean`` may delete, and nothing else.

A run directory without a manifest is a run that failed or was interrupted (or is still
running); ``costlib status`` lists it, readers refuse it, and a re-run with the same id
replaces it. :func:`clean_runs` removes the ones that are certainly dead. A run directory
``OUTPUT/runs/<id>/`` is removed only when all of these hold:

- ``<id>`` is a valid run id (:data:`~costlib_pipelines.io.runs.RUN_ID_PATTERN`) and the
  directory is not a symbolic link (local outputs);
- it holds costlib's marker (:data:`~costlib_pipelines.io.runs.MARKER`): costlib created it;
- it has no readable ``manifest.json`` (incomplete), and ``LATEST`` does not name it;
- nothing in it was written for ``older_than`` seconds (the newest file's modification time:
  a run still writing, e.g. a remote job whose submitter died, keeps its files fresh);
- no run holds the output's lock under that id.

While it deletes, ``clean`` holds the output's lock itself (:mod:`costlib_pipelines.io.lock`), so
no run can start and replace a directory it is deleting; if a run holds the lock, that run's
directory is kept and the others are still cleaned.
"""

from __future__ import annotations

import os
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

from costlib.message_text import human_age
from costlib_pipelines.io.files import InputError, check_output_path
from costlib_pipelines.io.filesystems import FileSystems, is_local
from costlib_pipelines.io.lock import OutputLocked, hold_output, read_lock
from costlib_pipelines.io.runs import MARKER, RUN_ID_PATTERN, latest_run_id, list_runs

__all__ = ["CleanPlan", "check_clean_output", "clean_runs"]

def check_clean_output(output: str) -> str:
    """``output`` (without a trailing ``/``) if it may be cleaned; else :class:`InputError`.

    Checked before any filesystem call: a plain path (no control characters), and no glob
    characters (``*?[``), which would make the listing of ``OUTPUT/runs/*`` reach other
    directories. Then: it exists, and it is an output directory (it has ``runs/``).
    """
    check_output_path(output, what="--output")
    if any(c in output for c in "*?["):
        raise InputError(f"--output {output!r}: contains a glob character (*, ? or [); give "
                         "the one output directory to clean")
    output = output.rstrip("/") or "/"
    if not FileSystems.exists(output):
        raise InputError(f"--output {output}: no such output directory")
    if is_local(output) and not os.path.isdir(output):
        raise InputError(f"--output {output}: not a directory")
    if not FileSystems.exists(f"{output}/runs"):
        raise InputError(f"--output {output}: not a costlib output directory (no runs/); give "
                         "the directory passed to recalibrate or decide as --output")
    return output


@dataclass
class CleanPlan:
    """What :func:`clean_runs` removed (or, dry, would remove) and what it kept, with why."""

    output: str
    removed: list[tuple[str, float]] = field(default_factory=list)  # (run id, idle seconds)
    kept: list[tuple[str, str]] = field(default_factory=list)  # (run id, reason)
    dry_run: bool = True
    locked_by: str | None = None


def _idle_seconds(run_dir: str, now: float) -> float:
    """Seconds since the newest file of ``run_dir`` was written."""
    newest = max((m.last_updated_in_seconds for r in FileSystems.match([f"{run_dir}/**"])
                  for m in r.metadata_list), default=0.0)
    return now - newest


def clean_runs(output: str, *, older_than: float, dry_run: bool,
               now: float | None = None) -> CleanPlan:
    """Remove (``dry_run``: list) the incomplete runs of ``output`` that may go (see the
    module docstring); ``older_than`` in seconds.

    Raises
    ------
    InputError
        ``output`` is not a costlib output directory (:func:`check_clean_output`).
    """
    output = check_clean_output(output)
    plan = CleanPlan(output=output, dry_run=dry_run)
    with ExitStack() as stack:
        holder = None
        try:
            if not dry_run:
                stack.enter_context(hold_output(output, run_id="clean", command="clean"))
            else:
                holder = read_lock(output)
        except OutputLocked:
            holder = read_lock(output)
            if holder is None:  # not locked: the output is not writable
                raise
        if holder is not None:
            plan.locked_by = str(holder.get("run_id") or "an unnamed run")
        now = time.time() if now is None else now
        _, incomplete = list_runs(output)
        try:
            latest = latest_run_id(output)
        except InputError:
            latest = None
        for run_id in incomplete:
            run_dir = f"{output}/runs/{run_id}"
            if not RUN_ID_PATTERN.fullmatch(run_id):
                plan.kept.append((run_id, "not a valid run id"))
            elif is_local(run_dir) and os.path.islink(run_dir):
                plan.kept.append((run_id, "a symbolic link"))
            elif not FileSystems.exists(f"{run_dir}/{MARKER}"):
                plan.kept.append((run_id, f"no {MARKER} marker: costlib did not create it"))
            elif run_id == latest:
                plan.kept.append((run_id, "LATEST names it"))
            elif run_id == plan.locked_by:
                plan.kept.append((run_id, "it holds the output lock (still running?)"))
            else:
                idle = _idle_seconds(run_dir, now)
                if idle < older_than:
                    plan.kept.append((run_id, f"last written {human_age(idle)} ago, less than "
                                              f"{human_age(older_than)}"))
                    continue
                if not dry_run:
                    FileSystems.delete([run_dir])
                plan.removed.append((run_id, idle))
    return plan
