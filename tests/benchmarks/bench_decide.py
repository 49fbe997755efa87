"""Benchmark of ``costlib decide`` on the local runner (FnApiRunner, in process).

1. Threshold decisions (fast path, no sets): ~10M rows in Parquet, k=2 classifiers, 100 groups;
   the decide pipeline end to end (``run_decide``: preflight, Beam pipeline, manifest) against
   the same work as a plain pyarrow + numpy loop in the same run (read every row group,
   validate, compare with the thresholds, write one Parquet file per row group). Target:
   >= 1M rows/s for the pipeline.
2. Top-k decisions (F1) on 1M rows in 50,000 sets of exactly 20 (``--set-sizes poisson``:
   ragged sets, Poisson sizes of mean 20), every set's rows spread over 4 files and their row
   groups of 100,000. In the same run, on the same files, through the real CLI in process
   (``costlib_pipelines.commands.cli.main(["decide", ...])``, FnApiRunner): ``costlib decide`` with
   top-k (config names ``probability`` and ``set_id``), the same command threshold-only (config
   without them), and the library decoder alone (``optimal_topk_ragged`` on the sets already
   grouped in memory). Targets: top-k >= 1M rows/s, and top-k wall time <= 2x the
   threshold-only wall time on the same rows. Also printed: the rate of the work top-k adds,
   ``rows / (top-k s - threshold s)``, which excludes the fixed cost both runs pay, and that
   fixed cost itself: the same threshold-only command on 1,000 rows (graph construction,
   runner start-up, preflight, manifest), with what it leaves of a 1 s budget. Last, Beam's
   local shuffle alone: a pipeline that only moves byte strings of the sizes the top-k run
   shuffles (per bucket, as ``DecideFileFn`` emits them) through a ``GroupByKey`` on the
   FnApiRunner, against the same pipeline with 1-byte strings; the difference is what moving
   the payload bytes costs (the runner copies each byte about a dozen times: encode, data
   plane, grouping buffer decode and re-encode, data plane again, decode).

3. Top-k decisions without a shuffle (issue 23): ``--contiguous-rows`` rows (default 5M) in
   sets of 20 (or Poisson sizes) written set by set, every set's rows one run inside one row
   group (row groups of about 100,000 rows cut at set boundaries, 4 files). Through the real
   CLI in process, on the same files: top-k with ``decoding.sets_contiguous: true`` (decoded
   in place), top-k with the shuffle (the default), and threshold-only; rows/s of each
   (target: contiguous top-k >= 1.5M rows/s) and the decision records of the two top-k runs
   compared (every column, expected losses bit for bit).

Run: ``.venv/bin/python tests/benchmarks/bench_decide.py [--rows 10000000] [--topk-rows 1000000]
[--contiguous-rows 5000000]`` (``0`` skips a part).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

from costlib.decoding import optimal_topk_ragged
from costlib_pipelines.commands.cli import main as costlib_main
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.pipeline import run_decide
from costlib_pipelines.decide.records import (
    decide_columns,
    decision_columns,
    read_decisions,
    write_decisions,
)
from costlib_pipelines.decide.transforms import DecideFileFn
from costlib_pipelines.io.batches import validate_batch
from costlib_pipelines.io.dead_letters import dead_letter_name
from costlib_pipelines.io.files import match_inputs, read_row_groups
from costlib_pipelines.io.published_points import select_operating_points
from costlib_pipelines.io.records import arrow_schema, records_to_table
from costlib_pipelines.io.runs import load_operating_points
from costlib_pipelines.runner import make_pipeline

CLASSIFIERS = ("text_model", "image_model")


def make_config(topk: bool, contiguous: bool = False) -> RunConfig:
    columns = {"probability": "probability", "set_id": "set_id"} if topk else {}
    return RunConfig.from_dict({
        "columns": columns, "classifiers": list(CLASSIFIERS), "rule": "any", "grid": {},
        "target": {"marginal_precision": 0.3}, "min_rated": {}, "bootstrap": {},
        "decoding": {"loss": "f1", "params": {}, "buckets": 16,
                     "sets_contiguous": contiguous},
    })


def set_numbers(rows: int, set_size: int, sizes: str, rng: np.random.Generator
                ) -> np.ndarray:
    """Set number of every row, rows in random order: ``fixed`` sets of exactly ``set_size``
    (the last one shorter if ``rows`` is not a multiple), ``poisson`` sizes ~ Poisson(set_size)
    (at least 1)."""
    if sizes == "fixed":
        numbers = np.arange(rows) // set_size
    else:
        lengths = np.maximum(rng.poisson(set_size, rows // set_size + 1), 1)
        while lengths.sum() < rows:  # the sizes drawn fell short of the rows: draw more sets
            lengths = np.concatenate([lengths, np.maximum(rng.poisson(set_size, 16), 1)])
        numbers = np.repeat(np.arange(lengths.size), lengths)[:rows]
    return rng.permutation(numbers)


def write_stream(directory: Path, rows: int, *, files: int, row_group: int, groups: int,
                 set_size: int | None, seed: int, sizes: str = "fixed") -> str:
    """A score stream: 10% of scores null per classifier; every set's rows spread over all
    files (``set_size``: see :func:`set_numbers`)."""
    rng = np.random.default_rng(seed)
    numbers = set_numbers(rows, set_size, sizes, rng) if set_size else None
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
            set_number = numbers[bounds[i]:bounds[i + 1]]
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
    parser.add_argument("--set-sizes", choices=("fixed", "poisson"), default="fixed")
    parser.add_argument("--contiguous-rows", type=int, default=5_000_000)
    args = parser.parse_args()
    print(f"machine: {describe()}; load average at start "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-decide-") as tmp:
        tmp = Path(tmp)
        ops = write_operating_points(tmp / "operating_points.parquet", args.groups, seed=2)
        if args.rows:
            threshold_benchmark(tmp, args, ops)
        if args.topk_rows:
            topk_comparison(tmp, args, ops)
        if args.contiguous_rows:
            contiguous_comparison(tmp, args, ops)


def threshold_benchmark(tmp: Path, args: argparse.Namespace, ops: str) -> None:
    """Part 1: the threshold-only pipeline against the plain loop on ``args.rows`` rows."""
    start = time.perf_counter()
    inputs = write_stream(tmp / "stream", args.rows, files=8, row_group=250_000,
                          groups=args.groups, set_size=None, seed=1)
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



def cli_decide(config: RunConfig, inputs: str, ops: str, output: Path, run_id: str
               ) -> tuple[float, float, dict]:
    """``costlib decide`` through the CLI entry point, in process; (wall seconds, CPU seconds
    of this process, manifest)."""
    config_path = output.parent / f"{run_id}.yaml"
    config_path.write_text(json.dumps(config.raw))  # JSON is YAML
    start, cpu = time.perf_counter(), time.process_time()
    code = costlib_main(["decide", "--config", str(config_path), "--input", inputs,
                         "--operating-points", ops, "--output", str(output),
                         "--run-id", run_id])
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert code == 0, f"costlib decide exited {code}"
    manifest = json.loads((output / "runs" / run_id / "manifest.json").read_text())
    return seconds, cpu, manifest


def library_decoder(inputs: str, repeats: int) -> tuple[float, int, int]:
    """The library decoder alone on the benchmark's sets: (best seconds, rows, sets).

    The sets are grouped in memory first (sorted by set id, then item id, like the pipeline);
    only ``optimal_topk_ragged`` is timed.
    """
    table = pa.concat_tables([pq.read_table(p, columns=["set_id", "item_id", "probability"])
                              for p in match_inputs(inputs)])
    table = table.sort_by([("set_id", "ascending"), ("item_id", "ascending")])
    ids = table.column("set_id").combine_chunks()
    change = np.flatnonzero(pc.not_equal(ids[1:], ids[:-1]).to_numpy(zero_copy_only=False)) + 1
    offsets = np.concatenate([[0], change, [len(ids)]])
    values = table.column("probability").to_numpy()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        optimal_topk_ragged(values, offsets, "f1")
        seconds.append(time.perf_counter() - start)
    return min(seconds), values.size, offsets.size - 1


def shuffle_payloads(inputs: str, ops: str, directory: Path) -> list[tuple[int, int]]:
    """``(bucket, size in bytes)`` of every payload the top-k run sends through its shuffle
    (``DecideFileFn`` on every input file; the benchmark's rows all have a set, so no file
    is written)."""
    config = make_config(topk=True)
    records, source = load_operating_points(ops)
    directory.mkdir(parents=True, exist_ok=True)
    fn = DecideFileFn(select_operating_points(records, config, source=source), config,
                      str(directory))
    return [(output[0], len(output[1])) for path in match_inputs(inputs)
            for output in fn.process(path) if isinstance(output, tuple)]


class _ZeroBytes(beam.DoFn):
    """``(bucket, size)`` -> ``(bucket, size zero bytes)``."""

    def process(self, element):
        bucket, size = element
        yield bucket, bytes(size)


def beam_shuffle(payloads: list[tuple[int, int]], repeats: int
                 ) -> tuple[tuple[float, float, int], tuple[float, float, int]]:
    """(wall s, kernel CPU s, minor page faults) of the fastest of ``repeats`` runs of a
    FnApiRunner pipeline that makes byte strings of the payloads' sizes and groups them by
    bucket; then the same with 1-byte strings."""
    def run(sizes: list[tuple[int, int]]) -> tuple[float, float, int]:
        pipeline = make_pipeline([], type_check=False)
        _ = (pipeline | beam.Create(sizes) | beam.ParDo(_ZeroBytes()) | beam.GroupByKey()
             | beam.MapTuple(lambda bucket, values: sum(len(v) for v in values)))
        before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        pipeline.run().wait_until_finish()
        after = resource.getrusage(resource.RUSAGE_SELF)
        return (time.perf_counter() - start, after.ru_stime - before.ru_stime,
                after.ru_minflt - before.ru_minflt)
    ones = [(bucket, 1) for bucket, _ in payloads]
    return (min(run(payloads) for _ in range(repeats)), min(run(ones) for _ in range(repeats)))


def topk_comparison(tmp: Path, args: argparse.Namespace, ops: str) -> None:
    """Part 2: top-k and threshold-only ``costlib decide`` on the same rows, and the library
    decoder alone, in this run."""
    n = args.topk_rows
    start = time.perf_counter()
    inputs = write_stream(tmp / "sets", n, files=4, row_group=100_000, groups=args.groups,
                          set_size=20, seed=3, sizes=args.set_sizes)
    print(f"top-k data: {n:,} rows, sets of 20 ({args.set_sizes}), every set spread over 4 "
          f"files, row groups of 100,000 (written in {time.perf_counter() - start:.1f} s)")
    topk_s, threshold_s, topk_cpu, threshold_cpu = [], [], [], []
    for r in range(args.repeats):
        seconds, cpu, manifest = cli_decide(make_config(topk=True), inputs, ops,
                                            tmp / "out-topk", f"topk-{r}")
        topk_s.append(seconds)
        topk_cpu.append(cpu)
        seconds, cpu, _ = cli_decide(make_config(topk=False), inputs, ops,
                                     tmp / "out-threshold", f"threshold-{r}")
        threshold_s.append(seconds)
        threshold_cpu.append(cpu)
    tiny = write_stream(tmp / "tiny", 1_000, files=1, row_group=1_000, groups=args.groups,
                        set_size=20, seed=4)
    fixed_s = min(cli_decide(make_config(topk=False), tiny, ops, tmp / "out-tiny",
                             f"tiny-{r}")[0] for r in range(args.repeats))
    counts = manifest["decision_counts"]
    assert manifest["row_accounting"]["decided"] == n == counts["topk_rows"]
    best_topk, best_threshold = min(topk_s), min(threshold_s)
    decoder_s, decoder_rows, decoder_sets = library_decoder(inputs, args.repeats)
    assert decoder_rows == n and decoder_sets == counts["topk_sets"]
    print(f"top-k (F1) costlib decide: {n:,} rows in {counts['topk_sets']:,} sets, 16 buckets: "
          f"{best_topk:.2f} s wall, {n / best_topk / 1e6:.2f} M rows/s (target >= 1.0; runs: "
          f"{', '.join(f'{s:.2f}' for s in topk_s)} s)")
    print(f"threshold-only costlib decide, same rows: {best_threshold:.2f} s wall, "
          f"{n / best_threshold / 1e6:.2f} M rows/s (runs: "
          f"{', '.join(f'{s:.2f}' for s in threshold_s)} s)")
    print(f"top-k / threshold-only wall time: {best_topk / best_threshold:.2f}x (target <= 2x); "
          f"CPU time of the process: {min(topk_cpu):.2f} s / {min(threshold_cpu):.2f} s = "
          f"{min(topk_cpu) / min(threshold_cpu):.2f}x")
    extra = best_topk - best_threshold
    if extra > 0:
        print(f"work top-k adds (split, shuffle, sort, decode, write by bucket): {extra:.2f} s, "
              f"{n / extra / 1e6:.2f} M rows/s (target >= 1.0); CPU "
              f"{min(topk_cpu) - min(threshold_cpu):.2f} s")
    print(f"fixed cost of a run (threshold-only costlib decide on 1,000 rows): {fixed_s:.2f} s "
          f"wall; top-k work excluding it: {n / max(best_topk - fixed_s, 1e-9) / 1e6:.2f} M "
          f"rows/s; a 1 s budget for 1M rows leaves {max(1.0 - fixed_s, 0.0):.2f} s for the "
          f"work")
    print(f"library decoder alone (optimal_topk_ragged, sets grouped in memory): "
          f"{decoder_s:.2f} s, {decoder_sets / decoder_s:,.0f} sets/s, "
          f"{decoder_rows / decoder_s / 1e6:.2f} M rows/s; pipeline / decoder time: "
          f"{best_topk / decoder_s:.1f}x; decoder / work top-k adds: "
          f"{decoder_s / extra if extra > 0 else float('nan'):.0%}")
    payloads = shuffle_payloads(inputs, ops, tmp / "payloads")
    moved = sum(size for _, size in payloads)
    (bytes_s, bytes_sys, bytes_faults), (ones_s, ones_sys, ones_faults) = beam_shuffle(
        payloads, args.repeats)
    print(f"Beam's local shuffle alone (FnApiRunner GroupByKey of the top-k run's "
          f"{len(payloads)} payloads, {moved / 1e6:.1f} MB, {moved / n:.1f} B a row): "
          f"{bytes_s:.2f} s, against {ones_s:.2f} s with 1-byte payloads: moving the bytes costs "
          f"{bytes_s - ones_s:.2f} s ({moved / max(bytes_s - ones_s, 1e-9) / 1e6:.0f} MB/s), "
          f"{bytes_sys - ones_sys:.2f} s of it kernel time for "
          f"{bytes_faults - ones_faults:,} page faults "
          f"(fresh 4 KiB pages for {(bytes_faults - ones_faults) * 4096 / moved:.1f}x the bytes "
          f"moved)")
    print(f"load average at end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def write_contiguous_stream(directory: Path, rows: int, *, files: int, row_group: int,
                            groups: int, set_size: int, sizes: str, seed: int) -> tuple[str, int]:
    """A score stream written set by set: sets in order, every row group cut at a set
    boundary (the first set start at or after each multiple of ``row_group``), files of whole
    row groups. Returns the glob and the number of row groups."""
    rng = np.random.default_rng(seed)
    numbers = np.sort(set_numbers(rows, set_size, sizes, rng))
    set_starts = np.flatnonzero(np.concatenate([[True], numbers[1:] != numbers[:-1]]))
    cuts = np.unique(set_starts[np.minimum(
        np.searchsorted(set_starts, np.arange(0, rows, row_group)), set_starts.size - 1)])
    bounds = np.append(cuts, rows)
    per_file = np.array_split(np.arange(bounds.size - 1), files)
    names = pa.array([f"group_{g:03d}" for g in range(groups)])
    directory.mkdir(parents=True, exist_ok=True)
    for i, chosen in enumerate(per_file):
        writer = None
        for g in chosen.tolist():
            start, stop = int(bounds[g]), int(bounds[g + 1])
            n = stop - start
            columns = {
                "group": pa.DictionaryArray.from_arrays(
                    pa.array(rng.integers(0, groups, n).astype(np.int32)), names),
                "item_id": pa.array(np.arange(start, stop, dtype=np.int64)),
            }
            for name in CLASSIFIERS:
                columns[name] = pa.array(rng.random(n), mask=rng.random(n) < 0.1)
            columns["probability"] = pa.array(rng.random(n) ** 4)
            columns["set_id"] = pc.binary_join_element_wise(
                "set-", pa.array(numbers[start:stop]).cast(pa.string()), "")
            table = pa.table(columns)
            if writer is None:
                writer = pq.ParquetWriter(directory / f"scores-{i:03d}.parquet", table.schema)
            writer.write_table(table, row_group_size=n)
        if writer is not None:
            writer.close()
    return str(directory / "*.parquet"), bounds.size - 1


def contiguous_comparison(tmp: Path, args: argparse.Namespace, ops: str) -> None:
    """Part 3: top-k decoded in place (``decoding.sets_contiguous``), top-k through the
    shuffle and threshold-only ``costlib decide``, on the same set-by-set files."""
    n = args.contiguous_rows
    start = time.perf_counter()
    inputs, row_groups = write_contiguous_stream(
        tmp / "contiguous", n, files=4, row_group=100_000, groups=args.groups, set_size=20,
        sizes=args.set_sizes, seed=5)
    print(f"contiguous top-k data: {n:,} rows, sets of 20 ({args.set_sizes}) written set by "
          f"set, {row_groups} row groups of ~100,000 cut at set boundaries, 4 files (written "
          f"in {time.perf_counter() - start:.1f} s); load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    runs: dict[str, list[float]] = {"contiguous": [], "shuffle": [], "threshold": []}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    configs = {"contiguous": make_config(topk=True, contiguous=True),
               "shuffle": make_config(topk=True), "threshold": make_config(topk=False)}
    manifests = {}
    for r in range(args.repeats):
        for name, config in configs.items():
            seconds, cpu_s, manifests[name] = cli_decide(config, inputs, ops,
                                                         tmp / f"out-{name}", f"{name}-{r}")
            runs[name].append(seconds)
            cpu[name].append(cpu_s)
    for name in ("contiguous", "shuffle"):
        counts = manifests[name]["decision_counts"]
        assert manifests[name]["row_accounting"]["decided"] == n == counts["topk_rows"]
    best = {name: min(seconds) for name, seconds in runs.items()}
    sets = manifests["contiguous"]["decision_counts"]["topk_sets"]
    labels = {"contiguous": f"top-k (F1), decoding.sets_contiguous: true, {sets:,} sets",
              "shuffle": "top-k (F1), shuffle (default), 16 buckets",
              "threshold": "threshold-only"}
    for name in ("contiguous", "shuffle", "threshold"):
        print(f"{labels[name]}: {best[name]:.2f} s wall, {n / best[name] / 1e6:.2f} M rows/s "
              f"(runs: {', '.join(f'{s:.2f}' for s in runs[name])} s; CPU of the process, "
              f"best {min(cpu[name]):.2f} s = {n / min(cpu[name]) / 1e6:.2f} M rows per CPU s)"
              + (" (target >= 1.5 M rows/s)" if name == "contiguous" else ""))
    print(f"contiguous / threshold-only wall time: {best['contiguous'] / best['threshold']:.2f}x;"
          f" shuffle / threshold-only: {best['shuffle'] / best['threshold']:.2f}x; shuffle / "
          f"contiguous: {best['shuffle'] / best['contiguous']:.2f}x")
    same = read_decisions(str(tmp / "out-contiguous")).sort_by("item_id").equals(
        read_decisions(str(tmp / "out-shuffle")).sort_by("item_id"))
    print(f"contiguous and shuffle decision records identical (sorted by item id, every "
          f"column): {same}")
    print(f"load average at end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
