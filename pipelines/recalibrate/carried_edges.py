"""Default (``auto``) edges carried from the published run: one pass over the data.

``grid.edges: auto`` places candidate thresholds from edge sketches of the rows
(:mod:`costlib.thresholds.binning._score_sketch`,
:func:`costlib.thresholds.decision_edges_from_sketch`). Placing them from *this* run's rows
needs a first pass before the grids can be counted. Every run with auto edges therefore also
sketches its rows while it counts them (in the same pass) and writes the merged sketch to
``runs/<run_id>/edge_sketch.parquet``; the next run of the same output (``grid.auto_edges_from:
previous_run``, the default) places its edges from the *published* run's sketch and counts its grids
in a single pass. A first run (nothing published), a published run without a sketch, or one of other
classifiers falls back to the first pass (``this_run``), and the manifest's ``grid_edges.source``
says which happened.

Between two runs of a scheduled recalibration the windows overlap (each day recalibrates on the
last days), so the previous run's score distribution places the candidates where this run
decides; the thresholds in force are added to them as for every recipe, and the resolution
check (``point.resolution``) says when the lattice limits a group's answer.

File layout (Parquet): one row per classifier and channel (``scored``, ``rated``,
``positives``), columns ``classifier``, ``channel``, ``level``, ``capacity``, ``keys`` (list of
uint64: the occupied buckets, ascending) and ``weights`` (list of float64).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from costlib.thresholds.binning import EdgeSketch, ScoreSketch
from costlib_pipelines.io.files import open_parquet, parquet_bytes, write_bytes_atomically
from costlib_pipelines.io.filesystems import FileSystems

__all__ = [
    "SKETCH_FILE",
    "carried_sketches",
    "read_edge_sketches",
    "sketch_table",
    "write_edge_sketches",
]

#: Where a run with auto edges writes the merged sketch of its rows (in its run directory).
SKETCH_FILE = "edge_sketch.parquet"
_CHANNELS = ("scored", "rated", "positives")


def sketch_table(sketches: Sequence[EdgeSketch], classifiers: Sequence[str]) -> pa.Table:
    """The sketches of every classifier as one table (see the module docstring)."""
    rows: dict[str, list[Any]] = {name: [] for name in
                                  ("classifier", "channel", "level", "capacity", "keys",
                                   "weights")}
    for name, sketch in zip(classifiers, sketches, strict=True):
        for channel in _CHANNELS:
            part: ScoreSketch = getattr(sketch, channel)
            rows["classifier"].append(name)
            rows["channel"].append(channel)
            rows["level"].append(part.level)
            rows["capacity"].append(part.capacity)
            rows["keys"].append(pa.array(part.keys, pa.uint64()))
            rows["weights"].append(pa.array(part.weights, pa.float64()))
    return pa.table({
        "classifier": pa.array(rows["classifier"], pa.string()),
        "channel": pa.array(rows["channel"], pa.string()),
        "level": pa.array(rows["level"], pa.int8()),
        "capacity": pa.array(rows["capacity"], pa.int64()),
        "keys": _lists(rows["keys"], pa.uint64()),
        "weights": _lists(rows["weights"], pa.float64()),
    })


def _lists(arrays: list[pa.Array], kind: pa.DataType) -> pa.ListArray:
    """One list per row from whole arrays (no Python loop over their values)."""
    offsets = np.concatenate(([0], np.cumsum([len(a) for a in arrays]))).astype(np.int32)
    values = pa.concat_arrays(arrays) if arrays else pa.array([], kind)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def write_edge_sketches(sketches: Sequence[EdgeSketch] | None, run_dir: str,
                        classifiers: Sequence[str]) -> str | None:
    """Write the run's merged sketches (None: no row was read, nothing written)."""
    if sketches is None:
        return None
    path = f"{run_dir}/{SKETCH_FILE}"
    # snappy: a fifth of zstd's time on these keys (zstd's first call in a worker costs
    # ~0.1 s), for a file of under a megabyte
    table = sketch_table(sketches, classifiers)
    write_bytes_atomically(path, parquet_bytes(table, compression="snappy"))
    return path


def read_edge_sketches(path: str, classifiers: Sequence[str]) -> list[EdgeSketch]:
    """The sketches of ``classifiers`` (in that order) from a run's sketch file.

    Raises
    ------
    ValueError
        The file is not a readable sketch file (:class:`~costlib_pipelines.io.files.InputError`),
        or lacks one of the classifiers (the config changed).
    """
    table = open_parquet(path).read()  # an unreadable file is an InputError naming it
    expected = {"classifier", "channel", "level", "capacity", "keys", "weights"}
    if not expected <= set(table.column_names):
        raise ValueError(f"{path}: not an edge sketch file (columns {table.column_names})")
    index = {(c, h): i for i, (c, h) in enumerate(zip(table["classifier"].to_pylist(),
                                                      table["channel"].to_pylist(),
                                                      strict=True))}
    missing = [c for c in classifiers if (c, "scored") not in index]
    if missing:
        raise ValueError(f"{path}: no sketch of classifier(s) {missing}")
    levels, capacities = table["level"].to_pylist(), table["capacity"].to_pylist()
    keys, weights = table["keys"].combine_chunks(), table["weights"].combine_chunks()
    out = []
    for name in classifiers:
        parts = {}
        for channel in _CHANNELS:
            i = index.get((name, channel))
            if i is None:
                raise ValueError(f"{path}: classifier {name!r} has no {channel!r} channel")
            k = keys[i].values.to_numpy(zero_copy_only=False).astype(np.uint64)
            w = weights[i].values.to_numpy(zero_copy_only=False).astype(np.float64)
            if k.shape != w.shape or (k[1:] <= k[:-1]).any() or (w <= 0).any():
                raise ValueError(f"{path}: {name!r}/{channel}: keys must be strictly "
                                 "ascending with one positive weight each")
            parts[channel] = ScoreSketch(k, w, int(levels[i]), int(capacities[i]))
        out.append(EdgeSketch(**parts))
    return out


def carried_sketches(output: str, run_id: str | None,
                     classifiers: Sequence[str]) -> tuple[list[EdgeSketch] | None, dict[str, Any]]:
    """The published run's sketches, or None and why not (for the manifest)."""
    if run_id is None:
        return None, {"note": "nothing published in the output: edges from a first pass"}
    path = f"{output.rstrip('/')}/runs/{run_id}/{SKETCH_FILE}"
    if not FileSystems.exists(path):
        return None, {"note": f"published run {run_id} has no {SKETCH_FILE}: edges from a "
                              "first pass"}
    try:
        return read_edge_sketches(path, classifiers), {"run_id": run_id}
    except (ValueError, OSError, pa.ArrowException) as exc:
        return None, {"note": f"cannot use {path} ({exc}): edges from a first pass"}
