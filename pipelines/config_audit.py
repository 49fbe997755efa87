"""The defaults of a run config's ``audit`` section that depend on what the config names
(:func:`audit_defaults`): score strata and the fixed design for a config that names score
edges or weights, strata relative to the point in force with the default shares and weights
(:data:`DEFAULT_AUDIT_SHARES`, :data:`DEFAULT_AUDIT_WEIGHTS`) and the ``auto`` design
otherwise. Applied before the schema's own defaults.
"""

from __future__ import annotations

__all__ = ["DEFAULT_AUDIT_SHARES", "DEFAULT_AUDIT_WEIGHTS", "audit_defaults"]

#: Audit strata of a config that names no strata (docs/audit.md, "Strata relative to the point
#: in force"): shares of each group's unflagged rows nearest the point, weights far to near.
DEFAULT_AUDIT_SHARES = [0.001, 0.01, 0.05, 0.25]
DEFAULT_AUDIT_WEIGHTS = [0.5, 2.0, 10.0, 60.0, 1000.0]


def audit_defaults(data: dict) -> dict:
    """The ``audit`` defaults that depend on what the config names.

    A config that sets ``audit.strata.edges`` or ``audit.strata.weights`` but not
    ``relative_to`` keeps score strata (``relative_to: score``, no shares) and, without
    ``audit.design``, the fixed design, exactly as before. Otherwise the strata are relative
    to the point in force (``relative_to: point``; without shares or steps the default shares
    and weights) and the design defaults to ``auto`` (``budget_share`` = expected audited
    share of all unflagged rows).
    """
    audit = data.get("audit")
    if ("audit" in data and audit is None) or (audit is not None and not isinstance(audit, dict)):
        return data  # the schema names it (a section written but left empty is null in YAML)
    audit = dict(audit or {})
    strata = audit.get("strata")
    if ("strata" in audit and strata is None) or (
            strata is not None and not isinstance(strata, dict)):
        return data
    strata = dict(strata or {})
    if "relative_to" not in strata:
        named = bool(strata.get("edges")) or "weights" in strata
        strata["relative_to"] = "score" if named else "point"
    if strata["relative_to"] == "point":
        if not strata.get("shares") and not strata.get("steps"):
            strata.setdefault("shares", list(DEFAULT_AUDIT_SHARES))
            strata.setdefault("weights", list(DEFAULT_AUDIT_WEIGHTS))
        strata.setdefault("shares", [])
        audit.setdefault("design", "auto")
    else:
        strata.setdefault("shares", [])
        strata.setdefault("weights", [1.0])
        audit.setdefault("design", "fixed")
    audit["strata"] = strata
    return {**data, "audit": audit}
