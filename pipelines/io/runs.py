"""Per-run output directories shared by the pipelines (recalibrate, decide).

Layout::

    OUTPUT/
      LATEST              run id of the newest *complete* run (replaced after the manifest)
      runs/<run_id>/      everything one run wrote; manifest.json is written LAST

A run directory without ``manifest.json`` is incomplete (interrupted or failed); readers refuse
it. Re-running with the same run id replaces the run directory whole, so no stale shard of an
earlier attempt is ever mixed into a new one.

Run ids are names, never paths: :data:`RUN_ID_PATTERN` (a letter or digit, then up to 127
letters, digits, ``.``, ``_`` or ``-``; so no separator, no ``.``/``..``). The only directory
costlib ever deletes is ``OUTPUT/runs/<run_id>/`` of a valid id, and only when it holds the
marker file :data:`MARKER` that costlib writes into every run directory it creates; the run
``LATEST`` names is never replaced. ``LATEST`` itself is read through the same pattern.

Both pipelines use :class:`RunDirectory`; :func:`check_accounting` verifies their row accounting
and :func:`load_operating_points` is the one reader of a recalibration's results
(:func:`points_publication`: whether what it read is its output's published run).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from costlib_pipelines.io.files import (
    InputError,
    check_output_path,
    check_rows_read,
    write_bytes_atomically,
    write_json,
)
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.plausibility import Plausibility, plausibility_violations

__all__ = [
    "CARRIED",
    "MANIFEST_LOCK",
    "MARKER",
    "POINTS_IN_FORCE",
    "RUN_ID_PATTERN",
    "NothingInForce",
    "RunDirectory",
    "applied_windows",
    "check_accounting",
    "check_run_id",
    "latest_run_id",
    "list_runs",
    "load_operating_points",
    "manifest_lock",
    "points_publication",
    "previous_run",
    "read_manifest",
    "read_records",
    "verified_accounting",
]

if TYPE_CHECKING:  # the config module is heavy; status and publish never build one
    from costlib_pipelines.config import RunConfig


#: What a run id must match (whole): a name, never a path.
RUN_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

#: File costlib writes first into every run directory it creates; only such a directory is
#: ever deleted (when a run with the same id replaces it).
MARKER = ".costlib-run"


def check_run_id(run_id: object, *, what: str = "run id") -> str:
    """``run_id`` if it matches :data:`RUN_ID_PATTERN`; else :class:`InputError` saying why."""
    if isinstance(run_id, str) and RUN_ID_PATTERN.fullmatch(run_id):
        return run_id
    raise InputError(
        f"{what} {run_id!r} is not a valid run id: use 1-128 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit (no path separators, no '.' or '..')"
    )


class RunDirectory:
    """Paths and bookkeeping of one run under ``output``.

    Parameters
    ----------
    output : str
        The output directory (local path or any Beam filesystem URL).
    config_digest : str
        Digest of the run config; its first 8 characters end generated run ids.
    run_id : str, optional
        Explicit run id (checked against :data:`RUN_ID_PATTERN`); by default
        ``<UTC timestamp>-<digest[:8]>``.

    Raises
    ------
    InputError
        An invalid run id, or an empty output path.
    """

    def __init__(self, output: str, config_digest: str, run_id: str | None = None):
        self.output = check_output_path(output).rstrip("/")
        if not self.output:
            raise InputError(f"output {output!r}: not a directory path")
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        self.run_id = check_run_id(run_id) if run_id is not None else (
            f"{stamp}-{config_digest[:8]}")
        self.run_dir = f"{self.output}/runs/{self.run_id}"

    def path(self, *parts: str) -> str:
        """A path inside the run directory."""
        return "/".join([self.run_dir, *parts])

    def check_replaceable(self) -> None:
        """Refuse (``InputError``) a run id whose directory this run may not replace.

        That is the run ``LATEST`` names (replacing it would change what readers use before
        the guard checks the new run), and a directory without :data:`MARKER` (costlib did
        not create it).
        """
        if latest_run_id(self.output) == self.run_id:
            raise InputError(
                f"run id {self.run_id!r} is the published run ({self.output}/LATEST names it): "
                "re-running into it would replace the results readers use before the guard "
                "checks them; choose another run id"
            )
        if FileSystems.exists(self.run_dir) and not FileSystems.exists(self.path(MARKER)):
            raise InputError(
                f"{self.run_dir} exists but costlib did not create it (no {MARKER} marker); "
                "refusing to replace it: choose another run id"
            )

    def prepare(self) -> None:
        """Start from an empty run directory (a re-run with the same id replaces it whole).

        Only a directory that passes :meth:`check_replaceable` is deleted; the new one gets
        the :data:`MARKER` first.
        """
        self.check_replaceable()
        if FileSystems.exists(self.run_dir):
            FileSystems.delete([self.run_dir])
        write_json(self.path(MARKER), {
            "run_id": self.run_id,
            "created_utc": dt.datetime.now(dt.UTC).isoformat(),
            "note": "written by costlib; a run directory without it is never deleted",
        })

    def read_json(self, name: str, default: Any = None) -> Any:
        """A JSON file the pipeline wrote into the run directory (``default`` if absent)."""
        path = self.path(name)
        if not FileSystems.exists(path):
            return default
        with FileSystems.open(path) as fh:
            return json.loads(fh.read().decode())

    def outputs(self) -> list[str]:
        """Every file of the run directory, relative to it, sorted."""
        prefix = len(self.run_dir) + 1
        return sorted(
            m.path[prefix:]
            for result in FileSystems.match([f"{self.run_dir}/**"])
            for m in result.metadata_list
            if m.path[prefix:] != MARKER
        )

    def commit(self, manifest: dict[str, Any]) -> None:
        """Write ``manifest.json`` (marks the run complete), then point ``LATEST`` at it."""
        write_json(self.path("manifest.json"), manifest)
        write_bytes_atomically(f"{self.output}/LATEST", (self.run_id + "\n").encode())


#: Lock file of a run directory whose manifest two writers may change (a followed stream's
#: judging worker and ``costlib publish --window``): :func:`manifest_lock`.
MANIFEST_LOCK = ".manifest.lock"


@contextlib.contextmanager
def manifest_lock(run_dir: str) -> Iterator[None]:
    """Hold the run directory's manifest lock (``fcntl.flock`` on :data:`MANIFEST_LOCK`:
    writers on one machine, or on a filesystem that honours flock); a no-op for a run
    directory that is not local (``scheme://``)."""
    if "://" in run_dir:
        yield
        return
    with open(os.path.join(run_dir, MANIFEST_LOCK), "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def latest_run_id(output: str) -> str | None:
    """The run id ``OUTPUT/LATEST`` names (the run itself may be missing), or None.

    Raises
    ------
    InputError
        ``LATEST`` holds something that is not a valid run id (it is never followed as a path).
    """
    output = output.rstrip("/")
    if not FileSystems.exists(f"{output}/LATEST"):
        return None
    with FileSystems.open(f"{output}/LATEST") as fh:
        text = fh.read().decode(errors="replace").strip()
    return check_run_id(text, what=f"{output}/LATEST holds") if text else None


def previous_run(output: str, what: str = "decide run") -> tuple[str | None, str]:
    """The run id ``OUTPUT/LATEST`` names, or None and why not (``what``: how messages name
    the run). Never raises: a missing or unreadable ``LATEST`` is a reason."""
    try:
        run_id = latest_run_id(output)
    except InputError as exc:
        return None, f"no usable previous {what}: {exc}"
    if run_id is None:
        return None, f"no previous {what} in {output} (no LATEST)"
    return run_id, ""


def read_manifest(run_dir: str) -> dict[str, Any]:
    """The manifest of a complete run; ``InputError`` when the run has none (incomplete)."""
    path = f"{run_dir}/manifest.json"
    if not FileSystems.exists(path):
        raise InputError(
            f"{run_dir}: no manifest.json: the run is incomplete or not a run directory"
        )
    with FileSystems.open(path) as fh:
        return json.loads(fh.read().decode())


def list_runs(output: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Complete runs (id -> manifest) and incomplete run directories (ids) under ``runs/``.

    A run directory is one holding costlib's :data:`MARKER` or a ``manifest.json``; it is
    incomplete when its manifest is missing or not JSON (failed, or still running).
    """
    output = output.rstrip("/")
    complete: dict[str, dict[str, Any]] = {}
    incomplete = []
    found = FileSystems.match([f"{output}/runs/*/{MARKER}", f"{output}/runs/*/manifest.json"])
    for run_id in sorted({m.path.rsplit("/", 2)[1] for r in found for m in r.metadata_list}):
        try:
            complete[run_id] = read_manifest(f"{output}/runs/{run_id}")
        except ValueError:  # InputError (no manifest), or a manifest that is not JSON
            incomplete.append(run_id)
    return complete, incomplete


def check_accounting(accounting: dict[str, int]) -> dict[str, Any]:
    """read == used + unrated + dead-lettered (or decided + dead-lettered), with the breakdown.

    Raises ``RuntimeError`` when the counts do not add up or name an unknown reason: a row
    would have been lost or counted twice.
    """
    dead = {k.split(".", 1)[1]: v for k, v in accounting.items() if k.startswith("dead_letter.")}
    from costlib_pipelines.io.batches import REASONS  # Arrow compute: for pipelines only

    unknown = set(dead) - set(REASONS)
    accounted = accounting.get("used", 0) + accounting.get("unrated", 0)
    accounted += accounting.get("decided", 0) + sum(dead.values())
    summary = {
        "read": accounting.get("read", 0),
        "dead_lettered": sum(dead.values()),
        "dead_letter_reasons": dead,
        **{k: v for k, v in accounting.items() if k in ("used", "unrated", "decided")
           or k.startswith(("audit.", "min_risk."))},
    }
    if accounted != summary["read"] or unknown:
        raise RuntimeError(f"row accounting does not add up: {accounting}")
    return summary


def verified_accounting(run: RunDirectory, inputs: list[dict[str, Any]],
                        config: RunConfig) -> tuple[dict[str, int], dict[str, Any]]:
    """The run's ``accounting.json``, checked before a manifest may be written.

    Rows must add up (:func:`check_accounting`), the rows read must equal the rows of the input
    footers, and the implausible share must stay within the config's ``plausibility`` limit.

    Returns
    -------
    (counters, summary)
        The raw counters and :func:`check_accounting`'s summary.

    Raises
    ------
    InputError
        Too many implausible rows (the run is not committed).
    RuntimeError
        The rows do not add up (a bug: a row was lost or counted twice).
    """
    counters = run.read_json("accounting.json", {"read": 0})
    summary = check_accounting(counters)
    check_rows_read(inputs, summary["read"])
    problems = plausibility_violations(counters, Plausibility.from_config(config))
    if problems:
        raise InputError(f"run {run.run_id} not committed: " + "; ".join(problems))
    return counters, summary


def read_records(path: str) -> list[dict[str, Any]]:
    with FileSystems.open(path) as fh:
        return pq.ParquetFile(fh).read().to_pylist()


#: Columns every reader of operating points relies on (``schemas/operating_point.json``).
OPERATING_POINT_COLUMNS = ("run_id", "group", "method", "rule", "classifiers", "thresholds",
                           "status", "fallback_group", "window_start", "window_end",
                           "pane_index")


def read_operating_points(path: str) -> list[dict[str, Any]]:
    """Records of one ``operating_points.parquet``; ``InputError`` if it is not one."""
    try:
        with FileSystems.open(path) as fh:
            table = pq.ParquetFile(fh).read()  # no pyarrow.dataset (it imports pandas)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise InputError(f"{path}: not a readable operating points file ({exc})") from exc
    missing = [c for c in OPERATING_POINT_COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(f"{path}: not an operating points file (no column {missing[0]!r}; "
                         "expected the schema of schemas/operating_point.json)")
    return table.to_pylist()


class NothingInForce(InputError):
    """A complete, published windowed run that applies nothing: the guard applied none of its
    windows and no points were in force before it. ``costlib decide`` has nothing to apply
    from it; for the next recalibration it means no points are in force (as before a first
    run)."""


#: File of a windowed run: the points in force when the run started (what ``costlib decide``
#: applied then, one record per group and method), for groups no applied window covers.
POINTS_IN_FORCE = "points_in_force.parquet"

#: Key :func:`load_operating_points` adds to a record read from :data:`POINTS_IN_FORCE`: the
#: run that produced the record (it is not one of this run's windows).
CARRIED = "carried_from"


def applied_windows(manifest: dict[str, Any], *, chain_only: bool = False) -> set[str] | None:
    """Names (``<start>_<end>``) of the windows ``costlib decide`` may apply from a windowed
    run's manifest: those the window guard applied, and the windows outside its chain
    (``not_eligible``: partial under the run's ``decide.window``) in which it found no
    violation (left out with ``chain_only``: the points in force after the run are the applied
    windows'); None for a run without window guard (a batch run, or a windowed run from before
    it: every window counts)."""
    guard = manifest.get("guard")
    if not isinstance(guard, dict) or not isinstance(guard.get("windows"), list):
        return None
    return {w["window"] for w in guard["windows"] if w.get("state") == "applied"
            or (not chain_only and w.get("state") == "not_eligible"
                and not w.get("violations"))}


def load_operating_points(path: str, *, windows: str = "all"
                          ) -> tuple[list[dict[str, Any]], str]:
    """Operating point records and the resolved source they came from.

    ``path`` is a recalibrate output directory (its ``LATEST`` run), a run directory, or an
    ``operating_points.parquet`` file. Run directories must be complete (hold
    ``manifest.json``). A windowed run directory has no top-level ``operating_points.parquet``:
    the records of all its ``windows/*/operating_points.parquet`` are read.

    ``windows`` (of a windowed run with a window guard): ``"all"``; ``"usable"`` (what
    ``costlib decide`` reads): the windows :func:`applied_windows` names (held and withdrawn
    ones are left out); ``"applied"`` (the guard's baseline): only the windows the guard
    applied. With either, the run's :data:`POINTS_IN_FORCE` are added, each record marked with
    :data:`CARRIED`.

    Raises
    ------
    InputError
        The path does not exist, the run is incomplete, or ``LATEST`` names a missing run.
    """
    path = path.rstrip("/")
    if path.endswith(".parquet"):
        if not FileSystems.exists(path):
            raise InputError(f"{path}: operating points file not found")
        return read_operating_points(path), path
    if not FileSystems.exists(path):
        raise InputError(f"{path}: operating points not found (expected a recalibrate output "
                         f"directory, a run directory or an operating_points.parquet file)")
    run_dir = path
    latest = latest_run_id(path)
    if latest is not None:
        run_dir = f"{path}/runs/{latest}"
        if not FileSystems.exists(run_dir):
            raise InputError(f"{path}/LATEST names run directory {run_dir}, which does not exist")
    elif not FileSystems.exists(f"{path}/manifest.json") and any(list_runs(path)):
        raise InputError(f"nothing is published in {path} yet (no LATEST); costlib status "
                         f"--output {path} shows its runs")
    manifest = read_manifest(run_dir)
    if run_dir != path and manifest.get("published") is False:  # LATEST must name a published run
        raise InputError(f"{path}/LATEST names {run_dir}, which is held for review "
                         "(not published)")
    if FileSystems.exists(f"{run_dir}/operating_points.parquet"):
        return read_operating_points(f"{run_dir}/operating_points.parquet"), run_dir
    if windows not in ("all", "usable", "applied"):
        raise ValueError(f"windows must be 'all', 'usable' or 'applied', not {windows!r}")
    paths = sorted(
        m.path
        for result in FileSystems.match([f"{run_dir}/windows/*/operating_points.parquet"])
        for m in result.metadata_list
    )
    carried_only = windows != "all" and FileSystems.exists(f"{run_dir}/{POINTS_IN_FORCE}")
    if not paths and not carried_only:  # (a followed stream before its first window: carried)
        command = manifest.get("command", "recalibrate")
        if command != "recalibrate":
            raise InputError(f"{run_dir}: this is a {command} output, not a recalibration (no "
                             "operating points); give a recalibrate output's run (or the "
                             "recalibrate output directory)")
        raise InputError(f"{run_dir}: complete run without operating_points.parquet "
                         f"(neither at the top level nor under windows/)")
    applied = (None if windows == "all"
               else applied_windows(manifest, chain_only=windows == "applied"))
    records = []
    for window in paths:
        if applied is None or window.rsplit("/", 2)[1] in applied:
            records += read_operating_points(window)
    if applied is not None and FileSystems.exists(f"{run_dir}/{POINTS_IN_FORCE}"):
        for record in read_operating_points(f"{run_dir}/{POINTS_IN_FORCE}"):
            records.append({**record, CARRIED: record["run_id"]})
    if not records:
        raise NothingInForce(
            f"{run_dir}: the window guard holds every window of the run and no points were in "
            "force before it: nothing to apply; review the held windows (costlib status) and "
            "release one with costlib publish --window")
    return records, run_dir


def _run_dir_of(source: str) -> str | None:
    """The run directory of ``source``: a run directory, or a file of one
    (``operating_points.parquet``, ``points_in_force.parquet``,
    ``windows/<w>/operating_points.parquet``); None for a file outside any run (no manifest and
    no :data:`MARKER` next to it)."""
    if not source.endswith(".parquet"):
        return source
    folder = source.rsplit("/", 1)[0] if "/" in source else "."
    candidates = [folder]
    if folder.rsplit("/", 2)[-2:-1] == ["windows"]:
        candidates.append(folder.rsplit("/", 2)[0])
    for run_dir in candidates:
        if FileSystems.exists(f"{run_dir}/manifest.json") or FileSystems.exists(
                f"{run_dir}/{MARKER}"):
            return run_dir
    return None


def points_publication(source: str) -> dict[str, Any]:
    """Whether the operating points read from ``source`` (as :func:`load_operating_points`
    resolved it) are the published run of their recalibrate output.

    Returns ``{"published", "run_id", "reason"}``: ``published`` True when ``source`` is (a file
    of) the run ``OUTPUT/LATEST`` names, ``OUTPUT`` being the directory above ``runs/``; False
    for any other run (held by the guard, an earlier or later run, an incomplete one, or a run
    directory outside ``OUTPUT/runs/``); None (unknown) for a file outside any run, such as
    hand-made points. ``reason`` says which, in words.
    """
    where = source.rstrip("/")
    if "://" not in where:  # a local path: compare absolute paths
        where = os.path.abspath(where)
    run_dir = _run_dir_of(where)
    if run_dir is None:
        return {"published": None, "run_id": None,
                "reason": f"{source} is a file outside any recalibrate run (no manifest.json "
                          "next to it): whether it was published is unknown"}
    parent, run_id = run_dir.rsplit("/", 1)
    if parent.rsplit("/", 1)[-1] != "runs":
        return {"published": False, "run_id": run_id,
                "reason": f"{run_dir} is not inside a recalibrate output (OUTPUT/runs/<run_id>), "
                          "so no LATEST publishes it"}
    output = parent.rsplit("/", 1)[0]
    try:
        manifest = read_manifest(run_dir)
    except ValueError:  # InputError (no manifest), or a manifest that is not JSON
        return {"published": False, "run_id": run_id,
                "reason": f"run {run_id} is incomplete (no readable manifest.json)"}
    try:
        latest = latest_run_id(output)
    except InputError as exc:
        return {"published": False, "run_id": run_id, "reason": str(exc)}
    if manifest.get("published") is False:
        violations = (manifest.get("guard") or {}).get("violations") or []
        return {"published": False, "run_id": run_id,
                "reason": f"run {run_id} is held for review by the publish guard (not "
                          "published; " + (f"LATEST names {latest}" if latest is not None
                                           else f"{output} has no LATEST")
                          + (f"; {len(violations)} violation(s): {violations[0]}" if violations
                             else "") + ")"}
    if latest != run_id:
        return {"published": False, "run_id": run_id,
                "reason": f"run {run_id} is not the published run of {output} (LATEST names "
                          f"{latest})" if latest else
                          f"run {run_id} is not published: {output} has no LATEST"}
    if where != run_dir:  # a file of the published run: only what decide reads from it
        inside = where[len(run_dir) + 1:]
        window = inside.split("/")[1] if inside.startswith("windows/") else None
        applied = applied_windows(manifest)
        if not inside.endswith("operating_points.parquet") or inside.count("/") not in (0, 2):
            return {"published": False, "run_id": run_id,
                    "reason": f"{inside} of the published run {run_id} is not its "
                              "operating_points.parquet"}
        if window is not None and applied is not None and window not in applied:
            return {"published": False, "run_id": run_id,
                    "reason": f"window {window} of the published run {run_id} is not applied "
                              "by the window guard (held or withdrawn)"}
    return {"published": True, "run_id": run_id,
            "reason": f"run {run_id} is the published run ({output}/LATEST names it)"}
