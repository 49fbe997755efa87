"""Benchmarks for threshold grids and operating points (issue 2), each against its peer.

Run: ``.venv/bin/python tests/benchmarks/bench_thresholds.py`` (add ``--quick`` for 1M rows).

Targets (issue 2):
- grid building, k=2, 256 bins per axis, 10M rows: >= 5x numpy.histogramdd with uniform
  edges, >= 2x with quantile edges;
- graph method on a 1024x1024 lattice <= 50 ms; >= 100x networkx.bellman_ford_path on 256x256;
- hull on 1024x1024 <= 20 ms; k=3 graph on 128^3 <= 2 s;
- analytic method on 256x256 <= 1 s;
- bootstrap with R = 50 on 1M rows, k=2, 256 bins <= 5 s;
- the resolution check within 10% of the optimisation it checks on 1025x1025 (hull and graph).

``--resolution`` runs only the last.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import best_of, describe

from costlib.thresholds.binning._edges import quantile_edges, uniform_edges
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.loop._bootstrap import BootstrapGrids, confidence_intervals
from costlib.thresholds.point._lattice_path import max_area_path
from costlib.thresholds.point._objectives import Constraints, Objective
from costlib.thresholds.point._optimize import optimize, optimize_each
from costlib.thresholds.point._resolution import _Boxes, _scanned, lattice_resolution


def rows(n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.random(n) < 0.02
    scores = rng.normal(size=(n, k)) + np.linspace(1.5, 1.0, k) * y[:, None]
    return scores, y


def lattice_grid(n_edges: int, k: int, n_rows: int = 400_000) -> ThresholdGrid:
    scores, y = rows(n_rows, k, seed=1)
    return ThresholdGrid.from_scores(scores, y, [uniform_edges(-3, 4, n_edges)] * k)


def report(name: str, ours: float, peer: float | None = None, peer_name: str = "", target=""):
    line = f"{name:<55} ours {ours * 1e3:10.1f} ms"
    if peer is not None:
        line += f" | {peer_name} {peer * 1e3:10.1f} ms | ratio {peer / ours:7.1f}x"
    print(line + (f" | target {target}" if target else ""), flush=True)


def bench_grid(n: int) -> None:
    scores, y = rows(n, 2)
    for kind in ("uniform", "quantile"):
        if kind == "uniform":
            edges = [uniform_edges(-4, 4, 255)] * 2
        else:
            edges = [quantile_edges(scores[:200_000, j], 255) for j in range(2)]
        bins = [np.concatenate(([-np.inf], e, [np.inf])) for e in edges]
        ours = best_of(lambda e=edges: ThresholdGrid.from_scores(scores, y, e), 3)

        def peer(b=bins):
            np.histogramdd(scores[y], bins=b)
            np.histogramdd(scores[~y], bins=b)

        peer_time = best_of(peer, 2)
        grid = ThresholdGrid.from_scores(scores, y, edges)
        assert np.array_equal(np.histogramdd(scores[y], bins=bins)[0], grid.pos)
        target = ">= 5x" if kind == "uniform" else ">= 2x"
        report(f"grid build k=2 256x256 {n / 1e6:g}M rows, {kind} edges", ours, peer_time,
               "np.histogramdd", target)


def bench_graph() -> None:
    grid = lattice_grid(1023, 2)
    tp, fp = grid.counts("any")
    report("graph: max-area path on 1024x1024", best_of(lambda: max_area_path(tp, fp)),
           target="<= 50 ms")
    report(
        "graph: optimize(method='graph') on 1024x1024",
        best_of(lambda: optimize(grid, target_marginal_precision=0.5, method="graph")),
        target="<= 50 ms",
    )
    import networkx as nx

    small = lattice_grid(255, 2)
    tp, fp = small.counts("any")
    graph = nx.DiGraph()
    for cell in itertools.product(range(256), range(256)):
        for axis in (0, 1):
            nxt = (cell[0] + 1, cell[1]) if axis == 0 else (cell[0], cell[1] + 1)
            if max(nxt) < 256:
                w = 0.5 * (fp[cell] - fp[nxt]) * (tp[cell] + tp[nxt])
                graph.add_edge(cell, nxt, weight=-w)
    start = time.perf_counter()
    bf = nx.bellman_ford_path(graph, (0, 0), (255, 255), weight="weight")
    peer = time.perf_counter() - start
    ours = best_of(lambda: max_area_path(tp, fp))
    _, area = max_area_path(tp, fp)
    assert abs(-nx.path_weight(graph, bf, weight="weight") - area) <= 1e-9 * area
    report("graph on 256x256 vs networkx Bellman-Ford (same area)", ours, peer,
           "nx.bellman_ford_path", ">= 100x")


def bench_graph_batches() -> None:
    """Many groups' grids (101 of 102x102 and of 257x257): optimised one at a time against
    optimize_each (paths solved side by side in batches); the same points either way."""
    scores, y = rows(2_000_000, 2, seed=3)
    group = np.random.default_rng(3).integers(0, 101, y.size)
    parts = [(scores[group == g], y[group == g]) for g in range(101)]
    for n_edges in (101, 256):
        edges = [uniform_edges(-3, 4, n_edges)] * 2

        def grids(e=edges):
            return [ThresholdGrid.from_scores(s, labels, e) for s, labels in parts]

        def one_by_one(made):
            return [optimize(g, target_marginal_precision=0.3) for g in made]

        def together(made):
            return list(optimize_each(made, target_marginal_precision=0.3))

        alone_points = one_by_one(grids())
        batched_points = together(grids())
        assert [p.index for p in alone_points] == [p.index for p in batched_points]
        alone = min(_timed(one_by_one, grids()) for _ in range(3))  # fresh grids: no cached
        batched = min(_timed(together, grids()) for _ in range(3))  # counts or paths
        report(f"graph: 101 grids {n_edges + 1}x{n_edges + 1}, optimize_each", batched, alone,
               "one at a time")


def _timed(function, argument) -> float:
    start = time.perf_counter()
    function(argument)
    return time.perf_counter() - start


def bench_hull() -> None:
    grid = lattice_grid(1023, 2)
    grid.counts("any")
    report(
        "hull: optimum + hull neighbours on 1024x1024",
        best_of(lambda: optimize(grid, target_marginal_precision=0.5, method="hull",
                                 frontier=False)),
        target="<= 20 ms",
    )
    report(
        "hull: optimum + full concave frontier on 1024x1024",
        best_of(lambda: optimize(grid, target_marginal_precision=0.5, method="hull"), 3),
    )
    report("(for scale) counts(rule) on 1024x1024, uncached",
           best_of(lambda: ThresholdGrid(grid.edges, grid.pos, grid.neg).counts("any"), 3))


def bench_k3() -> None:
    grid = lattice_grid(127, 3)
    grid.counts("any")
    report("graph k=3 on 128^3", best_of(
        lambda: optimize(grid, target_marginal_precision=0.5, method="graph"), 2),
        target="<= 2000 ms")
    report("hull k=3 on 128^3", best_of(
        lambda: optimize(grid, target_marginal_precision=0.5, method="hull", frontier=False), 2))


def bench_analytic() -> None:
    grid = lattice_grid(255, 2)
    grid.counts("any")
    report("analytic on 256x256", best_of(
        lambda: optimize(grid, target_marginal_precision=0.5, method="analytic"), 3),
        target="<= 1000 ms (paper: 60 s at 10,000 rows)")


def bench_bootstrap() -> None:
    scores, y = rows(1_000_000, 2, seed=3)
    edges = [uniform_edges(-4, 4, 255)] * 2
    ids = np.arange(1_000_000)
    start = time.perf_counter()
    boot = BootstrapGrids.from_scores(scores, y, edges, ids, n_replicates=50)
    build = time.perf_counter() - start
    start = time.perf_counter()
    confidence_intervals(boot, target_marginal_precision=0.5, method="graph")
    solve = time.perf_counter() - start
    report("bootstrap R=50, 1M rows, k=2, 256 bins: replicate grids", build)
    report("bootstrap R=50: re-optimise 50 replicates (graph)", solve)
    report("bootstrap R=50 total", build + solve, target="<= 5000 ms")


def bench_resolution() -> None:
    """The resolution check against the optimisation it checks, on a 1025x1025 lattice.

    The optimisation is timed on a fresh grid whose counts and volume are already computed
    (what ``optimize`` finds cached after building the grid), so the graph method solves its
    path; the check is ``lattice_resolution`` with the settings ``optimize`` passes. For scale:
    the same check reading every box at once (numpy over the whole lattice).
    """
    grid = lattice_grid(1024, 2)
    for rule in ("any", "all"):
        for method, options in (("hull", {"frontier": False}), ("hull", {}), ("graph", {})):
            def fresh(g=grid, r=rule):
                copy = ThresholdGrid(g.edges, g.pos, g.neg)
                copy.counts(r)
                copy.volume(r)
                return copy

            def bare(m=method, o=options, r=rule):
                made = fresh()
                start = time.perf_counter()
                optimize(made, target_marginal_precision=0.5, method=m, rule=r,
                         check_resolution=False, **o)
                return time.perf_counter() - start

            solve = min(bare() for _ in range(7))
            point = optimize(grid, target_marginal_precision=0.5, method=method, rule=rule,
                             check_resolution=False, **options)
            objective = Objective.make("linear", slope=1.0)
            check = best_of(lambda p=point, r=rule, o=objective: lattice_resolution(
                grid, p.objective, rule=r, objective=o, point_tp=p.tp), 7)
            boxes = _Boxes(*grid.counts(rule), grid.volume(rule), None, objective,
                           Constraints(), grid.total_positives, 0.0, 4.0, None)
            scan = best_of(lambda p=point, b=boxes: _scanned(b, p.objective), 5)
            frontier = " + frontier" if method == "hull" and not options else ""
            label = f"{method}{frontier}, rule {rule}"
            print(f"resolution check, 1025x1025, {label:<24} optimise {solve * 1e3:7.2f} ms"
                  f" | check {check * 1e3:6.2f} ms = {check / solve:6.1%} of it"
                  f" | every box read {scan * 1e3:6.2f} ms"
                  " | target <= 10%", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1M rows instead of 10M")
    parser.add_argument("--resolution", action="store_true",
                        help="only the resolution check against the optimisation")
    args = parser.parse_args()
    print(f"machine: {describe()}")
    if args.resolution:
        bench_resolution()
        return
    bench_grid(1_000_000 if args.quick else 10_000_000)
    bench_graph()
    bench_graph_batches()
    bench_hull()
    bench_k3()
    bench_analytic()
    bench_bootstrap()
    bench_resolution()


if __name__ == "__main__":
    main()
