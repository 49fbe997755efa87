"""Row accounting of the recalibration pipeline: counters, Beam metrics, duplicate item ids.

Every accounting counter is also a Beam metric ``Metrics.counter("costlib", name)``
(:func:`report_metrics`), incremented where it is produced, so the Dataflow and Flink UIs show
them while the job runs. :class:`SumCounters` adds the per-batch counters;
:class:`CountDuplicateIds` counts rows whose (group, item id) appeared before.
:func:`audit_warning` reads the audit counters for a score stream that breaks the rater-facing
contract (docs/audit.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import apache_beam as beam
import numpy as np
import pandas as pd
import pyarrow as pa
from apache_beam.metrics import Metrics
from numpy.typing import NDArray

from costlib.arrays import sorted_distinct
from costlib_pipelines.io.batches import AUDIT

__all__ = [
    "METRICS_NAMESPACE",
    "CountDuplicateIds",
    "SumCounters",
    "audit_warning",
    "item_id_keys",
    "keys_per_group",
    "report_metrics",
]


#: Namespace of the Beam metrics that mirror the accounting counters.
METRICS_NAMESPACE = "costlib"


def report_metrics(counter: Mapping[str, int]) -> None:
    """Add every accounting counter to the Beam metric ``costlib/<name>`` (Dataflow, Flink UIs)."""
    for name, value in counter.items():
        if value:
            Metrics.counter(METRICS_NAMESPACE, name).inc(int(value))


def audit_warning(accounting: Mapping[str, int]) -> str | None:
    """Why the audit rows of a run cannot be used as designed, or None.

    Audited rated rows (``audit.audited``: rated with p < 1) but not one unrated row with
    ``0 < p < 1`` (``audit.represented``) while there are unrated rows: the score stream carries
    ``audit_probability`` on the rated rows only. Every unrated row is then an unrated gap
    (:mod:`costlib.audit._weights`), so points below the flagged region are coverage limited
    although the audit sampled it.
    """
    audited = int(accounting.get(f"{AUDIT}audited", 0) or 0)
    represented = int(accounting.get(f"{AUDIT}represented", 0) or 0)
    unrated = int(accounting.get("unrated", 0) or 0)
    if audited == 0 or represented > 0 or unrated == 0:
        return None
    return ("audit_probability is set on rated rows only: unrated rows need it too "
            "(docs/audit.md, 'The rater-facing contract'): "
            f"{audited:,} audited rated rows, but none of the {unrated:,} unrated rows carries "
            "its p, so all of them count as coverage gaps instead of being represented by the "
            "audit sample (accounting audit.represented 0)")


def item_id_keys(item_ids: pa.Array) -> NDArray[np.uint64]:
    """One uint64 key per item id: the id's bits for integers (exact), else a 64-bit hash.

    String ids are hashed with ``pandas.util.hash_array`` (SipHash, fixed key: the same in every
    process); two distinct ids collide with probability ~n²/2^65 among n ids of a group.
    """
    if pa.types.is_integer(item_ids.type):
        if item_ids.type != pa.uint64():
            item_ids = item_ids.cast(pa.int64())  # every other integer type fits
        return item_ids.to_numpy(zero_copy_only=False).view(np.uint64)
    if pa.types.is_dictionary(item_ids.type):
        item_ids = item_ids.cast(item_ids.type.value_type)
    values = item_ids.to_numpy(zero_copy_only=False).astype(object)
    return pd.util.hash_array(values, categorize=False)


def keys_per_group(batch) -> list[tuple[str, NDArray[np.uint64]]]:
    """``(group, sorted item-id keys)`` of a validated batch's valid rows, per group."""
    keys = item_id_keys(batch.item_ids)
    codes = batch.group_codes
    order = np.lexsort((keys, codes))
    codes, keys = codes[order], keys[order]
    present, starts = np.unique(codes, return_index=True)
    bounds = [*starts.tolist(), codes.size]
    return [(batch.group_names[code], keys[a:b])
            for code, a, b in zip(present.tolist(), bounds[:-1], bounds[1:], strict=True)]


class CountDuplicateIds(beam.CombineFn):
    """Sorted item-id keys of one group -> rows whose key appeared before (exact, per group).

    The accumulator is ``[distinct sorted keys, pending arrays, pending size, duplicates]``;
    pending arrays are merged into the distinct keys once they hold as many keys as it (so each
    key is sorted O(log n) times). Memory: 8 bytes per distinct (group, item id), plus at most
    as much pending.
    """

    def create_accumulator(self):
        return [np.zeros(0, dtype=np.uint64), [], 0, 0]

    def add_input(self, acc, keys):
        acc[1].append(keys)
        acc[2] += keys.size
        return self._maybe_merge(acc) if acc[2] >= max(acc[0].size, 1 << 16) else acc

    def merge_accumulators(self, accs):
        merged = self.create_accumulator()
        for acc in accs:
            merged[1] += [acc[0], *acc[1]]
            merged[2] += acc[0].size + acc[2]
            merged[3] += acc[3]
        return self._maybe_merge(merged)

    @staticmethod
    def _maybe_merge(acc):
        if not acc[1]:
            return acc
        everything = np.concatenate([acc[0], *acc[1]])
        distinct = sorted_distinct(everything)
        return [distinct, [], 0, acc[3] + everything.size - distinct.size]

    def compact(self, acc):
        return self._maybe_merge(acc)

    def extract_output(self, acc):
        return int(self._maybe_merge(acc)[3])


class SumCounters(beam.CombineFn):
    def create_accumulator(self):
        return Counter()

    def add_input(self, acc, counter):
        acc.update(counter)
        return acc

    def merge_accumulators(self, accs):
        out = Counter()
        for acc in accs:
            out.update(acc)
        return out

    def extract_output(self, acc):
        return dict(sorted(acc.items()))
