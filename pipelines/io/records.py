"""Output records, typed by the JSON contracts in ``schemas/`` (the single source of truth)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

import pyarrow as pa

import costlib_schemas
from costlib.thresholds.loop import PROPOSED, ReasonCode
from costlib.thresholds.point import objective_parameters
from costlib_pipelines.io.recall_fields import DEFAULT_RECALL_SETTINGS, recall_fields
from costlib_pipelines.io.units import ROWS, weight_unit

__all__ = [
    "CAPACITY_NULLS",
    "PN_CURVE_SCHEMA",
    "arrow_schema",
    "capacity_fields",
    "operating_point_records",
    "pn_curve_records",
    "point_settings",
    "records_to_jsonl",
    "records_to_table",
]

_TYPES = {
    "string": pa.string(),
    "bool": pa.bool_(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "timestamp[us, UTC]": pa.timestamp("us", tz="UTC"),
    "list<string>": pa.list_(pa.string()),
    "list<float64>": pa.list_(pa.float64()),
}


@cache
def arrow_schema(contract: str) -> pa.Schema:
    """Arrow schema of a record contract, e.g. ``arrow_schema("operating_point.json")``."""
    fields = costlib_schemas.load(contract)["fields"]
    return pa.schema(
        [pa.field(f["name"], _TYPES[f["type"]], nullable=f["nullable"]) for f in fields]
    )


def records_to_table(records: Iterable[dict[str, Any]], contract: str) -> pa.Table:
    """Records (dicts with exactly the contract's fields) as an Arrow table of that schema."""
    schema = arrow_schema(contract)
    rows = list(records)
    for row in rows:
        missing = set(schema.names) - set(row)
        extra = set(row) - set(schema.names)
        if missing or extra:
            raise ValueError(f"{contract}: record fields differ: missing {missing}, extra {extra}")
    return pa.Table.from_pylist(rows, schema=schema)


def _json_value(value: Any) -> Any:
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def records_to_jsonl(records: Iterable[dict[str, Any]]) -> str:
    """JSON lines: +inf as the string "inf" (JSON has no infinity), NaN as null."""
    return "".join(
        json.dumps({k: _json_value(v) for k, v in r.items()}, sort_keys=True) + "\n"
        for r in records
    )


def _float_or_none(value: float | None) -> float | None:
    return None if value is None or value != value else float(value)


#: The run settings of :func:`operating_point_records` when none are given (today's defaults).
DEFAULT_POINT_SETTINGS: dict[str, Any] = {
    "max_unrated_share": None,
    "objective": {"name": "linear", "beta": 1.0, "volume": None},
    "constraints": {"min_precision": None, "max_volume": None, "max_false_positives": None,
                    "min_recall": None},
    "recall": DEFAULT_RECALL_SETTINGS,
    "weight_unit": ROWS,
}


def point_settings(config) -> dict[str, Any]:
    """The settings of a :class:`~costlib_pipelines.config.RunConfig` that records carry."""
    return {"max_unrated_share": config.max_unrated_share, "objective": config.objective,
            "constraints": config.constraints, "recall": config.recall,
            "weight_unit": weight_unit(config)}


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


#: The objective parameters a record states, as its columns ``objective_<key>``
#: (operating_point.json); every registered objective's parameters are among them.
OBJECTIVE_PARAMETER_FIELDS = ("beta", "volume")


def _settings_fields(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Objective and constraint fields of a record, from the run settings."""
    objective = settings["objective"]
    name = objective["name"]
    params = objective_parameters(name, objective)
    return {
        "objective": name,
        **{f"objective_{key}": None if params.get(key) is None else float(params[key])
           for key in OBJECTIVE_PARAMETER_FIELDS},
        "max_unrated_share": _float_or_none(settings["max_unrated_share"]),
        **{key: _float_or_none(value) for key, value in settings["constraints"].items()},
        "recall_bound": (settings.get("recall") or DEFAULT_RECALL_SETTINGS)["bound"]
        if settings["constraints"].get("min_recall") is not None else None,
        "weight_unit": settings.get("weight_unit", ROWS),
    }


def _reason_code(withheld: str | None) -> str | None:
    """The ``reason_code`` of a record: a withheld point's method did not switch it on."""
    return None if withheld is None else ReasonCode.NOT_SWITCHED_ON.value


def _coverage_fields(point, withheld: str | None = None) -> dict[str, Any]:
    """Volume, coverage, point status and the unrestricted point (all null without a point;
    ``reason`` then says why a group with enough rated rows has none: ``withheld``; with a
    point, ``withheld`` comes first: a group not switched on that took its parent's point)."""
    if point is None:
        return {"volume": None, "unrated": None, "coverage": None, "point_status": None,
                "reason": withheld, "reason_code": _reason_code(withheld),
                "unrestricted_thresholds": None, "unrestricted_tp": None,
                "unrestricted_fp": None, "unrestricted_unrated": None, "objective_value": None,
                "finer_bound": None, "proposed_thresholds": None}
    free = point.unrestricted
    return {
        "volume": float(point.volume),
        "unrated": float(point.unrated),
        "coverage": _float_or_none(point.coverage),
        "point_status": point.status,
        "reason": "; ".join(r for r in (withheld, point.reason) if r) or None,
        "reason_code": _reason_code(withheld),
        "unrestricted_thresholds": None if free is None
        else [float(t) for t in free["thresholds"]],
        "unrestricted_tp": None if free is None else float(free["tp"]),
        "unrestricted_fp": None if free is None else float(free["fp"]),
        "unrestricted_unrated": None if free is None else float(free["unrated"]),
        "objective_value": _float_or_none(point.objective),
        "finer_bound": None if point.resolution is None
        else point.resolution["finer_bound"],
        "proposed_thresholds": None if point.details.get(PROPOSED) is None
        else [float(t) for t in point.details[PROPOSED]],
    }


#: The capacity fields of a record of any method but ``capacity`` (see
#: :func:`capacity_fields`).
CAPACITY_NULLS: dict[str, Any] = {
    "capacity": None, "capacity_status": None, "capacity_multiplier": None,
    "allocated_volume": None, "allocated_utility": None, "capacity_share": None,
    "volume_scale": None,
}


def capacity_fields(entry: Mapping[str, Any] | None, capacity: float,
                    multiplier: float) -> dict[str, Any]:
    """The capacity fields of a group's ``capacity`` record.

    ``entry``: the group's allocation
    (:func:`costlib_pipelines.recalibrate.capacity.capacity_point`), None for a group left out of
    the allocation (status ``insufficient_data``).
    """
    if entry is None:
        return {**CAPACITY_NULLS, "capacity": float(capacity),
                "capacity_status": "insufficient_data",
                "capacity_multiplier": float(multiplier)}
    volume = float(entry["volume"])
    return {
        "capacity": float(capacity),
        "capacity_status": entry["status"],
        "capacity_multiplier": float(multiplier),
        "allocated_volume": volume,
        "allocated_utility": float(entry["utility"]),
        "capacity_share": volume / capacity if capacity > 0 else None,
        "volume_scale": float(entry["volume_scale"]),
    }


def operating_point_records(
    result,
    *,
    rule: str,
    classifiers: tuple[str, ...],
    target_marginal_precision: float,
    run_id: str,
    config_digest: str,
    window_start=None,
    window_end=None,
    pane_index: int = 0,
    settings: Mapping[str, Any] | None = None,
    capacity: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One ``operating_point.json`` record per method of a ``GroupResult``.

    ``settings`` are the run's coverage, objective and constraint settings
    (:func:`point_settings`; default :data:`DEFAULT_POINT_SETTINGS`), recorded on every record.
    ``capacity``: the capacity fields (:func:`capacity_fields`) of the record of method
    ``capacity``; every other record has them null.
    """
    fixed = _settings_fields(DEFAULT_POINT_SETTINGS if settings is None else settings)
    recall = (DEFAULT_POINT_SETTINGS if settings is None else settings).get("recall")
    records = []
    for method, point in result.points.items():
        ci = result.intervals.get(method)
        records.append(
            {
                "group": result.group,
                "window_start": window_start,
                "window_end": window_end,
                "rule": rule,
                "method": method,
                "classifiers": list(classifiers),
                "thresholds": None if point is None else [float(t) for t in point.thresholds],
                "target_marginal_precision": float(target_marginal_precision),
                "tp": None if point is None else float(point.tp),
                "fp": None if point is None else float(point.fp),
                "precision": None if point is None else _float_or_none(point.precision),
                "marginal_precision_left": None if point is None
                else _float_or_none(point.marginal_precision_left),
                "marginal_precision_right": None if point is None
                else _float_or_none(point.marginal_precision_right),
                "rated_positives": float(result.rated_positives),
                "rated_negatives": float(result.rated_negatives),
                "rated_positive_rows": _int_or_none(result.rated_positive_rows),
                "rated_negative_rows": _int_or_none(result.rated_negative_rows),
                "threshold_ci_low": None if ci is None else [float(v) for v in ci.thresholds[0]],
                "threshold_ci_high": None if ci is None else [float(v) for v in ci.thresholds[1]],
                "tp_ci_low": None if ci is None else float(ci.tp[0]),
                "tp_ci_high": None if ci is None else float(ci.tp[1]),
                "fp_ci_low": None if ci is None else float(ci.fp[0]),
                "fp_ci_high": None if ci is None else float(ci.fp[1]),
                "precision_ci_low": None if ci is None else _float_or_none(ci.precision[0]),
                "precision_ci_high": None if ci is None else _float_or_none(ci.precision[1]),
                **recall_fields(point, ci, recall),
                **_coverage_fields(point, result.withheld.get(method)),
                **fixed,
                **(capacity if method == "capacity" and capacity is not None
                   else CAPACITY_NULLS),
                "status": result.status,
                "fallback_group": result.fallback_group,
                "pane_index": int(pane_index),
                "run_id": run_id,
                "config_digest": config_digest,
            }
        )
    return records


def pn_curve_records(result, *, window_start=None, window_end=None) -> list[dict[str, Any]]:
    """The PN curve each method chose its point on (own grid only; not for fallbacks, nor for
    the shared-capacity allocation, method ``capacity``, nor for a method that did not switch
    the group on: no point)."""
    if result.status != "ok":
        return []
    rows = []
    for method, point in result.points.items():
        if method == "capacity" or point is None:  # capacity: one cell, not a curve
            continue
        rows.append(
            {
                "group": result.group,
                "window_start": window_start,
                "window_end": window_end,
                "method": method,
                "curve_kind": point.curve_kind,
                "fp": point.curve_fp.tolist(),
                "tp": point.curve_tp.tolist(),
                "path": point.path.ravel().tolist(),
                "chosen_position": int(point.position),
            }
        )
    return rows


PN_CURVE_SCHEMA = pa.schema(
    [
        ("group", pa.string()),
        ("window_start", pa.timestamp("us", tz="UTC")),
        ("window_end", pa.timestamp("us", tz="UTC")),
        ("method", pa.string()),
        ("curve_kind", pa.string()),
        ("fp", pa.list_(pa.float64())),
        ("tp", pa.list_(pa.float64())),
        ("path", pa.list_(pa.int64())),
        ("chosen_position", pa.int64()),
    ]
)
