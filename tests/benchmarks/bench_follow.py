"""Benchmark: the always-on worker on a local Flink cluster. How long from a file landing to
its decisions written, and how many rows a second it keeps up with.

Run: ``.venv/bin/python tests/benchmarks/bench_follow.py [--rows 100000,1000000]
[--files 6] [--gap 10] [--port-base 38081]``

The cluster is ``tools/flink_cluster.py``'s, started here on its own ports and stopped at the
end. Points: a batch ``costlib recalibrate`` (FnApiRunner) of the demo's stream with the
demo's config (``costlib demo``: auto edges, four methods, top-k F1 decoding). Then
``costlib decide --follow`` runs with ``flink_cluster.py flags --streaming``, and for each size:

* **latency**: after one warm-up file (the job's workers start on it), ``--files`` files of
  that many rows (the demo's stream, 4 row groups) land one by one, ``--gap`` seconds apart
  (renamed into place). A file's latency runs from its rename
  to its output's ``LATEST``; the benchmark prints p50, p95 and the largest.
* **sustained rows/s**: as many files again land at once, and it prints their rows divided by
  the time from the first rename to the last ``LATEST``.

For comparison it also times the same file decided by one batch ``costlib decide`` process on
the FnApiRunner (what a cron job pays per file). Every output is checked: the decided rows
equal the rows of the file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_flink import _cluster_module  # the cluster tool, loaded as a module
from machine import describe

COSTLIB = str(Path(sys.executable).parent / "costlib")


def _write(rows: int, seed: int, path: Path) -> None:
    from costlib.sample import generate_score_stream

    frame = generate_score_stream(rows, seed=seed)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path,
                   row_group_size=max(1, rows // 4))


def _land(source: Path, land: Path, name: str) -> float:
    hidden = land / f"_{name}"
    shutil.copy(source, hidden)
    os.rename(hidden, land / name)
    return time.time()


def _done(output: Path) -> dict[str, float]:
    """The outputs under ``output/files`` that have a ``LATEST``: name -> its mtime."""
    return {p.name: (p / "LATEST").stat().st_mtime for p in (output / "files").iterdir()
            if (p / "LATEST").exists()}


def _wait(output: Path, count: int, timeout: float = 1200) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = _done(output)
        if len(done) >= count:
            return done
        time.sleep(0.2)
    raise RuntimeError(f"only {len(_done(output))} of {count} files decided in {timeout} s")


def _check(output: Path, rows: int) -> None:
    for directory in (output / "files").iterdir():
        run = directory / "runs" / (directory / "LATEST").read_text().strip()
        decided = json.loads((run / "manifest.json").read_text())["row_accounting"]["decided"]
        if decided != rows:
            raise AssertionError(f"{directory.name}: decided {decided} of {rows} rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="100000,1000000")
    parser.add_argument("--files", type=int, default=6)
    parser.add_argument("--gap", type=float, default=10.0)
    parser.add_argument("--port-base", type=int, default=38081)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-follow-"))
    demo = work / "demo"
    subprocess.run([COSTLIB, "demo", "--output", str(demo), "--n-items", "1000", "--no-plots"],
                   check=True, stdout=subprocess.DEVNULL)
    config = demo / "config.yaml"
    points = demo / "recalibrate"
    if not (points / "LATEST").exists():  # the demo publishes its points there
        _write(200_000, 1, work / "rated.parquet")
        subprocess.run([COSTLIB, "recalibrate", "--config", str(config), "--input",
                        str(work / "rated.parquet"), "--output", str(points)], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    flink = _cluster_module()
    cluster = flink.Cluster(flink.Ports(args.port_base), work / "cluster")
    cluster.start()
    print(describe())
    print(f"Flink {cluster.versions['FLINK_VERSION']}, Beam job server "
          f"{cluster.versions['BEAM_FLINK_RUNNER_VERSION']}; decide --follow, poll 1 s")
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            source = work / f"scores-{rows}.parquet"
            _write(rows, 7, source)
            start = time.perf_counter()
            subprocess.run([COSTLIB, "decide", "--config", str(config), "--input", str(source),
                            "--operating-points", str(points), "--output",
                            str(work / f"batch-{rows}")], check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            batch = time.perf_counter() - start
            land, output = work / f"land-{rows}", work / f"out-{rows}"
            land.mkdir()
            done = subprocess.run(
                [COSTLIB, "decide", "--follow", "--config", str(config), "--input",
                 str(land / "*.parquet"), "--operating-points", str(points), "--output",
                 str(output), "--poll-seconds", "1", *cluster.streaming_flags()],
                capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(done.stderr[-3000:])
            _land(source, land, "warm-up.parquet")  # the job's workers start on the first file
            _wait(output, 1)
            landed = {}
            for i in range(args.files):
                name = f"spaced-{i}.parquet"
                landed[name] = _land(source, land, name)
                time.sleep(args.gap)
            finished = _wait(output, 1 + args.files)
            finished = {d: t for d, t in finished.items() if d.startswith("spaced-")}
            latencies = sorted(finished[d] - landed[d.rsplit("-", 1)[0] + ".parquet"]
                               for d in finished)
            burst = {}
            for i in range(args.files):
                burst[f"burst-{i}.parquet"] = _land(source, land, f"burst-{i}.parquet")
            finished = _wait(output, 1 + 2 * args.files)
            last = max(t for d, t in finished.items() if d.startswith("burst-"))
            rate = args.files * rows / (last - min(burst.values()))
            _check(output, rows)
            p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
            print(f"{rows:>9,} rows a file: landing -> decisions p50 "
                  f"{statistics.median(latencies):.1f} s, p95 {p95:.1f} s, max "
                  f"{latencies[-1]:.1f} s ({args.files} files {args.gap:g} s apart); "
                  f"sustained {rate:,.0f} rows/s ({args.files} files at once); one batch "
                  f"costlib decide of the file: {batch:.1f} s; load {os.getloadavg()[0]:.1f}")
            for job in _jobs(cluster):
                _cancel(cluster, job)
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def _jobs(cluster) -> list[str]:
    import urllib.request

    with urllib.request.urlopen(f"http://localhost:{cluster.ports.rest}/jobs/overview",
                                timeout=5) as response:
        return [j["jid"] for j in json.load(response)["jobs"] if j["state"] == "RUNNING"]


def _cancel(cluster, jid: str) -> None:
    import urllib.request

    request = urllib.request.Request(
        f"http://localhost:{cluster.ports.rest}/jobs/{jid}?mode=cancel", method="PATCH")
    urllib.request.urlopen(request, timeout=5).close()


if __name__ == "__main__":
    main()
