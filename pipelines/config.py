"""Run configuration: YAML validated against ``schemas/run_config.schema.json``.

Errors name the offending key path (``grid.bins: 0 is less than the minimum of 1``). Defaults come
from the schema itself, so the schema stays the single source of truth. The *config digest* is
the sha256 of the canonical JSON of the validated, defaulted config; it is stamped on every
output record so that results can be traced to the exact configuration.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np

import costlib_schemas
from costlib.audit import AuditDesign, check_shares, check_steps, relative_design
from costlib.decoding import get_loss
from costlib.thresholds.binning import (
    DEFAULT_DECISION_EDGES,
    RULE_ALIASES,
    check_edges,
    uniform_edges,
)
from costlib.thresholds.loop import InForcePolicy
from costlib.thresholds.point import (
    DecisionSpec,
    Objective,
    Target,
    capacity_objective_names,
    objective_names,
)
from costlib_pipelines.config_audit import audit_defaults
from costlib_pipelines.config_sections import (
    AuditSection,
    ConfigError,
    GridSection,
    PublishSection,
)
from costlib_pipelines.config_text import (
    check_objective_keys_as_written,
    read_config_text,
    schema_blind_spots,
    schema_error_line,
)
from costlib_pipelines.config_units import rows_against_money

__all__ = ["ConfigError", "RunConfig", "load_config", "run_config_schema"]


def _apply_defaults(value: Any, schema: dict) -> Any:
    if isinstance(value, dict) and schema.get("type") in ("object", ["object", "null"]):
        out = dict(value)
        for key, sub in schema.get("properties", {}).items():
            if key not in out and "default" in sub:
                out[key] = copy.deepcopy(sub["default"])
            elif key not in out and sub.get("type") == "object":
                out[key] = {}  # a section left out entirely: all of its defaults
            if key in out:
                out[key] = _apply_defaults(out[key], sub)
        return out
    return value


@dataclass(frozen=True)
class RunConfig:
    """A validated run configuration (see ``schemas/example_config.yaml``)."""

    raw: dict[str, Any]

    # ------------------------------------------------------------------ accessors
    @property
    def columns(self) -> dict[str, str | None]:
        return self.raw["columns"]

    @property
    def classifiers(self) -> tuple[str, ...]:
        return tuple(self.raw["classifiers"])

    @property
    def rule(self) -> str:
        return self.raw["rule"]

    @property
    def methods(self) -> tuple[str, ...]:
        return tuple(self.raw["methods"])

    @property
    def decision_method(self) -> str:
        return self.raw["decision_method"]

    @property
    def min_positives(self) -> float:
        return float(self.raw["min_rated"]["positives"])

    @property
    def min_negatives(self) -> float:
        return float(self.raw["min_rated"]["negatives"])

    @property
    def fallback(self) -> str:
        return self.raw["fallback"]

    @property
    def bootstrap(self) -> dict[str, Any]:
        return self.raw["bootstrap"]

    @property
    def recall(self) -> dict[str, Any]:
        """``recall``: ``bound`` (what ``min_recall`` is checked against), ``level``,
        ``interval`` (exact or bootstrap), ``max_width``, ``target_half_width``."""
        return self.raw["recall"]

    @property
    def decoding(self) -> dict[str, Any]:
        return self.raw["decoding"]

    @property
    def windowing(self) -> dict[str, Any] | None:
        return self.raw["windowing"]

    @property
    def decide(self) -> dict[str, Any]:
        """Window selection of ``costlib decide``: ``window`` and ``max_uncovered_share``."""
        return self.raw["decide"]

    @functools.cached_property
    def audit(self) -> AuditSection:
        return AuditSection.from_section(self.raw["audit"])

    def audit_design(self) -> AuditDesign:
        """The :class:`costlib.audit.AuditDesign` of the ``audit`` section."""
        audit = self.audit
        strata = audit.strata
        if strata.get("relative_to", "score") == "point":
            if strata["edges"]:
                raise ValueError(f"strata.edges: must be empty with strata.relative_to point "
                                 f"(the strata are cut by strata.shares or strata.steps), got "
                                 f"{strata['edges']}")
            shares, steps = strata.get("shares") or [], strata.get("steps") or []
            if shares and steps:
                raise ValueError("strata.steps: give strata.shares or strata.steps, not both")
            cuts = check_shares(shares) if shares else check_steps(steps)
            if len(strata["weights"]) != len(cuts) + 1:
                name = "shares" if shares else "steps"
                raise ValueError(f"strata.weights: need len(strata.{name}) + 1 = "
                                 f"{len(cuts) + 1} weights (one per stratum), got "
                                 f"{len(strata['weights'])}")
            band = strata.get("proposal_stratum")
            if band is not None and band > len(cuts):
                raise ValueError(f"strata.proposal_stratum: a stratum index 0..{len(cuts)} "
                                 f"(far to near, one per weight), got {band}")
            return relative_design(strata["weights"], audit.floor, audit.budget_share)
        if strata.get("proposal_stratum") is not None:
            raise ValueError(f"strata.proposal_stratum: only with strata.relative_to point, got "
                             f"{strata['proposal_stratum']}")
        for key in ("steps", "shares"):
            if strata.get(key):
                raise ValueError(f"strata.{key}: only with strata.relative_to point, got "
                                 f"{strata[key]}")
        return AuditDesign(edges=tuple(audit.strata["edges"]),
                           weights=tuple(audit.strata["weights"]),
                           floor=audit.floor, budget_share=audit.budget_share)

    @property
    def proposal_stratum(self) -> int | None:
        """``audit.strata.proposal_stratum``: the stratum the rows of a group's unsupported
        proposal are audited in at least (:func:`costlib.audit._strata.promote_proposed`);
        None: off. Unset: the third-nearest stratum (``len(weights) - 3``; the "next 4%" band
        for the default shares) with relative strata and the auto design, whose budget bounds
        what it spends (docs/audit.md, "Auditing the proposed move"); off with fewer
        than four strata (the third-nearest would be the farthest, where promotion does
        nothing: set it explicitly there), with the fixed design (no total: a large proposal
        region would be audited at ``budget_share * weight`` each) and with score strata."""
        strata = self.audit.strata
        if not self.relative_strata:
            return None
        if "proposal_stratum" in strata:
            band = strata["proposal_stratum"]
            return None if band is None else int(band)
        if self.audit.design != "auto" or len(strata["weights"]) < 4:
            return None
        return len(strata["weights"]) - 3

    @property
    def relative_strata(self) -> bool:
        """Whether the audit strata are lattice steps below the point in force
        (``audit.strata.relative_to: point``, :mod:`costlib.audit._strata`)."""
        return self.audit.strata.get("relative_to", "score") == "point"

    @property
    def capacity(self) -> dict[str, Any]:
        """``capacity``: ``total`` (None: no shared capacity), ``objective``, ``exact``,
        ``period_share``, ``expected_rows``, ``min_volume``, ``max_volume``."""
        return self.raw["capacity"]

    @property
    def allocates_capacity(self) -> bool:
        """Whether recalibrate allocates a shared review capacity (``capacity.total`` set)."""
        return self.raw["capacity"]["total"] is not None

    @functools.cached_property
    def publish(self) -> PublishSection:
        return PublishSection.from_section(self.raw["publish"])

    @functools.cached_property
    def policy(self) -> InForcePolicy:
        """The ``in_force`` section as the one policy every optimising stage is given."""
        return InForcePolicy.from_settings(self.raw["in_force"])

    @functools.cached_property
    def grid(self) -> GridSection:
        return GridSection.from_section(self.raw["grid"])

    @property
    def target(self) -> Target:
        return self.target_of(self.raw["target"])

    @staticmethod
    def target_of(t: Mapping[str, Any]) -> Target:
        """The :class:`Target` of a config's ``target`` section, in any of its four forms."""
        if "marginal_precision" in t:
            return Target.from_marginal_precision(t["marginal_precision"])
        if "slope" in t:
            return Target(slope=float(t["slope"]))
        if "fp_per_tp" in t:
            return Target.from_fp_per_tp(t["fp_per_tp"])
        return Target.from_benefit_matrix(t["benefit_matrix"])

    @property
    def max_unrated_share(self) -> float | None:
        """``coverage.max_unrated_share``: the allowed unrated share, None = not enforced."""
        share = self.raw["coverage"]["max_unrated_share"]
        return None if share is None else float(share)

    @property
    def objective(self) -> dict[str, Any]:
        """``objective``: ``name`` (linear, fbeta, f1, precision_at_volume), ``beta``,
        ``volume``."""
        return self.raw["objective"]

    @property
    def constraints(self) -> dict[str, float | None]:
        """``constraints``: ``min_precision``, ``max_volume``, ``max_false_positives``,
        ``min_recall``."""
        return self.raw["constraints"]

    @functools.cached_property
    def decision(self) -> DecisionSpec:
        """The run's :class:`~costlib.thresholds.DecisionSpec`: target, rule, objective,
        constraints, coverage and the recall bound and level, built once.

        A ``max_unrated_share`` of None (not enforced) is 1, which covers every tuple: the
        points are then exactly those of a grid without the unrated channel.
        """
        share = self.max_unrated_share
        objective = self.objective
        return DecisionSpec.of(
            target=self.target, rule=self.rule,
            max_unrated_share=1.0 if share is None else share,
            objective=objective["name"], beta=float(objective["beta"]),
            volume=None if objective["volume"] is None else float(objective["volume"]),
            **{k: None if v is None else float(v) for k, v in self.constraints.items()},
            recall_bound=self.recall["bound"], recall_level=float(self.recall["level"]),
        )

    def with_overrides(self, overrides: dict[str, Any], *, source: str) -> RunConfig:
        """The same config with ``"section.key"`` values replaced, validated again.

        Command-line flags override the config this way, so the run's config and digest record
        the values used and every schema rule applies to them.
        """
        raw = copy.deepcopy(self.raw)
        for dotted, value in overrides.items():
            *sections, key = dotted.split(".")
            place = raw
            for section in sections:
                place = place[section]
            place[key] = value
        return RunConfig.from_dict(raw, source=source)

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON of the config; computed once (the config is frozen,
        and every group's records carry it)."""
        canonical = json.dumps(self.raw, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def n_edges(self) -> int:
        """Candidate thresholds per classifier: ``grid.bins``, by default 128 for ``auto``
        edges (:data:`costlib.thresholds.DEFAULT_DECISION_EDGES`) and 64 for
        uniform/quantile."""
        bins = self.grid.bins
        if bins is not None:
            return int(bins)
        return DEFAULT_DECISION_EDGES if self.grid.edges == "auto" else 64

    def fixed_edges(self) -> list[np.ndarray] | None:
        """Edges known before reading data (uniform or explicit); None for auto and quantile
        edges (the pipeline computes them in a first pass)."""
        grid = self.grid
        if grid.edges == "uniform":
            low, high = grid.range
            edges = check_edges(uniform_edges(low, high, self.n_edges), name="grid (range, bins)")
            return [edges for _ in self.classifiers]
        if grid.edges == "explicit":
            return [
                check_edges(v, name=f"grid.values[{j}]") for j, v in enumerate(grid.values)
            ]
        return None

    def to_json(self) -> str:
        return json.dumps(self.raw, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "config") -> RunConfig:
        """Validate a parsed config (dict) and fill in defaults."""
        if not isinstance(data, dict):
            kind = type(data).__name__
            raise ConfigError(f"{source}: the run config must be a mapping, got {kind}")
        blind = schema_blind_spots(data)
        if blind:
            raise ConfigError(f"{source}: invalid run config:\n  " + "\n  ".join(blind))
        schema = run_config_schema()
        filled = _apply_defaults(audit_defaults(data), schema)
        validator = jsonschema.Draft202012Validator(schema)
        errors = sorted(validator.iter_errors(filled), key=lambda e: list(e.absolute_path))
        if errors:
            lines = [schema_error_line(e) for e in errors]
            raise ConfigError(f"{source}: invalid run config:\n  " + "\n  ".join(lines))
        filled["rule"] = RULE_ALIASES.get(filled["rule"], filled["rule"])  # or/and, as costlib
        config = cls(raw=filled)
        config._check_semantics(source)
        return config

    def _check_capacity(self, source: str) -> None:
        """The ``capacity`` section against the rest of the config."""
        capacity = self.capacity
        if capacity["total"] is None:
            return  # decision_method capacity without a total: check_recalibrate
        if self.windowing is not None:
            raise ConfigError(
                f"{source}: capacity.total: a shared capacity is allocated in batch runs only; "
                "windowed runs (windowing) would need one allocation per window over every "
                "group's results, which they do not gather (docs/pipelines.md, 'Shared review "
                "capacity'); set capacity.total to null or run without windowing")
        constrained = sorted(k for k, v in self.constraints.items() if v is not None)
        if constrained:
            raise ConfigError(
                f"{source}: capacity.total: the shared-capacity allocation respects coverage "
                "(coverage.max_unrated_share) and the per-group capacity.min_volume / "
                f"max_volume only, not constraints.{', constraints.'.join(constrained)}; "
                "set them to null (bound a group's volume with capacity.max_volume)")
        low, high = capacity["min_volume"], capacity["max_volume"]
        for group in sorted(set(low) & set(high)):
            if low[group] > high[group]:
                raise ConfigError(
                    f"{source}: capacity.min_volume[{group!r}] = {low[group]:g} exceeds "
                    f"capacity.max_volume[{group!r}] = {high[group]:g}")
        if self.decision_method != "capacity":
            raise ConfigError(
                f"{source}: capacity.total: {capacity['total']:g} rows would be allocated, but "
                f"decision_method is {self.decision_method!r}, so costlib decide would apply "
                f"{self.decision_method}'s thresholds and ignore the allocation; set "
                "decision_method: capacity (decide then applies the allocation), or drop "
                "capacity.total / --capacity")

    def check_recalibrate(self, source: str) -> None:
        """After the flags: ``decision_method: capacity`` needs ``capacity.total`` in
        recalibrate (decide reads the allocation's records, and needs no total)."""
        if self.decision_method == "capacity" and self.capacity["total"] is None:
            raise ConfigError(
                f"{source}: decision_method: 'capacity' applies the shared-capacity allocation, "
                "but capacity.total is null (set it, or --capacity N)")

    def _check_semantics(self, source: str) -> None:
        try:
            self.policy  # noqa: B018 - built (and validated) once, here
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from exc
        grid = self.grid
        if grid.edges == "explicit":
            values = grid.values
            if not values or len(values) != len(self.classifiers):
                raise ConfigError(
                    f"{source}: grid.values: need one edge list per classifier "
                    f"({len(self.classifiers)}), got {len(values or [])}"
                )
        if grid.edges == "auto" and self.n_edges < 4:
            raise ConfigError(f"{source}: grid.bins: auto edges need at least 4 candidate "
                              f"thresholds per classifier, got {self.n_edges}")
        if grid.edges in ("uniform", "quantile", "auto"):
            low, high = grid.range
            if not low < high:
                raise ConfigError(f"{source}: grid.range: need low < high, got {grid.range}")
        try:
            self.fixed_edges()
            _ = self.target
        except ValueError as exc:
            raise ConfigError(f"{source}: {exc}") from exc
        strata = self.audit.strata
        if (self.audit.enabled and strata.get("relative_to") == "score"
                and not strata.get("edges") and len(strata.get("weights") or []) > 1):
            raise ConfigError(
                f"{source}: audit.strata.weights: {len(strata['weights'])} weights but no "
                "audit.strata.edges: without relative_to, weights alone mean score strata, "
                "which need len(weights) - 1 edges; for strata relative to the point in force "
                "set relative_to: point with shares or steps (docs/audit.md)")
        weights = strata.get("weights") or []
        if self.audit.enabled and weights and not any(w > 0 for w in weights):
            raise ConfigError(
                f"{source}: audit.strata.weights: every weight is 0, so no stratum gets more "
                "than the floor and budget_share cannot be spent; a uniform audit is one "
                "stratum of weight 1 (weights: [1])")
        try:
            self.audit_design()
        except ValueError as exc:
            raise ConfigError(f"{source}: audit.{exc}") from exc
        audit = self.audit
        if audit.enabled and audit.design == "auto" and \
                audit.floor > audit.budget_share:
            raise ConfigError(
                f"{source}: audit.floor: with audit.design auto, budget_share is the expected "
                f"audited share of all unflagged rows, so the floor ({audit.floor}) must not "
                f"exceed it (audit.budget_share {audit.budget_share})"
            )
        objective = self.objective
        kind = Objective.kind_of(objective["name"])
        for key, default in kind.parameters.items():
            if default is None and objective.get(key) is None:
                raise ConfigError(f"{source}: objective.{key}: objective '{kind.name}' needs the "
                                  f"{kind.parameter_help.get(key, key)}")
        if self.constraints["min_recall"] is not None and not self.columns.get(
                "audit_probability"):
            raise ConfigError(
                f"{source}: constraints.min_recall: needs audit data: set "
                "columns.audit_probability (the rating inclusion probability of every row). "
                "Without an audit sample the total number of positives P is unknown (rated "
                "positives are only those the thresholds in force flagged), so recall cannot "
                "be estimated; see docs/audit.md"
            )
        if self.policy.min_gain_z is not None and self.bootstrap["replicates"] < 2:
            raise ConfigError(
                f"{source}: in_force.min_gain_z: moving only on evidence needs bootstrap "
                f"replicates for the standard error of the gain; set bootstrap.replicates >= 2 "
                f"(got {self.bootstrap['replicates']}) or min_gain_z to null"
            )
        self._check_capacity(source)
        if problem := rows_against_money(self.raw):  # rows cannot be checked against money
            raise ConfigError(f"{source}: {problem}")
        decoding = self.decoding
        try:
            get_loss(decoding["loss"], **dict(decoding.get("params") or {}))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: decoding.loss / decoding.params: {exc}") from exc
        if self.decision_method not in self.methods and self.decision_method != "capacity":
            raise ConfigError(
                f"{source}: decision_method: {self.decision_method!r} is not one of methods "
                f"{list(self.methods)}; recalibrate would write no operating points of the "
                "method decide applies (add it to methods or choose one of them)"
            )
        names = [c for key, c in self.columns.items() if c and key != "label_positive"]
        names += list(self.classifiers)
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise ConfigError(f"{source}: columns: names used twice: {sorted(duplicates)}")
        window = self.windowing
        if window is not None and grid.edges == "quantile":
            raise ConfigError(
                f"{source}: grid.edges: quantile edges are not supported with windowing; use "
                "auto (the default: every window of a run shares them, carried from the "
                "published run or placed by a first pass over the run's input), uniform or "
                "explicit edges"
            )
        if window is not None:
            if window["period_days"] < MIN_PERIOD_DAYS * (1 - 1e-3):  # 0.04166: an hour
                raise ConfigError(
                    f"{source}: windowing.period_days: {window['period_days']:g} is below one "
                    f"hour ({MIN_PERIOD_DAYS:.6g} days): every period is a recalibration of "
                    "every group, and ratings are not back within the hour")
            ratio = window["size_days"] / window["period_days"]
            if abs(ratio - round(ratio)) > 1e-9:
                raise ConfigError(
                    f"{source}: windowing.size_days must be a multiple of windowing.period_days"
                )
            if round(ratio) > MAX_PANES:
                raise ConfigError(
                    f"{source}: windowing.size_days / period_days = {round(ratio)} periods per "
                    f"window, more than {MAX_PANES} (each window keeps a grid per period)")
            if self.raw["plausibility"].get("count_duplicate_item_ids"):
                raise ConfigError(
                    f"{source}: plausibility.count_duplicate_item_ids is not supported with "
                    "windowing (batch runs only)")
        score_range = self.raw["plausibility"].get("score_range")
        if score_range is not None and not score_range[0] < score_range[1]:
            raise ConfigError(f"{source}: plausibility.score_range: need low < high, got "
                              f"{score_range}")


#: Windowed runs: the shortest recalibration period (one hour) and most periods per window.
MIN_PERIOD_DAYS = 1.0 / 24.0
MAX_PANES = 1000


def run_config_schema() -> dict[str, Any]:
    """The run config's JSON Schema, with the objective enums (``objective.name``,
    ``capacity.objective``) those of the objective registry
    (:func:`costlib.thresholds.point.objective_names`, ``capacity_objective_names``): the file
    states the built-in ones (a test checks it), an objective registered since is accepted."""
    schema = costlib_schemas.load("run_config.schema.json")
    properties = schema["properties"]
    properties["objective"]["properties"]["name"]["enum"] = list(objective_names())
    properties["capacity"]["properties"]["objective"]["enum"] = list(capacity_objective_names())
    return schema


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML run config; errors name the file and the key."""
    path = Path(path)
    data = read_config_text(path, ConfigError)
    config = RunConfig.from_dict(data, source=str(path))
    check_objective_keys_as_written(data, source=str(path), error=ConfigError)
    return config
