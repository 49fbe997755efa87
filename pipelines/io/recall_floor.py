"""Which infeasible operating points ``costlib decide`` applies: those that miss ``min_recall``
only (plain dicts, no heavy imports: ``costlib status`` uses it without Beam or the config)."""

from __future__ import annotations

from typing import Any

__all__ = ["misses_only_min_recall"]

#: The constraints an operating point record can check on its own counts: name -> (record
#: field, whether the field must be at least (True) or at most (False) the constraint).
_RECORD_CHECKS = {"min_precision": ("precision", True), "max_volume": ("volume", False),
                  "max_false_positives": ("fp", False)}


def misses_only_min_recall(record: dict[str, Any]) -> bool:
    """True for an ``infeasible`` record whose point misses ``min_recall`` only: it has
    thresholds and meets every other constraint of the record (``min_precision``,
    ``max_volume``, ``max_false_positives``, checked on its own counts).

    Such a point is applied by ``costlib decide`` (a run holding one is held by the guard, so
    it is applied only after a person published the run): the record holds the nearest point,
    which for ``min_recall`` alone is the covered point with the most true positives, i.e. the
    highest recall (and recall lower bound) the rated region allows; without audit rows
    (recall unknown), the best point chosen without the floor. Flagging nothing instead would
    answer a request for more recall with none. Any other infeasible point breaks a
    constraint that flagging less protects (precision, volume, false positives): decide gives
    its group null decisions (fails closed).
    """
    if record.get("point_status") != "infeasible" or record.get("min_recall") is None:
        return False
    if record["thresholds"] is None:
        return False
    for name, (column, at_least) in _RECORD_CHECKS.items():
        limit, value = record.get(name), record.get(column)
        if limit is None:
            continue
        if value is None or (value < limit if at_least else value > limit):
            return False
    return True
