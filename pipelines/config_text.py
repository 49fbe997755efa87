"""Reading a run config file: the text as YAML, before the schema sees it.

PyYAML's safe loader with two changes: a key written twice in one mapping is an error (PyYAML
keeps the last one silently), and ``1e-3`` reads as a number (YAML 1.1 only reads ``1.0e-3``
as one). A file that is not UTF-8, and a YAML syntax error, are one-line errors naming the file
(:func:`read_config_text`). :func:`schema_blind_spots` finds what YAML can write and a JSON
schema cannot see: NaN and infinite numbers (``.nan``, ``.inf``, which pass every bound) and
mapping keys that are not strings; :func:`schema_error_line` words one schema error for the
one-line message.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import yaml

from costlib.thresholds.point import parameter_owners

__all__ = ["check_objective_keys_as_written", "read_config_text",
           "schema_blind_spots", "schema_error_line"]


class _ConfigLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key written twice in one mapping (PyYAML keeps the
    last silently) and reads ``1e-3`` as a number (YAML 1.1 wants ``1.0e-3``)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # '<<: *anchor' (merged by the base class)
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                hash(key)
            except TypeError:
                continue  # an unhashable key: the base class names it
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} is written twice (first on line {seen[key]})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"))


def read_config_text(path: Path, error: type[Exception]) -> Any:
    """The parsed YAML of the config file ``path``; unreadable, not UTF-8 or not YAML raise
    ``error`` (one line naming the file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"{path}: cannot read the run config: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the run config is not UTF-8 text (byte {exc.start}: "
                    f"{exc.reason})") from exc
    try:
        return yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {_yaml_problem(exc)}") from exc


def schema_blind_spots(value: Any, path: str = "") -> list[str]:
    """Key paths of every NaN or infinite number in a parsed config (YAML's ``.nan``,
    ``.inf``): no key takes one (null is "unset" where a key allows it), and NaN passes every
    ``minimum``/``maximum`` of the schema because it compares false; and of every mapping key
    that is not a string (a group named 1e5 or 123 must be quoted: the schema's key checks
    see only strings, so ``{1e5: 1000}`` would silently never match group "1e5")."""
    if isinstance(value, float) and not np.isfinite(value):
        return [f"{path or '(top level)'}: {value!r} is not a finite number"]
    if isinstance(value, dict):
        keys = [f"{path or '(top level)'}: key {k!r} is not a string (YAML read an unquoted "
                f"{type(k).__name__}): quote it as written in the file" for k in value
                if not isinstance(k, str)]
        return keys + [m for k, v in value.items()
                       for m in schema_blind_spots(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [m for i, v in enumerate(value) for m in schema_blind_spots(v, f"{path}.{i}")]
    return []


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML parser error on one line: where, what, and what the parser was reading, e.g.
    ``line 2, column 1: expected ',' or ']', but got '<stream end>' (while parsing a flow
    sequence that starts at line 1, column 10)``; PyYAML's own text shows the source lines
    with a ``^`` under the column, which does not survive being put on one line."""
    if not isinstance(exc, yaml.MarkedYAMLError) or not exc.problem:
        return " ".join(str(exc).split())

    def where(mark: Any) -> str:
        return f"line {mark.line + 1}, column {mark.column + 1}"

    text = f"{where(exc.problem_mark)}: {exc.problem}" if exc.problem_mark else exc.problem
    if exc.context:
        start = f" that starts at {where(exc.context_mark)}" if exc.context_mark else ""
        text += f" ({exc.context}{start})"
    return text


def _key_path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(top level)"


def schema_error_line(error: jsonschema.ValidationError) -> str:
    """One schema error as ``key.path: message``; a boolean where a string is expected gets
    the YAML hint (unquoted ``off``/``on``/``yes``/``no`` are booleans in YAML), an unknown key
    the closest known one."""
    line = f"{_key_path(error)}: {error.message}"
    schema = error.schema if isinstance(error.schema, dict) else {}
    if (error.validator in ("maxProperties", "minProperties") and schema.get("properties")
            and schema.get("minProperties") == schema.get("maxProperties") == 1
            and isinstance(error.instance, dict)):
        given = ", ".join(map(str, error.instance)) or "none"
        return (f"{_key_path(error)}: give exactly one of {', '.join(schema['properties'])} "
                f"(got {given})")
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list((error.schema.get("properties") or {}) if isinstance(error.schema, dict)
                     else [])
        hints = [f"{key!r} -> {close[0]!r}" for key in error.instance if key not in known
                 for close in [difflib.get_close_matches(str(key), known, n=1, cutoff=0.75)]
                 if close]
        if hints:
            line += f" (did you mean {', '.join(hints)}?)"
    if isinstance(error.instance, bool) and error.validator == "type":
        line += (" (YAML reads unquoted off/on/yes/no as true/false: quote the value, "
                 "e.g. 'off')")
    return line




def check_objective_keys_as_written(data: dict[str, Any], *, source: str,
                                    error: type[Exception]) -> None:
    """A config file's ``objective.beta`` (other than its default 1.0) with an objective other
    than fbeta, or ``objective.volume`` (other than null) with an objective other than
    precision_at_volume, would be ignored: ``error``, as ``costlib recalibrate
    --beta``/``--volume`` without the matching ``--objective`` is refused. Checked on the file
    as written (``beta: 1.0`` and ``volume: null`` next to another objective are the example
    config's template; a validated config always holds them), so a command line that
    overrides the file's objective is not refused for it."""
    objective = data.get("objective")
    if not isinstance(objective, dict):
        return
    name = objective.get("name", "linear")
    for key, (needs, default) in parameter_owners().items():
        value = objective.get(key, default)
        if name != needs and value != default:
            shown = f"{value:g}" if isinstance(value, int | float) else repr(value)
            raise error(
                f"{source}: objective.{key}: {shown} applies to objective.name {needs} only, "
                f"but objective.name is {name}; set name: {needs}, or remove {key}")
