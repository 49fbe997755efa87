"""The thresholds in force during a recalibration, and what recalibration does with them.

With selective labels the rows that reach a recalibration were rated *because* the thresholds in
force flagged them (plus any audit sample). Two consequences, both switched by the config's
``in_force`` section and both on by default:

- **On the lattice** (``add_to_edges``). The rated region begins exactly at the thresholds in
  force. If those are not candidate thresholds (grid edges), the covered point nearest to "keep
  what is applied" is the next edge above, which flags fewer rows: a loop started from
  thresholds off the lattice loses utility on its first run and can never get it back without
  audit data. Every finite threshold in force is therefore added to its classifier's edges
  (:func:`costlib.thresholds.with_thresholds`), at most ``max_added_edges`` per classifier.
- **Kept, not switched off** (``keep_when_insufficient``). A group whose grid holds fewer rated
  rows than ``min_rated`` and has no usable fallback used to get no thresholds (null decisions:
  nothing flagged, so nothing rated, so never enough rated rows again). It now keeps its
  thresholds in force, evaluated on its grid (status ``kept``; see
  :func:`costlib.thresholds.apply_fallback`).

The thresholds in force are read as ``costlib decide`` reads them (:func:`select_operating_points`:
decision method, fallback to ``"__all__"`` for groups without a record), from ``--in-force PATH``
if given, else from the output's published run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from costlib.thresholds.binning import with_thresholds
from costlib_pipelines.config import ConfigError, RunConfig
from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.published_points import select_operating_points
from costlib_pipelines.io.runs import load_operating_points, points_publication
from costlib_pipelines.recalibrate.publish import Baseline

__all__ = ["InForce", "edges_with_in_force", "read_in_force"]


@dataclass(frozen=True)
class InForce:
    """Thresholds in force per group, in the config's classifier order (small; pickled).

    ``by_group`` holds the groups with usable thresholds (``"__all__"`` included when it has
    them); other groups are decided with ``default`` (the ``"__all__"`` thresholds, or none).
    """

    by_group: dict[str, tuple[float, ...]]
    default: tuple[float, ...] | None
    source: str
    run_ids: list[str] = field(default_factory=list)

    def get(self, group: str) -> tuple[float, ...] | None:
        """The thresholds ``group`` is decided with now (None: none, a null decision)."""
        return self.by_group.get(group, self.default)

    def all_thresholds(self) -> NDArray[np.float64]:
        """Every distinct threshold tuple in force, shape (m, k)."""
        rows = {*self.by_group.values(), *([self.default] if self.default else [])}
        return np.asarray(sorted(rows), dtype=np.float64).reshape(len(rows), -1)

    def summary(self) -> dict[str, Any]:
        """For the manifest."""
        return {"source": self.source, "run_ids": self.run_ids,
                "groups": len(self.by_group), "default": self.default}


def read_in_force(
    config: RunConfig, source: str | None, baseline: Baseline, output: str
) -> tuple[InForce | None, dict[str, Any]]:
    """The thresholds in force, and the manifest's ``in_force`` entry.

    ``source`` (``--in-force``) wins; else the published run of ``output`` (``baseline``). For
    a ``source`` the entry records whether it is the published run of its output
    (``published``: True, False or None when unknown, and ``published_reason``;
    :func:`costlib_pipelines.io.runs.points_publication`): ``decide --allow-unpublished`` can
    apply another run, and the thresholds in force are what decide applied. A
    first run (nothing published, no ``source``) has none. A ``source`` that cannot be read or
    does not fit the config is an :class:`InputError` (exit 2); a published run that does not
    fit (another decision method or classifiers: the config changed) gives none, and the
    manifest says why.
    """
    entry: dict[str, Any] = {"settings": dict(config.raw["in_force"])}
    if source is not None:
        records, resolved = load_operating_points(source, windows="applied")
        publication = points_publication(resolved)
        entry["published"] = publication["published"]
        entry["published_reason"] = publication["reason"]
    elif baseline.records == [] and baseline.run_id is not None:
        entry["source"] = None
        entry["note"] = (f"none: the published run {baseline.run_id} applied no window and "
                         "carried no points in force")
        return None, entry
    elif baseline.records is not None and baseline.run_id is not None:
        records, resolved = baseline.records, f"{output.rstrip('/')}/runs/{baseline.run_id}"
    else:
        entry["source"] = None
        entry["note"] = ("none known: nothing published in the output and no --in-force"
                         if baseline.problem is None else
                         f"none known: the published run cannot be read ({baseline.problem})")
        return None, entry
    # Windowed records: the latest window of each group, as `decide.window: latest` picks it.
    latest = config.with_overrides({"decide.window": "latest"}, source="in-force selection")
    try:
        chosen = select_operating_points(records, latest, source=resolved)
    except InputError as exc:
        if source is not None:
            raise
        entry["source"] = resolved
        entry["note"] = f"not used: {exc}"
        return None, entry
    by_group = {g: t.thresholds for g, t in chosen.by_group.items() if t.thresholds is not None}
    in_force = InForce(by_group=by_group, default=chosen.default.thresholds, source=resolved,
                       run_ids=list(chosen.details.get("run_ids", [])))
    entry.update(in_force.summary())
    return in_force, entry


def edges_with_in_force(
    edges: list[NDArray[np.float64]], in_force: InForce | None, config: RunConfig
) -> tuple[list[NDArray[np.float64]], dict[str, int]]:
    """Each classifier's edges with its finite thresholds in force added; and how many were
    added per classifier. Unchanged without thresholds in force or with ``add_to_edges`` off.

    Raises
    ------
    ConfigError
        More than ``in_force.max_added_edges`` new edges for a classifier.
    """
    policy = config.policy
    if in_force is None or not policy.add_to_edges:
        return edges, {}
    table = in_force.all_thresholds()
    if table.size == 0:
        return edges, {}
    out, added = [], {}
    for j, name in enumerate(config.classifiers):
        new = with_thresholds(edges[j], table[:, j], name=f"grid edges of {name}")
        added[name] = int(new.size - edges[j].size)
        if added[name] > policy.max_added_edges:
            raise ConfigError(
                f"in_force: {added[name]} thresholds in force of classifier {name!r} from "
                f"{in_force.source} are not grid edges (in_force.max_added_edges = "
                f"{policy.max_added_edges}); raise the limit, or set in_force.add_to_edges "
                "to false"
            )
        out.append(new)
    return out, added
