"""Review of the batched graph paths, packed sparse counts, group batches and window shards:
edge cases the first tests did not reach."""

import numpy as np
import pytest
from threshold_data import random_grid

from costlib.thresholds.point import _optimize as optimizing
from costlib.thresholds.point._lattice_path import max_area_path, max_area_paths
from costlib.thresholds.point._optimize import optimize, optimize_each


def _grid(seed, widths=(12, 9), n=2_000):
    return random_grid(seed, widths, n)


@pytest.mark.parametrize("shape", [(0, 6, 5), (0, 1, 5), (0, 4), (0, 3, 4, 2)])
def test_an_empty_stack_has_no_paths(shape):
    assert max_area_paths(np.zeros(shape), np.zeros(shape)) == []


@pytest.mark.parametrize("shape", [(1, 6), (6, 1), (1, 1)])
def test_stacks_of_lattices_with_a_side_of_one_are_solved_like_each_alone(shape):
    rng = np.random.default_rng(3)
    tp = np.flip(np.cumsum(np.flip(rng.integers(0, 4, (9, *shape)), 2), 2), 2).astype(float)
    fp = np.flip(np.cumsum(np.flip(rng.integers(0, 4, (9, *shape)), 2), 2), 2).astype(float)
    for (path, area), t, f in zip(max_area_paths(tp, fp), tp, fp, strict=True):
        alone_path, alone_area = max_area_path(t, f)
        np.testing.assert_array_equal(path, alone_path)
        assert area == alone_area


@pytest.mark.parametrize("method", ["graph", "hull"])
def test_optimize_each_does_not_stop_at_a_none_in_the_middle(method, monkeypatch):
    """A None among the grids is an error, as for ``optimize(None)``, never the end of the
    grids (the grids after it would be silently dropped)."""
    monkeypatch.setattr(optimizing, "GRAPH_BATCH_CELLS", 1)  # batches of one grid
    with pytest.raises((TypeError, AttributeError)):
        list(optimize_each([_grid(0), None, _grid(1)], target_marginal_precision=0.3,
                           method=method))


def test_optimize_each_holds_one_shape_batch_when_shapes_change(monkeypatch):
    """A batch is sized for the first grid's lattice: a small first lattice must not make it
    take (and hold) as many big lattices."""
    monkeypatch.setattr(optimizing, "GRAPH_BATCH_CELLS", 8 * 4 * 4)  # 8 of 4 x 4
    shapes = [(3, 3)] + [(30, 30)] * 12
    pulled = []

    def grids():
        for seed, widths in enumerate(shapes):
            pulled.append(seed)
            yield _grid(seed, widths)

    points = optimize_each(grids(), target_marginal_precision=0.3)
    next(points)
    held = [shapes[i] for i in pulled]
    big = sum(1 for s in held if s == (30, 30))
    # at most the one grid that showed the shape changed, not 7 lattices of 31 x 31
    assert big <= 1
    rest = list(points)
    assert len(rest) == len(shapes) - 1
    for point, (seed, widths) in zip(rest, list(enumerate(shapes))[1:], strict=True):
        alone = optimize(_grid(seed, widths), target_marginal_precision=0.3)
        assert point.index == alone.index and point.thresholds == alone.thresholds


def _suffix_sums(a):
    for axis in range(a.ndim):
        a = np.flip(np.cumsum(np.flip(a, axis), axis), axis)
    return a


@pytest.mark.parametrize("g", [1, 16])  # 16 x 40 columns: the wide-row forward pass
def test_integer_counts_are_solved_as_float64(g):
    """Integer counts (e.g. unweighted tallies) give the paths and areas of the same counts
    as float64, alone and stacked: no int64 overflow in the step weights, and the same
    arithmetic whichever forward pass the stack width picks."""
    rng = np.random.default_rng(5)
    tp = np.stack([_suffix_sums(rng.integers(0, 2**26, (4, 40))) for _ in range(g)])
    fp = np.stack([_suffix_sums(rng.integers(0, 2**26, (4, 40))) for _ in range(g)])
    as_float = max_area_paths(tp.astype(np.float64), fp.astype(np.float64))
    for (path, area), (fpath, farea), t, f in zip(max_area_paths(tp, fp), as_float, tp, fp,
                                                  strict=True):
        np.testing.assert_array_equal(path, fpath)
        assert area == farea
        alone_path, alone_area = max_area_path(t, f)
        np.testing.assert_array_equal(alone_path, fpath)
        assert alone_area == farea


def test_an_assembly_during_a_shard_rewrite_reads_records_and_lines_of_one_version(tmp_path,
                                                                                  monkeypatch):
    """A window's assembly may read a shard while a later firing rewrites it (another shard's
    firing triggers the assembly). Whichever file replacements of the rewrite have happened,
    the window's JSON lines are those of its Parquet records: here the rewrite (a late group
    joins the shard) stops after its first file replacement and the window is assembled."""
    import json

    from apache_beam.transforms.window import IntervalWindow
    from pipeline_data import base_config, direct_grids

    from costlib.sample import generate_score_stream
    from costlib_pipelines.recalibrate import window_shards
    from costlib_pipelines.recalibrate.optimizing import optimize_one

    config = base_config(methods=["graph", "hull"], min_rated={"positives": 3, "negatives": 3})
    frame = generate_score_stream(3000, groups=["a", "b"], prevalence=0.05, days=1, seed=1)
    grids = direct_grids(frame, config)
    result = {g: optimize_one(config, g, grids[g]) for g in ("a", "b")}
    window = IntervalWindow(1_700_000_000, 1_700_086_400)
    fn = window_shards.WriteWindowShardFn(config, str(tmp_path / "run"), "run")
    [(directory, shard)] = fn.process((0, [(result["a"], 0, True)]), window=window)

    def first_replacement_only(write):
        def stopping(*args):
            if replaced:
                raise RuntimeError("rewrite interrupted")
            replaced.append(args[0])
            write(*args)
        return stopping

    replaced: list = []
    for name in ("write_parquet", "write_bytes_atomically"):
        if hasattr(window_shards, name):
            monkeypatch.setattr(window_shards, name,
                                first_replacement_only(getattr(window_shards, name)))
    with pytest.raises(RuntimeError, match="interrupted"):
        list(fn.process((0, [(result["a"], 0, True), (result["b"], 1, True)]), window=window))
    monkeypatch.undo()

    count = window_shards.assemble_window(directory, [shard])
    import pyarrow.parquet as pq

    rows = pq.read_table(f"{directory}/operating_points.parquet").to_pylist()
    with open(f"{directory}/operating_points.jsonl") as fh:
        lines = [json.loads(line) for line in fh]
    assert count == len(rows) == len(lines)
    assert [(r["group"], r["method"], r["pane_index"]) for r in rows] == [
        (r["group"], r["method"], r["pane_index"]) for r in lines]


@pytest.mark.parametrize("counts", [
    [np.nan, 1.0, 2.0], [1.0, np.inf, 2.0], [-1.0, 1.0, 2.0], [5e-324, 1.0, 2.0],
    [2.0**32 - 1, 0.0, 1.0], [1.0, -0.0, 2.0],
])
@pytest.mark.parametrize("cells", [[0, 1, 2], [3, 2**33, 2**62]])  # huge gaps stay int64
def test_packed_pickle_round_trips_any_float_and_any_cell(counts, cells):
    import pickle

    from costlib.thresholds.grid._sparse import SparseCounts

    counts = np.array(counts)
    sparse = SparseCounts(np.array(cells, dtype=np.int64), counts, 3)
    back = pickle.loads(pickle.dumps(sparse, protocol=pickle.HIGHEST_PROTOCOL))
    assert back.counts.tobytes() == counts.tobytes()
    np.testing.assert_array_equal(back.cells, cells)
    assert back.channels == 3


def test_groups_waiting_for_a_batch_hold_bounded_bootstrap_replicates(monkeypatch):
    """``OptimizeGroupsFn`` holds groups until a graph batch is full; their bootstrap
    replicates (R x occupied cells each, not bounded by the lattice size) must not pile up
    beyond :data:`~costlib_pipelines.recalibrate.shards.PENDING_BYTES` (before: a whole batch of
    groups' replicates, e.g. 100 groups of 16 MB). The records are those of each group alone."""
    from pipeline_data import base_config, direct_grids

    from costlib.sample import generate_score_stream
    from costlib.thresholds.loop._bootstrap import SparseBootstrapGrids
    from costlib_pipelines.recalibrate import shards
    from costlib_pipelines.recalibrate.optimizing import optimize_one

    config = base_config(methods=["graph"], bootstrap={"replicates": 20, "seed": 3,
                                                       "level": 0.8})
    groups = [f"g{i}" for i in range(6)]
    frame = generate_score_stream(6000, groups=groups, prevalence=0.1, days=1, seed=2)
    frame = frame[frame["label"].notna()]
    grids = direct_grids(frame, config)
    boots = {}
    for group, rows in frame.groupby("group"):
        scores = rows[list(config.classifiers)].to_numpy(dtype=float, na_value=np.nan)
        boots[group] = SparseBootstrapGrids.from_scores(
            np.where(np.isnan(scores), -np.inf, scores), rows["label"], config.fixed_edges(),
            rows["item_id"].to_numpy(), n_replicates=20, seed=3)
    one = max(b.nbytes for b in boots.values())
    monkeypatch.setattr(shards, "PENDING_BYTES", 2 * one, raising=False)

    fn = shards.OptimizeGroupsFn(config, "run")
    fn.start_bundle()
    held = []
    outputs = []
    for group in groups:
        element = (group, {"grid": [grids[group]], "bootstrap": [boots[group]]})
        outputs += list(fn.process(element, config.fixed_edges(), None, []))
        held.append(sum(b.nbytes for _, _, b in fn.pending))
    outputs += [v.value for v in fn.finish_bundle()]
    assert max(held) <= 2 * one
    records = [r for _, (chunk, _) in outputs
               for r in shards._read_table(chunk).drop_columns([shards.JSONL_COLUMN]).to_pylist()]
    alone = {g: optimize_one(config, g, grids[g], boots[g]) for g in groups}
    assert sorted(r["group"] for r in records) == sorted(
        g for g in groups for _ in alone[g].points)
    for r in records:
        point = alone[r["group"]].points[r["method"]]
        assert r["tp"] == point.tp and r["fp"] == point.fp
        assert r["threshold_ci_low"] == list(alone[r["group"]].intervals[r["method"]]
                                             .thresholds[0])
