"""Many small sets (multilabel decoding): n = 20 items per set, F1, one core.

Run: ``.venv/bin/python tests/benchmarks/bench_decoding_many_sets.py``

Target (issue 3): >= 50,000 sets per second on one core. Peers in the same run: the
pure-Python O(n^2) F1 optimiser called once per set (how Kaggle multilabel solutions use it),
and our own single-set ``optimal_topk`` in a Python loop.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_decoding_common import (
    best_of,
    machine,
    pure_python_f1_optimiser,
    single_core,
    timed,
)

single_core()

import numpy as np  # noqa: E402

from costlib.decoding import optimal_topk, optimal_topk_batch, optimal_topk_ragged  # noqa: E402

N_SETS, N_ITEMS = 100_000, 20


def main() -> int:
    print(machine())
    rng = np.random.default_rng(0)
    probs = rng.beta(0.5, 2.0, size=(N_SETS, N_ITEMS))
    ours, ours_cpu = timed(lambda: optimal_topk_batch(probs, "f1"), 3)
    rate = N_SETS / ours_cpu
    status = "meets" if rate >= 50_000 else "MISSES"
    print(f"F1, {N_SETS:,} sets x {N_ITEMS} items: ours optimal_topk_batch {ours:.3f} s wall, "
          f"{ours_cpu:.3f} s CPU = {rate:,.0f} sets/s [target >= 50,000: {status}]")
    sizes = rng.integers(5, 31, size=N_SETS)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    values = rng.beta(0.5, 2.0, size=offsets[-1])
    ragged = best_of(lambda: optimal_topk_ragged(values, offsets, "f1"), 3)
    print(f"F1, {N_SETS:,} ragged sets of 5..30 items: ours optimal_topk_ragged {ragged:.3f} s "
          f"= {N_SETS / ragged:,.0f} sets/s")

    sample = probs[:2_000]
    sorted_rows = [sorted(row, reverse=True) for row in sample.tolist()]
    peer = best_of(lambda: [pure_python_f1_optimiser(r) for r in sorted_rows], 1)
    print(f"peer: pure-Python F1 optimiser per set: {len(sample) / peer:,.0f} sets/s "
          f"({rate / (len(sample) / peer):.0f}x slower than ours)")
    loop = best_of(lambda: [optimal_topk(r, "f1") for r in sample], 1)
    print(f"peer: our single-set optimal_topk in a Python loop: {len(sample) / loop:,.0f} sets/s")
    batch = optimal_topk_batch(sample, "f1")
    peer_k = np.array([pure_python_f1_optimiser(r)[0] for r in sorted_rows])
    print(f"check: same k as the peer on {np.mean(peer_k == batch.k):.1%} of the sample sets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
