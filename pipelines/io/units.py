"""What the weighted numbers of a run count: rows, estimated rows or money.

A run's grids hold weights, not rows. Which unit their sums are in follows from the config:

- ``rows``: no ``columns.weight``, no ``columns.audit_probability``, no
  ``min_risk.weight_rated_rows``: every row weighs 1 and every sum is a count of rows;
- ``weighted rows``: ``columns.weight`` (each row stands for ``w`` rows);
- ``estimated rows``: ``columns.audit_probability`` (rated rows weigh ``w / π``: Horvitz–Thompson
  estimates of the rows of the whole scored population);
- ``money`` / ``estimated money``: ``min_risk.weight_rated_rows`` (each rated row weighs its
  regret, an amount; with audit probabilities an estimated amount).

The evidence guards never count weights: ``min_rated`` (fallback) and ``publish.min_rated``
count rated rows, one each (``rated_positive_rows``/``rated_negative_rows`` of a record), in
every unit. The volume settings (``constraints.max_volume``, ``max_false_positives``,
``objective: precision_at_volume``, ``capacity``) bound the weighted volume, which is rows or an
estimate of rows in the ``rows``/``weighted rows``/``estimated rows`` units; in the money units
they would compare rows with money, so a config refuses them there
(:func:`costlib_pipelines.config_units.rows_against_money`).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["ROWS", "UNITS", "UNIT_NOTES", "fmt_rows", "fmt_weighted", "is_count", "rated_rows",
           "weight_unit"]

ROWS = "rows"
UNITS = (ROWS, "weighted rows", "estimated rows", "money", "estimated money")

#: What a weighted sum in each unit is, for a line under a table.
UNIT_NOTES = {
    ROWS: "rows",
    "weighted rows": "weighted rows (each row counts its columns.weight)",
    "estimated rows": "estimated rows (~: audit weights w/p estimate the rows of the whole "
                      "scored population)",
    "money": "money (each rated row weighs its cost regret, min_risk.weight_rated_rows); "
             "precision is TP / (TP + FP) in money",
    "estimated money": "estimated money (~: regret times audit weight w/p); precision is "
                       "TP / (TP + FP) in money",
}


def weight_unit(config: Any) -> str:
    """The unit of a run's weighted sums (one of :data:`UNITS`) from its config."""
    columns = config.columns
    audit = bool(columns.get("audit_probability"))
    min_risk = config.raw.get("min_risk") or {}
    if min_risk.get("weight_rated_rows"):
        return "estimated money" if audit else "money"
    if audit:
        return "estimated rows"
    if columns.get("weight"):
        return "weighted rows"
    return ROWS


def is_count(unit: str | None) -> bool:
    """Whether sums in ``unit`` are counts of rows (integers)."""
    return unit in (None, ROWS)


def fmt_rows(value: Any) -> str:
    """A count of rows: an integer with thousands separators (``?`` when missing)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "?"
    return f"{round(float(value)):,d}"


def fmt_weighted(value: Any, unit: str | None) -> str:
    """A weighted sum in its unit: rows as integers; estimates with ``~`` and three
    significant digits' worth of precision; money as an amount with two decimals."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "?"
    v = float(value)
    if is_count(unit):
        return fmt_rows(v)
    if unit in ("money", "estimated money"):
        amount = f"{v:,.2f}"
        return f"~{amount}" if unit == "estimated money" else amount
    text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.3g}"
    return f"~{text}" if unit == "estimated rows" else text


def rated_rows(record: dict[str, Any]) -> tuple[float, float]:
    """``(positive rows, negative rows)`` of an ``operating_point.json`` record: its
    ``rated_positive_rows``/``rated_negative_rows``, or, in records that lack them (written
    before they existed, or from grids that do not know them), the weighted totals."""
    pos, neg = record.get("rated_positive_rows"), record.get("rated_negative_rows")
    if pos is None or neg is None:
        return float(record["rated_positives"]), float(record["rated_negatives"])
    return float(pos), float(neg)

