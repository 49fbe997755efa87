"""Settings that count rows, in a run whose grids hold money.

With ``min_risk.weight_rated_rows`` every rated row enters the grids weighted by its cost regret,
so TP, FP and volumes are amounts of money (:mod:`costlib_pipelines.io.units`). Settings that
bound rows cannot be checked against them; the config refuses them with the fix rather than
compare rows with money.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["rows_against_money"]

#: Settings that bound rows: (section, key) -> how a message names them.
ROW_SETTINGS = {("constraints", "max_volume"): "constraints.max_volume",
                ("constraints", "max_false_positives"): "constraints.max_false_positives",
                ("capacity", "total"): "capacity.total",
                ("capacity", "min_volume"): "capacity.min_volume",
                ("capacity", "max_volume"): "capacity.max_volume"}


def rows_against_money(raw: Mapping[str, Any]) -> str | None:
    """Why a (defaulted) raw config cannot be run, or None: a setting that bounds rows
    (:data:`ROW_SETTINGS`, ``objective: precision_at_volume``) next to
    ``min_risk.weight_rated_rows``."""
    if not (raw.get("min_risk") or {}).get("weight_rated_rows"):
        return None
    in_rows = [name for (section, key), name in ROW_SETTINGS.items()
               if (raw.get(section) or {}).get(key) not in (None, {}, 0)]
    if (raw.get("objective") or {}).get("name") == "precision_at_volume":
        in_rows.append("objective: precision_at_volume")
    if not in_rows:
        return None
    return ("min_risk.weight_rated_rows weighs every rated row by its cost regret, so the "
            "grids' TP, FP and volumes are money, not rows; "
            f"{', '.join(in_rows)} count rows and cannot be checked against them: drop them, "
            "or set weight_rated_rows: false (rows, with the target's trade-off)")
