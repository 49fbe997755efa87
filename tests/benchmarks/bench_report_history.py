"""Benchmark of ``costlib report --output OUTPUT --history``: time and page size for an output of
365 daily runs of 100 groups (the issue's target: <= 10 s and <= 3 MB).

The output is fabricated from one real small recalibration (``bench_report.template_runs``: 4
methods, k = 2, groups ``market_a..c``, a fallback group and ``__all__``): its records are copied
to ``--groups`` groups and, per run, the thresholds take a small random walk (a few groups move
a lot), volume, precision and an estimated recall with intervals jitter; 30% of the records
carry a proposed point (a move pending audit evidence). Every 30th run is held
by the guard, its violations naming three groups. The files are written with the project's
writers: the records as a table of ``arrow_schema("operating_point.json")``
(:mod:`costlib_pipelines.io.records`), the run directories with
:class:`costlib_pipelines.io.runs.RunDirectory` (marker, manifest, ``LATEST``).

Run: ``.venv/bin/python tests/benchmarks/bench_report_history.py [--runs 365] [--groups 100]
[--repeat 2] [--keep DIR]`` (``--keep``: write the output there and leave it, e.g. to open the
page).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machine import describe

#: Every HELD_EVERY-th run is held by the publish guard.
HELD_EVERY = 30


def _column(table: pa.Table, name: str, values: list) -> pa.Table:
    field = table.schema.field(name)
    return table.set_column(table.schema.get_field_index(name), field,
                            pa.array(values, field.type))


def base_table(template: Path, groups: int) -> pa.Table:
    """The template run's records copied to ``groups`` groups plus ``__all__``, as a table of
    the operating point schema (``records_to_table``: every field checked)."""
    from costlib_pipelines.io.records import records_to_table

    records = pq.read_table(template / "run-1" / "operating_points.parquet").to_pylist()
    markets = sorted({r["group"] for r in records if r["group"].startswith("market")})
    by_group: dict[str, list[dict]] = {}
    for r in records:
        by_group.setdefault(r["group"], []).append(r)
    rows = []
    for i in range(groups):
        source = "tiny" if i % 37 == 36 and "tiny" in by_group else markets[i % len(markets)]
        rows += [{**r, "group": f"group_{i:05d}"} for r in by_group[source]]
    rows += by_group["__all__"]
    return records_to_table(rows, "operating_point.json")


#: Share of a run's records with a pending move (``proposed_thresholds``: the evidence rule
#: published other thresholds than the method's point), shown as notes and hollow markers.
PROPOSAL_SHARE = 0.3


def run_table(base: pa.Table, rng: np.random.Generator, walk: dict[str, np.ndarray],
              run_id: str) -> pa.Table:
    """One run's records: thresholds from the random walk, jittered volume, precision and an
    estimated recall with its interval; :data:`PROPOSAL_SHARE` of them with a proposed point
    0.05 below their thresholds."""
    names = base.column("group").to_pylist()
    thresholds = base.column("thresholds").to_pylist()
    values = []
    for name, t in zip(names, thresholds, strict=True):
        if t is None:
            values.append(None)
            continue
        shift = walk[name]
        values.append([v if np.isinf(v) else float(np.clip(v + s, 0.0, 0.99))
                       for v, s in zip(t, shift, strict=True)])
    n = base.num_rows
    volume = np.asarray(base.column("volume").to_numpy(zero_copy_only=False), dtype=float)
    volume = np.where(np.isnan(volume), np.nan, np.round(volume * rng.uniform(0.8, 1.25, n)))
    precision = np.clip(rng.normal(0.6, 0.05, n), 0, 1)
    recall = np.clip(rng.normal(0.8, 0.04, n), 0, 1)
    table = _column(base, "thresholds", values)
    table = _column(table, "volume", [None if np.isnan(v) else float(v) for v in volume])
    table = _column(table, "precision", precision.tolist())
    table = _column(table, "precision_ci_low", np.clip(precision - 0.06, 0, 1).tolist())
    table = _column(table, "precision_ci_high", np.clip(precision + 0.06, 0, 1).tolist())
    table = _column(table, "estimated_recall", recall.tolist())
    table = _column(table, "estimated_recall_ci_low", np.clip(recall - 0.08, 0, 1).tolist())
    table = _column(table, "estimated_recall_ci_high", np.clip(recall + 0.08, 0, 1).tolist())
    pending = rng.random(n) < PROPOSAL_SHARE
    proposed = [None if t is None or not p else [v if np.isinf(v) else max(v - 0.05, 0.0)
                                                 for v in t]
                for t, p in zip(values, pending, strict=True)]
    table = _column(table, "proposed_thresholds", proposed)
    return _column(table, "run_id", [run_id] * n)


def make_output(template: Path, output: Path, runs: int, groups: int, seed: int = 0) -> Path:
    """``output`` with ``runs`` complete daily runs of ``groups`` groups (see the module doc)."""
    from costlib_pipelines.io.files import write_json
    from costlib_pipelines.io.records import arrow_schema
    from costlib_pipelines.io.runs import RunDirectory

    rng = np.random.default_rng(seed)
    base = base_table(template, groups)
    manifest = json.loads((template / "run-1" / "manifest.json").read_text())
    names = sorted(set(base.column("group").to_pylist()))
    walk = {g: np.zeros(2) for g in names}
    movers = set(rng.choice(names, size=max(1, len(names) // 20), replace=False))
    start = dt.datetime(2025, 1, 1, 3, 0, tzinfo=dt.UTC)
    schema = arrow_schema("operating_point.json")
    for day in range(runs):
        for g in names:
            scale = 0.01 if g in movers else 0.002
            walk[g] = walk[g] + rng.normal(0, scale, 2) * (rng.random() < 0.3)
        run_id = f"{start + dt.timedelta(days=day):%Y%m%d}-daily"
        run = RunDirectory(str(output), "0" * 8, run_id)
        run.prepare()
        table = run_table(base, rng, walk, run_id).cast(schema)
        pq.write_table(table, run.path("operating_points.parquet"))
        held = day % HELD_EVERY == HELD_EVERY - 1
        when = start + dt.timedelta(days=day)
        named = rng.choice(names[:-1], size=3, replace=False)
        entry = {
            **manifest, "run_id": run_id, "published": not held,
            "started_utc": when.isoformat(),
            "finished_utc": (when + dt.timedelta(minutes=4)).isoformat(),
            "guard": {**(manifest.get("guard") or {}), "violations": [
                f"group {g!r}: thresholds moved by 0.2 (> max_threshold_change=0.05)"
                for g in named] if held else []},
            "row_accounting": {**manifest["row_accounting"],
                               "audit.audited": int(rng.integers(400, 600))},
        }
        if held:
            write_json(run.path("manifest.json"), entry)
        else:
            run.commit(entry)
    return output


def timed(output: Path, out: Path, repeat: int) -> tuple[float, float, int, float]:
    """(wall s, CPU s, bytes, 1-min load) of the fastest of ``repeat`` in-process writes."""
    from costlib_pipelines.report.history import write_history

    best = None
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        write_history(str(output), str(out))
        figures = (time.perf_counter() - start, time.process_time() - cpu,
                   out.stat().st_size, os.getloadavg()[0])
        best = figures if best is None or figures[0] < best[0] else best
    assert best is not None
    return best


def cli_seconds(output: Path, out: Path) -> float:
    """Wall seconds of ``costlib report --history`` in a new interpreter, imports included."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "costlib_pipelines.commands.cli", "report", "--output",
                    str(output), "--history", "--out", str(out)], check=True,
                   capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=365)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=2, help="best of this many")
    parser.add_argument("--keep", default=None, help="build the output here and keep it")
    args = parser.parse_args()
    from bench_report import template_runs

    print(f"machine: {describe()}")
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        template = template_runs(root)
        output = make_output(template, root / "out", args.runs, args.groups)
        print(f"fabricated {args.runs} runs x {args.groups} groups (+ __all__) in "
              f"{time.perf_counter() - started:.1f} s")
        seconds, cpu, size, load = timed(output, root / "history.html", args.repeat)
        print(f"{args.runs} runs x {args.groups} groups: history page {seconds:.1f} s wall "
              f"({cpu:.1f} s CPU), {size / 1e6:.2f} MB, load {load:.1f} "
              f"(targets: <= 10 s, <= 3 MB)")
        print(f"the real CLI (`costlib report --output OUT --history`, a new process, imports "
              f"included): {cli_seconds(output, root / 'cli.html'):.1f} s wall")


if __name__ == "__main__":
    main()
