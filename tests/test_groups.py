"""Many groups: sparse accumulators, compact grids and sharded records give today's results.

Truth is independent of the pipeline: ``ThresholdGrid.from_scores`` on each group's rows (one
dense histogram, no splitting), and costlib's :func:`recalibrate_grids` for the records.
"""

import itertools
import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pipeline_data import base_config, direct_records, sample_frame, write_files

import costlib.thresholds.grid._sparse as sparse_module
from costlib.thresholds.grid._grid import ThresholdGrid
from costlib.thresholds.grid._sparse import (
    SparseCounts,
    SparseGrid,
    grouped_histograms,
    merge_sparse,
)
from costlib.thresholds.point import _optimize as optimizing
from costlib_pipelines.io.records import records_to_jsonl
from costlib_pipelines.recalibrate import shards
from costlib_pipelines.recalibrate.grids import SumGrids
from costlib_pipelines.recalibrate.pipeline import run_recalibrate
from costlib_pipelines.recalibrate.shards import ShardBoundaries, shard_of

EDGES = (np.linspace(0.1, 0.9, 5), np.linspace(0.2, 0.8, 4))
SHAPE = tuple(e.size + 1 for e in EDGES)


def _partials(rng, n_rows, n_parts, unrated_share, lattice):
    """Rows split into ``n_parts`` batches -> SumGrids partials, and the rows' true grid."""
    scores = rng.random((n_rows, 2))
    truth = rng.random(n_rows) < 0.3
    weights = rng.choice([1.0, 2.5, 0.125], size=n_rows)
    rated = rng.random(n_rows) >= unrated_share
    cuts = np.sort(rng.integers(0, n_rows + 1, size=n_parts - 1))
    bounds = [0, *cuts.tolist(), n_rows]
    partials = []
    for a, b in itertools.pairwise(bounds):
        if a == b:
            continue
        mask = None if rated[a:b].all() else ~rated[a:b]
        parts = grouped_histograms(np.zeros(b - a, dtype=np.intp), scores[a:b], truth[a:b],
                                   weights[a:b], EDGES, unrated=mask)
        partials.append((lattice, parts[0], int(rated[a:b].sum())))
    labels = np.where(rated, truth, None).astype(object)
    return partials, ThresholdGrid.from_scores(scores, labels, EDGES, weights)


def _combine(fn, partials, plan, draw_order):
    """Apply ``partials`` through add_input/compact/merge as ``plan`` splits them."""
    accs = []
    for chunk in plan:
        acc = fn.create_accumulator()
        for i in chunk:
            acc = fn.add_input(acc, partials[i])
        accs.append(fn.compact(acc) if draw_order % 2 else acc)
    while len(accs) > 1:  # merge in pairs, in the drawn order
        k = draw_order % (len(accs) - 1)
        accs = [*accs[:k], fn.merge_accumulators(accs[k:k + 2]), *accs[k + 2:]]
    return fn.extract_output(accs[0])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_rows=st.integers(1, 400),
       n_parts=st.integers(1, 8), unrated_share=st.sampled_from([0.0, 0.3]),
       dense_fraction=st.sampled_from([0.0, 0.05, 0.125, 2.0]), order=st.integers(0, 7),
       shape_only=st.booleans(), dense_work=st.sampled_from([0.05, 0.5, 1.0]))
def test_sum_grids_equals_the_rows_grid_for_any_split_merge_order_and_representation(
        seed, n_rows, n_parts, unrated_share, dense_fraction, order, shape_only, dense_work):
    rng = np.random.default_rng(seed)
    partials, expected = _partials(rng, n_rows, n_parts, unrated_share,
                                   SHAPE if shape_only else EDGES)
    config = base_config(grid={"edges": "explicit", "values": [e.tolist() for e in EDGES]})
    fn = SumGrids(config, compact_output=True)
    fn.DENSE_FRACTION = dense_fraction  # 0: dense at once; 2.0: never dense
    # ... or dense once the partials added hold dense_work x the cells (never: 2.0 above)
    fn.DENSE_WORK = np.inf if dense_fraction == 2.0 else dense_work
    indices = rng.permutation(len(partials)).tolist()
    cut = sorted(rng.integers(0, len(indices) + 1, size=2).tolist())
    plan = [c for c in (indices[:cut[0]], indices[cut[0]:cut[1]], indices[cut[1]:]) if c]
    if not any(p[2] for p in partials):  # no rated row: no grid
        assert _combine(fn, partials, plan, order) is None
        return
    out = _combine(fn, partials, plan, order)
    assert isinstance(out, SparseGrid)
    grid = (out.with_edges(EDGES) if shape_only else out).to_grid()
    assert grid == expected
    if not shape_only:  # the dense output of the public default is the same grid
        dense = _combine(SumGrids(config), partials, plan, order)
        assert isinstance(dense, ThresholdGrid) and dense == expected


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.lists(st.tuples(st.integers(0, 59), st.sampled_from([0.5, 1.0, 3.0])),
                               max_size=12), max_size=5),
       channels=st.lists(st.sampled_from([2, 3]), min_size=5, max_size=5),
       scratch_span=st.sampled_from([0, 16, 10**9]))
def test_merge_sparse_equals_dense_addition(parts, channels, scratch_span):
    """Both ways of merging (sorting; a scratch bincount, forced by ``scratch_span``)."""
    sparse, dense = [], np.zeros(3 * 20)
    for entries, ch in zip(parts, channels, strict=False):
        cells = sorted({c % (ch * 20) for c, _ in entries})
        counts = np.array([dict((c % (ch * 20), w) for c, w in entries)[c] for c in cells])
        sc = SparseCounts(cells=np.array(cells, dtype=np.int64), counts=counts, channels=ch)
        sparse.append(sc)
        np.add.at(dense, sc.cells, sc.counts)
    default = sparse_module.MERGE_SCRATCH_SPAN
    sparse_module.MERGE_SCRATCH_SPAN = scratch_span
    try:
        merged = merge_sparse(sparse)
    finally:
        sparse_module.MERGE_SCRATCH_SPAN = default
    assert merged.channels == max([p.channels for p in sparse], default=2)
    assert np.array_equal(merged.cells, np.flatnonzero(dense))
    assert np.array_equal(merged.counts, dense[np.flatnonzero(dense)])


@settings(max_examples=50, deadline=None)
@given(names=st.sets(st.text(min_size=1, max_size=6), min_size=1, max_size=60),
       size=st.integers(1, 10))
def test_shards_are_ranges_of_sorted_names_so_concatenation_is_sorted(names, size):
    fn = ShardBoundaries(size)
    acc = fn.merge_accumulators([fn.add_input(fn.create_accumulator(), n) for n in names])
    boundaries = fn.extract_output(acc)
    by_shard = {}
    for name in names:
        by_shard.setdefault(shard_of(boundaries, name), []).append(name)
    assert len(by_shard) == -(-len(names) // size)  # ceil: every shard holds `size` names
    assert all(len(v) <= size for v in by_shard.values())
    concatenated = [n for s in sorted(by_shard) for n in sorted(by_shard[s])]
    assert concatenated == sorted(names)


@pytest.fixture(scope="module")
def many_groups():
    frame = sample_frame(12_000, seed=4)
    # 40 groups, some thin (they fall back), names whose order differs from their codes
    frame["group"] = np.array([f"g{(i * 7) % 40:02d}" for i in range(40)])[
        frame["item_id"].to_numpy() % 40]
    return frame


@pytest.mark.parametrize("per_shard,flush,buffered,unit_rows,batch", [
    (2000, 256, 2048, 1_000_000, None),  # defaults: one shard, every group in one batch
    (3, 1, 2, 1, 1),  # 14 shards, chunks of one group, every row group its own unit
    (7, 2, 5, 2500, 3),  # graph paths solved 3 groups at a time
])
def test_records_identical_whatever_shards_chunks_and_units(many_groups, tmp_path, monkeypatch,
                                                            per_shard, flush, buffered,
                                                            unit_rows, batch):
    if batch is not None:  # groups per optimisation batch: lattices of 25 x 25 cells
        monkeypatch.setattr(optimizing, "GRAPH_BATCH_CELLS", batch * 25 * 25)
    monkeypatch.setattr(shards, "GROUPS_PER_SHARD", per_shard)
    monkeypatch.setattr(shards, "FLUSH_GROUPS", flush)
    monkeypatch.setattr(shards, "MAX_BUFFERED_GROUPS", buffered)
    config = base_config(methods=["graph", "hull"], min_rated={"positives": 12,
                                                              "negatives": 12})
    pattern = write_files(many_groups, tmp_path / "in", n_files=2, row_group_size=700)
    manifest = run_recalibrate(config, pattern, str(tmp_path / "out"), [],
                               unit_rows=unit_rows)
    run_dir = tmp_path / "out" / "runs" / manifest["run_id"]
    got = pq.read_table(run_dir / "operating_points.parquet").to_pylist()
    expected = direct_records(many_groups, config)  # sorted by group, then method order
    for record in expected:
        record["run_id"] = manifest["run_id"]
    # the same records in the same order (repr: NaN equals NaN; sorted keys: field order)
    assert repr([sorted(r.items()) for r in got]) == repr([sorted(r.items()) for r in expected])
    assert {r["status"] for r in got} == {"ok", "fallback"}
    assert (run_dir / "operating_points.jsonl").read_text() == records_to_jsonl(expected)
    curves = pq.read_table(run_dir / "pn_curves.parquet").to_pylist()
    assert [(c["group"], c["method"]) for c in curves] == [
        (r["group"], r["method"]) for r in expected if r["status"] == "ok"]
    assert not (run_dir / "shards").exists()
    assert manifest["row_accounting"]["read"] == len(many_groups)
    assert "shards" not in json.dumps(manifest["outputs"])


@pytest.mark.parametrize("dense_fraction", [0.0, 2.0])
def test_sum_grids_shuffles_an_accumulator_as_the_plain_tuple_of_its_fields(dense_fraction):
    """The accumulator coder round-trips every form and costs what the tuple of fields costs."""
    from apache_beam.coders import FastPrimitivesCoder

    rng = np.random.default_rng(5)
    partials, expected = _partials(rng, 300, 4, 0.3, SHAPE)
    config = base_config(grid={"edges": "explicit", "values": [e.tolist() for e in EDGES]})
    fn = SumGrids(config, compact_output=True)
    fn.DENSE_FRACTION = dense_fraction
    coder = fn.get_accumulator_coder()
    assert coder.decode(coder.encode(None)) is None
    acc = None
    for partial in partials:
        acc = fn.add_input(acc, partial)
    for form in (acc, fn.compact(acc)):
        back = coder.decode(coder.encode(form))
        assert back.fields()[1:] == form.fields()[1:]
        assert fn.extract_output(back).with_edges(EDGES).to_grid() == expected
        assert len(coder.encode(form)) == len(FastPrimitivesCoder().encode(form.fields()))
