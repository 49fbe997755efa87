"""How the report writes numbers, thresholds, times and a few facts as text."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["fmt_count", "fmt_interval", "fmt_ratio", "fmt_threshold",
           "fmt_time", "inputs_text", "plural", "publication_text", "sort_value"]


def fmt_threshold(value: float | None) -> str:
    """A threshold: 4 decimals, ``off`` for +inf, a dash for none."""
    if value is None:
        return "–"
    return "off" if math.isinf(value) else f"{value:.4f}"


def fmt_count(value: float | None) -> str:
    """A (weighted) count: thousands separators, decimals only when fractional."""
    if value is None:
        return "–"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def fmt_ratio(value: float | None) -> str:
    """A precision: 3 decimals, a dash for none or NaN."""
    return "–" if value is None or value != value else f"{value:.3f}"


def fmt_time(value: str | None) -> str:
    """An ISO timestamp as ``YYYY-MM-DD HH:MM:SS UTC``."""
    if not value:
        return "?"
    return f"{dt.datetime.fromisoformat(value).astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"


def fmt_interval(low: float | None, high: float | None, fmt: Callable[[float], str]) -> str:
    """``[low, high]`` with ``fmt`` applied, or an empty string."""
    if low is None or high is None:
        return ""
    return f"[{fmt(low)}, {fmt(high)}]"


def plural(count: float, noun: str) -> str:
    """``1 rated positive``, ``3 rated positives``."""
    return f"{fmt_count(count)} {noun}{'' if count == 1 else 's'}"


def sort_value(value: float | None) -> str:
    """A cell's ``data-sort`` value: the number (``inf`` for off), empty when there is none."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return "Infinity" if math.isinf(value) else repr(float(value))


def inputs_text(inputs: Sequence[str | Mapping[str, Any]]) -> str:
    """``N file(s) in DIR: a, b, c … (R rows)`` (the common directory once, then file names).

    Entries are ``{"path", "rows", "row_groups"}`` (older manifests: plain paths).
    """
    if not inputs:
        return "none recorded"
    rows = [entry.get("rows") for entry in inputs if isinstance(entry, Mapping)]
    total = f" ({fmt_count(sum(rows))} rows)" if rows and None not in rows else ""
    inputs = [entry["path"] if isinstance(entry, Mapping) else entry for entry in inputs]
    directories = {path.rsplit("/", 1)[0] if "/" in path else "" for path in inputs}
    names = [path.rsplit("/", 1)[-1] for path in inputs] if len(directories) == 1 else inputs
    where = f" in {next(iter(directories))}" if len(directories) == 1 else ""
    more = f" … ({len(inputs) - 4} more)" if len(inputs) > 4 else ""
    return f"{len(inputs)} file(s){where}: {', '.join(names[:4])}{more}{total}"


def publication_text(manifest: Mapping[str, Any]) -> str:
    """Whether the publish guard let the run become ``LATEST``, and who overrode it."""
    guard = manifest.get("guard") or {}
    override = guard.get("override")
    publications = manifest.get("publications") or []
    if not manifest.get("published"):
        compared = guard.get("compared_with_run")
        return "held by the publish guard" + (f" (compared with {compared})" if compared else "")
    if override:
        return (f"published over the guard by {override.get('by', '?')}: "
                f"{override.get('reason', '')}")
    if publications:
        last = publications[-1]
        return f"published by {last.get('by', '?')}: {last.get('reason', '')}"
    return "published (LATEST moved to it)"
