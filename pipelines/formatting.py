"""How numbers read in messages: thresholds, counts and estimates, ages.

One helper per kind, so every message prints a kind the same way. Files (manifests, JSON,
Parquet) keep full precision; only text for people goes through here.
"""

from __future__ import annotations

import math

__all__ = ["THRESHOLD_DIGITS", "estimate_text", "human_age", "threshold_text",
           "thresholds_text"]

#: Significant digits of a threshold in a message (files keep full precision).
THRESHOLD_DIGITS = 4


def threshold_text(value: float | None) -> str:
    """A threshold to :data:`THRESHOLD_DIGITS` significant digits (``0.3172``, ``1e-05``;
    ``-`` for None, ``inf``/``-inf`` as such)."""
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{THRESHOLD_DIGITS}g}"


def thresholds_text(values: list[float | None] | tuple[float | None, ...] | None) -> str:
    """Several thresholds (one per classifier) as ``[0.3172, 0.5]``."""
    if values is None:
        return "-"
    return "[" + ", ".join(threshold_text(v) for v in values) + "]"


def estimate_text(value: float) -> str:
    """A weighted estimate of a count (a sum of inverse-probability weights), to 3 significant
    digits, with thousands separators when large: ``4.98``, ``1,130``."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def human_age(seconds: float) -> str:
    """An age in words: ``45 s``, ``12 min``, ``3 h 5 min``, ``2 d 4 h``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
