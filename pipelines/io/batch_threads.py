"""The batches of one element on every core: work in a thread pool, results in input order.

A DoFn that reads, validates and histograms the row groups of a file range spends most of its
time in Arrow and numpy calls that release the GIL, so a few threads keep both cores of a small
machine busy where Beam's in-process runner uses one. :func:`in_order` runs ``work`` on the
items in threads, at most ``2 * threads`` items ahead of the consumer (memory stays a few
batches), and yields each result in the order of the items: whatever the number of threads,
the caller sees the same sequence as a plain loop. Beam metrics and outputs must be produced by
the DoFn's own thread, so ``work`` returns them and the caller reports and yields them.

The threads are one pool per process and size, made on first use and kept: an element does not
pay for starting threads and joining them, and the bundles a worker runs at once share the
cores instead of each starting its own threads. A forked child starts with no pool (its
parent's threads do not exist in it).
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

__all__ = ["batch_threads", "in_order"]

_T = TypeVar("_T")
_R = TypeVar("_R")


def batch_threads() -> int:
    """Threads per element: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return max(1, os.cpu_count() or 1)


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
    """A forked child has none of its parent's threads: it makes its own pools."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_after_fork)


def _pool(threads: int) -> ThreadPoolExecutor:
    """This process's pool of ``threads`` threads (made once)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = _POOLS[threads] = ThreadPoolExecutor(
                max_workers=threads, thread_name_prefix="costlib-batch")
        return pool


def in_order(work: Callable[[_T], _R], items: Iterable[_T], threads: int) -> Iterator[_R]:
    """``work(item)`` for every item, computed on ``threads`` threads, yielded in item order.

    With ``threads <= 1`` this is a plain loop. Items are drawn from ``items`` in the calling
    thread (a file reader needs no locking); an exception in ``work`` propagates when its
    result is reached, after the results before it.
    """
    if threads <= 1:
        for item in items:
            yield work(item)
        return
    pool = _pool(threads)
    pending: deque[Future[_R]] = deque()
    try:
        for item in items:
            pending.append(pool.submit(work, item))
            if len(pending) >= 2 * threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:  # the consumer stopped early, or work failed: drop what has not started
        for future in pending:
            future.cancel()
        for future in pending:  # and let what has started finish before returning
            if not future.cancelled():
                future.exception()
