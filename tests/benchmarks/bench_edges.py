"""Benchmark: do the default candidate thresholds resolve rare events? (issue 20)

Run from the repository root (not run by CI; about 1.5 minutes on 2 cores)::

    .venv/bin/python tests/benchmarks/bench_edges.py               # library and pipeline
    .venv/bin/python tests/benchmarks/bench_edges.py --no-pipeline # library only
    BENCH_EDGES_SEED=3 .venv/bin/python tests/benchmarks/bench_edges.py  # other streams

What it prints. First the machine (:func:`machine.describe`). Then, for every generated
rare-event stream and objective, one row: the stream, its rows, positives and classifiers
``k``, the objective, the value of the optimum on the *fine* lattice (below), and the share of
that value reached on the lattices of

- ``default``: :func:`costlib.thresholds.binning._edges.decision_edges` with ``n_edges=128`` (the
  default
  recipe), followed by the most candidate thresholds it placed on one classifier (``edges``);
- ``+refine``: :func:`costlib.thresholds.point._refine.refine` on top of the default point, on
  the rows;
- ``unif64``: ``uniform_edges(0, 1, 64)`` (the old pipeline default: 64 bins over the
  configured range [0, 1], which every generated score lies in);
- ``qall64``: ``quantile_edges`` of every row, 64 (the old library recipe);
- ``dense``: 4,096 quantile edges of all rows plus 4,096 quantiles of the top 1% (k <= 2 only):
  the sanity check of the claim below (it must never beat ``fine``; asserted);

then the point status of ``default`` and of ``qall64`` (``ok``, or ``resolution_limited`` when
:func:`costlib.thresholds.point._resolution.lattice_resolution` finds a coarse stretch of the
lattice that
could hide a better point). It ends with the smallest share of ``default`` over all rows and whether
the target of issue 20 is met: a share >= 0.98 with at most 128 candidate thresholds per
classifier, on every row. Each row below the target is listed with where the default and the
fine optimum sit: TP/FP, and per classifier the thresholds as ranks among the positives'
scores (1 = the highest positive) with the ranks of the default candidates around the fine one.

The pipeline part (``--pipeline``, on by default; ``--no-pipeline`` skips it) writes each k = 1
and k = 2 stream (and the k = 3 ones, which are small) to a Parquet file (columns ``group``,
one group "g"; ``item_id``; one score column per classifier; ``label``, bool), writes a YAML
config with *no* ``grid`` section (so ``grid.edges: auto``, 128 per classifier, applies), runs
``costlib recalibrate --runner FnApiRunner`` in this process
(``costlib_pipelines.commands.cli.main``) with the linear objective and with F1, reads
``operating_points.parquet`` of the run (group "g", method hull) and prints its ``objective_value``
as a share of ``fine`` next to the library's ``default`` share, with the seconds of the run. They
must be identical, and so must the edges the run records in its manifest (``grid_edges``) and the
library's ``decision_edges``, bit for bit (both asserted; ``identical`` says so): the pipeline
places the same edges from merged sketches and optimises the same grid.

Why the fine lattice is exact. Take any real threshold tuple and, on one axis, raise that
threshold to the lowest score of a positive at or above it (or to "off" when there is none).
No positive's score lies in between, so the classifier still fires on exactly the same
positives and on the same or fewer negatives; under the rule "any" (OR) and the rule "all"
(AND) alike, the ensemble then flags the same true positives and no more false positives.
Repeating on every axis lands on a tuple of the lattice whose candidates are every distinct
positive score per classifier (``np.unique(scores[labels, j])``), with the same TP and no more
FP. So for fully labelled rows that lattice holds the optimum over *all* real thresholds of
any objective that rises with TP and falls with FP (here ``TP - 0.25 FP``, i.e. a target
marginal precision of 0.2 under the rule "any", and F1); no lattice, however fine (4,096 edges
or more), can beat it. The hull method is exact on every lattice (it scores every cell), so the
shares below are exact, not estimates.

The streams (deterministic seeds): prevalence 0.05%, 0.2% and 1% (an exact number of
positives, placed at random); k = 1, 2, 3 classifiers whose scores differ but are correlated
(a shared latent normal with correlation 0.7 to each classifier's own); every row rated.

- ``spread``: ``logistic(1.5 z + shift)``, ``z`` the classifier's normal, ``shift = -2.5`` for
  negatives and ``-2.5 + 4 + 0.4 j`` for positives of classifier ``j``: scores over all of
  (0, 1).
- ``concentrated``: negatives ``Beta(0.5, 30)`` (mass near 0); positives ``Beta(1.5, 10 + j)``
  (a heavier tail), of which a random 30% (the same items for every classifier: hard cases)
  are scaled by 0.2 and so look like negatives. Both through a Gaussian copula of the same
  latent normals. Every score lies below about 0.6, most negatives below 0.05.

Every stream has a positive fine value of the linear objective (asserted). The shift of 4 of
the spread positives is what ensures it: with 2.5 the best the 0.05%, k = 1 stream can do is
flag nothing (fine value 0), with 3 its optimum rests on 2 true positives.

Sizes: 200,000 rows for k <= 2; for k = 3, rows such that there are at most 300 positives
(60,000 rows at 0.05% and 0.2%, 30,000 at 1%), so that the fine lattice (one candidate per
positive per classifier, cubed: up to 301**3 cells) stays small enough to optimise exactly.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from scipy.special import betaincinv, expit, ndtr

from costlib.thresholds.binning._edges import decision_edges, quantile_edges, uniform_edges
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.point._optimize import optimize
from costlib.thresholds.point._refine import refine

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import describe

PREVALENCES = (0.0005, 0.002, 0.01)
SHAPES = ("spread", "concentrated")
KS = (1, 2, 3)
ROWS = 200_000  # k <= 2
ROWS_K3 = 60_000  # k = 3, fewer at higher prevalence (at most MAX_POSITIVES_K3 positives)
MAX_POSITIVES_K3 = 300
CORRELATION = 0.7
TARGET_SHARE = 0.98
MAX_EDGES = 128
DENSE = 4096
OBJECTIVES = {
    "linear": {"target_marginal_precision": 0.2, "rule": "any", "method": "hull",
               "objective": "linear", "frontier": False},
    "f1": {"target_marginal_precision": 0.2, "rule": "any", "method": "hull",
           "objective": "f1", "frontier": False},
}


def stream(prevalence: float, shape: str, k: int) -> tuple[str, np.ndarray, np.ndarray]:
    """``(name, scores (n, k), labels)`` of one generated stream (see the module docstring)."""
    n = ROWS if k <= 2 else min(ROWS_K3, round(MAX_POSITIVES_K3 / prevalence))
    seed = 1000 * KS.index(k) + 10 * PREVALENCES.index(prevalence) + SHAPES.index(shape)
    rng = np.random.default_rng(20_000 + seed + int(os.environ.get("BENCH_EDGES_SEED", "0")) * 7919)
    n_pos = round(n * prevalence)
    labels = np.zeros(n, dtype=bool)
    labels[rng.choice(n, n_pos, replace=False)] = True
    shared = rng.standard_normal(n)
    own = rng.standard_normal((n, k))
    z = CORRELATION * shared[:, None] + np.sqrt(1 - CORRELATION**2) * own
    scores = np.empty((n, k))
    if shape == "spread":
        for j in range(k):
            shift = np.where(labels, -2.5 + 4.0 + 0.4 * j, -2.5)
            scores[:, j] = expit(1.5 * z[:, j] + shift)
    else:
        u = ndtr(z)
        hard = labels & (rng.random(n) < 0.3)
        for j in range(k):
            scores[:, j] = np.where(labels, betaincinv(1.5, 10.0 + j, u[:, j]),
                                    betaincinv(0.5, 30.0, u[:, j]))
            scores[hard, j] *= 0.2
    name = f"{shape}-{100 * prevalence:g}%-k{k}"
    return name, scores, labels


def solve(scores, labels, edges, kwargs, *, check_resolution=True):
    grid = ThresholdGrid.from_scores(scores, labels, edges)
    return optimize(grid, check_resolution=check_resolution, **kwargs), grid


def dense_edges(scores: np.ndarray) -> list[np.ndarray]:
    """4,096 quantiles of all rows and 4,096 quantiles of the top 1%, per classifier."""
    out = []
    for j in range(scores.shape[1]):
        s = scores[:, j]
        top = s[s >= np.quantile(s, 0.99)]
        out.append(np.union1d(quantile_edges(s, DENSE), quantile_edges(top, DENSE)))
    return out


def _where(scores, labels, point, fine_point, edges) -> str:
    """Where the default and the fine optimum sit, per classifier: threshold, its rank among
    the positives' scores on that axis (1 = the highest positive), and the ranks of the
    default's candidates next to the fine threshold (for rows below the target)."""
    lines = [f"    TP/FP: default {point.tp:g}/{point.fp:g}, "
             f"fine {fine_point.tp:g}/{fine_point.fp:g}"]
    for j, e in enumerate(edges):
        positives = scores[labels, j]

        def rank(x, positives=positives):
            return int((positives >= x).sum())

        t_def, t_fine = point.thresholds[j], fine_point.thresholds[j]
        i = int(np.searchsorted(e, t_fine))
        near = [rank(x) for x in e[max(i - 2, 0):i + 2]]
        lines.append(f"    classifier {j}: default threshold {t_def:.6g} (positive rank "
                     f"{rank(t_def)}), fine {t_fine:.6g} (rank {rank(t_fine)} of "
                     f"{positives.size}); ranks of the default candidates around it: {near}")
    return "\n".join(lines)


def library_rows(streams) -> tuple[list[dict], dict]:
    """One result per stream and objective; also the default values (for the pipeline)."""
    header = (f"{'stream':<24}{'rows':>8}{'pos':>6}{'k':>3} {'objective':<7}{'fine':>10}"
              f"{'default':>9}{'edges':>6}{'+refine':>9}{'unif64':>8}{'qall64':>8}"
              f"{'dense':>8}  {'status default':<19}{'status qall64':<19}")
    print(header)
    print("-" * len(header))
    results, defaults = [], {}
    for name, scores, labels in streams:
        n, k = scores.shape
        fine_edges = [np.unique(scores[labels, j]) for j in range(k)]
        default_edges = decision_edges(scores, labels, n_edges=MAX_EDGES)
        lattices = {
            "unif64": [uniform_edges(0.0, 1.0, 64)] * k,
            "qall64": [quantile_edges(scores[:, j], 64) for j in range(k)],
        }
        dense_grid = None
        if k <= 2:
            dense_grid = ThresholdGrid.from_scores(scores, labels, dense_edges(scores))
        fine_grid = ThresholdGrid.from_scores(scores, labels, fine_edges)
        for objective, kwargs in OBJECTIVES.items():
            fine_point = optimize(fine_grid, check_resolution=False, **kwargs)
            fine = fine_point.objective
            assert fine > 0, f"{name} {objective}: fine value {fine} <= 0; adjust the generator"
            point, grid = solve(scores, labels, default_edges, kwargs)
            refined, _ = refine(point, grid, scores, labels, **kwargs)
            values = {"default": point.objective, "+refine": refined.objective}
            statuses = {"default": point.status}
            for key, edges in lattices.items():
                other, _ = solve(scores, labels, edges, kwargs)
                values[key] = other.objective
                statuses[key] = other.status
            dense = float("nan")
            if dense_grid is not None:
                dense = optimize(dense_grid, check_resolution=False, **kwargs).objective
                assert dense <= fine, f"{name} {objective}: dense {dense} beats fine {fine}"
                values["dense"] = dense
            shares = {key: value / fine for key, value in values.items()}
            assert all(share <= 1 for share in shares.values()), (name, objective, shares)
            n_edges = max(e.size for e in default_edges)
            dense_text = f"{shares['dense']:8.4f}" if "dense" in shares else f"{'-':>8}"
            print(f"{name:<24}{n:>8,}{int(labels.sum()):>6}{k:>3} {objective:<7}{fine:>10.4g}"
                  f"{shares['default']:>9.4f}{n_edges:>6}{shares['+refine']:>9.4f}"
                  f"{shares['unif64']:>8.4f}{shares['qall64']:>8.4f}{dense_text}  "
                  f"{statuses['default']:<19}{statuses['qall64']:<19}", flush=True)
            results.append({"stream": name, "objective": objective, "fine": fine,
                            "share": shares["default"], "edges": n_edges, **values,
                            "why": _where(scores, labels, point, fine_point, default_edges)})
            defaults[(name, objective)] = (point.objective, fine, default_edges)
    return results, defaults


def pipeline_rows(streams, defaults, work: Path, objectives) -> None:
    """``costlib recalibrate`` (YAML config without a grid section) against the library."""
    from costlib_pipelines.commands.cli import main as costlib_main

    print(f"{'stream':<24}{'rows':>8} {'objective':<7}{'fine':>10}{'library':>9}"
          f"{'pipeline':>9}{'seconds':>9}  identical")
    for name, scores, labels in streams:
        n, k = scores.shape
        classifiers = [f"model_{j}" for j in range(k)]
        data = work / name / "in"
        data.mkdir(parents=True)
        table = {"group": pa.array(["g"] * n), "item_id": pa.array(np.arange(n))}
        table.update({c: pa.array(scores[:, j]) for j, c in enumerate(classifiers)})
        table["label"] = pa.array(labels)
        pq.write_table(pa.table(table), data / "rows.parquet")
        for objective in objectives:
            config = {
                "classifiers": classifiers,
                "rule": "any",
                "target": {"marginal_precision": 0.2},
                "objective": {"name": objective},
                "methods": ["hull"],
                "decision_method": "hull",
                "min_rated": {"positives": 1, "negatives": 1},
                "publish": {"min_rated": 0, "max_threshold_change": None},
            }
            path = work / name / f"config_{objective}.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            out = work / name / f"out_{objective}"
            log = io.StringIO()
            start = time.perf_counter()
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                code = costlib_main(["recalibrate", "--config", str(path), "--input",
                                     str(data / "*.parquet"), "--output", str(out),
                                     "--runner", "FnApiRunner"])
            seconds = time.perf_counter() - start
            assert code == 0, f"{name} {objective}: costlib recalibrate exited {code}:\n" + \
                log.getvalue()
            (run_dir,) = (out / "runs").iterdir()
            records = pq.read_table(run_dir / "operating_points.parquet").to_pylist()
            (record,) = [r for r in records if r["group"] == "g" and r["method"] == "hull"]
            library, fine, edges = defaults[(name, objective)]
            recorded = json.loads((run_dir / "manifest.json").read_text())["grid_edges"]
            same_edges = recorded["recipe"] == "auto" and all(
                got == e.tolist() for got, e in zip(recorded["edges"], edges, strict=True))
            got = record["objective_value"]
            same = got == library and same_edges
            print(f"{name:<24}{n:>8,} {objective:<7}{fine:>10.4g}{library / fine:>9.4f}"
                  f"{got / fine:>9.4f}{seconds:>9.2f}  {'yes' if same else 'NO'}", flush=True)
            assert same_edges, f"{name} {objective}: the pipeline's edges differ from the library's"
            assert same, f"{name} {objective}: pipeline {got!r} != library {library!r}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipeline", action=argparse.BooleanOptionalAction, default=True,
                        help="also run costlib recalibrate on every stream (default: on)")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"machine: {describe()}")
    streams = [stream(p, shape, k) for k in KS for shape in SHAPES for p in PREVALENCES]
    print(f"{len(streams)} streams; every row rated; rule any; method hull; linear = TP - 0.25 FP"
          f" (target marginal precision 0.2); k <= 2: {ROWS:,} rows; k = 3: at most "
          f"{MAX_POSITIVES_K3} positives ({ROWS_K3:,} rows or fewer) so that the fine lattice "
          "stays small")
    print("fine = optimum with every distinct positive score as a candidate (exact over all "
          "thresholds); the other columns are shares of it\n")
    results, defaults = library_rows(streams)
    worst = min(results, key=lambda r: r["share"])
    edges = max(r["edges"] for r in results)
    met = worst["share"] >= TARGET_SHARE and edges <= MAX_EDGES
    print(f"\nminimum share of default: {worst['share']:.4f} ({worst['stream']}, "
          f"{worst['objective']}); most edges per classifier: {edges}")
    print(f"target (issue 20: share >= {TARGET_SHARE} with <= {MAX_EDGES} edges per "
          f"classifier on every row): {'met' if met else 'NOT met'}")
    missed = [r for r in results if r["share"] < TARGET_SHARE]
    for r in missed:
        print(f"  below target: {r['stream']} {r['objective']}: default {r['default']:.6g}, "
              f"fine {r['fine']:.6g}, share {r['share']:.4f}; "
              f"+refine {r['+refine'] / r['fine']:.4f}")
        print(r["why"])
    print(f"library part: {time.perf_counter() - started:.1f} s", flush=True)
    if args.pipeline:
        print("\npipeline: costlib recalibrate --runner FnApiRunner, YAML config without a grid "
              "section (grid.edges: auto), group 'g', method hull; shares of fine")
        with tempfile.TemporaryDirectory(prefix="bench_edges_") as work:
            pipeline_rows(streams, defaults, Path(work), OBJECTIVES)
    print(f"\ntotal: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
