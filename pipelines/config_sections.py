"""Typed views of the run config's sections that the stages read most: ``grid``, ``audit``,
``publish``.

Each is a frozen value built once from its validated, defaulted section (the schema states every
key and default; :mod:`costlib_pipelines.config` fills them in), so a stage reads
``config.grid.edges`` rather than a string key, and a key the schema gains touches the schema,
its view here and the one place that uses it. The ``in_force`` section is the library's
:class:`costlib.thresholds.InForcePolicy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self

__all__ = ["AuditSection", "ConfigError", "GridSection", "PublishSection"]


class ConfigError(ValueError):
    """The run configuration is invalid; the message names the key."""


class _Section:
    """A section's view: built from the section's keys (the schema refuses any other)."""

    @classmethod
    def from_section(cls, section: Mapping[str, Any]) -> Self:
        return cls(**{f.name: section[f.name] for f in fields(cls)
                      if f.name in section})


@dataclass(frozen=True)
class GridSection(_Section):
    """``grid``: how the candidate thresholds are placed.

    Attributes
    ----------
    edges : {"auto", "uniform", "quantile", "explicit"}
    auto_edges_from : {"previous_run", "this_run"}
    bins : int or None
        Candidate thresholds per classifier (None: the recipe's default).
    range : list of float
        ``[low, high]`` of the scores (uniform edges; the plausible range).
    values : list of list of float or None
        Explicit edges, one list per classifier.
    quantile_resolution : int
    """

    edges: str = "auto"
    auto_edges_from: str = "previous_run"
    bins: int | None = None
    range: list[float] = field(default_factory=lambda: [0.0, 1.0])
    values: list[list[float]] | None = None
    quantile_resolution: int = 4096


@dataclass(frozen=True)
class AuditSection(_Section):
    """``audit``: the audit sample of the unflagged rows.

    Attributes
    ----------
    enabled : bool
    design : {"auto", "fixed"}
    salt : str or None
        Which rows the sample draws (None: the run id).
    groups_without_point : {"floor", "off"}
    floor, budget_share : float
    strata : mapping
        ``relative_to``, ``shares``/``steps``, ``weights``, ``edges``, ``proposal_stratum``.
    """

    enabled: bool = False
    design: str = "auto"
    salt: str | None = None
    groups_without_point: str = "floor"
    floor: float = 0.001
    budget_share: float = 0.01
    strata: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class PublishSection(_Section):
    """``publish``: the publish guard's limits (thresholds moves and rated rows off unless
    set; the volume change warns above 3x by default).

    Attributes
    ----------
    max_threshold_change : float or None
    min_rated : float
    max_volume_change : float or None
        Largest ratio between the flagged volume of the new points and of the points in force
        on the run's rows (:mod:`costlib_pipelines.recalibrate.volume_guard`); None: not checked.
    on_volume_change : {"warn", "hold"}
        What a larger change does: a warning (note), or the run is held (exit 3).
    """

    max_threshold_change: float | None = None
    min_rated: float = 0.0
    max_volume_change: float | None = 3.0
    on_volume_change: str = "warn"
