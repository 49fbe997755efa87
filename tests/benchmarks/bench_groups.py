"""Benchmark: ``costlib recalibrate`` with many groups (issue 12), ours against today's main.

Run: ``.venv/bin/python tests/benchmarks/bench_groups.py [--groups 1000 10000 100000]
[--peer /path/to/checkout-of-main | --peer-rev REV] [--rows-per-group 15] [--bootstrap R]``

Data: ``rows_per_group`` rated rows per group (k=2 classifiers, 1% positives plus a few per group
so most groups have their own point), 101 uniform bins per axis (a 102 x 102 lattice), the
``graph`` method, one Parquet file. Each run is the real CLI in a fresh subprocess; its peak
RSS is the child's ``ru_maxrss`` (``resource.getrusage(RUSAGE_CHILDREN)`` after it exits; each
run is the only child of its own ``python -c`` wrapper so that the maximum is that run's).
The peer is today's code: a ``git worktree`` of ``main`` (``--peer`` to reuse one), run with
the same interpreter and ``PYTHONPATH`` pointing at it.

Target: 100,000 groups at <= 2 GB peak RSS. ``--bootstrap R`` adds R bootstrap replicates per
group (interval estimates); ``--peer-rev`` picks the revision today's code is checked out at.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
from machine import describe

HERE = Path(__file__).resolve().parents[2]

CONFIG = """\
classifiers: [text_model, image_model]
grid: {edges: uniform, bins: 101, range: [0.0, 1.0]}
target: {marginal_precision: 0.3}
methods: [graph]
min_rated: {positives: 3, negatives: 3}
"""

#: Runs one CLI invocation as the only child, then prints its peak RSS (KiB on Linux) and time.
WRAPPER = """\
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
seconds = time.perf_counter() - start
print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, seconds)
"""


def write_data(path: Path, n_groups: int, rows_per_group: int, seed: int = 0,
               row_group_size: int = 250_000) -> int:
    """One Parquet file of ``n_groups * rows_per_group`` rated rows; returns the row count."""
    rng = np.random.default_rng(seed)
    n = n_groups * rows_per_group
    y = rng.random(n) < 0.3
    s1 = 1 / (1 + np.exp(-(rng.normal(size=n) + 2.5 * y - 1)))
    s2 = 1 / (1 + np.exp(-(rng.normal(size=n) + 2.0 * y - 1)))
    names = np.array([f"g{g:06d}" for g in range(n_groups)])
    groups = np.repeat(np.arange(n_groups), rows_per_group)
    rng.shuffle(groups)
    table = pa.table({
        "group": pa.array(names[groups]).dictionary_encode(),
        "item_id": pa.array(np.arange(n)),
        "text_model": pa.array(s1),
        "image_model": pa.array(s2),
        "label": pa.array(y),
    })
    pq.write_table(table, path, row_group_size=row_group_size)
    return n


def import_root(code_root: Path) -> Path:
    """A directory that imports ``costlib``, ``costlib_pipelines`` and ``costlib_schemas``
    from the checkout ``code_root`` (the installed package maps ``pipelines/`` and
    ``schemas/`` to those names; a ``PYTHONPATH`` entry must do the same, ahead of the
    editable install of the checkout this benchmark runs from)."""
    root = code_root / ".bench-imports"
    root.mkdir(exist_ok=True)
    for name, directory in (("costlib", "costlib"), ("costlib_pipelines", "pipelines"),
                            ("costlib_schemas", "schemas")):
        link = root / name
        if not link.exists():
            link.symlink_to(code_root / directory, target_is_directory=True)
    return root


def run_cli(code_root: Path, config: Path, data: Path, output: Path) -> tuple[int, float, float]:
    """(exit code, peak RSS in MB, seconds) of ``costlib recalibrate`` from ``code_root``."""
    env = dict(os.environ, PYTHONPATH=str(code_root if code_root == HERE
                                          else import_root(code_root)))
    cli = [sys.executable, "-c",
           "from costlib_pipelines.commands.cli import main; raise SystemExit(main())",
           "recalibrate", "--config", str(config), "--input", str(data),
           "--output", str(output)]
    out = subprocess.run([sys.executable, "-c", WRAPPER, *cli], env=env, cwd=code_root,
                         capture_output=True, text=True, check=True)
    code, rss_kib, seconds = out.stdout.split()
    return int(code), int(rss_kib) / 1024, float(seconds)


def same_records(a: Path, b: Path) -> bool:
    """Whether two runs wrote the same operating points (run ids and digests aside)."""
    def load(output: Path):
        run = (output / "LATEST").read_text().strip()
        table = pq.read_table(output / "runs" / run / "operating_points.parquet")
        return repr(table.drop_columns(["run_id"]).to_pylist())  # repr: NaN equals NaN
    return load(a) == load(b)


def make_peer(work: Path, revision: str = "main") -> Path:
    peer = work / "peer"
    subprocess.run(["git", "-C", str(HERE), "worktree", "add", "--detach", str(peer), revision],
                   check=True, capture_output=True)
    return peer


def shuffle_bytes(work: Path) -> None:
    """Bytes crossing the shuffle (Beam's FastPrimitivesCoder), for docs/cost_model.md.

    Per row group: every partial grid ``AggregateBatchesFn`` emits for one 250,000-row row group
    of ``bench_recalibrate``'s data (100 groups, 256 bins per axis). Per group: a group's compact
    accumulator after 1M rows (what one bundle sends per group).
    """
    from apache_beam.coders import coders
    from bench_recalibrate import CONFIG as RECALIBRATE_CONFIG
    from bench_recalibrate import write_data as write_stream

    from costlib_pipelines.config import RunConfig
    from costlib_pipelines.io.batches import validate_batch
    from costlib_pipelines.recalibrate.aggregating import AggregateBatchesFn
    from costlib_pipelines.recalibrate.grids import SumGrids

    coder = coders.FastPrimitivesCoder()
    write_stream(work, 1_000_000, 100, n_files=4)
    config = RunConfig.from_dict(RECALIBRATE_CONFIG)
    edges = config.fixed_edges()
    fn = AggregateBatchesFn(config, None, False, False)
    combine = SumGrids(config, compact_output=True)
    accs: dict = {}
    for index, path in enumerate(sorted(work.glob("*.parquet"))):
        batch = validate_batch(pq.read_table(path), config, source=str(path), row_group=0)
        outputs = list(fn.histograms(batch, edges))
        if index == 0:
            size = sum(len(coder.encode(o)) for o in outputs)
            print(f"per row group ({batch.n_read:,} rows, {len(outputs)} partials): "
                  f"{size:,} B = {size / batch.n_read:.1f} B a row")
        for group, value in outputs:
            accs[group] = combine.add_input(accs.get(group), value)
    sizes = [len(coder.encode((g, combine.compact(a)))) for g, a in accs.items()
             if g != "__all__"]
    print(f"per group after 1M rows (10,000 a group, 256x256 lattice): median "
          f"{int(np.median(sizes)):,} B; all-groups grid "
          f"{len(coder.encode(('__all__', combine.compact(accs['__all__'])))):,} B")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--rows-per-group", type=int, default=15)
    parser.add_argument("--peer", type=Path, default=None,
                        help="a checkout of today's code (default: a temporary git worktree "
                             "of main)")
    parser.add_argument("--peer-max-groups", type=int, default=100_000,
                        help="skip the peer above this many groups (it may need > 10 GB)")
    parser.add_argument("--peer-rev", default="main",
                        help="git revision of today's code for the temporary worktree")
    parser.add_argument("--bootstrap", type=int, default=0, metavar="R",
                        help="bootstrap replicates per group (default 0: no intervals)")
    parser.add_argument("--shuffle-bytes", action="store_true",
                        help="only print the bytes shuffled per row group and per group")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    work = Path(tempfile.mkdtemp(prefix="bench_groups_"))
    if args.shuffle_bytes:
        try:
            shuffle_bytes(work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    peer = args.peer
    made_peer = peer is None
    try:
        if made_peer:
            peer = make_peer(work, args.peer_rev)
        config = work / "config.yaml"
        config.write_text(CONFIG + (f"bootstrap: {{replicates: {args.bootstrap}}}\n"
                                    if args.bootstrap else ""))
        print(f"k=2, 101 bins per axis (102 x 102 lattice), method graph, "
              f"{args.rows_per_group} rows per group, {args.bootstrap} bootstrap replicates, "
              f"one Parquet file; peak RSS of the CLI; today's code: {peer}")
        print(f"{'groups':>8} {'rows':>10} | {'ours MB':>8} {'ours s':>7} | "
              f"{'today MB':>8} {'today s':>7} | same records")
        for n_groups in args.groups:
            data = work / f"data_{n_groups}.parquet"
            rows = write_data(data, n_groups, args.rows_per_group)
            ours = run_cli(HERE, config, data, work / f"ours_{n_groups}")
            if n_groups <= args.peer_max_groups:
                today = run_cli(peer, config, data, work / f"today_{n_groups}")
                same = (same_records(work / f"ours_{n_groups}", work / f"today_{n_groups}")
                        if ours[0] == today[0] == 0 else "n/a")
                today_text = f"{today[1]:8.0f} {today[2]:7.1f}"
                if today[0]:
                    today_text += f" (exit {today[0]})"
            else:
                today_text, same = f"{'skipped':>8} {'':>7}", "n/a"
            ours_text = f"{ours[1]:8.0f} {ours[2]:7.1f}" + (f" (exit {ours[0]})" if ours[0]
                                                               else "")
            print(f"{n_groups:>8,} {rows:>10,} | {ours_text} | {today_text} | {same}",
                  flush=True)
            for name in (f"ours_{n_groups}", f"today_{n_groups}"):
                shutil.rmtree(work / name, ignore_errors=True)
            data.unlink()
    finally:
        if made_peer:
            subprocess.run(["git", "-C", str(HERE), "worktree", "remove", "--force",
                            str(peer)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
