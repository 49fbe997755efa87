"""Publishing operating points: the guard that holds suspicious runs for a human.

A recalibration run is *published* when ``OUTPUT/LATEST`` points at it; readers (``costlib
decide``, schedulers, reports) follow ``LATEST``. Before moving it, the guard compares the new
run's thresholds of the decision method with those of the run ``LATEST`` points at and holds
the run back when

- a group's threshold moved by more than ``max_threshold_change`` (absolute, on any classifier;
  a classifier switched on or off counts as an infinite move), or
- a group's thresholds rest on fewer than ``min_rated`` rated rows (positives + negatives of the
  grid they were chosen on: the group's own, or the parent's under fallback; a group with no
  thresholds, status ``insufficient_data``, rests on none).

A held run is complete (its manifest says ``"published": false`` and lists the violations) but
``LATEST`` does not move. A person can publish it with an override that records who and why, or
roll ``LATEST`` back to any earlier complete run with :func:`publish_run`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipelines.files import write_bytes_atomically, write_json
from pipelines.runs import latest_run_id, load_operating_points, read_manifest

__all__ = [
    "GuardSettings",
    "Override",
    "PublishRefused",
    "guard_violations",
    "latest_records",
    "publish_run",
]

ALL_GROUPS = "__all__"


class PublishRefused(RuntimeError):
    """The guard held the run back; the message lists every violation."""


@dataclass(frozen=True)
class GuardSettings:
    """``max_threshold_change``: None = no limit; ``min_rated``: 0 = no minimum."""

    max_threshold_change: float | None = None
    min_rated: float = 0.0
    method: str = "graph"


@dataclass(frozen=True)
class Override:
    """A person's decision to publish despite the guard (recorded in the manifest)."""

    by: str
    reason: str

    def __post_init__(self) -> None:
        if not self.by.strip() or not self.reason.strip():
            raise ValueError("an override needs both who (--override-by) and why "
                             "(--override-reason)")

    def record(self) -> dict[str, str]:
        return {"by": self.by, "reason": self.reason,
                "at_utc": dt.datetime.now(dt.UTC).isoformat()}


def _threshold_move(old: Sequence[float], new: Sequence[float]) -> float:
    moves = []
    for a, b in zip(old, new, strict=True):
        if math.isinf(a) or math.isinf(b):
            moves.append(0.0 if a == b else math.inf)
        else:
            moves.append(abs(a - b))
    return max(moves)


def _by_group(records: Sequence[dict[str, Any]], method: str) -> dict[str, dict[str, Any]]:
    batch = [r for r in records if r["method"] == method and r["window_start"] is None]
    return {r["group"]: r for r in batch}


def guard_violations(
    previous: Sequence[dict[str, Any]] | None,
    new: Sequence[dict[str, Any]],
    settings: GuardSettings,
) -> list[str]:
    """Reasons to hold ``new`` back (empty: publish). Records are ``operating_point.json``.

    Thresholds are compared classifier by classifier, by name; a changed set of classifiers and
    a group that had thresholds and has no record any more are violations of their own.
    """
    new_by_group = _by_group(new, settings.method)
    old_by_group = _by_group(previous or [], settings.method)
    violations = []
    for group in sorted(new_by_group):
        record = new_by_group[group]
        source = new_by_group.get(record["fallback_group"] or group, record)
        rated = source["rated_positives"] + source["rated_negatives"]
        if record["thresholds"] is None:
            rated = 0.0
        if settings.min_rated > 0 and rated < settings.min_rated:
            violations.append(
                f"group {group!r}: thresholds rest on {rated:g} rated rows "
                f"(status {record['status']}), fewer than min_rated={settings.min_rated:g}"
            )
        old = old_by_group.get(group)
        if settings.max_threshold_change is None or old is None:
            continue
        if sorted(old["classifiers"]) != sorted(record["classifiers"]):
            violations.append(
                f"group {group!r}: the classifiers changed from {old['classifiers']} to "
                f"{record['classifiers']}; thresholds cannot be compared"
            )
            continue
        if old["thresholds"] is None or record["thresholds"] is None:
            continue
        before = dict(zip(old["classifiers"], old["thresholds"], strict=True))
        names = record["classifiers"]
        aligned = [before[c] for c in names]
        move = _threshold_move(aligned, record["thresholds"])
        if move > settings.max_threshold_change:
            pairs = ", ".join(
                f"{c}: {a:g} -> {b:g}" for c, a, b in zip(names, aligned, record["thresholds"],
                                                         strict=True)
            )
            violations.append(
                f"group {group!r}: thresholds moved by {move:g} "
                f"(> max_threshold_change={settings.max_threshold_change:g}; {pairs})"
            )
    if settings.max_threshold_change is not None:
        for group in sorted(set(old_by_group) - set(new_by_group)):
            if old_by_group[group]["thresholds"] is not None:
                violations.append(f"group {group!r}: had thresholds and is missing from the run")
    return violations


def latest_records(output: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Records and run id of the run ``OUTPUT/LATEST`` points at, or ``(None, None)``."""
    run_id = latest_run_id(output)
    if run_id is None:
        return None, None
    records, _ = load_operating_points(f"{output.rstrip('/')}/runs/{run_id}")
    return records, run_id


def publish_run(output: str, run_id: str, *, by: str, reason: str) -> dict[str, Any]:
    """Point ``OUTPUT/LATEST`` at a complete run (rollback, or publishing a held run).

    The run's manifest gets a ``publications`` entry (who, why, when, and which run ``LATEST``
    pointed at before), so every move of ``LATEST`` by a person is on record.
    """
    output = output.rstrip("/")
    run_dir = f"{output}/runs/{run_id}"
    manifest = read_manifest(run_dir)
    override = Override(by=by, reason=reason)
    previous = latest_run_id(output)  # only its name: LATEST may be broken, e.g. to roll back
    entry = {**override.record(), "previous_latest": previous}
    manifest.setdefault("publications", []).append(entry)
    manifest["published"] = True
    write_json(f"{run_dir}/manifest.json", manifest)
    write_bytes_atomically(f"{output}/LATEST", (run_id + "\n").encode())
    return manifest
