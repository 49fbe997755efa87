"""Data contracts of costlib's pipelines, as JSON files (the single source of truth).

- ``score_stream.json``: the input score stream (Parquet), by logical column;
- ``operating_point.json``: one operating point record (Parquet and JSON lines output);
- ``decision.json``: one decision record (Parquet output of ``costlib decide``);
- ``run_config.schema.json``: JSON Schema of the YAML run configuration;
- ``example_config.yaml``: a complete, valid run configuration.

Load them with :func:`load`. Installed as ``costlib_schemas`` (the repository keeps the
directory ``schemas/``; see docs/install.md).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["load", "read_text"]

if __name__ != "costlib_schemas":  # loaded under the directory's bare name (a checkout's root)
    raise ImportError(
        f"the schemas/ directory is the package costlib_schemas; import costlib_schemas, "
        f"not {__name__}"
    )


def read_text(name: str) -> str:
    """Text of a contract file shipped with this package."""
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def load(name: str) -> Any:
    """A JSON contract by file name, e.g. ``load("operating_point.json")``."""
    return json.loads(read_text(name))
