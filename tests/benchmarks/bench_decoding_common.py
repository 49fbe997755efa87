"""Shared pieces of the decoding benchmarks: machine line, timing, the pure-Python F1 peer.

Not a benchmark itself. The benchmarks pin BLAS/OpenMP to one thread *before* numpy is
imported (see :func:`single_core`), so every figure is a one-core figure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def single_core() -> None:
    """Pin numpy's BLAS and OpenMP pools to one thread (call before importing numpy)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def machine() -> str:
    """The machine line of :mod:`machine`, plus the BLAS thread pinning of these benchmarks."""
    from machine import describe

    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    return f"machine: {describe()}; BLAS threads={threads}"


def best_of(fn: Callable[[], object], repeat: int = 3) -> float:
    """Smallest wall time of ``repeat`` calls, in seconds."""
    return timed(fn, repeat)[0]


def timed(fn: Callable[[], object], repeat: int = 3) -> tuple[float, float]:
    """Smallest (wall, process CPU) times of ``repeat`` calls, in seconds.

    CPU time is shown next to wall time because on a shared 2-core machine other processes
    inflate wall time; with one BLAS thread the two agree on an idle machine.
    """
    wall = cpu = float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def pure_python_f1_expectations(probabilities: list[float]) -> list[float]:
    """Expected F1 of predicting the top k, k = 0..n: the classic O(n^2) pure-Python optimiser.

    Our own re-implementation of the approach of Ye et al. (2012) as it circulates in Kaggle
    solutions ("F1 optimizer"): plain Python lists and loops over k and the number of positives.

    - ``C[k][a]`` = P(a positives among the top k), built forward;
    - ``S[i][c]`` = E[1 / (c + positives among items i+1..n)], built backward from 1/c;
    - E[F1(k)] = sum_a 2 a C[k][a] S[k][k + a].

    ``probabilities`` must be sorted in decreasing order. E[F1(0)] = P(no positives) (F1 of an
    empty prediction on an empty truth is 1).
    """
    n = len(probabilities)
    c_rows = [[1.0]]
    for k in range(1, n + 1):
        p = probabilities[k - 1]
        prev = c_rows[-1]
        row = [0.0] * (k + 1)
        row[0] = (1.0 - p) * prev[0]
        for a in range(1, k):
            row[a] = p * prev[a - 1] + (1.0 - p) * prev[a]
        row[k] = p * prev[k - 1]
        c_rows.append(row)
    width = 2 * n + 2
    s_next = [0.0] + [1.0 / c for c in range(1, width)]
    expectations = [0.0] * (n + 1)
    for k in range(n, 0, -1):
        row = c_rows[k]
        total = 0.0
        for a in range(1, k + 1):
            total += 2.0 * a * row[a] * s_next[k + a]
        expectations[k] = total
        p = probabilities[k - 1]
        s_prev = [0.0] * width
        for c in range(1, width - 1):
            s_prev[c] = (1.0 - p) * s_next[c] + p * s_next[c + 1]
        s_next = s_prev
    expectations[0] = c_rows[n][0]
    return expectations


def pure_python_f1_optimiser(probabilities: list[float]) -> tuple[int, float]:
    """(k, expected F1 loss) of the best top-k prediction; probabilities sorted decreasingly."""
    expectations = pure_python_f1_expectations(probabilities)
    best = max(range(len(expectations)), key=expectations.__getitem__)
    return best, 1.0 - expectations[best]
