"""Benchmark: does the work split over worker processes? (the cost model's assumption 1).

``docs/cost_model.md`` projects Dataflow workers from the rows/s of one process. This script
checks that assumption on the machine at hand with Beam's local runners: the same recalibration
(100 groups, k=2, 256 bins, 10 files, row groups of 250,000 rows) on

- the in-process FnApiRunner (one process, the CLI's default),
- ``--direct_running_mode=multi_processing`` with 1 and with 2 worker processes (each a separate
  SDK worker talking to the runner over gRPC, as a Dataflow worker does),

each at ``--rows/5`` and ``--rows`` rows, after one untimed warm-up run per setup. The local
multi-process runner pays a large, variable start-up (worker processes boot; about half a second
per stage here), which does not grow with rows; the *marginal* figures between the two sizes
cancel it and are what a long run sees:

- marginal wall rate ``(rows - rows/5) / (t(rows) - t(rows/5))``: noisy on a shared machine;
- marginal CPU seconds per million rows, driver and worker processes together (``getrusage`` of
  this process and its finished children): what Dataflow bills as vCPU time, and far less
  sensitive to start-up waits and other load.

The projection's assumption 1 holds if a worker process spends about the CPU per row the
in-process runner does (the data plane between runner and workers costs little per row).

Run: ``.venv/bin/python tests/benchmarks/bench_workers.py [--rows 5000000] [--repeat 2]``
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recalibrate import CONFIG, write_data
from machine import describe

from costlib_pipelines.config import RunConfig
from costlib_pipelines.recalibrate.pipeline import run_recalibrate

SETUPS: dict[str, list[str]] = {
    "in-process FnApiRunner": [],
    "multi_processing, 1 worker": ["--direct_running_mode=multi_processing",
                                   "--direct_num_workers=1"],
    "multi_processing, 2 workers": ["--direct_running_mode=multi_processing",
                                    "--direct_num_workers=2"],
}


def cpu_seconds() -> float:
    """CPU seconds (user + system) of this process and of its finished worker processes."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def best_time(config: RunConfig, data: Path, out: Path, beam_args: list[str],
              repeat: int) -> tuple[float, float]:
    """Best wall time and least CPU time (driver and worker processes) of ``repeat``
    end-to-end recalibrations (each a fresh run id)."""
    walls, cpus = [], []
    for i in range(repeat):
        start, cpu = time.perf_counter(), cpu_seconds()
        run_recalibrate(config, str(data / "*.parquet"), str(out), beam_args,
                        run_id=f"run-{i}")
        walls.append(time.perf_counter() - start)
        cpus.append(cpu_seconds() - cpu)
    return min(walls), min(cpus)


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    config = RunConfig.from_dict(CONFIG)
    small = args.rows // 5
    print(f"machine: {describe()}; load average at start {load()}")
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        work = Path(tmp)
        sizes = {}
        for rows in (small, args.rows):
            data = work / f"rows-{rows}"
            data.mkdir()
            write_data(data, rows, args.groups, n_files=10)
            sizes[rows] = data
        wall_rates: dict[str, float] = {}
        cpu_per_m: dict[str, float] = {}
        for name, beam_args in SETUPS.items():
            # warm-up: imports, caches and the first pipeline's one-off costs are not timed
            best_time(config, sizes[small], work / f"warm-{len(cpu_per_m)}", beam_args, 1)
            (w_small, c_small), (w_big, c_big) = (
                best_time(config, sizes[rows], work / f"out-{len(cpu_per_m)}-{rows}", beam_args,
                          args.repeat) for rows in (small, args.rows))
            extra = (args.rows - small) / 1e6
            cpu_per_m[name] = (c_big - c_small) / extra
            wall_rates[name] = extra / (w_big - w_small) if w_big > w_small else float("nan")
            wall = (f"{wall_rates[name]:5.2f} M rows/s" if w_big > w_small
                    else "not measurable (start-up noise larger than the work)")
            print(f"{name}:\n  wall {w_small:6.2f} s at {small:,} rows, {w_big:6.2f} s at "
                  f"{args.rows:,}; marginal wall rate {wall}\n  CPU (driver + worker "
                  f"processes) {c_small:6.2f} s and {c_big:6.2f} s; marginal "
                  f"{cpu_per_m[name]:5.2f} CPU-s per M rows = {1 / cpu_per_m[name]:5.2f} M rows "
                  f"per CPU-second; load {load()}", flush=True)
        base = cpu_per_m["in-process FnApiRunner"]
        for name in list(SETUPS)[1:]:
            print(f"CPU per row, {name} / in-process: {cpu_per_m[name] / base:.2f}x "
                  "(the cost model's assumption 1 holds if ~1)")
        one, two = (wall_rates[n] for n in list(SETUPS)[1:])
        print(f"marginal wall rate, two worker processes / one: {two / one:.2f}x "
              "(ideal on 2 idle cores: 2x)")
    print(f"load average at end {load()}")


if __name__ == "__main__":
    main()
