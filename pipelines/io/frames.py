"""A run's outputs as pandas frames, for notebooks and scripts: the operating points of a
recalibrate run and the decisions of a decide run, read with :func:`pyarrow.parquet.read_table`
and converted with ``to_pandas`` (never ``pandas.read_parquet``, whose reader can abort the
interpreter at exit with some pyarrow versions: "terminate called without an active
exception"). Decisions get their item ids back in the type the score stream had (decide stores
them as strings; its manifest records each input file's id type).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from costlib_pipelines.io.files import InputError
from costlib_pipelines.io.filesystems import FileSystems
from costlib_pipelines.io.records import arrow_schema
from costlib_pipelines.io.runs import latest_run_id, read_manifest

__all__ = ["decisions_frame", "operating_points_frame"]


def _run_dir(path: str, command: str) -> tuple[str, dict[str, Any]]:
    """The run directory ``path`` names (an output directory: its ``LATEST`` run) and its
    manifest; :class:`InputError` for an incomplete run or one of another command."""
    path = path.rstrip("/")
    latest = latest_run_id(path)
    if latest is not None:
        path = f"{path}/runs/{latest}"
    manifest = read_manifest(path)
    if manifest.get("command", command) != command:
        raise InputError(f"{path}: a {manifest.get('command')} run, not a {command} run")
    return path, manifest


def _bools_nullable(dtype: pa.DataType) -> pd.api.extensions.ExtensionDtype | None:
    return pd.BooleanDtype() if pa.types.is_boolean(dtype) else None


def operating_points_frame(path: str) -> pd.DataFrame:
    """The operating points of a recalibrate run, one row per group and method.

    Parameters
    ----------
    path : str
        A recalibrate output directory (its published run, ``LATEST``) or a run directory.

    Returns
    -------
    pandas.DataFrame
        The columns of ``schemas/operating_point.json``: ``group``, ``method``, ``status``,
        ``thresholds`` (one per classifier, in the order of ``classifiers``; None: the group
        flags nothing), ``tp``, ``fp``, ``precision``, ...
    """
    run_dir, _ = _run_dir(path, "recalibrate")
    if not FileSystems.exists(f"{run_dir}/operating_points.parquet"):
        raise InputError(f"{run_dir}: no operating_points.parquet (a windowed run keeps one per "
                         "window: windows/<start>_<end>/operating_points.parquet)")
    with FileSystems.open(f"{run_dir}/operating_points.parquet") as fh:
        table = pq.read_table(fh)
    return table.to_pandas(types_mapper=_bools_nullable)


def decisions_frame(path: str) -> pd.DataFrame:
    """The decisions of a decide run, one row per decided input row, item ids in the type
    the score stream had.

    Parameters
    ----------
    path : str
        A decide output directory (its latest run, ``LATEST``) or a run directory.

    Returns
    -------
    pandas.DataFrame
        The columns of ``schemas/decision.json``; ``threshold_decision`` and the other flags
        as pandas' nullable boolean (``<NA>``: no operating point); ``item_id`` as int64
        when every input file's id column was an integer column (join it to your ids with
        ``merge(on=...)``), else as strings.
    """
    run_dir, manifest = _run_dir(path, "decide")
    files = sorted(m.path for r in FileSystems.match([f"{run_dir}/decisions/*.parquet"])
                   for m in r.metadata_list)
    tables = []
    for name in files:
        with FileSystems.open(name) as fh:
            tables.append(pq.read_table(fh))
    table = pa.concat_tables(tables) if tables else arrow_schema("decision.json").empty_table()
    id_types = {entry.get("item_id_type") for entry in manifest.get("inputs") or []}
    if id_types and all(t and pa.types.is_integer(pa.type_for_alias(t)) for t in id_types):
        # one integer type restores exactly; files of several integer types meet in int64
        target = pa.type_for_alias(id_types.pop()) if len(id_types) == 1 else pa.int64()
        index = table.column_names.index("item_id")
        table = table.set_column(index, "item_id", pc.cast(table.column("item_id"), target))
    return table.to_pandas(types_mapper=_bools_nullable)
