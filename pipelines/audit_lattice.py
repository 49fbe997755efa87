"""The lattice a decide run measures relative audit strata on (``audit.strata.relative_to: point``).

Relative strata (:mod:`costlib.audit_strata`) band an unflagged row by its depth in lattice steps
below its group's thresholds in force. The lattice is the one the points in force were chosen
on, which decide knows without reading any score:

1. the recalibrate run the operating points come from (``--operating-points`` a run or output
   directory): its manifest's ``grid_edges.edges`` (per classifier, thresholds in force
   included; every recipe records them);
2. else (operating points given as a file, or a run without ``grid_edges``) the config's fixed
   edges (``grid.edges`` uniform or explicit) with every finite threshold decide applies added
   (:func:`costlib.edges.with_thresholds`), i.e. the lattice the next recalibration starts from;
3. else (auto or quantile edges and a file: a first run) none: every unflagged row then has
   depth ``inf`` (stratum 0) and the manifest's ``audit.lattice.reason`` says why.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from costlib.edges import with_thresholds
from costlib_pipelines.config import RunConfig
from costlib_pipelines.files import InputError
from costlib_pipelines.runs import read_manifest

__all__ = ["decide_lattice"]

Lattice = tuple[tuple[float, ...], ...]


def _from_run(config: RunConfig, source: str) -> tuple[Lattice | None, str]:
    try:
        manifest = read_manifest(source)
    except (InputError, ValueError) as exc:
        return None, f"operating points source {source} has no readable manifest: {exc}"
    entry = manifest.get("grid_edges") or {}
    edges = entry.get("edges")
    if not edges:
        return None, f"run {source} recorded no grid_edges.edges"
    if list(entry.get("classifiers") or []) != list(config.classifiers):
        return None, (f"run {source} has other classifiers ({entry.get('classifiers')}, "
                      f"config: {list(config.classifiers)})")
    lattice = tuple(tuple(float(v) for v in e) for e in edges)
    if any(len(e) == 0 or np.any(np.diff(e) <= 0) for e in lattice):
        return None, f"run {source}: grid_edges.edges are not strictly increasing"
    return lattice, f"grid_edges of recalibrate run {source}"


def decide_lattice(config: RunConfig, source: str | None,
                   thresholds: np.ndarray) -> tuple[Lattice | None, dict[str, Any]]:
    """The lattice per classifier (module docstring) and the manifest's ``audit.lattice``.

    Parameters
    ----------
    config : RunConfig
    source : str or None
        Where the operating points were read from (a run directory or a file).
    thresholds : ndarray, shape (m, k)
        Every threshold tuple decide applies (``+inf`` = off; added to fixed edges).
    """
    reasons = []
    if source is not None and not source.endswith(".parquet"):
        lattice, reason = _from_run(config, source)
        if lattice is not None:
            return lattice, {"source": "operating_points_run", "reason": reason,
                             "edges_per_classifier": [len(e) for e in lattice]}
        reasons.append(reason)
    else:
        reasons.append("operating points are a file, not a recalibrate run")
    fixed = config.fixed_edges()
    if fixed is not None:
        table = np.asarray(thresholds, dtype=np.float64).reshape(-1, len(fixed))
        lattice = tuple(tuple(float(v) for v in with_thresholds(fixed[j], table[:, j]))
                        for j in range(len(fixed)))
        return lattice, {"source": "config_edges", "reason": "; ".join(
            [*reasons, f"grid.edges {config.grid['edges']} with the thresholds in force added"]),
            "edges_per_classifier": [len(e) for e in lattice]}
    return None, {"source": None, "reason": "; ".join(
        [*reasons, f"grid.edges {config.grid['edges']} are placed from data: no lattice before "
                   "reading scores, every unflagged row is in stratum 0 on this run"])}
