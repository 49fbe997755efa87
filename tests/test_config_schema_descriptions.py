"""Every key of the run configuration is documented: each named property of
schemas/run_config.schema.json, at every depth, has a non-empty "description"."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "run_config.schema.json"

#: Keywords whose value is one subschema, and those whose value is a list of subschemas.
_ONE = ("items", "additionalProperties", "propertyNames", "not", "if", "then", "else",
        "contains", "unevaluatedProperties", "unevaluatedItems")
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
#: Keywords whose value maps names to subschemas that are not config keys.
_DEFS = ("$defs", "definitions")


def _properties(schema: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(key path, subschema) of every named property reachable from ``schema``: through
    properties, items, additionalProperties, anyOf/oneOf/allOf branches and $defs."""
    if not isinstance(schema, dict):
        return
    for key, sub in (schema.get("properties") or {}).items():
        here = f"{path}.{key}" if path else key
        yield here, sub
        yield from _properties(sub, here)
    for key in _ONE:
        if key in schema:
            yield from _properties(schema[key], f"{path}[{key}]")
    for key in _MANY:
        for i, sub in enumerate(schema.get(key) or []):
            yield from _properties(sub, f"{path}[{key}{i}]")
    for key in _DEFS:
        for name, sub in (schema.get(key) or {}).items():
            yield from _properties(sub, f"{key}.{name}")


def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA.read_text(encoding="utf-8"))


def test_walk_reaches_nested_keys():
    """The walk finds keys inside nested objects, nullable objects and oneOf branches."""
    paths = {p for p, _ in _properties(_schema())}
    assert len(paths) > 80
    for expected in ("columns.group", "target.benefit_matrix", "audit.strata.weights",
                     "windowing.size_days", "min_risk.fn[oneOf1].column"):
        assert expected in paths


def test_every_config_key_has_a_description():
    missing = sorted(
        path for path, sub in _properties(_schema())
        if not (isinstance(sub, dict) and isinstance(sub.get("description"), str)
                and sub["description"].strip())
    )
    assert not missing, (f"{len(missing)} keys of {SCHEMA.name} lack a non-empty "
                         "description:\n  " + "\n  ".join(missing))
