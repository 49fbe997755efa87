"""Benchmark: the recalibrate pipeline against a plain pyarrow + numpy loop (issue 5).

Run: ``.venv/bin/python tests/benchmarks/bench_recalibrate.py [--rows 10000000]``

What the default edges cost (issue 20): ``.venv/bin/python tests/benchmarks/bench_recalibrate.py
--edges-cost --rows 5000000`` times auto against uniform(64) and uniform(128) edges.

One big file against many (issue 12: row-group ranges are the unit of parallel work):
``.venv/bin/python tests/benchmarks/bench_recalibrate.py --one-file --rows 4000000 [--peer
CHECKOUT_OF_MAIN] -- --direct_running_mode=multi_processing --direct_num_workers=2``

Same data for both (10M rows, 100 groups, k=2, 256 bins per axis, 10 Parquet files):
- the peer reads every row group with pyarrow, validates it and histograms it per group and for
  all groups with the same functions the pipeline calls (``validate_batch``,
  ``grouped_histograms`` with the unrated rows in a third channel, ``sum_sparse``), summing per
  group: the work without Beam;
- ours runs ``costlib recalibrate``'s pipeline end to end on the local runner (FnApiRunner):
  read, validate, aggregate, optimise 101 grids (graph method), write outputs and manifest.

Targets: aggregation throughput >= 0.8x the loop; end-to-end <= 10 s; end to end >= 0.8x the
loop (issue 12, "fixed cost"). Aggregation throughput is measured as the marginal rate between
runs on N/5 rows and on N rows (best of 3 each), so that the pipeline's fixed cost per run
(graph construction, runner start-up, optimising 101 grids, writing) cancels; it is also
printed in CPU seconds of the process (all threads), which other work on a shared machine
skews much less than wall time. The end-to-end ratio, which includes the fixed cost, is
printed as well, with the fixed cost per run (the intercept) split into its components, timed
inside the best N/5 run (:func:`timed_components`): checks before the graph (inputs, footers,
baseline), graph construction, translation to the runner API, optimising, records, writing shards,
publishing (assembling the record files, manifest), the state sampler's waits, and the rest (runner
start-up, stages and bundles).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
import apache_beam as beam
from apache_beam.runners.worker import statesampler
from machine import describe

from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._sparse import grouped_histograms, sum_sparse
from costlib.thresholds.point._optimize import prepare_graph_paths
from costlib_pipelines.config import RunConfig
from costlib_pipelines.io.batches import validate_batch
from costlib_pipelines.io.files import read_row_groups
from costlib_pipelines.recalibrate import manifest, shards
from costlib_pipelines.recalibrate import pipeline as recalibrate
from costlib_pipelines.recalibrate.optimizing import optimize_one
from costlib_pipelines.recalibrate.pipeline import run_recalibrate


def write_data(directory: Path, n_rows: int, n_groups: int, n_files: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    per_file = n_rows // n_files
    names = np.array([f"group_{g:03d}" for g in range(n_groups)])
    for i in range(n_files):
        y = rng.random(per_file) < 0.01
        s1 = 1 / (1 + np.exp(-(rng.normal(size=per_file) + 2.5 * y - 2)))
        s2 = 1 / (1 + np.exp(-(rng.normal(size=per_file) + 2.0 * y - 2)))
        rated = (s1 > 0.3) | (s2 > 0.3) | (rng.random(per_file) < 0.5)
        label = pa.array(y, mask=~rated)
        table = pa.table({
            "group": pa.array(names[rng.integers(0, n_groups, per_file)]).dictionary_encode(),
            "item_id": pa.array(np.arange(i * per_file, (i + 1) * per_file)),
            "text_model": pa.array(s1),
            "image_model": pa.array(s2, mask=rng.random(per_file) < 0.05),
            "label": label,
        })
        pq.write_table(table, directory / f"part-{i:03d}.parquet", row_group_size=250_000)


CONFIG = {
    "classifiers": ["text_model", "image_model"],
    "grid": {"edges": "uniform", "bins": 256, "range": [0.0, 1.0]},
    "target": {"marginal_precision": 0.3},
    "methods": ["graph"],
    "min_rated": {"positives": 5, "negatives": 5},
}


def plain_loop(paths: list[str], config: RunConfig,
               totals: dict[str, np.ndarray] | None = None) -> tuple[float, int]:
    """Seconds and rows of reading, validating and histogramming ``paths`` per group (into
    ``totals``: group -> dense (negatives, positives, unrated) counts)."""
    edges = config.fixed_edges()
    start = time.perf_counter()
    shape = (3, *(e.size + 1 for e in edges))  # negatives, positives, unrated
    totals = {} if totals is None else totals
    rows = 0
    for path in paths:
        for index, table in read_row_groups(path, ["group", "item_id", "label",
                                                   "text_model", "image_model"]):
            batch = validate_batch(table, config, source=path, row_group=index)
            rows += batch.n_read
            # every valid row, unrated ones in the third channel (as the pipeline does)
            hists = grouped_histograms(batch.group_codes, batch.scores, batch.labels,
                                       batch.weights, edges, unrated=~batch.rated)
            parts = {batch.group_names[code]: counts for code, counts in hists.items()}
            parts["__all__"] = sum_sparse(list(hists.values()), int(np.prod(shape)))
            for name, counts in parts.items():
                if name not in totals:
                    totals[name] = np.zeros(shape)
                counts.add_to(totals[name])
    return time.perf_counter() - start, rows


def optimise_loop(totals: dict[str, np.ndarray], config: RunConfig) -> float:
    """Seconds to optimise every group's totals as the pipeline does (same config and method,
    :func:`costlib_pipelines.recalibrate.optimizing.optimize_one`, graph paths solved together as
    :class:`~costlib_pipelines.recalibrate.shards.OptimizeGroupsFn` does): the work after the
    histograms that the plain loop leaves out."""
    edges = tuple(config.fixed_edges())
    start = time.perf_counter()
    grids = {group: ThresholdGrid(edges=edges, neg=counts[0], pos=counts[1], unrated=counts[2],
                                  names=tuple(config.classifiers))
             for group, counts in totals.items()}
    prepare_graph_paths(list(grids.values()), config.rule)
    for group, grid in grids.items():
        optimize_one(config, group, grid)
    return time.perf_counter() - start


#: Fixed-cost components in print order: (key, label).
COMPONENTS = (
    ("before", "checks before the graph (inputs, footers, baseline, lock)"),
    ("graph", "graph construction (make_pipeline, build_recalibrate)"),
    ("translate", "translation to the runner API (to_runner_api)"),
    ("optimise", "optimising the groups' grids (graph method)"),
    ("records", "records, JSON lines, PN curves per group"),
    ("write", "writing record shards"),
    ("publish", "publishing (assembling record files, accounting, guard, manifest)"),
    ("sampler", "Beam state sampler: waiting for its thread at each bundle's end"),
)


@contextlib.contextmanager
def timed_components():
    """Wall seconds spent in each fixed-cost component of ``run_recalibrate`` (a dict filled
    while the block runs; see :data:`COMPONENTS`), by wrapping the functions that do them.

    Generator DoFn methods that yield once, at their end (writing a shard, publishing), are
    timed up to that yield, so the time of downstream stages is not counted.
    """
    times: dict[str, float] = dict.fromkeys(k for k, _ in COMPONENTS)
    for key in times:
        times[key] = 0.0
    start = {"run": 0.0}
    patched = []

    def patch(owner, name, key, *, generator=False, mark=False):
        original = getattr(owner, name)

        if generator:
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                t = time.perf_counter()
                items = original(*args, **kwargs)
                first = next(items, None)
                times[key] += time.perf_counter() - t
                if first is not None:
                    yield first
                    yield from items
        else:
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                t = time.perf_counter()
                if mark:
                    times["before"] += t - start["run"]
                try:
                    return original(*args, **kwargs)
                finally:
                    times[key] += time.perf_counter() - t
        patched.append((owner, name, original))
        setattr(owner, name, wrapper)

    patch(recalibrate, "make_pipeline", "graph", mark=True)
    patch(recalibrate, "build_recalibrate", "graph")
    patch(beam.Pipeline, "to_runner_api", "translate")
    patch(shards, "optimize_one", "optimise")
    patch(shards, "prepare_graph_paths", "optimise")  # the batches' paths, solved together
    patch(shards.OptimizeGroupsFn, "_outputs", "records")
    patch(shards.WriteShardFn, "process", "write", generator=True)
    patch(manifest.PublishRunFn, "process", "publish", generator=True)
    patch(statesampler.StateSampler, "stop", "sampler")
    chunk = shards.OptimizeGroupsFn._chunk
    patched.append((shards.OptimizeGroupsFn, "_chunk", shards.OptimizeGroupsFn.__dict__["_chunk"]))

    def timed_chunk(buffer):
        t = time.perf_counter()
        try:
            return chunk(buffer)
        finally:
            times["records"] += time.perf_counter() - t

    shards.OptimizeGroupsFn._chunk = staticmethod(timed_chunk)
    start["run"] = time.perf_counter()
    try:
        yield times
    finally:
        for owner, name, original in reversed(patched):
            setattr(owner, name, original)


def one_file_vs_many(work: Path, rows: int, groups: int, beam_args: list[str],
                     peer: Path | None) -> None:
    """Throughput on one big file (40 row groups) against the same rows in 10 files.

    Row-group ranges are the unit of parallel work, so on two workers one file should run as
    fast as many; ``peer`` (a checkout of main) reads a file on one worker.
    """
    config = RunConfig.from_dict(CONFIG)
    many = work / "many"
    many.mkdir()
    write_data(many, rows, groups, n_files=10)
    one = work / "one"
    one.mkdir()
    pq.write_table(pa.concat_tables(pq.read_table(p) for p in sorted(many.glob("*.parquet"))),
                   one / "big.parquet", row_group_size=rows // 40)
    print(f"one file vs many, {rows:,} rows, runner flags {' '.join(beam_args) or '(none)'}:")
    for name, data in (("10 files", many), ("1 file, 40 row groups", one)):
        best = min(_timed_run(config, data, work / f"out_{name[:2]}", beam_args)
                   for _ in range(2))
        line = f"  ours {name:>22}: {best:6.2f} s = {rows / best / 1e6:5.2f} M rows/s"
        if peer is not None:
            peer_best = min(_peer_run(peer, data, work / f"peer_{name[:2]}", beam_args)
                            for _ in range(2))
            line += f"; today's code: {peer_best:6.2f} s = {rows / peer_best / 1e6:5.2f} M rows/s"
        print(line, flush=True)


def _timed_run(config, data: Path, out: Path, beam_args) -> float:
    start = time.perf_counter()
    run_recalibrate(config, str(data / "*.parquet"), str(out), beam_args)
    return time.perf_counter() - start


def _peer_run(peer: Path, data: Path, out: Path, beam_args) -> float:
    """Wall time of today's code (a checkout of main) in a subprocess, same config and data."""
    import json
    import os
    import subprocess

    code = ("import json, sys; from costlib_pipelines.config import RunConfig; "
            "from costlib_pipelines.recalibrate.pipeline import run_recalibrate; import time; "
            "c = RunConfig.from_dict(json.loads(sys.argv[1])); t = time.perf_counter(); "
            "run_recalibrate(c, sys.argv[2], sys.argv[3], sys.argv[4:]); "
            "print(time.perf_counter() - t)")
    out_text = subprocess.run(
        [sys.executable, "-c", code, json.dumps(CONFIG), str(data / "*.parquet"), str(out),
         *beam_args], env=dict(os.environ, PYTHONPATH=str(peer)), cwd=peer,
        capture_output=True, text=True, check=True).stdout
    return float(out_text.split()[-1])


def edges_cost(work: Path, n_rows: int, n_groups: int, repeats: int = 3) -> None:
    """What the default edges (``grid.edges: auto``: 128 candidates per classifier) cost
    against uniform edges (64, the old default, and 128: the same lattice size) and quantile
    edges (128; the other recipe with a first pass), on the same files, alternated, best of
    ``repeats``, wall and process CPU; at ``n_rows // 5`` and ``n_rows`` rows, so that the
    fixed cost per run and the CPU per row at the margin are apart (issue 20).

    Auto edges are timed both ways: the default, carried from the output's published run
    (one pass: the grid pass also sketches the rows for the next run), which is every run of a
    scheduled recalibration after the first; and ``auto_edges_from: this_run``, a first pass
    over the rows (what the first run of an output does)."""
    permissive = {"publish": {"max_threshold_change": None, "min_rated": 0}}
    base = {k: v for k, v in CONFIG.items() if k != "grid"} | permissive
    configs = {
        "uniform(64)": {**base, "grid": {"edges": "uniform", "bins": 64}},
        "uniform(128)": {**base, "grid": {"edges": "uniform", "bins": 128}},
        "quantile(128)": {**base, "grid": {"edges": "quantile", "bins": 128}},
        "auto, 1st pass": {**base, "grid": {"auto_edges_from": "this_run"}},
        "auto (default)": base,
    }
    sizes = {"fifth": n_rows // 5, "full": n_rows}
    wall = {(c, s): float("inf") for c in configs for s in sizes}
    cpu = dict(wall)
    for size, rows in sizes.items():
        data = work / size
        data.mkdir()
        write_data(data, rows, n_groups, n_files=10)
        pattern = str(data / "*.parquet")
        outputs = {name: str(work / f"out_{size}_{i}") for i, name in enumerate(configs)}
        for name, raw in configs.items():  # warm-up; auto (default) has a run to carry from
            run_recalibrate(RunConfig.from_dict(raw), pattern, outputs[name])
        for _ in range(repeats):
            for name, raw in configs.items():
                start, used = time.perf_counter(), time.process_time()
                manifest = run_recalibrate(RunConfig.from_dict(raw), pattern, outputs[name])
                wall[name, size] = min(wall[name, size], time.perf_counter() - start)
                cpu[name, size] = min(cpu[name, size], time.process_time() - used)
                source = (manifest.get("grid_edges") or {}).get("source") or {}
                assert name != "auto (default)" or source.get("from") == "previous_run"
    extra = (sizes["full"] - sizes["fifth"]) / 1e6
    print(describe())
    print(f"rows: {sizes['fifth']:,} and {n_rows:,}; groups: {n_groups}; k=2; graph method; "
          f"10 files; best of {repeats}, alternated")
    margin = {name: (cpu[name, "full"] - cpu[name, "fifth"]) / extra for name in configs}
    for name in configs:
        print(f"{name:15} {n_rows:,} rows: wall {wall[name, 'full']:6.2f} s cpu "
              f"{cpu[name, 'full']:6.2f} s | CPU per M rows at the margin {margin[name]:5.3f} s | "
              f"wall/uniform(64) {wall[name, 'full'] / wall['uniform(64)', 'full']:5.2f}, "
              f"/uniform(128) {wall[name, 'full'] / wall['uniform(128)', 'full']:5.2f}; "
              f"marginal CPU/uniform(64) {margin[name] / margin['uniform(64)']:5.2f}, "
              f"/uniform(128) {margin[name] / margin['uniform(128)']:5.2f}")
    print("target (issue 20): auto (default) <= 1.10x uniform")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--one-file", action="store_true",
                        help="only compare one big file with many files (row-group units)")
    parser.add_argument("--edges-cost", action="store_true",
                        help="only time the default (auto) edges against uniform edges")
    parser.add_argument("--peer", type=Path, default=None,
                        help="with --one-file: a checkout of main to time as well")
    parser.add_argument("beam_args", nargs="*",
                        help="with --one-file: runner flags, e.g. "
                             "--direct_running_mode=multi_processing --direct_num_workers=2")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    if args.edges_cost:
        work = Path(tempfile.mkdtemp(prefix="bench_edges_cost_"))
        try:
            edges_cost(work, args.rows, args.groups)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    if args.one_file:
        work = Path(tempfile.mkdtemp(prefix="bench_one_file_"))
        try:
            one_file_vs_many(work, args.rows, args.groups, args.beam_args, args.peer)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    work = Path(tempfile.mkdtemp(prefix="bench_recalibrate_"))
    try:
        sizes = {"full": args.rows, "fifth": args.rows // 5}
        paths, loop, pipeline = {}, {}, {}
        cpu: dict[tuple[str, str], float] = {}  # CPU seconds of the process (every thread)
        config = RunConfig.from_dict(CONFIG)
        for name, rows in sizes.items():
            data = work / name
            data.mkdir()
            write_data(data, rows, args.groups, n_files=10)
            paths[name] = sorted(str(p) for p in data.glob("*.parquet"))
        plain_loop(paths["fifth"][:1], config)  # warm caches and imports
        run_recalibrate(config, paths["fifth"][0], str(work / "warm"))
        components: dict[str, float] = {}
        optimise = float("inf")
        for name in sizes:  # best of 3 for each, interleaved
            loop[name] = pipeline[name] = float("inf")
            cpu[("loop", name)] = cpu[("pipeline", name)] = float("inf")
            for _ in range(3):
                totals: dict[str, np.ndarray] = {}
                used = time.process_time()
                seconds, counted = plain_loop(paths[name], config, totals)
                cpu[("loop", name)] = min(cpu[("loop", name)], time.process_time() - used)
                loop[name] = min(loop[name], seconds)
                if name == "full":
                    optimise = min(optimise, optimise_loop(totals, config))
                with timed_components() as times:
                    start, used = time.perf_counter(), time.process_time()
                    manifest = run_recalibrate(config, str(work / name / "*.parquet"),
                                               str(work / f"out_{name}"))
                    took = time.perf_counter() - start
                    used = time.process_time() - used
                cpu[("pipeline", name)] = min(cpu[("pipeline", name)], used)
                if name == "fifth" and took < pipeline[name]:
                    components = times
                pipeline[name] = min(pipeline[name], took)
                assert manifest["row_accounting"]["read"] == counted == sizes[name]
        rows = sizes["full"]
        extra = sizes["full"] - sizes["fifth"]
        loop_marginal = extra / (loop["full"] - loop["fifth"])
        pipe_marginal = extra / (pipeline["full"] - pipeline["fifth"])
        print(f"rows: {rows:,}; groups: {args.groups}; k=2; 256 bins per axis; 10 files")
        print(f"plain pyarrow+numpy loop (read, validate, histogram per group): "
              f"{loop['full']:6.2f} s = {rows / loop['full'] / 1e6:5.2f} M rows/s")
        print(f"recalibrate pipeline, FnApiRunner, end to end (incl. optimise, write): "
              f"{pipeline['full']:6.2f} s = {rows / pipeline['full'] / 1e6:5.2f} M rows/s")
        print(f"end-to-end ratio pipeline/loop: {loop['full'] / pipeline['full']:4.2f}x "
              "(includes the pipeline's fixed cost per run; target >= 0.8x)")
        same_work = loop["full"] + optimise
        print(f"the same work without Beam (the loop, then optimising its {len(totals)} grids "
              f"with the pipeline's method: {optimise:.2f} s): {same_work:6.2f} s; ratio "
              f"{same_work / pipeline['full']:4.2f}x (records and writing left out)")
        print(f"aggregation throughput, marginal between {sizes['fifth']:,} and {rows:,} rows "
              f"(fixed costs cancel): loop {loop_marginal / 1e6:5.2f} M rows/s, pipeline "
              f"{pipe_marginal / 1e6:5.2f} M rows/s, ratio {pipe_marginal / loop_marginal:4.2f}x "
              "(target >= 0.8x)")
        loop_cpu = extra / (cpu[("loop", "full")] - cpu[("loop", "fifth")])
        pipe_cpu = extra / (cpu[("pipeline", "full")] - cpu[("pipeline", "fifth")])
        print(f"the same marginal in CPU time of the process (all threads; less sensitive to "
              f"other work on the machine): loop {loop_cpu / 1e6:5.2f} M rows per CPU-s, "
              f"pipeline {pipe_cpu / 1e6:5.2f} M rows per CPU-s, ratio "
              f"{pipe_cpu / loop_cpu:4.2f}x")
        intercept = pipeline["full"] - rows / pipe_marginal
        print(f"pipeline fixed cost per run (intercept): {intercept:5.2f} s; its components, "
              f"timed in the best {sizes['fifth']:,}-row run:")
        for key, label in COMPONENTS:
            print(f"  {label:<74} {components[key]:5.2f} s")
        rest = intercept - sum(components.values())
        print(f"  {'the rest: runner start-up, stages and bundles (intercept minus the above)':<74}"
              f" {rest:5.2f} s")
        print(f"end-to-end wall: {pipeline['full']:.2f} s (target <= 10 s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
