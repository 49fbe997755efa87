"""Benchmark of ``costlib decide`` on the local runner (FnApiRunner, in process).

1. Threshold decisions (fast path, no sets): ~10M rows in Parquet, k=2 classifiers, 100 groups;
   the decide pipeline end to end (``run_decide``: preflight, Beam pipeline, manifest) against
   the same work as a plain pyarrow + numpy loop in the same run (read every row group,
   validate, compare with the thresholds, write one Parquet file per row group). Target:
   >= 1M rows/s for the pipeline.
2. Top-k decoding (F1) on ~1M rows in sets of 20 spread over all files (shuffle by set-id hash
   bucket, then ``optimal_topk_ragged``); no target.

Run: ``.venv/bin/python tests/benchmarks/bench_decide.py [--rows 10000000] [--topk-rows 1000000]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

from costlib_pipelines.batches import validate_batch
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide import (
    decide_columns,
    decision_columns,
    run_decide,
    select_operating_points,
    write_decisions,
)
from costlib_pipelines.files import match_inputs, read_row_groups
from costlib_pipelines.records import arrow_schema, records_to_table
from costlib_pipelines.runs import load_operating_points
from costlib_pipelines.transforms import dead_letter_name

CLASSIFIERS = ("text_model", "image_model")


def make_config(topk: bool) -> RunConfig:
    columns = {"probability": "probability", "set_id": "set_id"} if topk else {}
    return RunConfig.from_dict({
        "columns": columns, "classifiers": list(CLASSIFIERS), "rule": "any", "grid": {},
        "target": {"marginal_precision": 0.3}, "min_rated": {}, "bootstrap": {},
        "decoding": {"loss": "f1", "params": {}, "buckets": 16},
    })


def write_stream(directory: Path, rows: int, *, files: int, row_group: int, groups: int,
                 set_size: int | None, seed: int) -> str:
    """A score stream: 10% of scores null per classifier; sets spread over all files."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    names = pa.array([f"group_{g:03d}" for g in range(groups)])
    bounds = np.linspace(0, rows, files + 1).astype(np.int64)
    for i in range(files):
        n = int(bounds[i + 1] - bounds[i])
        ids = np.arange(bounds[i], bounds[i + 1], dtype=np.int64)
        columns = {
            "group": pa.DictionaryArray.from_arrays(
                pa.array(rng.integers(0, groups, n).astype(np.int32)), names),
            "item_id": pa.array(ids),
        }
        for name in CLASSIFIERS:
            columns[name] = pa.array(rng.random(n), mask=rng.random(n) < 0.1)
        if set_size:
            columns["probability"] = pa.array(rng.random(n) ** 4)
            set_number = rng.integers(0, rows // set_size, n)  # sets spread over files
            columns["set_id"] = pc.binary_join_element_wise(
                "set-", pa.array(set_number).cast(pa.string()), "")
        pq.write_table(pa.table(columns), directory / f"scores-{i:03d}.parquet",
                       row_group_size=row_group)
    return str(directory / "*.parquet")


def write_operating_points(path: Path, groups: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    records = []
    unset = {field.name: None for field in arrow_schema("operating_point.json")}
    for group in [f"group_{g:03d}" for g in range(groups)] + ["__all__"]:
        thin = group.endswith("7")  # every tenth group: fallback to __all__
        records.append({
            **unset, "objective": "linear",  # fields this benchmark does not exercise
            "group": group, "window_start": None, "window_end": None, "rule": "any",
            "method": "graph", "classifiers": list(CLASSIFIERS),
            "thresholds": [float(t) for t in rng.uniform(0.6, 0.95, 2)],
            "target_marginal_precision": 0.3, "tp": 1.0, "fp": 1.0, "precision": 0.5,
            "marginal_precision_left": 0.3, "marginal_precision_right": 0.3,
            "rated_positives": 100.0, "rated_negatives": 100.0, "threshold_ci_low": None,
            "threshold_ci_high": None, "tp_ci_low": None, "tp_ci_high": None,
            "fp_ci_low": None, "fp_ci_high": None, "precision_ci_low": None,
            "precision_ci_high": None, "status": "fallback" if thin else "ok",
            "fallback_group": "__all__" if thin else None, "pane_index": 0,
            "run_id": "bench", "config_digest": "bench",
        })
    pq.write_table(records_to_table(records, "operating_point.json"), path)
    return str(path)


def plain_loop(config: RunConfig, inputs: str, operating_points: str, output: Path) -> int:
    """The same work without Beam: read, validate, compare, write one file per row group."""
    records, source = load_operating_points(operating_points)
    thresholds = select_operating_points(records, config, source=source)
    output.mkdir(parents=True, exist_ok=True)
    rows = 0
    for path in match_inputs(inputs):
        for index, table in read_row_groups(path, decide_columns(config)):
            batch = validate_batch(table, config, source=path, row_group=index,
                                   for_decisions=True)
            decisions = decision_columns(batch, thresholds, config.rule, "f1")
            write_decisions(str(output / dead_letter_name(path, index)), decisions)
            rows += decisions.num_rows
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--topk-rows", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    args = parser.parse_args()
    print(f"machine: {describe()}; load average at start "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-decide-") as tmp:
        tmp = Path(tmp)
        start = time.perf_counter()
        inputs = write_stream(tmp / "stream", args.rows, files=8, row_group=250_000,
                              groups=args.groups, set_size=None, seed=1)
        ops = write_operating_points(tmp / "operating_points.parquet", args.groups, seed=2)
        print(f"data: {args.rows:,} rows, k=2, {args.groups} groups, 8 files, row groups of "
              f"250,000 (written in {time.perf_counter() - start:.1f} s)")
        config = make_config(topk=False)
        pipeline_s, loop_s = [], []
        for r in range(args.repeats):
            start = time.perf_counter()
            manifest = run_decide(config, inputs, ops, str(tmp / "out"), beam_args=[],
                                  run_id=f"fast-{r}")
            pipeline_s.append(time.perf_counter() - start)
            assert manifest["row_accounting"]["decided"] == args.rows
            start = time.perf_counter()
            assert plain_loop(config, inputs, ops, tmp / f"loop-{r}") == args.rows
            loop_s.append(time.perf_counter() - start)
        best, peer = min(pipeline_s), min(loop_s)
        flagged = manifest["decision_counts"]["threshold_flagged"]
        print(f"threshold decisions, decide pipeline (FnApiRunner): {best:.2f} s wall, "
              f"{args.rows / best / 1e6:.2f} M rows/s (target >= 1.0 M rows/s; "
              f"{flagged:,} flagged; runs: {', '.join(f'{s:.2f}' for s in pipeline_s)} s)")
        print(f"threshold decisions, plain pyarrow+numpy loop: {peer:.2f} s wall, "
              f"{args.rows / peer / 1e6:.2f} M rows/s (runs: "
              f"{', '.join(f'{s:.2f}' for s in loop_s)} s)")
        print(f"pipeline / loop throughput: {peer / best:.2f}x")
        threads = ["--direct_running_mode=multi_threading", "--direct_num_workers=2"]
        start = time.perf_counter()
        run_decide(config, inputs, ops, str(tmp / "out"), beam_args=threads, run_id="threads")
        seconds = time.perf_counter() - start
        print(f"threshold decisions, decide pipeline ({' '.join(threads)}): {seconds:.2f} s "
              f"wall, {args.rows / seconds / 1e6:.2f} M rows/s")

        n = args.topk_rows
        inputs = write_stream(tmp / "sets", n, files=4, row_group=100_000, groups=args.groups,
                              set_size=20, seed=3)
        start = time.perf_counter()
        manifest = run_decide(make_config(topk=True), inputs, ops, str(tmp / "out-topk"),
                              beam_args=[], run_id="topk")
        seconds = time.perf_counter() - start
        counts = manifest["decision_counts"]
        print(f"top-k (F1) decide pipeline: {n:,} rows in {counts['topk_sets']:,} sets "
              f"(mean size {counts['topk_rows'] / counts['topk_sets']:.1f}), 16 buckets: "
              f"{seconds:.2f} s wall, {n / seconds / 1e6:.2f} M rows/s")


if __name__ == "__main__":
    main()
