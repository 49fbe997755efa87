"""argparse types for numbers in a range: one message format for every command.

A value outside its range (or not a number, or NaN) makes argparse exit 2 with
``argument --flag: must be ..., got TEXT``. A flag that sets a config key takes the key's
interval from :data:`costlib.bounds.BOUNDS` (:func:`bounded`), where the library's objects read
it too.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from costlib.bounds import BOUNDS, Interval

__all__ = ["bounded", "integer_in", "number_in", "number_within"]


def number_in(low: float = -math.inf, high: float = math.inf, *, low_open: bool = False,
              high_open: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite float in the interval between ``low`` and ``high``.

    ``low_open`` / ``high_open`` exclude the bound itself.
    """
    return number_within(Interval(low, high, low_open=low_open, high_open=high_open))


def bounded(key: str) -> Callable[[str], float]:
    """An argparse type for the values of config key ``key``: its interval in
    :data:`costlib.bounds.BOUNDS`."""
    return number_within(BOUNDS[key])


def number_within(interval: Interval) -> Callable[[str], float]:
    """An argparse type: a finite float in ``interval`` (kept on the type as ``.interval``)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value not in interval:
            raise argparse.ArgumentTypeError(
                f"must be a finite number {interval.text()}, got {text}")
        return value

    parse.kind = "number"  # type: ignore[attr-defined]  (templates map it to NUMBER)
    parse.interval = interval  # type: ignore[attr-defined]  (the reference pages show it)
    return parse


def integer_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:,} and {high:,}, got {text}")
        return value

    parse.kind = "integer"  # type: ignore[attr-defined]
    parse.interval = f"in [{low:,}, {high:,}]"  # type: ignore[attr-defined]
    return parse


def add_follow_arguments(parser: argparse.ArgumentParser, description: str) -> None:
    """``--follow``, ``--poll-seconds`` and ``--settle-seconds`` (recalibrate and decide)."""
    follow = parser.add_argument_group("follow a landing directory", description)
    follow.add_argument("--follow", action="store_true",
                        help="keep reading files as they land, on a streaming runner such as "
                             "Flink (see docs/worker.md); returns once the job is submitted")
    follow.add_argument("--poll-seconds", type=number_in(0, low_open=True), default=5.0,
                        help="how often the landing directory is listed (default 5)")
    follow.add_argument("--settle-seconds", type=number_in(0), default=60.0,
                        help="a file without Parquet's footer, unchanged this long, is taken "
                             "and dead-lettered (default 60)")
