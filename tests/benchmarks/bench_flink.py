"""Benchmark: ``costlib recalibrate`` and ``decide`` on a local Flink cluster against the
FnApiRunner, in the same run.

Run: ``.venv/bin/python tests/benchmarks/bench_flink.py [--millions 5,50] [--parallelism 1,2]
[--commands recalibrate,decide] [--data DIR]``, or for the fixed cost of a scheduled run alone:
``.venv/bin/python tests/benchmarks/bench_flink.py --fixed-cost [--repeat 3]
[--taskmanagers 1 --slots 4]``.

Data: the demo's own stream (:func:`costlib.sample.generate_score_stream`, as ``costlib demo``
writes it), 5M rows per chunk (seeds 7, 8, ...), 4 files a chunk, row groups of 25,000 rows;
the demo's config (``costlib demo`` writes it: auto edges, four methods, top-k F1 decoding).

The cluster is ``tools/flink_cluster.py``'s (started here on its own ports, stopped at the end):
a JobManager and a TaskManager with 2 slots, Beam's Flink job server and a Python worker pool;
jobs are submitted through the job server with ``--parallelism`` 1 or 2 and the EXTERNAL SDK
environment. For every command, size and runner it prints

* **wall**: the ``costlib`` process from start to exit;
* **CPU, all processes**: the submitting process (``wait4``) plus every cluster process
  (JobManager, TaskManager, job server, worker pool and the SDK workers it started and reaped:
  ``/proc/PID/stat`` utime + stime + cutime + cstime, before and after);
* the **fixed cost** of a job: an input of one row group (25,000 rows) on each runner.

Results are checked: the Flink run's operating points equal the FnApiRunner's (decisions:
the counts of flagged and selected rows).

``--fixed-cost`` runs the demo's recalibrate (``costlib demo``'s 300,000 rows and config) on
the cluster with ``tools/flink_cluster.py flags`` as they are (the product's defaults),
``--repeat`` times after a first job that warms the cluster's JVMs, and an empty Beam pipeline
(one element through one Python ``Map``) with the same flags: the floor of any job on this
cluster. It prints each against the targets of a scheduled run (:data:`TARGET_WALL`,
:data:`TARGET_CPU`), CPU split by process, with the load before and after each run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_duckdb_peer import _generate  # the demo stream in 5M-row chunks, as that peer reads it
from machine import describe

ROOT = Path(__file__).resolve().parents[2]
#: The fixed cost a scheduled run can carry: the demo's recalibrate in this wall time and
#: this many CPU-seconds, every process of the run and the cluster together.
TARGET_WALL, TARGET_CPU = 15.0, 10.0
#: An empty job: one element through one Python Map (the floor of any job on the cluster).
EMPTY_JOB = ("import sys, apache_beam as beam\n"
             "from apache_beam.options.pipeline_options import PipelineOptions\n"
             "with beam.Pipeline(options=PipelineOptions(sys.argv[1:])) as p:\n"
             "    p | beam.Create([1]) | beam.Map(lambda x: x + 1)\n")
COSTLIB = str(Path(sys.executable).parent / "costlib")
TICKS = os.sysconf("SC_CLK_TCK")


def _cluster_module():
    spec = importlib.util.spec_from_file_location("flink_cluster",
                                                  ROOT / "tools" / "flink_cluster.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["flink_cluster"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _tree_cpu(pids: list[int]) -> float:
    """CPU seconds of the processes ``pids`` and their reaped children, and of their live
    descendants (the worker pool's SDK workers, which outlive a job by
    ``--environment_cache_millis``: counted while alive, and once reaped)."""
    total = 0.0
    seen: set[int] = set()
    stack = list(pids)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15]) / TICKS  # utime stime cutime cstime
        # children of every thread: the worker pool starts SDK workers from its gRPC threads
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                stack += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
    return total


def _run(argv: list[str], cluster_pids: list[int]) -> dict:
    before = _tree_cpu(cluster_pids)
    start = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(argv[:3])} failed:\n{err.read().decode()[-3000:]}")
    submitter = usage.ru_utime + usage.ru_stime
    cluster = _tree_cpu(cluster_pids) - before
    return {"wall": wall, "submitter_cpu": submitter, "cluster_cpu": cluster,
            "cpu": submitter + cluster}


def _points(output: Path) -> list[dict]:
    run = output / "runs" / (output / "LATEST").read_text().strip()
    rows = [json.loads(x) for x in (run / "operating_points.jsonl").read_text().splitlines()]
    return sorted(({k: v for k, v in r.items() if k != "run_id"} for r in rows),
                  key=lambda r: (r["group"], r["method"]))


def _decision_counts(output: Path) -> dict:
    run = output / "runs" / (output / "LATEST").read_text().strip()
    return json.loads((run / "decision_counts.json").read_text())


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _by_process(cluster, run) -> tuple[dict, dict[str, float]]:
    """``run()``'s result and the CPU seconds each cluster process spent meanwhile."""
    names = cluster.pids()
    before = {n: _tree_cpu([p]) for n, p in names.items()}
    result = run()
    return result, {n: _tree_cpu([p]) - before[n] for n, p in names.items()}


def fixed_cost(args) -> None:
    """The demo's recalibrate and an empty job on the cluster, against the targets."""
    demo = args.data / "fixed-cost-demo"
    if not (demo / "config.yaml").exists():
        subprocess.run([COSTLIB, "demo", "--output", str(demo), "--no-plots"], check=True,
                       stdout=subprocess.DEVNULL)
    command = [COSTLIB, "recalibrate", "--config", str(demo / "config.yaml"), "--input",
               str(demo / "input" / "*.parquet")]
    flink = _cluster_module()
    cluster = flink.Cluster(flink.Ports(args.port_base), args.data / "cluster",
                            layout=flink.Layout(args.taskmanagers, args.slots))
    start = time.perf_counter()
    cluster.start()
    print(f"cluster start: {time.perf_counter() - start:.1f} s; {args.taskmanagers} "
          f"TaskManager(s) x {args.slots} slot(s); flags: {' '.join(cluster.beam_flags())}")
    print(describe())
    pids = list(cluster.pids().values())
    out = args.data / "out" / "fixed-cost"
    shutil.rmtree(out, ignore_errors=True)
    local = _run([*command, "--output", str(out / "local")], pids)
    print(f"FnApiRunner    demo recalibrate (300,000 rows): wall {local['wall']:5.1f} s  "
          f"CPU {local['cpu']:5.1f} s  load {_load()}")
    want = _points(out / "local")
    rows = []
    try:
        for i in range(args.repeat + 1):
            load = _load()
            result, per = _by_process(cluster, lambda i=i: _run(
                [*command, "--output", str(out / f"flink-{i}"), *cluster.beam_flags()], pids))
            same = _points(out / f"flink-{i}") == want
            label = "first job after start (JVMs cold)" if i == 0 else f"run {i}"
            print(f"Flink          demo recalibrate, {label}: wall {result['wall']:5.1f} s  "
                  f"CPU {result['cpu']:5.1f} s (submitter {result['submitter_cpu']:.1f}, "
                  + ", ".join(f"{n} {c:.1f}" for n, c in per.items())
                  + f")  load {load}->{_load()}  points {'equal' if same else 'DIFFER'}",
                  flush=True)
            if i:
                rows.append(result)
            if not same:
                raise SystemExit("the Flink run's points differ from the FnApiRunner's")
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
            script.write(EMPTY_JOB)
        floor = []
        for i in range(args.repeat):
            load = _load()
            result, per = _by_process(cluster, lambda: _run(
                [sys.executable, script.name, *cluster.beam_flags()], pids))
            floor.append(result)
            print(f"Flink          empty job {i + 1}: wall {result['wall']:5.1f} s  CPU "
                  f"{result['cpu']:5.1f} s (submitter {result['submitter_cpu']:.1f}, "
                  + ", ".join(f"{n} {c:.1f}" for n, c in per.items())
                  + f")  load {load}->{_load()}", flush=True)
        os.unlink(script.name)
    finally:
        cluster.stop()

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    wall, cpu = median([r["wall"] for r in rows]), median([r["cpu"] for r in rows])
    floor_wall, floor_cpu = median([r["wall"] for r in floor]), median([r["cpu"] for r in floor])
    def verdict(value: float, target: float) -> str:
        return f"target <= {target:.0f} s: {'met' if value <= target else 'NOT met'}"

    print(f"\nfixed cost of the demo's recalibrate on Flink (median of {len(rows)}): wall "
          f"{wall:.1f} s ({verdict(wall, TARGET_WALL)}), CPU {cpu:.1f} s "
          f"({verdict(cpu, TARGET_CPU)}); an empty job: wall {floor_wall:.1f} s, CPU "
          f"{floor_cpu:.1f} s")
    print(describe())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixed-cost", action="store_true",
                        help="only the fixed cost: the demo's recalibrate and an empty job")
    parser.add_argument("--repeat", type=int, default=3,
                        help="for --fixed-cost: runs after the first (warm-up) job")
    parser.add_argument("--taskmanagers", type=int, default=1)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--millions", default="5,50")
    parser.add_argument("--parallelism", default="1,2")
    parser.add_argument("--commands", default="recalibrate,decide")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "bench-flink")
    parser.add_argument("--port-base", type=int, default=48081)
    args = parser.parse_args()
    if args.fixed_cost:
        fixed_cost(args)
        return
    millions = [int(m) for m in args.millions.split(",")]
    parallelisms = [int(p) for p in args.parallelism.split(",")]
    commands = args.commands.split(",")
    files = _generate(args.data / "data", max(millions) // 5)
    config = args.data / "config.yaml"
    if not config.exists():  # the demo's config, as costlib demo writes it
        demo = args.data / "demo"
        subprocess.run([COSTLIB, "demo", "--output", str(demo), "--n-items", "1000",
                        "--no-plots"], check=True, stdout=subprocess.DEVNULL)
        shutil.copy(demo / "config.yaml", config)
    flink = _cluster_module()
    cluster = flink.Cluster(flink.Ports(args.port_base), args.data / "cluster",
                            layout=flink.Layout(args.taskmanagers, args.slots))
    start = time.perf_counter()
    cluster.start()
    print(f"cluster start (installed): {time.perf_counter() - start:.1f} s")
    pids = list(cluster.pids().values())
    print(describe())
    print(f"Flink {cluster.versions['FLINK_VERSION']}, Beam job server "
          f"{cluster.versions['BEAM_FLINK_RUNNER_VERSION']}, {args.taskmanagers} "
          f"TaskManager(s) with {args.slots} slot(s) each")
    results: dict[tuple, dict] = {}
    try:
        small = args.data / "one_row_group.parquet"  # fixed cost: one row group, 25,000 rows
        if not small.exists():
            import pyarrow.parquet as pq
            pq.write_table(pq.ParquetFile(files[0]).read_row_group(0), small)
        sizes = {0: [str(small)], **{m: files[: m // 5 * 4] for m in millions}}
        for m, inputs in sizes.items():
            pattern = ",".join(inputs)
            points_out = args.data / "out" / f"points-{m}"
            shutil.rmtree(points_out, ignore_errors=True)
            subprocess.run([COSTLIB, "recalibrate", "--config", str(config), "--input", pattern,
                            "--output", str(points_out)], check=True, capture_output=True)
            for command in commands:
                extra = ([] if command == "recalibrate"
                         else ["--operating-points", str(points_out)])
                runners = [("FnApiRunner", [])] + [
                    (f"Flink p={p}", [f for f in cluster.beam_flags()
                                      if not f.startswith("--parallelism")]
                     + [f"--parallelism={p}"]) for p in parallelisms]
                for name, flags in runners:
                    out = args.data / "out" / f"{command}-{m}-{name.replace(' ', '')}"
                    shutil.rmtree(out, ignore_errors=True)
                    result = _run([COSTLIB, command, "--config", str(config), "--input",
                                   pattern, *extra, "--output", str(out), *flags], pids)
                    result["check"] = (_points(out) if command == "recalibrate"
                                       else _decision_counts(out))
                    results[(command, m, name)] = result
                    label = "25k rows" if m == 0 else f"{m}M rows"
                    print(f"{command:11} {label:15} {name:12} wall {result['wall']:7.1f} s  "
                          f"CPU {result['cpu']:7.1f} s (submitter {result['submitter_cpu']:.1f}"
                          f", cluster {result['cluster_cpu']:.1f})", flush=True)
                    same = result["check"] == results[(command, m, "FnApiRunner")]["check"]
                    if not same:
                        print(f"  MISMATCH: {name} differs from the FnApiRunner")
    finally:
        cluster.stop()
    print("\nratio to the FnApiRunner (wall, CPU):")
    for (command, m, name), r in results.items():
        if name != "FnApiRunner":
            base = results[(command, m, "FnApiRunner")]
            print(f"  {command:11} {m or 0.025:>5}M {name:10} wall x{r['wall'] / base['wall']:.2f}"
                  f"  CPU x{r['cpu'] / base['cpu']:.2f}")
    print(describe())


if __name__ == "__main__":
    main()
