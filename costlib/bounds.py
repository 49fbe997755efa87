"""Bounds of the numeric run parameters, declared once.

:data:`BOUNDS` maps a parameter, by its key in the run config (``constraints.min_recall``), to
the :class:`Interval` its values must lie in. The library's objects validate against it
(:class:`costlib.thresholds.Target`, :class:`~costlib.thresholds.Objective`,
:class:`~costlib.thresholds.Constraints`, :class:`~costlib.thresholds.InForcePolicy`, the
coverage check and the bootstrap and recall levels), the ``costlib`` commands build their
argparse types from it, and a test checks that the config schema states the same intervals.
Keys only the commands and the schema read (``capacity.total``, ``publish.*``) are here too, so
that no interval is written twice.

>>> BOUNDS["constraints.min_recall"].text(), 0.0 in BOUNDS["constraints.min_recall"]
('in (0, 1]', False)
>>> BOUNDS["constraints.max_volume"].text(), BOUNDS["constraints.max_volume"].json_schema()
('>= 0', {'minimum': 0})
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from costlib._messages import plain

__all__ = ["BOUNDS", "Interval"]


@dataclass(frozen=True)
class Interval:
    """The real numbers between ``low`` and ``high``, each end closed unless ``*_open``.

    Membership needs a finite number: NaN and infinities are never inside, whatever the ends.
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: object) -> bool:
        """Whether ``value`` is a finite real number in the interval."""
        try:
            x = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False
        return (math.isfinite(x)
                and (x > self.low if self.low_open else x >= self.low)
                and (x < self.high if self.high_open else x <= self.high))

    def check(self, name: str, value: float) -> None:
        """Refuse ``value`` outside the interval: ``ValueError("{name} must be {text}, got
        {value}")``."""
        if value not in self:
            raise ValueError(f"{name} must be {self.text()}, got {plain(value)}")

    def text(self) -> str:
        """How messages state the interval: ``>= 0``, ``> 0`` or ``in (0, 1]``."""
        if math.isinf(self.high):
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return (f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.high_open else ']'}")

    def json_schema(self) -> dict[str, int | float]:
        """The JSON Schema keywords of the interval (``minimum``, ``exclusiveMinimum``, ...;
        an infinite end states nothing)."""
        out: dict[str, int | float] = {}
        for end, open_, word in ((self.low, self.low_open, "Minimum"),
                                 (self.high, self.high_open, "Maximum")):
            if not math.isinf(end):
                value = int(end) if float(end).is_integer() else end
                out[f"exclusive{word}" if open_ else word.lower()] = value
        return out


_UNIT = Interval(0.0, 1.0)
_POSITIVE = Interval(0.0, low_open=True)
_NON_NEGATIVE = Interval(0.0)

#: Config key -> the interval of its values (a key left out of the config is not bounded here).
BOUNDS: Mapping[str, Interval] = MappingProxyType({
    "target.marginal_precision": Interval(0.0, 1.0, low_open=True, high_open=True),
    "target.slope": _POSITIVE,
    "target.fp_per_tp": _POSITIVE,
    "objective.beta": _POSITIVE,
    "objective.volume": _POSITIVE,
    "constraints.min_precision": Interval(0.0, 1.0, low_open=True),
    "constraints.min_recall": Interval(0.0, 1.0, low_open=True),
    "constraints.max_volume": _NON_NEGATIVE,
    "constraints.max_false_positives": _NON_NEGATIVE,
    "coverage.max_unrated_share": _UNIT,
    "capacity.total": _NON_NEGATIVE,
    "publish.max_threshold_change": _NON_NEGATIVE,
    "publish.min_rated": _NON_NEGATIVE,
    "in_force.min_gain_z": _NON_NEGATIVE,
    "in_force.evidence_z": _NON_NEGATIVE,
    "in_force.unseen_rows": Interval(0.0, 100.0),
    "in_force.max_added_edges": Interval(0.0, 4096.0),
    "bootstrap.level": Interval(0.0, 1.0, low_open=True, high_open=True),
    "recall.level": Interval(0.0, 1.0, low_open=True, high_open=True),
})
