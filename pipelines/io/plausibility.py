"""Plausibility settings of a run (config section ``plausibility``) and what they hold back.

:class:`Plausibility` resolves the section once (``now`` fixed) for every batch of a run; the
checks themselves count (and dead-letter, or stop the run on) implausible rows while a batch is
validated (:func:`costlib_pipelines.io.batches.validate_batch`), in the accounting's
``plausibility.*`` counters. :func:`plausibility_summary` and :func:`plausibility_violations`
read those counters for the manifest and the publish decision.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from costlib_pipelines.config_sections import ConfigError

if TYPE_CHECKING:  # the config module is heavy; status and publish never build one
    from costlib_pipelines.config import RunConfig

__all__ = ["PLAUSIBILITY", "Plausibility", "plausibility_summary", "plausibility_violations"]

#: Prefix of the plausibility counters in the accounting (extra counters, not buckets).
PLAUSIBILITY = "plausibility."

MICROS_PER_DAY = 86_400 * 1_000_000


def _micros(text: str, key: str) -> int:
    """An ISO 8601 date or time (naive = UTC) as microseconds since the epoch."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(f"plausibility.{key}: {text!r} is not an ISO 8601 date or time "
                          "(e.g. 2000-01-01 or 2026-01-01T00:00:00Z)") from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)


@dataclass(frozen=True)
class Plausibility:
    """The plausibility checks of a run, resolved once (``now`` fixed) and pickled into DoFns.

    Attributes
    ----------
    score_range : (float, float) or None
        Plausible scores (inclusive); ``plausibility.score_range``, else ``grid.range`` for
        uniform and quantile edges; None (no check) for explicit edges without a range.
    scores_outside_range : {"count", "dead_letter", "error"}
        What a row with a score outside ``score_range`` gets.
    event_time_range_us : (int, int)
        Plausible event times (inclusive, microseconds since the epoch; windowed mode only).
    event_times_outside_range : {"count", "dead_letter", "error"}
        What a row with an event time outside the range gets.
    max_implausible_share : float or None
        A run in which a larger share of the rows read fails one check is not published.
    count_duplicate_item_ids : bool
        Count rows whose (group, item id) appeared before in the run.
    """

    score_range: tuple[float, float] | None
    scores_outside_range: str
    event_time_range_us: tuple[int, int]
    event_times_outside_range: str
    max_implausible_share: float | None
    count_duplicate_item_ids: bool

    @classmethod
    def from_config(cls, config: RunConfig, now: dt.datetime | None = None) -> Plausibility:
        """Resolve ``config.raw["plausibility"]`` (``now`` ends the default event-time range).

        Raises
        ------
        ConfigError
            An empty event-time range, or a time that is not ISO 8601 (an empty score range is
            refused when the config is read).
        """
        raw = config.raw.get("plausibility") or {}
        score_range = raw.get("score_range")
        if score_range is None and config.grid.edges in ("uniform", "quantile", "auto"):
            score_range = config.grid.range
        if score_range is not None:  # low < high: checked with the config (and grid.range)
            low, high = (float(v) for v in score_range)
            score_range = (low, high)
        start = _micros(raw.get("event_time_min", "2000-01-01T00:00:00+00:00"), "event_time_min")
        if raw.get("event_time_max") is not None:
            end = _micros(raw["event_time_max"], "event_time_max")
        else:
            now = now or dt.datetime.now(dt.UTC)
            end = _micros(now.isoformat(), "event_time_max") + round(
                raw.get("max_future_days", 1) * MICROS_PER_DAY)
        if not start < end:
            raise ConfigError("plausibility: event_time_min must be before event_time_max "
                              "(or now + max_future_days)")
        return cls(
            score_range=score_range,
            scores_outside_range=raw.get("scores_outside_range", "count"),
            event_time_range_us=(start, end),
            event_times_outside_range=raw.get("event_times_outside_range", "dead_letter"),
            max_implausible_share=raw.get("max_implausible_share", 0.01),
            count_duplicate_item_ids=bool(raw.get("count_duplicate_item_ids", False)),
        )


def _share_checks(settings: Plausibility | None = None) -> dict[str, str]:
    """Plausibility counter -> what it counts (the checks ``max_implausible_share`` limits),
    naming the keys that set the range."""
    low, high = (settings.score_range if settings is not None and settings.score_range
                 else (None, None))
    scores = (f"the plausible range [{low:g}, {high:g}]" if low is not None
              else "the plausible range")
    return {
        "score_outside_range": (
            f"rows with a score outside {scores}, set by plausibility.score_range (or, when "
            "it is null, grid.range): on another scale, set both to your scores' range"),
        "event_time_outside_range": (
            "rows with an event time outside the plausible range (plausibility.event_time_min "
            "/ event_time_max)"),
    }


def plausibility_summary(accounting: Mapping[str, int]) -> dict[str, int]:
    """The ``plausibility.*`` counters of an accounting, without the prefix (for manifests)."""
    return {key[len(PLAUSIBILITY):]: int(value) for key, value in sorted(accounting.items())
            if key.startswith(PLAUSIBILITY)}


def plausibility_violations(accounting: Mapping[str, int], settings: Plausibility) -> list[str]:
    """Why a run must not be published: a check failed on more than the allowed share of rows."""
    limit = settings.max_implausible_share
    read = int(accounting.get("read", 0))
    if limit is None or read == 0:
        return []
    counts = plausibility_summary(accounting)
    out = []
    for name, what in _share_checks(settings).items():
        count = counts.get(name, 0)
        if count > limit * read:
            detail = ", ".join(f"{k} {v:,}" for k, v in counts.items()
                               if k.startswith(name.split("_outside")[0]) and k != name)
            out.append(f"plausibility: {count:,} of {read:,} {what} ({count / read:.1%} > "
                       f"plausibility.max_implausible_share {limit:g})"
                       + (f" [{detail}]" if detail else ""))
    return out
