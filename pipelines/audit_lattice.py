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

With ``audit.strata.shares`` the depth cutoffs per group come from the previous decide run's
counts of unflagged rows per group and depth (:func:`relative_cutoffs`).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from apache_beam.io.filesystems import FileSystems

from costlib.audit_strata import share_cutoffs, stratum_counts
from costlib.edges import with_thresholds
from costlib_pipelines.config import RunConfig
from costlib_pipelines.files import InputError
from costlib_pipelines.runs import latest_run_id, read_manifest

__all__ = ["DEPTHS_FILE", "decide_lattice", "relative_cutoffs"]

#: Run file of the unflagged rows per group and depth a decide run with relative strata counts.
DEPTHS_FILE = "audit_depths.json"

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


def _depth_counts(by_depth: dict[str, int]) -> np.ndarray:
    """``{"1": c1, ..., "inf": c}`` as the array of :func:`costlib.audit_strata.share_cutoffs`."""
    finite = {int(k): int(v) for k, v in by_depth.items() if k != "inf"}
    top = max(finite, default=1)
    counts = np.zeros(top + 1, dtype=np.float64)
    for depth, count in finite.items():
        counts[depth - 1] += count
    counts[top] = float(by_depth.get("inf", 0))
    return counts


def relative_cutoffs(config: RunConfig, output: str | None
                     ) -> tuple[dict[str, tuple[float, ...]], tuple[float, ...], dict[str, Any]]:
    """Depth cutoffs of relative strata: per group, the default for other groups, and the
    manifest's record of where they came from.

    ``audit.strata.steps``: the steps, for every group. ``audit.strata.shares``: per group,
    :func:`costlib.audit_strata.share_cutoffs` of the unflagged rows per depth that the decide
    run ``OUTPUT/LATEST`` names counted (its ``audit_depths.json``); groups it did not count
    take the cutoffs of all groups' counts summed; without a usable previous run every cutoff
    is ``inf`` (all unflagged rows in the nearest stratum: a uniform audit). With shares the
    record's ``unflagged`` holds the previous run's rows per stratum re-cut by these cutoffs
    (:func:`costlib.audit_strata.stratum_counts`): the counts an auto design is sized on.
    """
    strata = config.audit["strata"]
    shares = strata.get("shares") or []
    if not shares:
        steps = tuple(float(v) for v in strata.get("steps") or [])
        return {}, steps, {"from": "audit.strata.steps"}
    uniform = tuple(np.inf for _ in shares)
    if output is None:
        return {}, uniform, {"from": None, "reason": "no output to read previous counts from"}
    try:
        run_id = latest_run_id(output)
    except InputError as exc:
        return {}, uniform, {"from": None, "reason": f"no usable previous decide run: {exc}"}
    if run_id is None:
        return {}, uniform, {"from": None, "reason": f"no previous decide run in {output}: "
                                                     "a uniform audit (one stratum)"}
    path = f"{output.rstrip('/')}/runs/{run_id}/{DEPTHS_FILE}"
    if not FileSystems.exists(path):
        return {}, uniform, {"from": None, "reason": f"previous decide run {run_id} counted "
                                                     "no depths (no relative strata): a "
                                                     "uniform audit (one stratum)"}
    with FileSystems.open(path) as handle:
        depths = json.loads(handle.read().decode("utf-8"))
    by_group = {g: tuple(float(v) for v in share_cutoffs(_depth_counts(c), shares))
                for g, c in depths.items()}
    pooled: dict[str, int] = {}
    for counts in depths.values():
        for key, value in counts.items():
            pooled[key] = pooled.get(key, 0) + int(value)
    default = tuple(float(v) for v in share_cutoffs(_depth_counts(pooled), shares)) \
        if pooled else uniform
    m = len(shares) + 1
    recut = sum((stratum_counts(_depth_counts(c), by_group[g], m) for g, c in depths.items()),
                np.zeros(m))
    return by_group, default, {"from": run_id, "shares": list(shares),
                               "unflagged": [int(v) for v in recut],
                               "reason": f"shares of decide run {run_id}'s unflagged rows "
                                         "per group and depth"}
