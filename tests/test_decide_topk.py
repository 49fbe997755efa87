"""The top-k path of ``costlib decide`` piece by piece: ordering, shuffle encoding, decoding.

Independent truths: Arrow's own multi-key sort for :func:`set_order`; per set, items sorted by
item id (Python's ``sorted`` on the UTF-8 bytes) and decoded one set at a time by
:func:`costlib.decoding.optimal_topk`, or all sets in one :func:`costlib.decoding.
optimal_topk_ragged` call, for the shuffled, bucketed, batched decoding; the rows themselves
for the shuffle payloads.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costlib.decoding import optimal_topk, optimal_topk_ragged
from costlib_pipelines.config import RunConfig
from costlib_pipelines.decide.records import COMPACT_SCHEMA, as_contract, write_decisions
from costlib_pipelines.decide.sets import (
    PROBABILITY,
    SHUFFLE_SCHEMA,
    decode_sets,
    decode_shuffled,
    encode_sets,
    set_buckets,
    set_order,
    shuffled_rows,
    split_sets,
)
from costlib_pipelines.decide.transforms import DecodeBucketFn

#: Item ids that share long prefixes, differ only in trailing NULs, or are not ASCII.
TRICKY_IDS = ["", "a", "a\x00", "a\x00\x00", "ab", "abcdefgh", "abcdefghi", "abcdefgh\x00",
              "abcdefgz", "\u00e9", "\u00e9t\u00e9", "\U0001f600", "zzzzzzzzzzzzzzzz1",
              "zzzzzzzzzzzzzzzz0", "12", "112", "2"]


def decision_rows(n_sets: int, seed: int, *, max_size: int = 9, tricky: bool = False
                  ) -> pa.Table:
    """Set rows as the decide stage emits them: decision columns (dictionary-encoded like
    :data:`COMPACT_SCHEMA`, top-k fields dropped) plus the probability column."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, max_size + 1, n_sets)
    set_ids = np.repeat([f"set-{i:03d}" for i in rng.permutation(n_sets)], sizes)
    n = set_ids.size
    if tricky:
        items = np.array([TRICKY_IDS[i % len(TRICKY_IDS)] + str(i // len(TRICKY_IDS))
                          for i in range(n)], dtype=object)
        items[rng.random(n) < 0.1] = "dup"  # repeated items inside a set
    else:
        items = np.array([str(i) for i in rng.permutation(10 * n)[:n]], dtype=object)
    probability = np.round(rng.random(n) ** 2, 1)  # many ties in probability
    groups = np.array(["g0", "g1", "g2"], dtype=object)[rng.integers(0, 3, n)]
    decision = np.array([True, False, None], dtype=object)[rng.integers(0, 3, n)]
    columns = {
        "group": pa.array(groups).dictionary_encode(),
        "set_id": pa.array(set_ids).dictionary_encode(),
        "item_id": pa.array(items, pa.string()),
        "threshold_decision": pa.array(decision, pa.bool_()),
        "loss": pa.array(["f1"] * n).dictionary_encode(),
        "operating_point_method": pa.array(["graph"] * n).dictionary_encode(),
        "operating_point_group": pa.array(groups).dictionary_encode(),
        "operating_point_window_end": pa.nulls(n, COMPACT_SCHEMA.field(
            "operating_point_window_end").type),
        "audit": pa.array(rng.random(n) < 0.2),
        "audit_probability": pa.array(rng.random(n)),
    }
    for spec in COMPACT_SCHEMA:  # other decision columns (e.g. min-risk fields): null here
        if spec.name not in columns and spec.name not in ("topk_decision", "k", "expected_loss"):
            columns[spec.name] = pa.nulls(n, spec.type)
    columns[PROBABILITY] = pa.array(probability)
    return pa.table(columns)


def reference(rows: pa.Table) -> dict[tuple[str, str, int], tuple[bool, int, float]]:
    """Per (set, item, occurrence): top-k decision, k and expected loss, set by set.

    Items of a set in the order (item id bytes, probability, group, decision with null last,
    audit, audit probability), the pipeline's documented order, decoded by ``optimal_topk``
    (ties in probability go to the earlier item).
    """
    frame = rows.to_pandas()
    out = {}
    for set_id, members in frame.groupby("set_id", sort=True, observed=True):
        members = members.assign(
            item_bytes=members.item_id.map(lambda s: s.encode()),
            group_str=members.group.astype(str),
            decision_key=members.threshold_decision.map(
                lambda d: 2 if d is None or d != d else int(d)))
        members = members.sort_values(["item_bytes", PROBABILITY, "group_str", "decision_key",
                                       "audit", "audit_probability"], kind="stable")
        result = optimal_topk(members[PROBABILITY].to_numpy(), "f1")
        seen: dict[str, int] = {}
        for item, chosen in zip(members.item_id, result.selected, strict=True):
            seen[item] = seen.get(item, -1) + 1
            out[(set_id, item, seen[item])] = (bool(chosen), result.k, result.expected_loss)
    return out


def decided_rows(tables: list[pa.Table]) -> dict[tuple[str, str, int], tuple[bool, int, float]]:
    out = {}
    for table in tables:
        seen: dict[tuple[str, str], int] = {}
        for row in table.to_pylist():
            key = (row["set_id"], row["item_id"])
            seen[key] = seen.get(key, -1) + 1
            out[(*key, seen[key])] = (row["topk_decision"], row["k"], row["expected_loss"])
    return out


def decode_all(tables: list[pa.Table]) -> list[pa.Table]:
    """Every bucket decoded on its own, as ``DecodeBucketFn`` does."""
    return [decode_sets(table, "f1", {}) for table in tables]


def assert_same_decisions(got, want) -> None:
    assert got.keys() == want.keys()
    for key, (chosen, k, loss) in want.items():
        assert got[key][:2] == (chosen, k), key
        assert got[key][2] == pytest.approx(loss, rel=1e-12, abs=1e-15)


def shuffle(rows: pa.Table, cuts: list[int], n_buckets: int, seed: int) -> list[pa.Table]:
    """The pipeline's path without Beam: batches at ``cuts`` (rows in a random order), each
    split by bucket and encoded; per bucket the payloads in a random order, decoded."""
    rng = np.random.default_rng(seed)
    rows = rows.take(pa.array(rng.permutation(rows.num_rows)))
    bounds = [0, *sorted(set(cuts)), rows.num_rows]
    payloads: dict[int, list[bytes]] = {}
    for start, stop in itertools.pairwise(bounds):
        if stop <= start:
            continue
        batch = rows.slice(start, stop - start)
        for bucket, part in split_sets(batch, np.arange(batch.num_rows), n_buckets):
            payloads.setdefault(bucket, []).append(encode_sets(part))
    tables = []
    for bucket in sorted(payloads):
        parts = payloads[bucket]
        tables.append(decode_shuffled([parts[i] for i in rng.permutation(len(parts))]))
    return tables


def test_shuffled_batched_decoding_equals_the_library_set_by_set():
    rows = decision_rows(400, seed=1, max_size=30)
    tables = shuffle(rows, cuts=[97, 500, 501, 1400, 2000], n_buckets=5, seed=2)
    assert len(tables) == 5
    decided = decode_all(tables)
    assert_same_decisions(decided_rows(decided), reference(rows))
    # sets really were split over batches, and several sizes decoded in the one call
    sizes = np.bincount(pc.dictionary_encode(rows.column("set_id")).combine_chunks()
                        .indices.to_numpy())
    assert len(set(sizes.tolist())) > 10
    for table in decided:
        assert table.schema == COMPACT_SCHEMA
        # rows sorted by (set id, item id) within every bucket
        keys = list(zip(table.column("set_id").to_pylist(),
                        [s.encode() for s in table.column("item_id").to_pylist()], strict=True))
        assert keys == sorted(keys)


def test_many_small_payloads_whose_dictionaries_together_outgrow_their_indices():
    """A batch's payload narrows its set-id dictionary to int8 when the batch holds <= 128
    sets; a bucket of many such payloads (small row groups, as on Flink) has more distinct set
    ids than int8 holds. Decoding the payloads as they travelled (``shuffled_rows``) equals
    the library set by set."""
    rows = decision_rows(300, seed=7, max_size=12)
    payloads = []
    for start in range(0, rows.num_rows, 40):
        batch = rows.slice(start, 40)
        own = pc.dictionary_encode(batch.column("set_id").cast(pa.string()))  # this batch's sets
        batch = batch.set_column(batch.schema.get_field_index("set_id"), "set_id", own)
        payloads += [encode_sets(part)
                     for _, part in split_sets(batch, np.arange(batch.num_rows), 1)]
    table = shuffled_rows(payloads)
    assert table.column("set_id").type.index_type == pa.int8()
    assert len(pc.unique(table.column("set_id").cast(pa.string()))) > 128
    decided = decode_sets(table, "f1", {})
    assert_same_decisions(decided_rows([decided]), reference(rows))


def test_tricky_item_ids_and_repeated_items_order_like_the_reference():
    rows = decision_rows(60, seed=3, max_size=25, tricky=True)
    decided = decode_all(shuffle(rows, cuts=[50, 300], n_buckets=3, seed=4))
    assert_same_decisions(decided_rows(decided), reference(rows))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(0, 400), max_size=6),
       other_cuts=st.lists(st.integers(0, 400), max_size=6), n_buckets=st.integers(1, 6))
def test_batch_splits_and_shard_order_never_change_decisions(seed, cuts, other_cuts,
                                                             n_buckets):
    rows = decision_rows(40, seed=seed, max_size=12, tricky=seed % 2 == 0)
    first = decode_all(shuffle(rows, cuts, n_buckets, seed=seed + 1))
    second = decode_all(shuffle(rows, other_cuts, n_buckets, seed=seed + 2))
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert a.equals(b)  # same rows, same order, same dictionaries: identical files
    # other buckets: the same decisions, bit for bit (the decoder's result for a set does not
    # depend on the sets decoded beside it)
    assert decided_rows(decode_all(shuffle(rows, cuts, n_buckets + 1, seed=seed + 3))) == (
        decided_rows(first))


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(st.one_of(st.sampled_from(TRICKY_IDS), st.text(max_size=12)),
                   min_size=1, max_size=60),
    data=st.data(),
)
def test_set_order_equals_arrows_sort(items, data):
    n = len(items)
    sets = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    probability = data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=n,
                                     max_size=n))
    decision = data.draw(st.lists(st.sampled_from([True, False, None]), min_size=n,
                                  max_size=n))
    keys = pa.table({"set": pa.array(sets, pa.int64()), "item": pa.array(items, pa.string()),
                     "p": pa.array(probability), "decision": pa.array(decision, pa.bool_())})
    want = pc.sort_indices(keys, sort_keys=[(c, "ascending") for c in keys.column_names])
    got = set_order(keys)
    # Arrow's sort is stable, so rows equal in every key keep their order in both
    assert got.tolist() == want.to_numpy().tolist()


def test_split_sets_keeps_every_row_once_and_each_set_in_its_bucket():
    rows = decision_rows(300, seed=7)
    keep = np.flatnonzero(np.random.default_rng(8).random(rows.num_rows) < 0.8)
    parts = list(split_sets(rows, keep, 7))
    assert [b for b, _ in parts] == sorted({b for b, _ in parts})
    back = pa.concat_tables([decode_shuffled([encode_sets(p)]) for _, p in parts])
    assert sorted(back.column("item_id").to_pylist()) == sorted(
        rows.take(pa.array(keep)).column("item_id").to_pylist())
    for bucket, part in parts:
        ids = part.column("set_id").combine_chunks()
        assert (set_buckets(ids, 7) == bucket).all()
        assert (set_buckets(ids.dictionary, 7) == bucket).all()  # its own bucket's ids only



def ordered_members(rows: pa.Table) -> pd.DataFrame:
    """Set rows in the pipeline's documented order: set id, then the items of each set by
    (item id bytes, probability, group, decision with null last, audit, audit probability)."""
    frame = rows.to_pandas()
    frame = frame.assign(
        set_str=frame.set_id.astype(str),
        item_bytes=frame.item_id.map(lambda s: s.encode()),
        group_str=frame.group.astype(str),
        decision_key=frame.threshold_decision.map(lambda d: 2 if d is None or d != d else int(d)))
    return frame.sort_values(["set_str", "item_bytes", PROBABILITY, "group_str", "decision_key",
                              "audit", "audit_probability"], kind="stable")


def ragged_reference(rows: pa.Table) -> dict[tuple[str, str, int], tuple[bool, int, float]]:
    """Per (set, item, occurrence): the decisions of one ``optimal_topk_ragged`` call over all
    sets, the rows in the documented order (:func:`ordered_members`)."""
    members = ordered_members(rows)
    sets = members.set_str.to_numpy()
    starts = np.flatnonzero(np.concatenate([[True], sets[1:] != sets[:-1]]))
    offsets = np.append(starts, sets.size)
    result = optimal_topk_ragged(members[PROBABILITY].to_numpy(), offsets, "f1")
    set_of_row = np.repeat(np.arange(starts.size), np.diff(offsets))
    out, seen = {}, {}
    for i, (set_id, item) in enumerate(zip(sets, members.item_id, strict=True)):
        seen[(set_id, item)] = seen.get((set_id, item), -1) + 1
        s_i = set_of_row[i]
        out[(set_id, item, seen[(set_id, item)])] = (
            bool(result.selected[i]), int(result.k[s_i]), float(result.expected_loss[s_i]))
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), cuts=st.lists(st.integers(0, 500), max_size=8),
       n_buckets=st.integers(1, 9), max_size=st.integers(1, 25))
def test_bucket_count_and_batch_split_never_change_decisions(seed, cuts, n_buckets, max_size):
    rows = decision_rows(50, seed=seed, max_size=max_size, tricky=seed % 3 == 0)
    # probabilities without ties: a set whose expected losses tie exactly at two k (rounded
    # probabilities make that happen) may go either way by the last bit of a sum
    rows = rows.set_column(rows.schema.get_field_index(PROBABILITY), PROBABILITY,
                           pa.array(np.random.default_rng(seed).random(rows.num_rows)))
    decided = decode_all(shuffle(rows, cuts, n_buckets, seed=seed + 1))
    assert sum(t.num_rows for t in decided) == rows.num_rows
    assert_same_decisions(decided_rows(decided), ragged_reference(rows))


def wide_dictionary(n_rows: int, n_values: int, seed: int) -> pa.DictionaryArray:
    """A string dictionary array with ``n_values`` values (most unused), a tenth of rows null."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_values, n_rows).astype(np.int32)
    return pa.DictionaryArray.from_arrays(
        pa.array(codes, mask=rng.random(n_rows) < 0.1),
        pa.array([f"v{i:06d}" for i in range(n_values)]))


def plain_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("n_values", [1, 128, 129, 40_000])
def test_payloads_carry_every_value_in_fewer_bytes(n_values):
    rows = decision_rows(80, seed=11, max_size=9)
    n = rows.num_rows
    rows = rows.set_column(rows.schema.get_field_index("operating_point_group"),
                           "operating_point_group", wide_dictionary(n, n_values, seed=12))
    assert rows.column("operating_point_window_end").null_count == n  # left out
    payload = encode_sets(rows)
    back = decode_shuffled([payload])
    assert back.schema == SHUFFLE_SCHEMA
    for name in SHUFFLE_SCHEMA.names:
        assert back.column(name).to_pylist() == rows.column(name).to_pylist(), name
    assert len(payload) < len(plain_ipc(rows))
    # and the decoded records are those of the rows as they were, bit for bit
    assert decode_all([back])[0].equals(decode_all([rows])[0])


def test_decode_shuffled_of_nothing_and_of_mixed_payload_schemas():
    assert decode_shuffled([]).equals(SHUFFLE_SCHEMA.empty_table())
    rows = decision_rows(30, seed=13)
    half = rows.num_rows // 2
    first = rows.slice(0, half)
    # the second payload has audit probabilities (the first none) and a wide group dictionary
    second = rows.slice(half).set_column(
        rows.schema.get_field_index("audit_probability"), "audit_probability",
        pa.nulls(rows.num_rows - half, pa.float64()))
    second = second.set_column(second.schema.get_field_index("group"), "group",
                               wide_dictionary(second.num_rows, 300, seed=14))
    back = decode_shuffled([encode_sets(first), encode_sets(second)])
    want = pa.concat_tables([first, second.cast(first.schema)])
    assert back.schema == SHUFFLE_SCHEMA
    for name in SHUFFLE_SCHEMA.names:
        assert back.column(name).to_pylist() == want.column(name).to_pylist(), name


@pytest.mark.parametrize(("change", "message"), [
    (lambda t: t.append_column("surprise", pa.array(np.zeros(t.num_rows))),
     r"columns \['surprise'\] that are not decision columns"),
    (lambda t: t.set_column(t.schema.get_field_index("item_id"), "item_id",
                            pa.array(np.arange(t.num_rows))),
     r"column 'item_id' has type int64, expected string"),
    (lambda t: t.set_column(t.schema.get_field_index("group"), "group",
                            t.column("group").cast(pa.string())),
     r"column 'group' has type string"),
])
def test_decode_shuffled_refuses_payloads_that_are_not_set_rows(change, message):
    rows = change(decision_rows(10, seed=15))
    with pytest.raises(ValueError, match=message):
        decode_shuffled([plain_ipc(rows)])


@pytest.mark.parametrize("audit", [True, False])
def test_rows_as_they_travelled_decode_like_restored_rows(audit):
    """``DecodeBucketFn`` decodes :func:`shuffled_rows` (columns left out, narrow indices)."""
    rows = decision_rows(120, seed=16, max_size=15)
    if not audit:  # no audit: the audit probability is null on every row, and left out
        rows = rows.set_column(rows.schema.get_field_index("audit_probability"),
                               "audit_probability", pa.nulls(rows.num_rows, pa.float64()))
    payloads = [encode_sets(part) for _, part in split_sets(rows, np.arange(rows.num_rows), 1)]
    travelled = shuffled_rows(payloads)
    assert ("audit_probability" in travelled.column_names) == audit
    assert "operating_point_window_end" not in travelled.column_names
    assert travelled.schema.field("group").type.index_type == pa.int8()
    decided = decode_sets(travelled, "f1", {})
    assert decided.equals(decode_sets(decode_shuffled(payloads), "f1", {}))
    assert decided.schema == COMPACT_SCHEMA
    assert_same_decisions(decided_rows([decided]), reference(rows))


@given(ids=st.lists(st.one_of(st.sampled_from(TRICKY_IDS), st.text(max_size=20)), min_size=1,
                    max_size=40),
       n_buckets=st.integers(1, 1000))
@settings(max_examples=60, deadline=None)
def test_set_buckets_are_siphash_of_the_python_strings(ids, n_buckets):
    """The documented bucket: ``pandas.util.hash_array`` of the ids as Python ``str``."""
    want = pd.util.hash_array(np.array(ids, dtype=object), categorize=False) % n_buckets
    assert set_buckets(pa.array(ids, pa.string()), n_buckets).tolist() == want.tolist()
    assert set_buckets(pa.array(ids, pa.large_string()), n_buckets).tolist() == want.tolist()
    assert set_buckets(pa.array(ids).dictionary_encode(), n_buckets).tolist() == want.tolist()


def column_encodings(path) -> dict[str, set[str]]:
    meta = pq.ParquetFile(path).metadata.row_group(0)
    return {meta.column(i).path_in_schema: set(meta.column(i).encodings)
            for i in range(meta.num_columns)}


def test_bucket_files_read_back_exactly_with_per_set_fields_dictionary_encoded(tmp_path):
    decided = decode_sets(decision_rows(200, seed=17, max_size=20), "f1", {})
    path = tmp_path / "bucket.parquet"
    write_decisions(str(path), decided)
    back = pq.read_table(path)
    assert back.to_pylist() == as_contract(decided).to_pylist()
    assert "RLE_DICTIONARY" in column_encodings(path)["expected_loss"]
    # rows without top-k fields (threshold-only files): k and expected_loss as before
    plain = as_contract(decided).drop_columns(["k", "expected_loss"])
    plain = plain.append_column("k", pa.nulls(plain.num_rows, pa.int64())).append_column(
        "expected_loss", pa.nulls(plain.num_rows, pa.float64())).select(decided.column_names)
    write_decisions(str(tmp_path / "plain.parquet"), plain)
    assert "RLE_DICTIONARY" not in column_encodings(tmp_path / "plain.parquet")["expected_loss"]
    assert pq.read_table(tmp_path / "plain.parquet").to_pylist() == plain.to_pylist()


@pytest.mark.parametrize("n_sets", [1, 3])
def test_one_group_one_loss_and_a_single_set_decode_like_the_reference(n_sets):
    rows = decision_rows(n_sets, seed=18, max_size=30)
    for name in ("group", "operating_point_group"):
        rows = rows.set_column(rows.schema.get_field_index(name), name,
                               pa.array(["g1"] * rows.num_rows).dictionary_encode())
    decided = decode_all(shuffle(rows, cuts=[5], n_buckets=2, seed=19))
    assert_same_decisions(decided_rows(decided), reference(rows))
    for table in decided:
        assert table.schema == COMPACT_SCHEMA
        assert set(table.column("group").to_pylist()) == {"g1"}


def topk_config() -> RunConfig:
    return RunConfig.from_dict({
        "columns": {"probability": "probability", "set_id": "set_id"},
        "classifiers": ["a"], "rule": "any", "grid": {}, "target": {"marginal_precision": 0.3},
        "min_rated": {}, "bootstrap": {}, "decoding": {"loss": "f1", "params": {}, "buckets": 3},
    })


def run_decode_bundle(fn: DecodeBucketFn, elements) -> list:
    """``fn``'s lifecycle over one bundle, as a runner calls it; the outputs of ``process``."""
    fn.setup()
    fn.start_bundle()
    try:
        outputs = [out for element in elements for out in fn.process(element)]
        fn.finish_bundle()
    finally:
        fn.teardown()
    return outputs


def test_decode_bucket_fn_writes_every_bucket_file_by_the_end_of_the_bundle(tmp_path):
    """Files are written on a second thread; when ``finish_bundle`` returns, every bucket's
    file holds exactly :func:`decode_sets` of its rows, and the counts match them."""
    rows = decision_rows(90, seed=21, max_size=12)
    buckets = [(bucket, [encode_sets(part)])
               for bucket, part in split_sets(rows, np.arange(rows.num_rows), 3)]
    counts = run_decode_bundle(DecodeBucketFn(topk_config(), str(tmp_path)), buckets)
    assert len(buckets) == 3 and len(counts) == 3
    for (bucket, payloads), count in zip(buckets, counts, strict=True):
        want = as_contract(decode_sets(shuffled_rows(payloads), "f1", {}))
        got = pq.read_table(tmp_path / f"part-bucket-{bucket:05d}.parquet")
        assert got.to_pylist() == want.to_pylist()
        assert count["rows_written"] == count["topk_rows"] == want.num_rows
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"part-bucket-{bucket:05d}.parquet" for bucket, _ in buckets]
    assert sum(c["topk_sets"] for c in counts) == 90


def test_decode_bucket_fn_fails_the_bundle_when_a_write_fails(tmp_path):
    """A write that fails on the writer thread is raised by the bundle (here: the output
    "directory" is a file), not lost."""
    rows = decision_rows(10, seed=22)
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    with pytest.raises(OSError):
        run_decode_bundle(DecodeBucketFn(topk_config(), str(not_a_directory)),
                          [(0, [encode_sets(rows)])])
