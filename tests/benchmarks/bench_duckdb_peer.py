"""Benchmark: ``costlib recalibrate`` against a DuckDB script, and against Beam's floor (issue 23).

Run (the peer needs DuckDB, which is not a runtime dependency: install
``requirements/bench.txt`` into a separate environment and name its Python)::

    python3 -m venv /tmp/benchenv && /tmp/benchenv/bin/pip install -r requirements/bench.txt
    .venv/bin/python tests/benchmarks/bench_duckdb_peer.py --peer-python /tmp/benchenv/bin/python

Data: the demo's own stream (:func:`costlib.sample.generate_score_stream`, as ``costlib demo``
writes it: 4 Parquet files per 5M rows, row groups of 25,000) at 0.6M and 2.4M rows (one and
all four files of a 2.4M-row stream, seed 7, written as 4 files of 600,000 rows), 5M rows (seed
7, what ``costlib demo --n-items 5000000`` writes) and 50M rows (ten 5M streams, seeds 7..16,
item ids made unique), generated once into ``--data-dir``. Config: k = 2, 64 uniform edges on
[0, 1], method hull only, coverage on (``max_unrated_share: 0``), target marginal precision 0.3.

Every measured run is its own process (so each pays its interpreter start and imports, as a
command would); the CPU is the process's user + system time from ``wait4`` (all threads), and
in-process figures split off the imports. Per size, in alternation: costlib recalibrate
(FnApiRunner; reads, validates, counts plausibility, accounts every row, writes outputs and the
manifest), the DuckDB peer (:mod:`duckdb_peer`, exact binning), the DuckDB peer with the plain
floor binning (the script as a data engineer writes it; only trusted where it agrees), and
Beam's floor: a trivial pipeline on the same runner over the same files and columns
(``ReadFromParquetBatched``, count the rows of each Arrow batch, sum). Before any figure is
printed every peer run must reproduce costlib's hull operating points (thresholds, TP, FP) of
every group and of ``__all__`` exactly.

Marginal CPU per row = (CPU at the large size - CPU at the small size) / (rows difference),
on each pair of sizes (0.6M and 2.4M, 5M and 50M by default); fixed cost = the intercept (CPU
at the small size - small rows x marginal). costlib's own fixed cost above Beam's floor = its
intercept minus the floor's intercept, and measured directly on one row group. Also printed:
the wall time of costlib and the DuckDB peer at every size, and the start-up of a command that
runs no pipeline (``costlib status`` on the kept costlib output, whole processes).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLASSIFIERS = ["text_model", "image_model"]
CONFIG = {
    "columns": {"weight": "weight"},
    "classifiers": CLASSIFIERS,
    "rule": "any",
    "grid": {"edges": "uniform", "bins": 64, "range": [0.0, 1.0]},
    "target": {"marginal_precision": 0.3},
    "coverage": {"max_unrated_share": 0},
    "methods": ["hull"],
    "decision_method": "hull",
    "min_rated": {"positives": 20, "negatives": 20},
}
READ_COLUMNS = ["group", "item_id", "text_model", "image_model", "label", "weight"]


# --------------------------------------------------------------------------- workers
def _worker_ours(files: list[str], output: str) -> dict:
    t0_wall, t0_cpu = time.perf_counter(), time.process_time()
    from costlib_pipelines.config import RunConfig
    from costlib_pipelines.recalibrate.pipeline import run_recalibrate
    imported = time.perf_counter() - t0_wall, time.process_time() - t0_cpu
    config = RunConfig.from_dict(CONFIG, source="bench")
    s_wall, s_cpu = time.perf_counter(), time.process_time()
    result = run_recalibrate(config, files, output, [])
    return {"import_wall": imported[0], "import_cpu": imported[1],
            "run_wall": time.perf_counter() - s_wall, "run_cpu": time.process_time() - s_cpu,
            "run_id": result["run_id"], "rows": result["row_accounting"]["read"]}


def _worker_floor(files: list[str], columns: list[str] = READ_COLUMNS) -> dict:
    """Beam's floor: read the ``columns`` of ``files`` as Arrow batches, count rows, sum."""
    t0_wall, t0_cpu = time.perf_counter(), time.process_time()
    import apache_beam as beam
    from apache_beam.io.parquetio import ReadFromParquetBatched
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner
    imported = time.perf_counter() - t0_wall, time.process_time() - t0_cpu
    s_wall, s_cpu = time.perf_counter(), time.process_time()
    out = tempfile.mkdtemp(prefix="floor-")
    with beam.Pipeline(runner=FnApiRunner()) as p:
        _ = (p
             | beam.Create(files)
             | beam.io.ReadAllFromParquetBatched(columns=columns)
             | beam.Map(lambda batch: batch.num_rows)
             | beam.CombineGlobally(sum)
             | beam.Map(lambda n: Path(out, "count").write_text(str(n))))
    rows = int(Path(out, "count").read_text())
    shutil.rmtree(out)
    assert ReadFromParquetBatched  # the same reader, on the file list
    return {"import_wall": imported[0], "import_cpu": imported[1],
            "run_wall": time.perf_counter() - s_wall, "run_cpu": time.process_time() - s_cpu,
            "rows": rows}


def exit_as_the_command_does(result: dict) -> None:
    """Print ``result`` and leave as ``costlib``'s console script does
    (:func:`costlib_pipelines.commands.cli.console_main`: exit handlers, then ``os._exit``,
    without waiting for the runner's threads to wind down at interpreter finalisation). Beam's
    floor leaves the same way, so both are timed to the same end."""
    import atexit

    print(json.dumps(result), flush=True)
    atexit._run_exitfuncs()
    sys.stderr.flush()
    os._exit(0)


# --------------------------------------------------------------------------- data
def _generate(directory: Path, chunks: int) -> list[str]:
    """``chunks`` demo streams of 5M rows (seeds 7, 8, ...), 4 files each, row groups 25,000."""
    from costlib.sample import generate_score_stream, write_score_stream

    directory.mkdir(parents=True, exist_ok=True)
    for c in range(chunks):
        if glob.glob(str(directory / f"c{c:02d}-*.parquet")):
            continue
        stream = generate_score_stream(5_000_000, seed=7 + c)
        stream["item_id"] += c * 5_000_000
        tmp = directory / f"tmp{c:02d}"
        write_score_stream(stream, str(tmp), n_files=4, row_group_size=25_000)
        for path in sorted(tmp.iterdir()):
            path.rename(directory / f"c{c:02d}-{path.name}")
        tmp.rmdir()
    return sorted(glob.glob(str(directory / "c*-*.parquet")))


def _generate_small(directory: Path, millions: float) -> list[str]:
    """The first ``millions / 0.6`` files of one 2.4M-row demo stream (seed 7) written as 4
    files of 600,000 rows, row groups of 25,000: 0.6M is one file, 2.4M all four."""
    from costlib.sample import generate_score_stream, write_score_stream

    n_files = round(millions / 0.6)
    if not (1 <= n_files <= 4 and abs(n_files * 0.6 - millions) < 1e-9):
        raise SystemExit(f"sizes below 5M rows must be 0.6, 1.2, 1.8 or 2.4, got {millions}")
    stream_dir = directory / "2.4m"
    if not stream_dir.exists():
        tmp = directory / "2.4m-tmp"
        write_score_stream(generate_score_stream(2_400_000, seed=7), str(tmp), n_files=4,
                           row_group_size=25_000)
        tmp.rename(stream_dir)
    return sorted(glob.glob(str(stream_dir / "*.parquet")))[:n_files]


def _files(data: Path, millions: float) -> list[str]:
    if millions < 5:
        return _generate_small(data, millions)
    if millions % 5:
        raise SystemExit(f"sizes from 5M rows on must be multiples of 5, got {millions}")
    return _generate(data / f"{millions:g}m", int(millions) // 5)


# --------------------------------------------------------------------------- timing
def _run_child(argv: list[str], env: dict | None = None) -> dict:
    """Run a process: its last JSON line, plus the process's CPU (user + system, all threads,
    from ``wait4``) and wall time."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        text, errors = out.read().decode(), err.read().decode()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} failed:\n{errors[-3000:]}")
    result = json.loads(text.strip().splitlines()[-1])
    result["process_cpu"] = usage.ru_utime + usage.ru_stime
    result["process_wall"] = wall
    return result


def _ours_points(output: str, run_id: str) -> dict:
    import pyarrow.parquet as pq

    table = pq.read_table(Path(output, "runs", run_id, "operating_points.parquet"))
    return {r["group"]: {"thresholds": [float(t) for t in r["thresholds"]], "tp": float(r["tp"]),
                         "fp": float(r["fp"])}
            for r in table.to_pylist() if r["method"] == "hull"}


def _check_same(ours: dict, peer: dict, what: str) -> None:
    mine = {g: (p["thresholds"], p["tp"], p["fp"]) for g, p in ours.items()}
    theirs = {g: (p["thresholds"], p["tp"], p["fp"]) for g, p in peer.items()}
    if mine != theirs:
        raise SystemExit(f"{what} does not reproduce costlib's operating points:\n"
                         f"costlib {json.dumps(mine)}\npeer    {json.dumps(theirs)}")


def print_runs(runs: dict[str, dict]) -> None:
    """One line per run of a size: process CPU and wall, and the in-process split."""
    print(f"  {'run':<14}{'process CPU s':>14}{'wall s':>9}{'imports CPU':>13}"
          f"{'run CPU':>10}{'run wall':>10}")
    for name, r in runs.items():
        print(f"  {name:<14}{r['process_cpu']:>14.2f}{r['process_wall']:>9.2f}"
              f"{r['import_cpu']:>13.2f}{r['run_cpu']:>10.2f}{r['run_wall']:>10.2f}")


def print_fits(results: dict[float, dict[str, dict]], rows: dict[float, int], small: float,
               large: float) -> dict[str, tuple[float, float]]:
    """Print and return ``(marginal CPU s per row, fixed CPU s)`` of every run name, from its
    whole-process CPU at the ``small`` and ``large`` sizes (and the same fit of wall time)."""
    extra = rows[large] - rows[small]
    print(f"\nmarginal CPU per million rows ({small:g}M -> {large:g}M) and fixed cost (intercept), "
          f"whole processes (load {os.getloadavg()[0]:.2f}):")
    fits = {}
    for name in results[small]:
        cpu = [results[m][name]["process_cpu"] for m in (small, large)]
        wall = [results[m][name]["process_wall"] for m in (small, large)]
        per_row = (cpu[1] - cpu[0]) / extra
        fits[name] = (per_row, cpu[0] - per_row * rows[small])
        wall_per_row = (wall[1] - wall[0]) / extra
        print(f"  {name:<14}{per_row * 1e6:7.3f} CPU-s/M rows, fixed {fits[name][1]:5.2f} CPU-s;"
              f" wall {wall_per_row * 1e6:6.3f} s/M rows, fixed "
              f"{wall[0] - wall_per_row * rows[small]:5.2f} s")
    return fits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default="/tmp/costlib-bench-demo")
    parser.add_argument("--sizes", default="0.6,2.4,5,50",
                        help="millions of rows, comma-separated; CPU per row is fitted on "
                        "each pair in turn (0.6,2.4 and 5,50)")
    parser.add_argument("--peer-python", default="/tmp/benchenv/bin/python",
                        help="a Python with duckdb, numpy and pyarrow (requirements/bench.txt)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of each program per size, in alternation; figures are "
                        "medians (default 3)")
    parser.add_argument("--worker", choices=("ours", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "ours":
        exit_as_the_command_does(_worker_ours(json.loads(args.files), args.output))
    if args.worker == "floor":
        exit_as_the_command_does(_worker_floor(json.loads(args.files)))

    from costlib_pipelines.config import RunConfig

    sys.path.insert(0, str(HERE))
    from machine import describe

    config = RunConfig.from_dict(CONFIG, source="bench")
    edges = [e.tolist() for e in config.fixed_edges()]
    compiled = compile_sources()
    sizes = [float(s) for s in args.sizes.split(",")]
    data = Path(args.data_dir)
    me = [sys.executable, str(Path(__file__).resolve())]
    rows = {}
    results: dict[float, dict[str, dict]] = {}
    kept_output = None  # one costlib output, for the start-up of a command without a pipeline
    print(f"machine: {describe()}")
    print(f"costlib's modules compiled to bytecode before timing, as a wheel install has them: "
          f"{compiled}")
    for millions in sizes:
        files = _files(data, millions)
        spec = {"files": files, "classifiers": CLASSIFIERS, "edges": edges,
                "slope": config.target.slope, "group": '"group"', "label": "label",
                "weight": "weight"}
        spec_path = data / f"spec-{millions:g}m.json"
        spec_path.write_text(json.dumps(spec))
        plain_path = data / f"spec-{millions:g}m-plain.json"
        plain_path.write_text(json.dumps({**spec, "binning": "estimate"}))
        repeated: dict[str, list[dict]] = {}
        for _ in range(args.repeats):  # in alternation: ours, peer, plain peer, floor
            output = tempfile.mkdtemp(prefix="bench-ours-")
            try:
                ours = _run_child([*me, "--worker", "ours", "--files", json.dumps(files),
                                   "--output", output])
                points = _ours_points(output, ours["run_id"])
            finally:
                if kept_output is None:
                    kept_output = output
                else:
                    shutil.rmtree(output, ignore_errors=True)
            repeated.setdefault("costlib", []).append(ours)
            peer = _run_child([args.peer_python, str(HERE / "duckdb_peer.py"), str(spec_path)])
            _check_same(points, peer["points"], "the DuckDB peer")
            repeated.setdefault("duckdb", []).append(peer)
            plain = _run_child([args.peer_python, str(HERE / "duckdb_peer.py"), str(plain_path)])
            _check_same(points, plain["points"], "the plain DuckDB peer")
            repeated.setdefault("duckdb_plain", []).append(plain)
            repeated.setdefault("beam_floor", []).append(
                _run_child([*me, "--worker", "floor", "--files", json.dumps(files)]))
        runs = {name: _median_run(done) for name, done in repeated.items()}
        rows[millions] = runs["costlib"]["rows"]
        assert runs["beam_floor"]["rows"] == rows[millions], (runs["beam_floor"]["rows"], rows)
        assert runs["duckdb"]["rows_histogrammed"] == rows[millions]
        results[millions] = runs
        print(f"\n{rows[millions]:,} rows ({len(files)} files); operating points of "
              f"{len(points)} grids (hull) reproduced exactly by both DuckDB peers "
              f"(DuckDB {runs['duckdb']['duckdb']}, {runs['duckdb']['threads']} threads); "
              f"load {os.getloadavg()[0]:.2f}")
        print_runs(runs)
    print_walls(results, rows, ("costlib", "duckdb"))
    for small, large in zip(sizes[0::2], sizes[1::2], strict=False):
        fits = print_fits(results, rows, small, large)
        print_against_peers("costlib", fits, results[small], small, ("duckdb", "duckdb_plain"),
                            "read Arrow batches")
    _fixed_cost_direct(me, data, min(s for s in sizes))
    if kept_output is not None:
        print_start_up(kept_output)
        shutil.rmtree(kept_output, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


def _median_run(done: list[dict]) -> dict:
    """One run's figures: the median of each time over the repeats (the rest from the first)."""
    times = ("process_cpu", "process_wall", "import_cpu", "import_wall", "run_cpu", "run_wall")
    merged = dict(done[0])
    for key in times:
        if key in merged:
            merged[key] = statistics.median(run[key] for run in done)
    return merged


def compile_sources() -> str:
    """Compile costlib's packages to bytecode (``compileall``), as installing a wheel does.

    An editable install runs from the source tree; with ``PYTHONDONTWRITEBYTECODE`` set (as on
    some CI machines) every process would compile every module again, a cost no installed
    product pays. Returns what was compiled."""
    import compileall

    import costlib
    import costlib_pipelines

    roots = [Path(costlib.__file__).parent, Path(costlib_pipelines.__file__).parent]
    ok = all(compileall.compile_dir(str(root), quiet=1) for root in roots)
    if not ok:
        raise SystemExit("compileall failed on costlib's sources")
    return ", ".join(str(root) for root in roots)


def print_walls(results: dict[float, dict[str, dict]], rows: dict[float, int],
                names: tuple[str, ...]) -> None:
    """Wall time of whole processes at every size, costlib against the peer."""
    print(f"\nwall time, whole processes (load {os.getloadavg()[0]:.2f}):")
    for millions, runs in results.items():
        line = "  ".join(f"{n} {runs[n]['process_wall']:6.2f} s" for n in names)
        ratio = runs[names[0]]["process_wall"] / runs[names[1]]["process_wall"]
        print(f"  {rows[millions]:>12,} rows  {line}  ratio {ratio:5.2f}x")


def print_start_up(output: str, repeats: int = 5) -> None:
    """``costlib status`` on a real output, whole processes, median of ``repeats``: what a
    command that runs no pipeline costs from start to finish (target <= 0.5 s wall)."""
    command = [str(Path(sys.executable).with_name("costlib")), "status", "--output", output]
    walls, cpus = [], []
    for _ in range(repeats):
        run = _run_status(command)
        walls.append(run[0])
        cpus.append(run[1])
    print(f"costlib status (no pipeline), whole process, median of {repeats}: "
          f"{statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} CPU-s "
          f"(target <= 0.5 s wall; load {os.getloadavg()[0]:.2f})")


def _run_status(command: list[str]) -> tuple[float, float]:
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(command)} failed")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def print_against_peers(name: str, fits: dict, small_runs: dict, small: float,
                        peers: tuple[str, ...], floor_reads: str) -> None:
    """The closing lines: costlib's marginal CPU per row against each peer (target <= 1.5x),
    Beam's floor, and costlib's fixed cost above it (intercepts; in process at the small
    size)."""
    for peer in peers:
        print(f"{name} / {peer} marginal CPU per row: "
              f"{fits['costlib'][0] / fits[peer][0]:.2f}x (target <= 1.5x)")
    print(f"Beam's floor (FnApiRunner, {floor_reads} + count): fixed "
          f"{fits['beam_floor'][1]:.2f} CPU-s, {fits['beam_floor'][0] * 1e6:.3f} CPU-s/M rows")
    print(f"{name}'s fixed cost above Beam's floor: "
          f"{fits['costlib'][1] - fits['beam_floor'][1]:.2f} CPU-s (target <= 0.3); "
          f"in-process run only at {small:g}M (imports excluded): costlib "
          f"{small_runs['costlib']['run_cpu']:.2f} vs floor "
          f"{small_runs['beam_floor']['run_cpu']:.2f} CPU-s; imports "
          f"{small_runs['costlib']['import_cpu']:.2f} vs "
          f"{small_runs['beam_floor']['import_cpu']:.2f} CPU-s")


def _fixed_cost_direct(me: list[str], data: Path, millions: float, repeats: int = 5) -> None:
    """The fixed cost measured directly: whole processes (imports included) on one row group
    cut from the first data file (25,000 rows), costlib and Beam's floor in alternation, the
    median of ``repeats`` each. The intercept of the 2-point fit above moves whenever the cost
    per row is not quite linear between the two sizes (any change that saves more at the large
    size raises it); this line has no fit in it."""
    import pyarrow.parquet as pq

    first = pq.ParquetFile(json.loads((data / f"spec-{millions:g}m.json").read_text())["files"][0])
    one = data / "one-row-group.parquet"
    pq.write_table(first.read_row_group(0), one)
    cpu: dict[str, list[float]] = {"costlib": [], "beam_floor": []}
    for _ in range(repeats):
        output = tempfile.mkdtemp(prefix="bench-ours-")
        try:
            run = _run_child([*me, "--worker", "ours", "--files", json.dumps([str(one)]),
                              "--output", output])
            cpu["costlib"].append(run["process_cpu"])
        finally:
            shutil.rmtree(output, ignore_errors=True)
        cpu["beam_floor"].append(_run_child([*me, "--worker", "floor", "--files",
                                             json.dumps([str(one)])])["process_cpu"])
    ours, floor = (statistics.median(cpu[k]) for k in ("costlib", "beam_floor"))
    print(f"fixed cost measured directly (one row group of {first.metadata.row_group(0).num_rows:,}"
          f" rows, whole processes, median of {repeats}, alternated): costlib {ours:.2f} CPU-s, "
          f"floor {floor:.2f} CPU-s: costlib's fixed cost above Beam's floor {ours - floor:.2f} "
          f"CPU-s (target <= 0.3)")


if __name__ == "__main__":
    main()
