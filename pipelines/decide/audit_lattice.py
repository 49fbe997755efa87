"""The lattice a decide run measures relative audit strata on (``audit.strata.relative_to: point``).

Relative strata (:mod:`costlib.audit._strata`) band an unflagged row by its depth in lattice steps
below its group's thresholds in force. The lattice is the one the points in force were chosen
on, which decide knows without reading any score:

1. the recalibrate run the operating points come from (``--operating-points`` a run or output
   directory): its manifest's ``grid_edges.edges`` (per classifier, thresholds in force
   included; every recipe records them);
2. else (operating points given as a file, or a run without ``grid_edges``) the config's fixed
   edges (``grid.edges`` uniform or explicit) with every finite threshold decide applies added
   (:func:`costlib.thresholds.with_thresholds`), i.e. the lattice the next recalibration
   starts from;
3. else (auto or quantile edges and a file: a first run) none: every unflagged row then has
   depth ``inf`` (stratum 0) and the manifest's ``audit.lattice.reason`` says why.

With ``audit.strata.shares`` the depth cutoffs per group come from the previous decide run's
rows per group and lattice cell (:func:`relative_cutoffs`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np

from costlib.audit import (
    depth_counts_from_cells,
    proposal_recount,
    share_cutoffs,
    stratum_counts,
)
from costlib.thresholds.binning import with_thresholds
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.runs import previous_run, read_manifest

__all__ = ["CELLS_FILE", "decide_lattice", "relative_cutoffs"]

#: Run file of the rows per group and lattice cell a decide run with relative strata counts.
CELLS_FILE = "audit_cells.json"

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
            [*reasons, f"grid.edges {config.grid.edges} with the thresholds in force added"]),
            "edges_per_classifier": [len(e) for e in lattice]}
    return None, {"source": None, "reason": "; ".join(
        [*reasons, f"grid.edges {config.grid.edges} are placed from data: no lattice before "
                   "reading scores, every unflagged row is in stratum 0 on this run"])}


def _previous_cells(output: str) -> tuple[dict[str, Any] | None, str | None, str]:
    """The ``audit_cells.json`` of the decide run ``OUTPUT/LATEST`` names, its run id and why
    not when there is none."""
    run_id, why = previous_run(output)
    if run_id is None:
        return None, None, why
    path = f"{output.rstrip('/')}/runs/{run_id}/{CELLS_FILE}"
    if not FileSystems.exists(path):
        return None, run_id, f"previous decide run {run_id} counted no lattice cells"
    with FileSystems.open(path) as handle:
        return json.loads(handle.read().decode("utf-8")), run_id, ""


def relative_cutoffs(config: RunConfig, output: str | None, lattice: Lattice | None,
                     in_force: Callable[[str], np.ndarray],
                     proposed: Callable[[str], np.ndarray | None] | None = None,
                     ) -> tuple[dict[str, tuple[float, ...]], tuple[float, ...], dict[str, Any]]:
    """Depth cutoffs of relative strata: per group, the default for other groups, and the
    manifest's record of where they came from.

    ``audit.strata.steps``: the steps, for every group. ``audit.strata.shares``: per group,
    :func:`costlib.audit.share_cutoffs` of the rows per depth that the previous decide
    run (``OUTPUT/LATEST``) counted per lattice cell (its ``audit_cells.json``), re-based to
    this run's thresholds ``in_force(group)`` and ``lattice``
    (:func:`costlib.audit._strata.depth_counts_from_cells`), so a move of the point between
    runs does not shift the strata. Groups it did not count take the cutoffs of all groups'
    depths summed; without a usable previous run (or lattice) every cutoff is ``inf`` (all
    unflagged rows in the nearest stratum: a uniform audit). The record's ``unflagged`` holds
    those rows per stratum (:func:`costlib.audit.stratum_counts`): the counts an auto
    design is sized on. With ``audit.strata.proposal_stratum`` and a group's proposed point
    (``proposed(group)``, None: none), the previous rows that point flags are counted in at
    least that stratum, as this run will audit them (:func:`costlib.audit._strata.
    proposal_recount`); the record's
    ``proposed`` holds how many (the cutoffs themselves stay on every row's depth).
    """
    strata = config.audit.strata
    shares = strata.get("shares") or []
    if not shares:
        steps = tuple(float(v) for v in strata.get("steps") or [])
        return {}, steps, {"from": "audit.strata.steps"}
    uniform = tuple(np.inf for _ in shares)
    if output is None or lattice is None:
        why = "no output to read previous counts from" if output is None else "no lattice"
        return {}, uniform, {"from": None, "reason": f"{why}: a uniform audit (one stratum)"}
    previous, run_id, why = _previous_cells(output)
    if previous is None:
        return {}, uniform, {"from": None, "reason": f"{why}: a uniform audit (one stratum)"}
    then = [np.asarray(e, dtype=np.float64) for e in previous["lattice"]]
    if len(then) != len(config.classifiers):
        return {}, uniform, {"from": None, "reason": f"previous decide run {run_id} counted "
                                                     "cells of other classifiers"}
    m = len(shares) + 1
    band = config.proposal_stratum
    by_group: dict[str, tuple[float, ...]] = {}
    depth_counts: dict[str, np.ndarray] = {}
    moved = np.zeros(m)  # promoted rows per stratum minus their rows per own stratum
    promoted = 0.0
    for group, cells in previous["cells"].items():
        index = np.asarray([[int(v) for v in key.split(",")] for key in cells],
                           dtype=np.intp).reshape(-1, len(then))
        counts = np.asarray(list(cells.values()), dtype=np.float64)
        depth_counts[group] = depth_counts_from_cells(index, counts, then, in_force(group),
                                                      lattice, config.rule)
        by_group[group] = tuple(float(v) for v in share_cutoffs(depth_counts[group], shares))
        point = None if band is None or proposed is None else proposed(group)
        if point is None:
            continue
        change, rows = proposal_recount(index, counts, then, in_force(group), lattice, point,
                                        by_group[group], m, band, config.rule)
        moved += change
        promoted += rows
    pooled = np.zeros(max((c.size for c in depth_counts.values()), default=1))
    for c in depth_counts.values():
        pooled[: c.size - 1] += c[:-1]
        pooled[-1] += c[-1]
    default = tuple(float(v) for v in share_cutoffs(pooled, shares)) if depth_counts \
        else uniform
    recut = sum((stratum_counts(c, by_group[g], m) for g, c in depth_counts.items()),
                np.zeros(m)) + moved
    extra = {} if band is None else {"proposed": int(promoted)}
    return by_group, default, {"from": run_id, "shares": list(shares),
                               "unflagged": [float(v) for v in recut], **extra,
                               "reason": f"shares of decide run {run_id}'s rows per group and "
                                         "lattice cell, below this run's thresholds"}
