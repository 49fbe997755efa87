"""Per-run output directories shared by the pipelines (recalibrate, decide).

Layout::

    OUTPUT/
      LATEST              run id of the newest *complete* run (replaced after the manifest)
      runs/<run_id>/      everything one run wrote; manifest.json is written LAST

A run directory without ``manifest.json`` is incomplete (interrupted or failed); readers refuse
it. Re-running with the same run id replaces the run directory whole, so no stale shard of an
earlier attempt is ever mixed into a new one.

This module holds the generic bookkeeping only; :mod:`pipelines.recalibrate` has an equivalent
``RecalibrateRun`` that is meant to switch to :class:`RunDirectory`.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from apache_beam.io.filesystems import FileSystems

from pipelines.files import write_bytes_atomically, write_json

__all__ = ["RunDirectory"]


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
