"""Group results per GroupByKey key in a windowed run, before and after sharding (issue 12).

1,000 groups (plus ``"__all__"``) of one window, on-time pane. *Before*: the results were keyed
``"results"`` (every group's result on one key per window pane). *After*: keyed by shard
(``window_shards.KeyByShardFn``, ``window_shards.SHARDS`` shards; the parent's copies counted
apart). Both are measured on a GroupByKey's output in the same run (FnApiRunner), and the
sharded tail (``window_shards.WriteWindows``: shard files and the window's assembly) is timed
with them.

Run: ``.venv/bin/python tests/benchmarks/bench_window_shards.py``
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.transforms.window import FixedWindows, TimestampedValue

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machine import describe
from pipeline_data import base_config, direct_grids

from costlib.sample import generate_score_stream
from costlib.thresholds.loop._recalibration import ALL_GROUPS
from costlib_pipelines.recalibrate import window_shards
from costlib_pipelines.recalibrate.optimizing import optimize_one

GROUPS = 1000
DAY = 86_400


def _results(config):
    frame = generate_score_stream(4000, groups=["g"], prevalence=0.03, days=1, seed=0)
    frame["weight"] = np.ones(len(frame))
    base = optimize_one(config, "g", direct_grids(frame, config)["g"])
    names = [f"group-{i:04d}" for i in range(GROUPS)] + [ALL_GROUPS]
    return [("results", (dataclasses.replace(base, group=n), 0)) for n in names]


def _per_key(element):
    key, values = element
    own = {v[0].group for v in values if len(v) < 3 or v[2]}  # (result, pane[, own])
    return key, len(own)


def _keep(element, path: str) -> None:
    with open(path, "a") as fh:  # one line per key (FnApiRunner in process: one writer)
        fh.write(f"{element[1]}\n")


def main() -> None:
    config = base_config(methods=["graph"])
    results = _results(config)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        with beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions()) as pipeline:
            windowed = (pipeline | beam.Create(results)
                        | beam.Map(lambda r: TimestampedValue(r, 60))
                        | beam.WindowInto(FixedWindows(DAY)))
            _ = (windowed | "Before" >> beam.GroupByKey() | "CountBefore" >> beam.Map(_per_key)
                 | "KeepBefore" >> beam.Map(_keep, f"{tmp}/before"))
            _ = (windowed | "ByShard" >> beam.ParDo(window_shards.KeyByShardFn(
                     window_shards.SHARDS))
                 | "After" >> beam.GroupByKey() | "CountAfter" >> beam.Map(_per_key)
                 | "KeepAfter" >> beam.Map(_keep, f"{tmp}/after"))
            _ = windowed | window_shards.WriteWindows(config, f"{tmp}/run", "bench")
        seconds = time.perf_counter() - started
        [window] = Path(tmp, "run", "windows").iterdir()
        rows = pq.read_metadata(window / "operating_points.parquet").num_rows
        counts = {name: [int(n) for n in Path(tmp, name).read_text().split()]
                  for name in ("before", "after")}
    print(describe())
    before, after = max(counts["before"]), counts["after"]
    print(f"{GROUPS} groups + __all__, one window pane: peak group results per GroupByKey key "
          f"before {before} (1 key), after {max(after)} "
          f"({len(after)} shard keys, min {min(after)}; each key also gets 1 parent copy)")
    print(f"both GroupByKeys and the sharded tail (shard files + assembly, {rows} records) in "
          f"one FnApiRunner run: {seconds:.2f} s")


if __name__ == "__main__":
    main()
