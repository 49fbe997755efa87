"""The figures of a run's group sections: the lattice their threshold ticks use, the PN curve
each point was chosen on, and the :class:`~costlib_pipelines.report.figures.GroupFigures` of the
run (:func:`group_figures`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.io.files import InputError
from costlib_pipelines.recalibrate.in_force import edges_with_in_force, read_in_force
from costlib_pipelines.recalibrate.publish import Baseline
from costlib_pipelines.report.changes import Key, applied_points
from costlib_pipelines.report.figures import GroupFigures
from costlib_pipelines.report.runs_data import RunData

__all__ = ["curve_index", "curves_of", "group_figures"]


def _lattice_thresholds(manifest: Mapping[str, Any]) -> list[np.ndarray] | None:
    """Threshold value at every lattice index per classifier.

    The manifest's ``grid_edges`` when recorded (every recipe). Older runs: the lattice is the
    config's fixed edges plus, when the run added them (``in_force.edges_added`` of the manifest),
    the thresholds in force, rebuilt from the run they came from as recalibrate built them
    (:func:`costlib_pipelines.recalibrate.in_force.edges_with_in_force`). None when the edges are
    not fixed or cannot be rebuilt (the source run is gone, or it now adds other edges than the
    manifest says).
    """

    recorded = (manifest.get("grid_edges") or {}).get("edges")
    if isinstance(recorded, list) and recorded:  # runs since the manifest records them
        try:
            return [np.append(np.asarray(e, dtype=np.float64), np.inf) for e in recorded]
        except (TypeError, ValueError):
            return None
    try:
        config = RunConfig.from_dict(manifest.get("config", {}), source="manifest")
        edges = config.fixed_edges()
        in_force = manifest.get("in_force") or {}
        added = {k: int(v) for k, v in (in_force.get("edges_added") or {}).items()}
        if edges is not None and any(added.values()):
            thresholds, _ = read_in_force(config, in_force["source"], Baseline(None, None),
                                          "")
            edges, rebuilt = edges_with_in_force(edges, thresholds, config)
            if rebuilt != added:
                return None
    except (ConfigError, InputError, KeyError, TypeError, ValueError):
        return None
    return None if edges is None else [np.append(e, np.inf) for e in edges]


def _lattice_fits(lattice: Sequence[np.ndarray] | None, run: RunData,
                  points: Mapping[Key, Mapping[str, Any]],
                  index: Mapping[tuple[Any, Any, Any], dict[str, Any]]) -> bool:
    """Whether every chosen cell of every curve indexes its record's thresholds in
    ``lattice`` (the check that the figure's threshold ticks are the run's)."""
    if lattice is None:
        return False
    k = len(lattice)
    for point in points.values():
        curve = index.get((point["group"], point["method"], point["window_start"]))
        if curve is None or point["thresholds"] is None or not curve["path"]:
            continue
        cell = np.asarray(curve["path"], dtype=int).reshape(-1, k)[curve["chosen_position"]]
        if any(c >= len(axis) or axis[c] != t
               for c, axis, t in zip(cell, lattice, point["thresholds"], strict=True)):
            return False
    return True



def curve_index(run: RunData) -> dict[tuple[Any, Any, Any], dict[str, Any]]:
    """The run's PN curve records by (group, method, window start) (first one wins)."""
    index: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
    for curve in run.curves:
        index.setdefault((curve["group"], curve["method"], curve["window_start"]), curve)
    return index


def curves_of(run: RunData, point: Mapping[str, Any],
               index: Mapping[tuple[Any, Any, Any], dict[str, Any]] | None = None
               ) -> dict[str, Any] | None:
    """The PN curve record a point was chosen on (same group, method and window)."""
    index = curve_index(run) if index is None else index
    return index.get((point["group"], point["method"], point["window_start"]))


def group_figures(run: RunData, methods: Sequence[str],
                  points: Mapping[Key, Mapping[str, Any]] | None = None,
                  index: Mapping[tuple[Any, Any, Any], dict[str, Any]] | None = None,
                  ) -> GroupFigures:
    """The figures of the run's group sections: the methods' curve kinds, the lattice (fixed
    edges, when every chosen cell indexes its thresholds in it) and the largest lattice index
    of any curve (quantile edges, or a lattice that does not fit). ``points`` and ``index``:
    the run's :func:`applied_points` and :func:`curve_index` when the caller has them."""
    kinds: dict[str, str] = {}
    for curve in run.curves:
        kinds.setdefault(curve["method"], curve["curve_kind"])
    lattice = _lattice_thresholds(run.manifest)
    if not _lattice_fits(lattice, run, applied_points(run) if points is None else points,
                         curve_index(run) if index is None else index):
        lattice = None
    config = run.manifest.get("config", {})
    decision = config.get("decision_method") or (list(methods) or [None])[0]
    estimated = any(r.get("estimated_recall") is not None for r in run.records)
    return GroupFigures(methods, kinds, run.classifiers, lattice,
                        _path_extent(run.curves, len(run.classifiers)), decision,
                        estimated=estimated)


def _path_extent(curves: Iterable[Mapping[str, Any]], k: int) -> tuple[int, ...] | None:
    """The largest lattice index per classifier over every curve's path (None for none)."""
    extent = np.full(k, -1)
    for curve in curves:
        cells = np.asarray(curve["path"], dtype=int).reshape(-1, k)
        if cells.size:
            extent = np.maximum(extent, cells.max(axis=0))
    return None if (extent < 0).any() else tuple(int(e) for e in extent)

