"""Before a stage runs: its plausibility settings and every input file's schema, checked from
the files' footers (:func:`preflight`, called by ``costlib recalibrate`` and ``costlib
decide`` alike).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.files import read_footers
from costlib_pipelines.io.plausibility import Plausibility
from costlib_pipelines.io.schema import check_schema

__all__ = ["preflight"]


def preflight(paths: Sequence[str], config: RunConfig, *, windowed: bool,
              for_decisions: bool = False) -> list[dict[str, Any]]:
    """Check the plausibility settings and every file's schema (footer) before the pipeline.

    Returns the manifest's ``inputs``: ``{"path", "rows", "row_groups"}`` per file, and for
    decisions the Arrow type of the file's item id column (``item_id_type``: decisions store
    ids as strings, and readers restore this type).
    """
    Plausibility.from_config(config)  # a bad time or range is a ConfigError before any work
    inputs = []
    for footer in read_footers(paths):
        check_schema(footer.schema, footer.path, config, windowed=windowed,
                     for_decisions=for_decisions)
        record = footer.record()
        if for_decisions:
            record["item_id_type"] = str(footer.schema.field(config.columns["item_id"]).type)
        inputs.append(record)
    return inputs
