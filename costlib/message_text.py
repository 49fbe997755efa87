"""How values read in messages: thresholds, counts and weighted estimates, ages.

One helper per kind, so every message (of the library and of the ``costlib`` commands) prints
a kind the same way. Files (manifests, JSON, Parquet) keep full precision; only text for people
goes through here.

>>> threshold_text(0.8666666666666667), thresholds_text([0.8666666666666667, None])
('0.8667', '[0.8667, -]')
>>> count_text(5.0, "positive"), count_text(4.97718, "positive")
('5 positives', 'an estimated 4.98 positives')
>>> human_age(42), human_age(720), human_age(11_100), human_age(183_600)
('42 s', '12 min', '3 h 5 min', '2 d 3 h')
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["THRESHOLD_DIGITS", "ago", "count_text", "estimate_text", "human_age", "threshold_text",
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


def thresholds_text(values: Iterable[float | None] | None) -> str:
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


def count_text(value: float, noun: str) -> str:
    """``value`` of ``noun`` (singular) as a person reads it: a whole number as a count
    (``5 positives``, ``1 row``, ``1,130 rows``), anything else as a weighted estimate
    (``an estimated 4.98 positives``): sums of row weights are estimates of counts."""
    rounded = round(value) if math.isfinite(value) else None
    if rounded is not None and abs(value - rounded) < 1e-9:
        return f"{rounded:,} {noun}{'' if rounded == 1 else 's'}"
    return f"an estimated {estimate_text(value)} {noun}s"


def ago(seconds: float) -> str:
    """How long ago, in words: ``less than a minute ago``, ``12 min ago``, ``3 h 5 min ago``."""
    return "less than a minute ago" if seconds < 60 else f"{human_age(seconds)} ago"


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
