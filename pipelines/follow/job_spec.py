"""What a followed stream's job is built with, recorded in its run's manifest
(``follow.spec``) when it starts, so that an upgrade (:mod:`costlib_pipelines.follow.upgrade`)
builds the same job again: the thresholds in force at the start, the guard's settings, and the
job's stateful steps (:func:`stateful_steps`), whose names and inputs Flink maps saved state
by. The grid edges are the manifest's ``grid_edges``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from costlib_pipelines.io.files import write_json
from costlib_pipelines.io.runs import manifest_lock, read_manifest
from costlib_pipelines.recalibrate.in_force import InForce
from costlib_pipelines.recalibrate.publish import GuardSettings

__all__ = ["in_force_of", "job_spec", "record_spec", "stateful_steps"]


def job_spec(in_force: InForce | None, settings: GuardSettings) -> dict[str, Any]:
    """What the streaming job is built with besides the config and the edges (the manifest's
    ``grid_edges``): the thresholds in force at the start and the guard's settings."""
    return {
        "in_force": None if in_force is None else {
            "by_group": {g: [float(v) for v in t] for g, t in in_force.by_group.items()},
            "default": None if in_force.default is None else [float(v) for v in in_force.default],
            "source": in_force.source, "run_ids": list(in_force.run_ids)},
        "settings": {"max_threshold_change": settings.max_threshold_change,
                     "min_rated": settings.min_rated, "method": settings.method},
    }


def in_force_of(entry: Mapping[str, Any] | None) -> InForce | None:
    """The thresholds in force :func:`job_spec` recorded (None: none)."""
    if entry is None:
        return None
    default = entry.get("default")
    return InForce(by_group={g: tuple(t) for g, t in entry["by_group"].items()},
                   default=None if default is None else tuple(default),
                   source=entry["source"], run_ids=list(entry.get("run_ids") or []))


def stateful_steps(pipeline) -> dict[str, dict[str, list[str]]]:
    """Each stateful step of ``pipeline`` (a ParDo with user state or timers): its main
    input's PCollection names and its state names. Flink maps a savepoint's state back to the
    steps these name; two graphs with the same steps restore each other's state."""
    from apache_beam.portability import common_urns
    from apache_beam.portability.api import beam_runner_api_pb2

    proto = pipeline.to_runner_api()
    components = proto.components
    steps: dict[str, dict[str, list[str]]] = {}
    for transform in components.transforms.values():
        if transform.spec.urn != common_urns.primitives.PAR_DO.urn:
            continue
        payload = beam_runner_api_pb2.ParDoPayload.FromString(transform.spec.payload)
        if not payload.state_specs and not payload.timer_family_specs:
            continue
        inputs = [pid for tag, pid in transform.inputs.items() if tag not in payload.side_inputs]
        steps[transform.unique_name] = {
            "inputs": sorted(components.pcollections[p].unique_name for p in inputs),
            "state": sorted([*payload.state_specs, *payload.timer_family_specs])}
    return steps


def record_spec(run_dir: str, **fields: Any) -> None:
    """Add ``fields`` to the manifest's ``follow.spec``."""
    with manifest_lock(run_dir):
        manifest = read_manifest(run_dir)
        manifest["follow"].setdefault("spec", {}).update(fields)
        write_json(f"{run_dir}/manifest.json", manifest)
