"""Endurance benchmark of the always-on worker: both ``--follow`` jobs on a local Flink cluster
for ``--minutes`` of wall time, files landing at a steady rate, the TaskManager SIGKILLed every
``--kill-every`` minutes and brought back as an operator would.

Run: ``.venv/bin/python tests/benchmarks/bench_worker_soak.py --minutes 60 [--every 7]
[--rows 100000] [--hours-per-file 4] [--kill-every 10] [--port-base 28081] [--out soak.json]``

What it does, in order:

1. starts its own cluster (``tools/flink_cluster.py``, ports from ``--port-base``);
2. the first run as docs/worker.md says: one batch ``costlib recalibrate`` with the stream's
   config (auto edges, ``windowing`` size 2 days, period 1 day, allowed lateness 2 days) over
   four days of history, then ``recalibrate --follow`` on a rated landing directory and
   ``decide --follow`` on a score landing directory;
3. every ``--every`` seconds one rated file (``--rows`` rows of the demo's stream, generated
   once; each file's event times moved to its own ``--hours-per-file`` hours) lands renamed
   into place and ``_WATERMARK`` moves to the end of the event time landed; half a period
   later one score file (``--rows`` rows) lands. One rated file in 25 is held back 6 files
   (late: its windows are judged again), one in 150 is held until the stream's watermark has
   passed its windows' allowed lateness (too late: its rows are counted, not used);
4. every ``--kill-every`` minutes: SIGKILL of the TaskManager, then
   ``tools/flink_cluster.py start`` (it starts what is not running);
5. every minute: each job's last completed checkpoint size (Flink REST
   ``/jobs/<id>/checkpoints``), the resident memory of the TaskManager, the job server and the
   worker pool with its SDK workers (``/proc``), and the landing-to-decision latency of the
   score files (rename to its output's ``LATEST``);
6. at the end: the watermark moves past the last window; then every score file must have
   exactly one complete decision output (its rows all decided), every judged window's last pane
   must equal a batch windowed ``costlib recalibrate`` (FnApiRunner) over every rated file that
   was not too late, into the output as it was before the stream (same carried edges, same
   points in force), no window's pane may be recorded twice, and the too-late rows counted must
   be the too-late files' rated rows.

It prints a table per 10 minutes and ends with the line
``SOAK minutes=N files=… lost=… duplicated=… windows_equal=…/… checkpoint_growth=…
rss_growth=… latency_p50=… p95=…``. Growth is the mean over the last 10 minutes against the
mean over minutes 10–20 (runs shorter than 30 minutes: the last third against the middle
third); ``checkpoint_growth`` is the larger of the two jobs', ``rss_growth`` the sum of the
processes' resident memory. Latency: score files landed after the first window was applied
(before it, ``decide --follow`` waits for points by design).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from bench_flink import _cluster_module  # noqa: E402  (the cluster tool, as a module)
from flink_support import engine_config  # noqa: E402
from machine import describe  # noqa: E402
from pipeline_data import sample_frame  # noqa: E402

from costlib_pipelines.follow.decide_stream import decided_name  # noqa: E402

ROOT = HERE.parents[1]
COSTLIB = str(Path(sys.executable).parent / "costlib")
HOUR_US = 3_600_000_000
DAY_US = 24 * HOUR_US
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
START_US = int(START.timestamp()) * 1_000_000
WINDOWING = {"size_days": 2, "period_days": 1, "allowed_lateness_days": 2}
LATE_EVERY, LATE_HOLD = 25, 6
TOO_LATE_EVERY = 150


def iso(micros: int) -> str:
    return (START + dt.timedelta(microseconds=micros - START_US)).isoformat()


class Files:
    """The demo stream's rows, generated once; a file's event times moved cheaply."""

    def __init__(self, rows: int, hours: int, seed: int = 3):
        frame = sample_frame(rows, seed=seed)
        self.table = pa.Table.from_pandas(frame, preserve_index=False)
        self.rows, self.hours = rows, hours
        self.rated = int(frame["label"].notna().sum())
        self.time_type = self.table.schema.field("event_time").type
        unit = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[self.time_type.unit]
        span = hours * 3600 * unit
        self.offsets = (np.arange(rows, dtype=np.int64) * 7919 * unit // 1000) % span
        self.unit = unit

    def write(self, path: Path, start_us: int) -> None:
        """``rows`` rows with event times in ``[start_us, start_us + hours)``."""
        start = start_us * self.unit // 1_000_000
        times = pa.array(start + self.offsets, type=self.time_type)
        index = self.table.schema.get_field_index("event_time")
        pq.write_table(self.table.set_column(index, "event_time", times), path,
                       row_group_size=max(1, self.rows // 4))


def land(source: Path, target: Path) -> float:
    """Rename ``source`` (written beside ``target`` under a hidden name) into place."""
    os.rename(source, target)
    return time.time()


def move_watermark(directory: Path, micros: int) -> None:
    tmp = directory / "_WATERMARK.tmp"
    tmp.write_text(iso(micros))
    os.rename(tmp, directory / "_WATERMARK")


def rest(cluster, path: str, method: str = "GET"):
    request = urllib.request.Request(f"http://localhost:{cluster.ports.rest}{path}",
                                     method=method)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read()
    return json.loads(body) if body else None


def run_cli(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([COSTLIB, *args], capture_output=True, text=True, timeout=timeout)


def job_id(cluster, done: subprocess.CompletedProcess, what: str) -> str:
    """The Flink id the command printed; else the id of the job with the name it printed
    (the command's own look-up can time out on a loaded machine)."""
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}): {done.stderr[-3000:]}")
    found = re.search(r"Flink job ([0-9a-f]{32})", done.stdout)
    if found is not None:
        return found.group(1)
    name = re.search(r"job (costlib-[\w.-]+)", done.stdout)
    if name is None:
        raise RuntimeError(f"{what}: no job name in its output: {done.stdout[-2000:]}")
    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            for job in rest(cluster, "/jobs/overview")["jobs"]:
                if job["name"] == name.group(1) and job["state"] == "RUNNING":
                    return job["jid"]
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(3)
    raise RuntimeError(f"{what}: job {name.group(1)} not running after 300 s")


# ----------------------------------------------------------------------------- sampling
def _groups() -> dict[int, list[tuple[int, int]]]:
    """``pgid -> [(pid, RSS kB)]`` of every process (the cluster's processes each lead a
    session of their own, and the worker pool's SDK workers are in the pool's)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            rss = next((int(line.split()[1]) for line in
                        (entry / "status").read_text().splitlines()
                        if line.startswith("VmRSS:")), 0)
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(int(stat[2]), []).append((int(entry.name), rss))
    return out


def sample_memory(cluster) -> dict[str, float]:
    """Resident MB of each cluster process with its group; the pool's SDK workers apart."""
    pids, groups = cluster.pids(), _groups()
    out = {}
    for name in ("taskmanager", "jobmanager", "job_server", "worker_pool"):
        members = groups.get(pids.get(name, -1), [])
        own = sum(rss for pid, rss in members if pid == pids.get(name))
        out[name] = round((own if name == "worker_pool" else
                           sum(rss for _, rss in members)) / 1024, 1)
        if name == "worker_pool":
            out["sdk_workers"] = round(sum(rss for pid, rss in members
                                           if pid != pids.get(name)) / 1024, 1)
    return out


def sample_checkpoint(cluster, jid: str) -> dict:
    try:
        data = rest(cluster, f"/jobs/{jid}/checkpoints")
        state = rest(cluster, f"/jobs/{jid}")["state"]
    except (OSError, ValueError, KeyError) as exc:
        return {"error": str(exc)}
    completed = (data.get("latest") or {}).get("completed") or {}
    return {"state": state, "state_size": completed.get("state_size"),
            "checkpointed_size": completed.get("checkpointed_size"),
            "checkpoint_id": completed.get("id"),
            "completed": (data.get("counts") or {}).get("completed"),
            "restored": (data.get("counts") or {}).get("restored")}


def live_manifest(output: Path) -> dict:
    run = (output / "LATEST").read_text().strip()
    return json.loads((output / "runs" / run / "manifest.json").read_text())


def stream_watermark_us(output: Path) -> int | None:
    try:
        text = live_manifest(output)["follow"]["stream"]["watermark_utc"]
    except (OSError, KeyError, ValueError, TypeError):
        return None
    if not text:
        return None
    return int(dt.datetime.fromisoformat(text).timestamp()) * 1_000_000


def first_applied(output: Path) -> bool:
    try:
        return any(e.get("state") == "applied" for e in live_manifest(output)["guard"]["windows"])
    except (OSError, KeyError, ValueError):
        return False


# ----------------------------------------------------------------------------- the run
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60)
    parser.add_argument("--every", type=float, default=7.0, help="seconds between rated files "
                        "(and between score files)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--hours-per-file", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=10.0, help="minutes")
    parser.add_argument("--port-base", type=int, default=28081)
    parser.add_argument("--out", type=Path, default=None, help="samples as JSON")
    parser.add_argument("--work", type=Path, default=None, help="work directory (kept)")
    args = parser.parse_args()
    if 24 % args.hours_per_file:
        parser.error("--hours-per-file must divide 24")
    work = args.work or Path(tempfile.mkdtemp(prefix="soak-"))
    work.mkdir(parents=True, exist_ok=True)
    flink = _cluster_module()
    cluster = flink.Cluster(flink.Ports(args.port_base), work / "cluster")
    stop_requested = []
    signal.signal(signal.SIGTERM, lambda *_: stop_requested.append(1))
    print(describe(), flush=True)
    files = Files(args.rows, args.hours_per_file)
    hours_us = args.hours_per_file * HOUR_US
    config = engine_config(
        work / "soak.yaml", methods=["graph"], grid={"edges": "auto"}, windowing=WINDOWING,
        publish={"max_threshold_change": 0.2, "min_rated": 0},
        in_force={"add_to_edges": False, "keep_when_insufficient": False})
    history, points, before = work / "history", work / "points", work / "before"
    rated_dir, score_dir, decided = work / "rated", work / "scores", work / "decided"
    for d in (history, rated_dir, score_dir):
        d.mkdir(exist_ok=True)
    days = Files(args.rows, 24, seed=4)
    for day in range(4):  # four days of history before the stream (one file a day)
        days.write(history / f"day{day}.parquet", START_US - (4 - day) * DAY_US)
    done = run_cli("recalibrate", "--config", config, "--input", str(history / "*.parquet"),
                   "--output", str(points))
    if done.returncode not in (0, 3):
        raise RuntimeError(f"first batch run: {done.stderr[-3000:]}")
    shutil.copytree(points, before)
    score_source = work / "score-source.parquet"
    files.write(score_source, START_US)
    samples: list[dict] = []
    kills: list[dict] = []
    rated: list[dict] = []     # index, path, start_us, landed (time), kind
    scores: list[dict] = []    # path, landed
    result: dict = {"args": {k: str(v) for k, v in vars(args).items()}, "machine": describe()}
    try:
        cluster.start(timeout=300)
        result["versions"] = {k: cluster.versions[k] for k in ("FLINK_VERSION",
                                                                "BEAM_FLINK_RUNNER_VERSION")}
        flags = cluster.streaming_flags()
        jid_rec = job_id(cluster, run_cli("recalibrate", "--follow", "--config", config, "--input",
                                 str(rated_dir / "*.parquet"), "--output", str(points),
                                 "--poll-seconds", "1", *flags, timeout=600),
                         "recalibrate --follow")
        jid_dec = job_id(cluster, run_cli("decide", "--follow", "--config", config, "--input",
                                 str(score_dir / "*.parquet"), "--operating-points",
                                 str(points), "--output", str(decided), "--poll-seconds", "1",
                                 *flags, timeout=600), "decide --follow")
        jobs = {"recalibrate": jid_rec, "decide": jid_dec}
        print(f"Flink {cluster.versions['FLINK_VERSION']}, Beam "
              f"{cluster.versions['BEAM_FLINK_RUNNER_VERSION']}; jobs {jobs}; a rated and a "
              f"score file of {args.rows:,} rows every {args.every:g} s, "
              f"{args.hours_per_file} h of event time a rated file; work {work}", flush=True)

        restarting = threading.Event()

        def kill_and_restart() -> None:
            restarting.set()
            try:
                pid = cluster.kill("taskmanager")
                killed = time.time()
                time.sleep(2)
                back = subprocess.run(
                    [sys.executable, str(ROOT / "tools" / "flink_cluster.py"), "--port-base",
                     str(args.port_base), "--state-dir", str(cluster.state), "start"],
                    capture_output=True, text=True, timeout=600)
                record = {"at": killed - t0, "pid": pid, "start_rc": back.returncode,
                          "back_after_s": round(time.time() - killed, 1), "recovered_s": {}}
                # recovered: a checkpoint completed after the kill (the job runs again)
                while len(record["recovered_s"]) < len(jobs) and time.time() < killed + 900:
                    for name, jid in jobs.items():
                        if name in record["recovered_s"]:
                            continue
                        try:
                            latest = rest(cluster, f"/jobs/{jid}/checkpoints")["latest"]
                            acked = (latest.get("completed") or {}).get("latest_ack_timestamp")
                        except (OSError, ValueError, KeyError, TypeError):
                            acked = None
                        if acked and acked / 1000 > killed:
                            record["recovered_s"][name] = round(acked / 1000 - killed, 1)
                    time.sleep(1)
                kills.append(record)
            finally:
                restarting.clear()

        t0 = time.time()
        end = t0 + args.minutes * 60
        next_rated, next_score = t0, t0 + args.every / 2
        # kills half a minute before each sample (not at the moment memory is sampled)
        next_sample, next_kill = t0, t0 + args.kill_every * 60 - 30
        index, held = 0, []  # held: (due index or None for too-late, record)
        landed_through = 0   # rated event time landed, as the producer says (µs from START)
        while time.time() < end and not stop_requested:
            now = time.time()
            if now >= next_rated:
                next_rated += args.every
                start_us = START_US + index * hours_us
                path = rated_dir / f"rated-{index:06d}.parquet"
                files.write(rated_dir / f"_rated-{index:06d}.parquet", start_us)
                record = {"index": index, "path": str(path), "start_us": start_us,
                          "kind": "on_time"}
                day_start = start_us - (start_us - START_US) % DAY_US
                if index % TOO_LATE_EVERY == 35:
                    record["kind"] = "too_late"  # until its windows are past the lateness
                    record["expires_us"] = day_start + 4 * DAY_US
                    held.append(record)
                elif index % LATE_EVERY == 10:
                    record["kind"] = "late"
                    record["due"] = index + LATE_HOLD
                    held.append(record)
                else:
                    record["landed"] = land(rated_dir / f"_{path.name}", path)
                    rated.append(record)
                wm = stream_watermark_us(points)
                for record in list(held):
                    ready = (record["kind"] == "late" and index >= record["due"]) or (
                        record["kind"] == "too_late" and wm is not None
                        and wm >= record["expires_us"])
                    if ready:
                        held.remove(record)
                        p = Path(record["path"])
                        record["landed"] = land(p.parent / f"_{p.name}", p)
                        rated.append(record)
                index += 1
                landed_through = max(landed_through, start_us + hours_us)
                move_watermark(rated_dir, landed_through)
            if now >= next_score:
                next_score += args.every
                name = f"scores-{len(scores):06d}.parquet"
                shutil.copyfile(score_source, score_dir / f"_{name}")
                scores.append({"path": str(score_dir / name),
                               "landed": land(score_dir / f"_{name}", score_dir / name),
                               "after_first_window": first_applied(points)})
            if now >= next_kill and not restarting.is_set():
                next_kill += args.kill_every * 60
                threading.Thread(target=kill_and_restart, daemon=True).start()
            if now >= next_sample:
                next_sample += 60
                sample = {"minute": round((now - t0) / 60, 2), "load": os.getloadavg()[0],
                          "rss_mb": sample_memory(cluster),
                          "checkpoints": {k: sample_checkpoint(cluster, j)
                                          for k, j in jobs.items()},
                          "rated_landed": len(rated), "scores_landed": len(scores)}
                try:
                    manifest = live_manifest(points)
                    sample["windows_judged"] = len(manifest["guard"]["windows"])
                    sample["stream"] = {k: manifest["follow"]["stream"].get(k) for k in
                                        ("files_read", "watermark_utc", "watermarks_waiting",
                                         "open_buckets")}
                except (OSError, KeyError, ValueError):
                    pass
                samples.append(sample)
                print(f"[{sample['minute']:6.2f} min] rated {len(rated)} scores "
                      f"{len(scores)} windows {sample.get('windows_judged')} "
                      f"ckpt {[c.get('state_size') for c in sample['checkpoints'].values()]} "
                      f"rss {sample['rss_mb']} load {sample['load']:.1f}", flush=True)
            time.sleep(max(0.0, min(next_rated, next_score, next_sample) - time.time()))
        minutes_run = (time.time() - t0) / 60
        while restarting.is_set():
            time.sleep(1)
        # the end: land what is still held (late files now; too-late ones once the stream's
        # watermark is past their windows' lateness), move the watermark past the last window
        final_us = landed_through - (landed_through - START_US) % DAY_US + 3 * DAY_US
        for record in [r for r in held if r["kind"] == "late"]:
            held.remove(record)
            p = Path(record["path"])
            record["landed"] = land(p.parent / f"_{p.name}", p)
            rated.append(record)
        move_watermark(rated_dir, final_us)
        deadline = time.time() + 900
        while held and time.time() < deadline:
            wm = stream_watermark_us(points)
            for record in list(held):
                if wm is not None and wm >= record["expires_us"]:
                    held.remove(record)
                    p = Path(record["path"])
                    record["landed"] = land(p.parent / f"_{p.name}", p)
                    rated.append(record)
            time.sleep(2)
        for record in held:  # never landed (the stream did not get there): not counted
            Path(record["path"]).parent.joinpath(f"_{Path(record['path']).name}").unlink()
        # wait for every rated file read and every score file decided
        while time.time() < deadline:
            try:
                stream = live_manifest(points)["follow"]["stream"]
            except (OSError, KeyError, ValueError):
                stream = {}
            decided_now = sum((decided / "files" / decided_name(s["path"]) / "LATEST").exists()
                              for s in scores)
            if (stream.get("files_read") == len(rated)
                    and stream_watermark_us(points) == final_us
                    and decided_now == len(scores)):
                break
            time.sleep(2)
        time.sleep(5)  # a last pane being written
        for jid in jobs.values():
            try:
                rest(cluster, f"/jobs/{jid}?mode=cancel", method="PATCH")
            except OSError:
                pass
    finally:
        cluster.stop()
    result.update(samples=samples, kills=kills, rated=rated, scores=scores, t0=t0,
                  minutes_run=minutes_run, work=str(work))
    out = args.out or work / "soak.json"
    out.write_text(json.dumps(result, indent=1, default=str))  # before the checks: kept
    report(result, work, points, before, decided, config, files, minutes_run, args)
    out.write_text(json.dumps(result, indent=1, default=str))
    return 0


def report_again(path: Path) -> int:
    """The checks and the figures again, from a finished run's JSON and work directory."""
    result = json.loads(path.read_text())
    work = Path(result["work"])
    args = argparse.Namespace(**result["args"])
    files = Files(int(args.rows), int(args.hours_per_file))
    if (work / "reference").exists():
        shutil.rmtree(work / "reference")
    before = work / "before"
    runs = sorted((before / "runs").iterdir())
    if len(runs) > 1:  # a reference run went into it: back to the first run alone
        pristine = work / "before-pristine"
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.copytree(before, pristine)
        for run in sorted((pristine / "runs").iterdir())[1:]:
            shutil.rmtree(run)
        (pristine / "LATEST").write_text(runs[0].name + "\n")
        before = pristine
    report(result, work, work / "points", before, work / "decided",
           str(work / "soak.yaml"), files, result["minutes_run"], args)
    path.write_text(json.dumps(result, indent=1, default=str))
    return 0


# ----------------------------------------------------------------------------- the checks
def report(result, work, points, before, decided, config, files, minutes_run, args) -> None:
    rated, scores, samples, kills = (result[k] for k in ("rated", "scores", "samples",
                                                         "kills"))
    t0_run = result["t0"]
    for s in scores:  # latency and the one complete output of each score file
        out = decided / "files" / decided_name(s["path"])
        runs = sorted((out / "runs").iterdir()) if (out / "runs").is_dir() else []
        s["runs"] = len(runs)
        if (out / "LATEST").exists():
            s["decided_at"] = (out / "LATEST").stat().st_mtime
            s["latency"] = s["decided_at"] - s["landed"]
            manifest = json.loads((runs[-1] / "manifest.json").read_text())
            s["rows"] = manifest["row_accounting"].get("decided")
    lost = sum("decided_at" not in s or s.get("rows") != files.rows for s in scores)
    extra = [p.name for p in (decided / "files").iterdir()] if (decided / "files").is_dir() \
        else []
    duplicated_decisions = sum(s["runs"] > 1 for s in scores) + max(0, len(extra) - len(scores))
    dead = list((decided / "dead_letter" / "files").glob("*.json")) \
        if (decided / "dead_letter").is_dir() else []
    # windows: last pane against the batch run over the rated files that were not too late
    manifest = live_manifest(points)
    entries = manifest["guard"]["windows"]
    names = [e["window"] for e in entries]
    panes_twice = len(names) - len(set(names))
    for e in entries:
        seen = [p.get("pane_index", 0) for p in e.get("earlier_panes", [])] + [e["pane_index"]]
        panes_twice += len(seen) - len(set(seen))
    reference_in = work / "reference"
    reference_in.mkdir(exist_ok=True)
    used = [r for r in rated if r["kind"] != "too_late"]
    for r in used:
        os.link(r["path"], reference_in / Path(r["path"]).name)
    started = time.time()
    target = work / "reference-out"  # the output as it was before the stream, kept as it is
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(before, target)
    done = run_cli("recalibrate", "--config", config, "--input",
                   str(reference_in / "*.parquet"), "--output", str(target), timeout=7200)
    if done.returncode not in (0, 3):
        raise RuntimeError(f"the batch reference failed: {done.stderr[-3000:]}")
    reference_seconds = time.time() - started
    batch = target / "runs" / (target / "LATEST").read_text().strip()
    follow = points / "runs" / (points / "LATEST").read_text().strip()
    equal = 0
    unequal = []
    for name in names:
        if records(follow / "windows" / name) == records(batch / "windows" / name):
            equal += 1
        else:
            unequal.append(name)
    too_late_rows = manifest["row_accounting"].get("too_late.rated_rows", 0)
    too_late_files = sum(r["kind"] == "too_late" for r in rated)
    late_panes = sum(e["pane_index"] > 0 for e in entries)
    # growth and latency
    n = minutes_run
    if n >= 30:
        base, last, rule = (10, 20), (n - 10, n + 1), "last 10 min / minutes 10-20"
    else:
        base, last, rule = (n / 3, 2 * n / 3), (2 * n / 3, n + 1), "last third / middle third"

    def mean(values):
        values = [v for v in values if v is not None]
        return statistics.fmean(values) if values else float("nan")

    def span(lo_hi):
        return [s for s in samples if lo_hi[0] <= s["minute"] < lo_hi[1]]

    def ckpt(part, job):
        return mean([s["checkpoints"][job].get("state_size") for s in part])

    def rss(part):
        return mean([sum(s["rss_mb"].values()) for s in part])

    growths = {job: ckpt(span(last), job) / ckpt(span(base), job)
               for job in ("recalibrate", "decide")}
    checkpoint_growth = max(growths.values())
    rss_growth = rss(span(last)) / rss(span(base))
    timed = [s for s in scores if s.get("after_first_window") and "latency" in s]
    lat = sorted(s["latency"] for s in timed)
    recoveries = [(t0_run + k["at"], t0_run + k["at"] + max(k["recovered_s"].values(),
                                                             default=900)) for k in kills]
    calm = sorted(s["latency"] for s in timed
                  if not any(a <= s["landed"] <= b for a, b in recoveries))

    def pct(values, q):
        return values[min(len(values) - 1, round(q * (len(values) - 1)))] if values else \
            float("nan")

    t0 = min([s["landed"] for s in scores] + [time.time()])
    kill_minutes = ", ".join(f"{k['at'] / 60:.1f}" for k in kills)
    print(f"\nper 10 minutes ({len(kills)} TaskManager kills at {kill_minutes} min; back after "
          f"{', '.join(str(k['back_after_s']) for k in kills)} s)")
    print("minutes | rated | scores | windows | ckpt recal KB | ckpt decide KB | TM MB | "
          "job srv MB | pool MB | SDK MB | JM MB | latency p50/p95/max s | load")
    for lo in range(0, int(np.ceil(n)), 10):
        part = span((lo, lo + 10))
        if not part:
            continue
        in_bucket = sorted(s["latency"] for s in timed if lo <= (s["landed"] - t0) / 60 < lo + 10)
        print(f"{lo:3d}-{lo + 10:<3d} | {part[-1]['rated_landed']:5d} | "
              f"{part[-1]['scores_landed']:6d} | {part[-1].get('windows_judged')!s:>7} | "
              f"{ckpt(part, 'recalibrate') / 1024:13.1f} | {ckpt(part, 'decide') / 1024:14.1f} | "
              f"{mean([s['rss_mb']['taskmanager'] for s in part]):5.0f} | "
              f"{mean([s['rss_mb']['job_server'] for s in part]):10.0f} | "
              f"{mean([s['rss_mb']['worker_pool'] for s in part]):7.0f} | "
              f"{mean([s['rss_mb'].get('sdk_workers') for s in part]):6.0f} | "
              f"{mean([s['rss_mb']['jobmanager'] for s in part]):5.0f} | "
              f"{pct(in_bucket, .5):.1f}/{pct(in_bucket, .95):.1f}/"
              f"{(in_bucket or [float('nan')])[-1]:.1f} | {mean([s['load'] for s in part]):.1f}")
    print(f"growth rule: {rule}; checkpoint growth per job "
          f"{ {k: round(v, 3) for k, v in growths.items()} }")
    print(f"rated files {len(rated)} ({sum(r['kind'] == 'late' for r in rated)} late, "
          f"{too_late_files} too late: {too_late_rows} too-late rated rows counted, "
          f"expected {too_late_files * files.rated}); late panes {late_panes}; windows judged "
          f"{len(names)}; event time {iso(START_US)} to "
          f"{manifest['follow']['stream'].get('watermark_utc')}; decide dead letters "
          f"{len(dead)}; panes recorded twice {panes_twice}; duplicate decision outputs "
          f"{duplicated_decisions}; unequal windows {unequal[:5]}; batch reference "
          f"{reference_seconds:.0f} s; latency over {len(lat)} score files landed after the "
          f"first applied window (of {len(scores)}), max {(lat or [float('nan')])[-1]:.1f} s")
    phases = recovery_phases(work / "cluster" / "log", kills, t0_run)
    result["recovery_phases"] = phases
    for k, phase in enumerate(phases):
        print(f"kill {k + 1}: seconds after the kill: jobs restarting "
              f"{phase['restarting']}, new TaskManager registered "
              f"{phase['taskmanager_registered']}, every task running (SDK workers up, state "
              f"restored) {phase['tasks_running']}, first checkpoint "
              f"{phase['first_checkpoint']}")
    print(f"recovery after each kill (kill to the first checkpoint completed after it, s): "
          f"{[k['recovered_s'] for k in kills]}; latency of the {len(calm)} score files landed "
          f"outside recoveries: p50 {pct(calm, .5):.1f} s, p95 {pct(calm, .95):.1f} s, max "
          f"{(calm or [float('nan')])[-1]:.1f} s")
    print(describe())
    result["summary"] = {
        "minutes": round(n, 1), "files": len(rated) + len(scores), "lost": lost,
        "duplicated": duplicated_decisions + panes_twice, "windows_equal": equal,
        "windows": len(names), "checkpoint_growth": checkpoint_growth,
        "checkpoint_growth_by_job": growths, "rss_growth": rss_growth, "growth_rule": rule,
        "latency_p50": pct(lat, .5), "latency_p95": pct(lat, .95),
        "too_late_rows": too_late_rows, "too_late_rows_expected": too_late_files * files.rated,
        "late_panes": late_panes, "kills": len(kills), "decide_dead_letters": len(dead),
        "latency_outside_recoveries_p50": pct(calm, .5),
        "latency_outside_recoveries_p95": pct(calm, .95)}
    ok = too_late_rows == too_late_files * files.rated
    print(f"SOAK minutes={n:.0f} files={len(rated) + len(scores)} lost={lost} "
          f"duplicated={duplicated_decisions + panes_twice} windows_equal={equal}/{len(names)} "
          f"checkpoint_growth={checkpoint_growth:.2f} rss_growth={rss_growth:.2f} "
          f"latency_p50={pct(lat, .5):.1f}s p95={pct(lat, .95):.1f}s"
          + ("" if ok else " TOO_LATE_MISMATCH"))


def recovery_phases(log_dir: Path, kills: list[dict], t0: float) -> list[dict]:
    """Per kill, from the JobManager's log (seconds after the kill): the jobs restarting
    (failure detected), the new TaskManager registered, the last task initialized (its SDK
    workers started, state restored), the first checkpoint completed."""
    lines = []
    for path in sorted(log_dir.glob("flink--standalonesession-*.log")):
        lines += path.read_text(errors="replace").splitlines()

    def stamp(line: str) -> float | None:
        try:
            moment = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
        except ValueError:
            return None
        return moment.replace(tzinfo=dt.UTC).timestamp()

    events = [(stamp(line), line) for line in lines]
    events = [(t, line) for t, line in events if t is not None]
    phases = []
    for k, kill in enumerate(kills):
        at = t0 + kill["at"]
        until = t0 + kills[k + 1]["at"] if k + 1 < len(kills) else float("inf")
        window = [(t, line) for t, line in events if at <= t < until]

        def first(words: str, after: float, window=window, at=at) -> float | None:
            return next((t - at for t, line in window if t >= after and words in line), None)

        restarting = first("to RESTARTING", at)
        registered = first("Registering TaskManager", at)
        running = None
        if registered is not None:
            initialized = [t - at for t, line in window
                           if t >= at + registered and "from INITIALIZING to RUNNING" in line]
            running = max(initialized[:16]) if initialized else None
        checkpoint = first("Completed checkpoint", at + (running or 0))
        phases.append({k: None if v is None else round(v, 1) for k, v in (
            ("restarting", restarting), ("taskmanager_registered", registered),
            ("tasks_running", running), ("first_checkpoint", checkpoint))})
    return phases


def records(window: Path) -> list[dict]:
    text = (window / "operating_points.jsonl").read_text() if (
        window / "operating_points.jsonl").exists() else ""
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = [{k: v for k, v in r.items() if k not in ("run_id", "pane_index")} for r in rows]
    return sorted(out, key=lambda r: (str(r["group"]), r["method"]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--report-again":
        sys.exit(report_again(Path(sys.argv[2])))
    sys.exit(main())
