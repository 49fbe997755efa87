"""Benchmark of ``costlib report``: time and page size for 100 and 1,000 groups, against the
report module at an older git revision (``--old-rev``, by default ``d792395``: the last commit
before the figures were blitted), in the same run.

The runs are made from two real small recalibrations (4 methods, k = 2, 24 bins; groups
``market_a..c``, a fallback group and ``__all__``): their records and PN curves are copied to
``N`` groups (``group_00000`` ...), and in the earlier run about 5% of the groups have other
thresholds (so they changed since the previous run; the later run's thresholds stay those its
PN curves were chosen on), so both reports compare two runs. Targets: 100
groups in <= 10 s and <= 4 MB (every group a section with two figures at 100 dpi, about 17 KB
each: the price of legible text); 1,000 groups: an overview with search and sort, details only for
the groups that need a look. Each figure is the best of ``--repeat`` runs; the 1-minute load is
printed with each. The blitted figures draw one background per distinct view: the line
``views`` says how many were drawn (copies of three template groups give few; each new view of
the PN zoom panel costs about 0.06 s).

Run: ``.venv/bin/python tests/benchmarks/bench_report.py [--groups 100,1000] [--old-max 100]
[--old-rev d792395] [--repeat 2]`` (``--old-max``: the largest group count the old module is
timed on; it takes about 0.17 s per figure).
"""

from __future__ import annotations

import argparse
import importlib.util
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

#: Share of groups whose thresholds change between the two runs.
CHANGED_SHARE = 0.05


def template_runs(directory: Path) -> Path:
    """Two real recalibration runs (``run-1``, then ``run-2``) of a small stream; their
    ``runs/`` directory."""
    from pipeline_data import base_config

    from costlib.sample import generate_score_stream, write_score_stream
    from costlib_pipelines.recalibrate.pipeline import run_recalibrate

    output = directory / "template"
    for seed, name in ((0, "run-1"), (1, "run-2")):
        frame = generate_score_stream(24_000, seed=seed)
        frame.loc[frame.index[:60], "group"] = "tiny"  # falls back to __all__
        write_score_stream(frame, str(directory / name), n_files=1, row_group_size=24_000)
        run_recalibrate(base_config(bootstrap={"replicates": 8}),
                        str(directory / name / "*.parquet"), str(output), run_id=name)
    return output / "runs"


def _replicate(table: pa.Table, groups: int, moved: np.ndarray | None, seed: int = 0,
               fallback_share: float = 0.03) -> pa.Table:
    """``table``'s groups copied to ``groups`` groups (each a copy of a template group, the
    fallback group ``tiny`` for about ``fallback_share`` of them); ``moved`` groups get their
    thresholds raised by 0.05 (capped at 0.99)."""
    rng = np.random.default_rng(seed)
    names = table.column("group").to_pylist()
    markets = sorted({g for g in names if g.startswith("market")})
    rows_of = {g: [j for j, n in enumerate(names) if n == g] for g in set(names)}
    parts = []
    for i in range(groups):
        template = "tiny" if rng.random() < fallback_share else markets[i % len(markets)]
        part = table.take(pa.array(rows_of.get(template, []), pa.int64()))
        field = part.schema.field("group")
        part = part.set_column(part.schema.get_field_index("group"), field,
                               pa.array([f"group_{i:05d}"] * part.num_rows, field.type))
        if moved is not None and moved[i] and "thresholds" in part.column_names:
            values = [None if t is None else [min(v + 0.05, 0.99) if v < 1 else v for v in t]
                      for t in part.column("thresholds").to_pylist()]
            field = part.schema.field("thresholds")
            part = part.set_column(part.schema.get_field_index("thresholds"), field,
                                   pa.array(values, field.type))
        parts.append(part)
    parts.append(table.take(pa.array(rows_of.get("__all__", []), pa.int64())))
    return pa.concat_tables(parts)


def make_runs(template: Path, output: Path, groups: int, seed: int = 0, *,
              changed_share: float = CHANGED_SHARE, fallback_share: float = 0.03) -> Path:
    """``output/runs/{previous,current}`` with ``groups`` groups; returns the current run."""
    # Its own stream: with _replicate's (same seed) every fallback group would also move.
    rng = np.random.default_rng([seed, 1])
    moved = rng.random(groups) < changed_share
    for name, source, shift in (("previous", "run-1", moved), ("current", "run-1", None)):
        run = output / "runs" / name
        run.mkdir(parents=True, exist_ok=True)
        for file in ("operating_points.parquet", "pn_curves.parquet"):
            table = pq.read_table(template / source / file)
            pq.write_table(_replicate(table, groups, shift, seed, fallback_share), run / file)
        manifest = json.loads((template / "run-2" / "manifest.json").read_text())
        manifest["run_id"] = name
        if name == "previous":
            manifest["finished_utc"] = json.loads(
                (template / "run-1" / "manifest.json").read_text())["finished_utc"]
        (run / "manifest.json").write_text(json.dumps(manifest))
    return output / "runs" / "current"


def old_module(directory: Path, revision: str):
    """``pipelines/report.py`` at ``revision`` (a revision of the flat 0.1 layout), imported
    from a copy.

    Its sibling modules ``pipelines/report_*.py`` at that revision are copied too, and the
    copies import each other instead of the installed modules of that layout.
    """
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                              cwd=root).stdout

    files = [f for f in git("ls-tree", "--name-only", revision, "pipelines/").split()
             if f.rsplit("/", 1)[-1].startswith("report") and f.endswith(".py")]
    stems = [f.rsplit("/", 1)[-1][:-3] for f in files]
    for file, stem in zip(files, stems, strict=True):
        source = git("show", f"{revision}:{file}")
        for other in stems:
            source = source.replace(f"from costlib_pipelines.{other} import",
                                    f"from old_{other} import")
        (directory / f"old_{stem}.py").write_text(source)
    sys.path.insert(0, str(directory))
    spec = importlib.util.spec_from_file_location("old_report", directory / "old_report.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def timed(write, run: Path, out: Path, repeat: int) -> tuple[float, float, int, float]:
    """(wall seconds, CPU seconds of this process, bytes written, 1-min load) of the fastest of
    ``repeat`` writes of one report."""
    best = None
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        write(str(run), str(out))
        figures = (time.perf_counter() - start, time.process_time() - cpu, out.stat().st_size,
                   os.getloadavg()[0])
        best = figures if best is None or figures[0] < best[0] else best
    return best


def _count_views():
    """Every blitter the new module makes, to count the backgrounds it drew."""
    import costlib_pipelines.report.figures as figures

    made = []
    init = figures._Blitter.__init__

    def remember(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    figures._Blitter.__init__ = remember
    return made


def cli_seconds(run: Path, out: Path) -> float:
    """Wall seconds of ``costlib report`` as a user runs it: a new interpreter, imports
    included."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "costlib_pipelines.commands.cli", "report", "--run",
                    str(run), "--out", str(out)], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", default="100,1000")
    parser.add_argument("--old-max", type=int, default=100,
                        help="time the old module only up to this many groups")
    parser.add_argument("--old-rev", default="d792395",
                        help="git revision of the old report module (default: the last one "
                             "before blitting)")
    parser.add_argument("--repeat", type=int, default=2, help="best of this many runs")
    args = parser.parse_args()
    from costlib_pipelines.report.page import write_report

    print(f"machine: {describe()}; load average at start "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        tmp = Path(tmp)
        template = template_runs(tmp)
        old, why = None, f"--old-max {args.old_max}"
        if args.old_max > 0:
            try:
                old = old_module(tmp, args.old_rev)
            except ImportError as exc:  # the layout moved names the old module imports
                why = f"it no longer imports against this costlib: {exc}"
        blitters = _count_views()
        for groups in (int(g) for g in args.groups.split(",")):
            run = make_runs(template, tmp / f"g{groups}", groups)
            blitters.clear()
            seconds, cpu, size, load = timed(write_report, run, tmp / f"new-{groups}.html",
                                             args.repeat)
            views = "+".join(str(b.views) for b in blitters[-2:])  # the last report's
            print(f"{groups:,} groups: report {seconds:.1f} s wall ({cpu:.1f} s CPU), "
                  f"{size / 1e6:.2f} MB, {views} views drawn (PN+paths), load {load:.1f} "
                  f"(targets for 100 groups: <= 10 s, <= 4 MB)")
            print(f"{groups:,} groups: the real CLI (`costlib report`, a new process, imports "
                  f"included): {cli_seconds(run, tmp / f'cli-{groups}.html'):.1f} s wall")
            if old is not None and groups <= args.old_max:
                old_s, old_cpu, old_size, old_load = timed(
                    old.write_report, run, tmp / f"old-{groups}.html", args.repeat)
                print(f"{groups:,} groups: {args.old_rev}'s report {old_s:.1f} s wall "
                      f"({old_cpu:.1f} s CPU), {old_size / 1e6:.2f} MB, load {old_load:.1f}; "
                      f"speed-up {old_s / seconds:.1f}x wall, {old_cpu / cpu:.1f}x CPU; "
                      f"{old_size / size:.2f}x the size")
            else:
                print(f"{groups:,} groups: {args.old_rev}'s report not timed ({why})")
    print(f"load average at end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
