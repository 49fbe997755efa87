"""Data contracts of costlib's pipelines, as JSON files (the single source of truth).

- ``score_stream.json``: the input score stream (Parquet), by logical column;
- ``operating_point.json``: one operating point record (Parquet and JSON lines output);
- ``decision.json``: one decision record (Parquet output of ``costlib decide``);
- ``run_config.schema.json``: JSON Schema of the YAML run configuration;
- ``example_config.yaml``: a complete, valid run configuration.

Load them with :func:`load`.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["load", "read_text"]


def read_text(name: str) -> str:
    """Text of a contract file shipped with this package."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def load(name: str) -> Any:
    """A JSON contract by file name, e.g. ``load("operating_point.json")``."""
    return json.loads(read_text(name))
