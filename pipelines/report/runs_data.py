"""Reading a complete recalibration run for the report: :class:`RunData`, :func:`load_run`,
and the run it is compared with, :func:`previous_run`.

The *previous run* is the newest other complete run (one with ``manifest.json``) of the same
command under the same ``OUTPUT/runs/`` whose ``finished_utc`` is earlier than this run's;
published or not (a run held by the publish guard is complete too).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.runs import load_operating_points, read_manifest, read_records

__all__ = ["RunData", "load_run", "previous_run"]


@dataclass(frozen=True)
class RunData:
    """What the report reads from one complete run directory.

    Attributes
    ----------
    run_dir : str
        The run directory (``OUTPUT/runs/<run_id>``).
    manifest : dict
        Its ``manifest.json``.
    records : list of dict
        Every operating point record (``schemas/operating_point.json``), all windows.
    curves : list of dict
        Every PN curve record of ``pn_curves.parquet`` (all windows).
    """

    run_dir: str
    manifest: dict[str, Any]
    records: list[dict[str, Any]]
    curves: list[dict[str, Any]]

    @property
    def run_id(self) -> str:
        """The run id of the manifest (the directory name if the manifest has none)."""
        return str(self.manifest.get("run_id") or self.run_dir.rsplit("/", 1)[-1])

    @property
    def classifiers(self) -> list[str]:
        """Classifier names in threshold order."""
        if self.records:
            return list(self.records[0]["classifiers"])
        return list(self.manifest.get("config", {}).get("classifiers", []))

    @property
    def windowed(self) -> bool:
        """True when the records are per event-time window."""
        return any(r["window_start"] is not None for r in self.records)


def _match(pattern: str) -> list[str]:
    """Paths matching a glob, sorted."""
    return sorted(m.path for result in FileSystems.match([pattern]) for m in result.metadata_list)


def _read_curves(run_dir: str) -> list[dict[str, Any]]:
    """Every PN curve record of the run (top level, or all windows)."""
    top = f"{run_dir}/pn_curves.parquet"
    paths = [top] if FileSystems.exists(top) else _match(f"{run_dir}/windows/*/pn_curves.parquet")
    curves: list[dict[str, Any]] = []
    for path in paths:
        curves += read_records(path)
    return curves


def load_run(path: str) -> RunData:
    """Read a complete recalibration run.

    Parameters
    ----------
    path : str
        A run directory (``OUTPUT/runs/<run_id>``) or a recalibrate output directory (its
        ``LATEST`` run).

    Returns
    -------
    RunData

    Raises
    ------
    InputError
        The path does not exist, is not a run directory, or the run is incomplete (no
        ``manifest.json``: interrupted or failed).
    """
    path = path.rstrip("/")
    if not FileSystems.exists(path):
        raise InputError(f"{path}: run directory not found")
    records, run_dir = load_operating_points(path)
    manifest = read_manifest(run_dir)
    if manifest.get("command", "recalibrate") != "recalibrate":
        raise InputError(f"{run_dir}: a {manifest['command']!r} run, not a recalibrate run")
    return RunData(run_dir=run_dir, manifest=manifest, records=records,
                   curves=_read_curves(run_dir))


def _finished(manifest: Mapping[str, Any]) -> dt.datetime | None:
    """The manifest's ``finished_utc`` as an aware datetime (None if absent)."""
    value = manifest.get("finished_utc")
    return dt.datetime.fromisoformat(value) if value else None


def previous_run(run: RunData) -> RunData | None:
    """The newest other complete recalibrate run under the same ``runs/`` that finished earlier.

    Returns None when there is none (the first run, or the only complete one).
    """
    finished = _finished(run.manifest)
    parent = run.run_dir.rsplit("/", 1)[0]
    candidates = []
    for manifest_path in _match(f"{parent}/*/manifest.json"):
        run_dir = manifest_path.rsplit("/", 1)[0]
        if run_dir.rstrip("/") == run.run_dir.rstrip("/"):
            continue
        manifest = read_manifest(run_dir)
        other = _finished(manifest)
        if manifest.get("command", "recalibrate") != "recalibrate" or other is None:
            continue
        if finished is None or other < finished:
            candidates.append((other, run_dir))
    if not candidates:
        return None
    return load_run(max(candidates)[1])

