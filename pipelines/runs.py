"""Per-run output directories shared by the pipelines (recalibrate, decide).

Layout::

    OUTPUT/
      LATEST              run id of the newest *complete* run (replaced after the manifest)
      runs/<run_id>/      everything one run wrote; manifest.json is written LAST

A run directory without ``manifest.json`` is incomplete (interrupted or failed); readers refuse
it. Re-running with the same run id replaces the run directory whole, so no stale shard of an
earlier attempt is ever mixed into a new one.

Both pipelines use :class:`RunDirectory`; :func:`check_accounting` verifies their row accounting
and :func:`load_operating_points` is the one reader of a recalibration's results.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pyarrow.parquet as pq
from apache_beam.io.filesystems import FileSystems

from pipelines.batches import REASONS
from pipelines.files import InputError, write_bytes_atomically, write_json

__all__ = [
    "RunDirectory",
    "check_accounting",
    "latest_run_id",
    "load_operating_points",
    "read_manifest",
    "read_records",
]


class RunDirectory:
    """Paths and bookkeeping of one run under ``output``.

    Parameters
    ----------
    output : str
        The output directory (local path or any Beam filesystem URL).
    config_digest : str
        Digest of the run config; its first 8 characters end generated run ids.
    run_id : str, optional
        Explicit run id; by default ``<UTC timestamp>-<digest[:8]>``.
    """

    def __init__(self, output: str, config_digest: str, run_id: str | None = None):
        self.output = output.rstrip("/")
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        self.run_id = run_id or f"{stamp}-{config_digest[:8]}"
        self.run_dir = f"{self.output}/runs/{self.run_id}"

    def path(self, *parts: str) -> str:
        """A path inside the run directory."""
        return "/".join([self.run_dir, *parts])

    def prepare(self) -> None:
        """Start from an empty run directory (a re-run with the same id replaces it whole)."""
        if FileSystems.exists(self.run_dir):
            FileSystems.delete([self.run_dir])

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
        )

    def commit(self, manifest: dict[str, Any]) -> None:
        """Write ``manifest.json`` (marks the run complete), then point ``LATEST`` at it."""
        write_json(self.path("manifest.json"), manifest)
        write_bytes_atomically(f"{self.output}/LATEST", (self.run_id + "\n").encode())


def latest_run_id(output: str) -> str | None:
    """The run id ``OUTPUT/LATEST`` names (it may be missing or broken), or None."""
    output = output.rstrip("/")
    if not FileSystems.exists(f"{output}/LATEST"):
        return None
    with FileSystems.open(f"{output}/LATEST") as fh:
        return fh.read().decode().strip() or None


def read_manifest(run_dir: str) -> dict[str, Any]:
    """The manifest of a complete run; ``InputError`` when the run has none (incomplete)."""
    path = f"{run_dir}/manifest.json"
    if not FileSystems.exists(path):
        raise InputError(
            f"{run_dir}: no manifest.json: the run is incomplete or not a run directory"
        )
    with FileSystems.open(path) as fh:
        return json.loads(fh.read().decode())


def check_accounting(accounting: dict[str, int]) -> dict[str, Any]:
    """read == used + unrated + dead-lettered (or decided + dead-lettered), with the breakdown.

    Raises ``RuntimeError`` when the counts do not add up or name an unknown reason: a row
    would have been lost or counted twice.
    """
    dead = {k.split(".", 1)[1]: v for k, v in accounting.items() if k.startswith("dead_letter.")}
    unknown = set(dead) - set(REASONS)
    accounted = accounting.get("used", 0) + accounting.get("unrated", 0)
    accounted += accounting.get("decided", 0) + sum(dead.values())
    summary = {
        "read": accounting.get("read", 0),
        "dead_lettered": sum(dead.values()),
        "dead_letter_reasons": dead,
        **{k: v for k, v in accounting.items() if k in ("used", "unrated", "decided")},
    }
    if accounted != summary["read"] or unknown:
        raise RuntimeError(f"row accounting does not add up: {accounting}")
    return summary


def read_records(path: str) -> list[dict[str, Any]]:
    with FileSystems.open(path) as fh:
        return pq.read_table(fh).to_pylist()


def load_operating_points(path: str) -> tuple[list[dict[str, Any]], str]:
    """Operating point records and the resolved source they came from.

    ``path`` is a recalibrate output directory (its ``LATEST`` run), a run directory, or an
    ``operating_points.parquet`` file. Run directories must be complete (hold
    ``manifest.json``). A windowed run directory has no top-level ``operating_points.parquet``:
    the records of all its ``windows/*/operating_points.parquet`` are read.

    Raises
    ------
    InputError
        The path does not exist, the run is incomplete, or ``LATEST`` names a missing run.
    """
    path = path.rstrip("/")
    if path.endswith(".parquet"):
        if not FileSystems.exists(path):
            raise InputError(f"{path}: operating points file not found")
        return read_records(path), path
    if not FileSystems.exists(path):
        raise InputError(f"{path}: operating points not found (expected a recalibrate output "
                         f"directory, a run directory or an operating_points.parquet file)")
    run_dir = path
    latest = latest_run_id(path)
    if latest is not None:
        run_dir = f"{path}/runs/{latest}"
        if not FileSystems.exists(run_dir):
            raise InputError(f"{path}/LATEST names run directory {run_dir}, which does not exist")
    manifest = read_manifest(run_dir)
    if run_dir != path and manifest.get("published") is False:  # LATEST must name a published run
        raise InputError(f"{path}/LATEST names {run_dir}, which is held for review "
                         "(not published)")
    if FileSystems.exists(f"{run_dir}/operating_points.parquet"):
        return read_records(f"{run_dir}/operating_points.parquet"), run_dir
    windows = sorted(
        m.path
        for result in FileSystems.match([f"{run_dir}/windows/*/operating_points.parquet"])
        for m in result.metadata_list
    )
    if not windows:
        raise InputError(f"{run_dir}: complete run without operating_points.parquet "
                         f"(neither at the top level nor under windows/)")
    records = []
    for window in windows:
        records += read_records(window)
    return records, run_dir
