"""Why a point is where it is: the reason text of a ``coverage_limited`` or ``infeasible``
selection (:func:`selection_reason`), stated in the numbers of the grid it was read from;
thresholds to 4 significant digits (:func:`costlib.message_text.thresholds_text`), the point's
files keep full precision.
"""

from __future__ import annotations

from typing import Any

from costlib.message_text import thresholds_text
from costlib.thresholds.point._objectives import Selection
from costlib.thresholds.point._point_context import PointContext as _Context

__all__ = ["selection_reason"]


def selection_reason(ctx: _Context, selection: Selection, chosen: dict[str, Any],
                     free: dict[str, Any] | None) -> str:
    """The reason of a point whose selection is not plainly ``ok``, in the data's numbers.

    ``coverage_limited``: the unrestricted best point ``free`` (thresholds, objective, its
    unrated share of the flagged volume against ``max_unrated_share``) and the covered point
    ``chosen`` it was held back to. ``infeasible``: the limits asked, and for ``min_recall``
    the total positives recall is counted against (the estimate, or the upper end of its
    interval) with the nearest point's recall counted that way. Empty otherwise.
    """
    if selection.status == "coverage_limited":
        assert free is not None  # a coverage-limited selection has an unrestricted point
        share = free["unrated"] / free["volume"]
        return (
            f"the best {ctx.method} point (thresholds {thresholds_text(free['thresholds'])}, "
            f"{ctx.objective.name} {free['objective']:.6g}) flags {free['unrated']:g} unrated of "
            f"{free['volume']:g} ({share:.1%} > allowed {ctx.max_unrated_share:g}); held back "
            f"to the best covered point ({ctx.objective.name} {chosen['objective']:.6g})"
        )
    if selection.status == "infeasible":
        limits = {k: v for k, v in ctx.constraints.as_dict().items() if v is not None}
        if ctx.objective.volume_cap is not None:
            limits["volume"] = ctx.objective.volume_cap
        recall = ""
        if ctx.constraints.min_recall is not None:
            total = ctx.constraints.total_positives
            estimate = ctx.grid.total_positives
            if total == estimate:
                what = f"the estimated total of {total:,.4g} positives"
                share = f"the nearest point's estimated recall is {_share(chosen['tp'], ctx)}"
            else:
                what = (f"{total:,.4g} positives: the upper end of the {ctx.recall_level:.0%} "
                        f"interval of the total positives, estimated at {estimate:,.4g}")
                share = (f"the nearest point's recall counted that way is "
                         f"{_share(chosen['tp'], ctx)}")
            recall = f" (recall is counted against {what}; {share})"
        asked = ", ".join(f"{name} {value:.4g}" for name, value in limits.items())
        return (
            f"no covered {ctx.method} point that flags anything meets {asked}{recall}; the "
            f"nearest point (the smallest largest relative violation) misses "
            f"{', '.join(selection.violated)}"
        )
    return ""


def _share(tp: float, ctx: _Context) -> str:
    total = ctx.constraints.total_positives
    return f"{tp / total:.4g}" if total else "undefined"
