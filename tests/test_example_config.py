"""schemas/example_config.yaml is the documented template of every option (docs/pipelines.md):
it loads as a run config, and it names every key of the schema."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from costlib_pipelines.config import load_config

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
EXAMPLE = SCHEMAS / "example_config.yaml"


def _key_paths(node: dict[str, Any], path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for key, child in (node.get("properties") or {}).items():
        yield (*path, key)
        yield from _key_paths(child, (*path, key))


def test_example_config_loads():
    config = load_config(str(EXAMPLE))
    assert config.classifiers


def test_example_config_names_every_schema_key():
    """Every property of schemas/run_config.schema.json, at every depth, appears in the
    example as ``key:`` (set, or in a comment showing how to set it)."""
    schema = json.loads((SCHEMAS / "run_config.schema.json").read_text())
    text = EXAMPLE.read_text()
    paths = list(_key_paths(schema))
    assert len(paths) > 80
    missing = [".".join(p) for p in paths if not re.search(rf"\b{re.escape(p[-1])}\s*:", text)]
    assert missing == []


def test_example_in_force_section_shows_the_defaults():
    schema = json.loads((SCHEMAS / "run_config.schema.json").read_text())
    shown = yaml.safe_load(EXAMPLE.read_text())["in_force"]
    defaults = {k: v["default"] for k, v in schema["properties"]["in_force"]["properties"].items()}
    assert shown == defaults


def test_example_config_sets_only_the_columns_every_stream_has():
    """A copy adapted to one's own stream must not fail on a column a typical stream lacks:
    the optional columns (weight, probability, set_id, audit_probability) are comments, and
    the columns it sets are the schema's defaults."""
    schema = json.loads((SCHEMAS / "run_config.schema.json").read_text())
    defaults = {k: v.get("default")
                for k, v in schema["properties"]["columns"]["properties"].items()}
    shown = yaml.safe_load(EXAMPLE.read_text())["columns"]
    assert shown == {k: v for k, v in defaults.items() if v is not None}
    assert load_config(str(EXAMPLE)).columns == defaults
