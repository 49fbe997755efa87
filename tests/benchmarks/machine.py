"""One line describing the machine a benchmark ran on (printed with every figure), and the
smallest wall time of repeated calls."""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable

import numpy as np


def describe() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = f"{os.getloadavg()[0]:.2f}"
    except OSError:
        load = "n/a"
    return (
        f"{cpu}; {os.cpu_count()} cores; Python {platform.python_version()}; "
        f"numpy {np.__version__}; {platform.system()} {platform.release()}; "
        f"1-min load average {load} (other work on the machine skews wall times)"
    )


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Smallest wall time of ``repeat`` calls of ``fn``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)
