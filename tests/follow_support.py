"""What the engine tests of the always-on worker share: the day files and config of a followed
stream, a producer that lands them as the writer's contract says, the live manifest, a
``recalibrate --follow`` started on the session's cluster, and the batch windowed run the
followed windows are checked against (``tests/test_flink_follow.py``,
``tests/test_flink_upgrade.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd
from flink_support import engine_config, jobs, records, run_cli, run_dirs, wait_for
from pipeline_data import write_day_files

START = pd.Timestamp("2026-11-01", tz="UTC")
DAYS = 5
WINDOWING = {"size_days": 2, "period_days": 1, "allowed_lateness_days": 2}


def follow_days(root: Path) -> tuple[Path, str]:
    """Five day files under ``root/days`` (day 1 in two parts: ``day1b`` can land late) and
    the config of their followed stream (``root/follow.yaml``)."""
    source = root / "days"
    write_day_files(source, rows=30_000, seed=11, days=DAYS, split_day=1)
    config = engine_config(
        root / "follow.yaml", methods=["graph"],
        grid={"edges": "uniform", "bins": 16, "range": [0.0, 1.0]},
        windowing=WINDOWING, publish={"max_threshold_change": 0.2, "min_rated": 0},
        in_force={"add_to_edges": False, "keep_when_insufficient": False},
        audit={"enabled": True, "budget_share": 0.05, "salt": "follow-test"})
    return source, config


def window_name(start_day: int) -> str:
    start = START + pd.Timedelta(days=start_day)
    end = start + pd.Timedelta(days=WINDOWING["size_days"])
    return f"{start:%Y%m%dT%H%M%S}_{end:%Y%m%dT%H%M%S}"


class Producer:
    """Lands files and moves the watermark as the writer's contract says."""

    def __init__(self, source: Path, land: Path):
        self.source, self.land = source, land
        land.mkdir(parents=True, exist_ok=True)

    def land_file(self, name: str, *, in_place: bool = False) -> None:
        data = (self.source / f"{name}.parquet").read_bytes()
        target = self.land / f"{name}.parquet"
        if in_place:  # half the bytes first: no footer yet, the stream must wait for it
            target.write_bytes(data[: len(data) // 2])
            time.sleep(3)
            with target.open("ab") as fh:
                fh.write(data[len(data) // 2:])
            return
        hidden = self.land / f"_{name}.parquet"
        hidden.write_bytes(data)
        os.rename(hidden, target)

    def watermark(self, day: int) -> None:
        tmp = self.land / "_WATERMARK.tmp"
        tmp.write_text((START + pd.Timedelta(days=day)).isoformat())
        os.rename(tmp, self.land / "_WATERMARK")


def live_manifest(output: Path) -> dict:
    return json.loads((output / "runs" / (output / "LATEST").read_text().strip()
                       / "manifest.json").read_text())


def judged(output: Path, name: str, pane: int = 0) -> dict | None:
    entries = {e["window"]: e for e in live_manifest(output)["guard"]["windows"]}
    entry = entries.get(name)
    return entry if entry is not None and entry["pane_index"] >= pane else None


def start_follow(cluster, config: str, land: Path, output: Path) -> str:
    known = {j["jid"] for j in jobs(cluster)}
    done = run_cli("recalibrate", "--follow", "--config", config, "--input",
                   str(land / "*.parquet"), "--output", str(output), "--poll-seconds", "1",
                   *cluster.streaming_flags())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Unparseable argument" not in done.stderr, done.stderr[-3000:]
    jid = wait_for(lambda: next((j["jid"] for j in jobs(cluster) if j["jid"] not in known
                                 and j["state"] == "RUNNING"), None), "the follow job")
    # the command printed the job's Flink id and how to stop it, and recorded it
    assert f"Flink job {jid} (costlib-recalibrate-" in done.stdout, done.stdout
    assert f"flink cancel {jid}" in done.stdout
    assert live_manifest(output)["follow"]["job"]["flink_job_id"] == jid
    return jid


def batch_reference(config: str, source: Path, tmp_path: Path) -> Path:
    """The batch windowed run over every file (FnApiRunner): the truth for the windows."""
    everything = tmp_path / "all"
    everything.mkdir()
    for path in source.glob("*.parquet"):
        shutil.copy(path, everything / path.name)
    done = run_cli("recalibrate", "--config", config, "--input", str(everything / "*.parquet"),
                   "--output", str(tmp_path / "batch"))
    assert done.returncode in (0, 3), done.stderr[-3000:]
    return run_dirs(tmp_path / "batch")[-1]


def without(entry: dict, *keys: str) -> dict:
    return {k: v for k, v in entry.items() if k not in keys}


def final_records(run_dir: Path, name: str) -> list[dict]:
    return [without(r, "pane_index") for r in records(run_dir / "windows" / name)]


class Adding:
    """A stand-in combiner for a window book: sums rated rows (what the book merges, in
    closed form)."""

    def create_accumulator(self):
        return 0

    def add_input(self, acc, value):
        return acc + value[2]

    def compact(self, acc):
        return acc

    def merge_accumulators(self, accs):
        return sum(accs)

    def extract_output(self, acc):
        return acc
