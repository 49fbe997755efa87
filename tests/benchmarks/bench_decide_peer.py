"""Benchmark: ``costlib decide`` (threshold decisions) against a DuckDB script, and against
Beam's floor (issue 23, the decide half of ``bench_duckdb_peer.py``).

Run (the peer needs DuckDB: see ``bench_duckdb_peer.py`` for its environment)::

    python3 -m venv /tmp/benchenv && /tmp/benchenv/bin/pip install -r requirements/bench.txt
    .venv/bin/python tests/benchmarks/bench_decide_peer.py --peer-python /tmp/benchenv/bin/python

(``--sizes 0.6,2.4`` for a quicker run.) Data: the same generated demo streams as
``bench_duckdb_peer.py`` (0.6M and 2.4M rows: one and four 600,000-row files of one stream;
5M rows: 4 files, row groups of 25,000; 50M rows: ten of those),
the same config (k = 2, rule ``any``, ``decision_method: hull``). The operating points are
those a ``costlib recalibrate`` run on the smallest size writes (one run, not timed); both
sides decide every size with them.

Before any timing, the rules are checked: on the first file of the smallest size, and on 20,000
of its rows with bad rows mixed in (null group, ``__all__`` group, null item id, NaN and infinite
scores, scores outside [0, 1]), costlib decide (in process) and the DuckDB peer
(:mod:`duckdb_decide_peer`) decide with the recalibrated points and with edited ones (a group
on ``fallback``, a group without a record so on ``__all__``, an ``infeasible`` group, an
``insufficient_data`` ``__all__``, records listing the classifiers in the other order, rule
``all``); every row's ``threshold_decision`` and ``operating_point_group`` must be equal and
no decided row may be missing on either side (the peer leaves bad rows out, costlib
dead-letters them), else the benchmark stops.

Then per size, in alternation, one process per run: costlib decide (``run_decide`` on the
FnApiRunner: preflight, reads, validates, counts plausibility, decides, writes the decision
files, dead letters, accounting and the manifest), the DuckDB peer (one ``COPY`` of the join
to a zstd Parquet file of the decision fields that vary: group, item id, decision, operating
point group and method), the lean DuckDB peer (the same query writing item id and decision
only), and Beam's floor (``ReadAllFromParquetBatched`` of the columns decide reads, count
the rows of each Arrow batch, sum). After the runs of a size each peer's decisions are
compared with costlib's row by row (every row's decision equal), else the benchmark stops.
CPU is the process's user + system time from ``wait4`` (all threads); marginal CPU per row
and fixed cost are fitted on each pair of sizes (0.6M and 2.4M, 5M and 50M) as in
``bench_duckdb_peer.py``, which also prints wall times per size and the start-up of
``costlib status`` (on the recalibrated output).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_duckdb_peer import (  # noqa: E402
    CLASSIFIERS,
    CONFIG,
    _files,
    _run_child,
    _worker_floor,
    compile_sources,
    exit_as_the_command_does,
    print_against_peers,
    print_fits,
    print_runs,
    print_start_up,
    print_walls,
)

DECIDE_COLUMNS = ["group", "item_id", *CLASSIFIERS]
PEER = HERE / "duckdb_decide_peer.py"


# --------------------------------------------------------------------------- workers
# (workers import only what they time: numpy, pyarrow and costlib inside the functions)
def _worker_decide(files: list[str], operating_points: str, output: str) -> dict:
    t0_wall, t0_cpu = time.perf_counter(), time.process_time()
    from costlib_pipelines.config import RunConfig
    from costlib_pipelines.decide.pipeline import run_decide
    imported = time.perf_counter() - t0_wall, time.process_time() - t0_cpu
    config = RunConfig.from_dict(CONFIG, source="bench")
    s_wall, s_cpu = time.perf_counter(), time.process_time()
    manifest = run_decide(config, files, operating_points, output, [], run_id="bench")
    return {"import_wall": imported[0], "import_cpu": imported[1],
            "run_wall": time.perf_counter() - s_wall, "run_cpu": time.process_time() - s_cpu,
            "rows": manifest["row_accounting"]["read"],
            "decided": manifest["row_accounting"]["decided"],
            "flagged": manifest["decision_counts"]["threshold_flagged"]}


# --------------------------------------------------------------------------- the peer
def _peer_decide(python: str, spec: dict, where: Path) -> dict:
    where.mkdir(parents=True, exist_ok=True)
    path = where / "spec.json"
    path.write_text(json.dumps(spec))
    return _run_child([python, str(PEER), "decide", str(path)])


def _check_same(python: str, run_dir: str, peer_file: str, decided: int, what: str) -> dict:
    """Compare a costlib decide run's decisions with the peer's file; stop if any differs."""
    found = _run_child([python, str(PEER), "compare", run_dir, peer_file])
    if (found["rows_ours"] != decided or found["rows_peer"] != decided
            or found["one_side_only"] or found["different"]
            or found["duplicate_ids_ours"] or found["duplicate_ids_peer"]):
        raise SystemExit(f"{what}: the DuckDB peer does not reproduce costlib's decisions "
                         f"({decided:,} rows decided by costlib): {json.dumps(found)}")
    return found


def _spec(files: list[str], operating_points: str, output: str, rule: str = "any") -> dict:
    return {"files": files, "operating_points": operating_points, "output": output,
            "method": CONFIG["decision_method"], "rule": rule, "classifiers": CLASSIFIERS,
            "group": "group", "item_id": "item_id"}


# --------------------------------------------------------------------------- rule checks
def _with_bad_rows(source: str, path: Path) -> str:
    """20,000 rows of ``source`` with bad and edge rows mixed in (see the module doc)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(source).slice(0, 20_000)
    n = table.num_rows
    rng = np.random.default_rng(23)
    # kinds 0..4: bad rows (2% each); 5, 6: scores outside [0, 1] (0.25% each: counted, and
    # under plausibility.max_implausible_share); else unchanged
    raw = rng.integers(0, 400, n)
    kind = np.where(raw < 40, raw // 8, np.where(raw < 42, raw - 35, 99))
    group = pc.if_else(pa.array(kind == 0), pa.scalar(None, pa.string()), table["group"])
    group = pc.if_else(pa.array(kind == 1), "__all__", group)
    item = pc.if_else(pa.array(kind == 2), pa.scalar(None, pa.int64()), table["item_id"])
    text = table["text_model"].to_numpy().copy()
    image = table["image_model"].to_numpy().copy()
    text[kind == 3] = np.nan
    image[kind == 4] = np.where(rng.random(int((kind == 4).sum())) < 0.5, np.inf, -np.inf)
    text[kind == 5] = rng.uniform(1.0, 2.0, int((kind == 5).sum()))  # outside [0, 1]: counted
    image[kind == 6] = rng.uniform(-1.0, 0.0, int((kind == 6).sum()))
    table = table.set_column(0, "group", group).set_column(1, "item_id", item)
    for name, values in (("text_model", text), ("image_model", image)):
        null = table[name].is_null().to_numpy(zero_copy_only=False) & np.isnan(values)
        table = table.set_column(table.schema.get_field_index(name), name,
                                 pa.array(values, mask=null))
    pq.write_table(table, path, row_group_size=5_000)
    return str(path)


def _edited_points(source: str, path: Path, edit: str) -> str:
    """The recalibrated records edited to exercise one of decide's rules."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    records = table.to_pylist()
    groups = sorted(r["group"] for r in records if r["group"] != "__all__")
    for r in records:
        g = r["group"]
        if edit == "statuses" and g == groups[0]:
            r["status"], r["fallback_group"] = "fallback", "__all__"
            r["thresholds"] = [0.5, 0.9]
        if edit == "statuses" and g == groups[-1]:
            r["point_status"] = "infeasible"
        if edit == "no_default" and g == "__all__":
            r["status"], r["thresholds"] = "insufficient_data", None
        if edit == "reordered":
            r["classifiers"] = r["classifiers"][::-1]
            r["thresholds"] = r["thresholds"][::-1]
            if g == groups[0]:
                r["status"] = "kept"
        if edit == "rule_all":
            r["rule"] = "all"
    if edit in ("statuses", "no_default"):
        records = [r for r in records if r["group"] != groups[1]]  # a group without a record
    pq.write_table(pa.Table.from_pylist(records, schema=table.schema), path)
    return str(path)


def check_rules(python: str, source_file: str, operating_points: str, tmp: Path) -> None:
    """costlib decide and the peer on edge rows and edited operating points: same decisions."""
    from costlib_pipelines.config import RunConfig
    from costlib_pipelines.decide.pipeline import run_decide

    bad = _with_bad_rows(source_file, tmp / "bad-rows.parquet")
    for edit in ("as recalibrated", "statuses", "no_default", "reordered", "rule_all"):
        points = operating_points if edit == "as recalibrated" else _edited_points(
            operating_points, tmp / f"points-{edit}.parquet", edit)
        rule = "all" if edit == "rule_all" else "any"
        config = RunConfig.from_dict({**CONFIG, "rule": rule}, source="bench")
        for name, files in (("one file", [source_file]), ("bad rows", [bad])):
            output = tmp / f"check-{edit}-{name}".replace(" ", "_")
            manifest = run_decide(config, files, points, str(output), [], run_id="check")
            peer = _peer_decide(python, _spec(files, points, str(output / "peer.parquet"),
                                              rule), output)
            decided = manifest["row_accounting"]["decided"]
            found = _check_same(python, str(output / "runs" / "check"),
                                str(output / "peer.parquet"), decided,
                                f"rule check {edit!r} on {name}")
            counts = manifest["decision_counts"]
            print(f"  rules {edit:<16} {name:<9}: {decided:>9,} of "
                  f"{manifest['row_accounting']['read']:,} rows decided, "
                  f"{counts['threshold_flagged']:,} flagged, {counts['threshold_null']:,} null "
                  f"decisions; peer {peer['rows']:,} rows, {found['flagged_both']:,} flagged "
                  f"on both sides; equal")
            shutil.rmtree(output)


# --------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default="/tmp/costlib-bench-demo")
    parser.add_argument("--sizes", default="0.6,2.4,5,50",
                        help="millions of rows: 0.6, 1.2, 1.8, 2.4 or multiples of 5; fitted "
                        "in pairs")
    parser.add_argument("--peer-python", default="/tmp/benchenv/bin/python",
                        help="a Python with duckdb (requirements/bench.txt)")
    parser.add_argument("--skip-rule-checks", action="store_true")
    parser.add_argument("--worker", choices=("decide", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--files", help=argparse.SUPPRESS)
    parser.add_argument("--points", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "decide":
        exit_as_the_command_does(_worker_decide(json.loads(args.files), args.points,
                                                args.output))
    if args.worker == "floor":
        exit_as_the_command_does(_worker_floor(json.loads(args.files), DECIDE_COLUMNS))

    from machine import describe

    sizes = [float(s) for s in args.sizes.split(",")]
    data = Path(args.data_dir)
    me = [sys.executable, str(Path(__file__).resolve())]
    print(f"machine: {describe()}")
    print(f"costlib's modules compiled to bytecode before timing, as a wheel install has them: "
          f"{compile_sources()}")
    files = {m: _files(data, m) for m in sizes}
    tmp = Path(tempfile.mkdtemp(prefix="bench-decide-peer-"))
    try:
        recalibrated = _run_child([*me[:1], str(HERE / "bench_duckdb_peer.py"), "--worker",
                                   "ours", "--files", json.dumps(files[sizes[0]]),
                                   "--output", str(tmp / "recalibrate")])
        points = str(tmp / "recalibrate" / "runs" / recalibrated["run_id"]
                     / "operating_points.parquet")
        print(f"operating points: costlib recalibrate on {sizes[0]:g}M rows (hull), {points}")
        if not args.skip_rule_checks:
            check_rules(args.peer_python, files[sizes[0]][0], points, tmp)
        rows: dict[float, int] = {}
        results: dict[float, dict[str, dict]] = {}
        for millions in sizes:
            ours, theirs = tmp / f"ours-{millions:g}m", tmp / f"peer-{millions:g}m"
            runs = {"costlib": _run_child([*me, "--worker", "decide", "--files",
                                           json.dumps(files[millions]), "--points", points,
                                           "--output", str(ours)])}
            runs["duckdb"] = _peer_decide(
                args.peer_python, _spec(files[millions], points, str(theirs / "out.parquet")),
                theirs)
            runs["duckdb_lean"] = _peer_decide(
                args.peer_python, {**_spec(files[millions], points, str(theirs / "lean.parquet")),
                                   "output_columns": "lean"}, theirs)
            runs["beam_floor"] = _run_child([*me, "--worker", "floor", "--files",
                                             json.dumps(files[millions])])
            load = os.getloadavg()[0]
            rows[millions] = runs["costlib"]["rows"]
            assert runs["beam_floor"]["rows"] == rows[millions], (runs["beam_floor"], rows)
            found = _check_same(args.peer_python, str(ours / "runs" / "bench"),
                                str(theirs / "out.parquet"), runs["costlib"]["decided"],
                                f"{millions:g}M rows")
            _check_same(args.peer_python, str(ours / "runs" / "bench"),
                        str(theirs / "lean.parquet"), runs["costlib"]["decided"],
                        f"{millions:g}M rows, lean peer")
            shutil.rmtree(ours)
            shutil.rmtree(theirs)
            results[millions] = runs
            print(f"\n{rows[millions]:,} rows ({len(files[millions])} files); every row's "
                  f"decision reproduced exactly by both DuckDB peers ({found['flagged_both']:,} "
                  f"flagged; DuckDB {runs['duckdb']['duckdb']}, {runs['duckdb']['threads']} "
                  f"threads); load {load:.2f}")
            print_runs(runs)
        print_walls(results, rows, ("costlib", "duckdb"))
        for small, large in zip(sizes[0::2], sizes[1::2], strict=False):
            fits = print_fits(results, rows, small, large)
            print_against_peers("costlib decide", fits, results[small], small,
                                ("duckdb", "duckdb_lean"),
                                f"read Arrow batches of {len(DECIDE_COLUMNS)} columns")
        print_start_up(str(tmp / "recalibrate"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
