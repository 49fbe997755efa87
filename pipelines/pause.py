"""Pause points: where a test holds a command still, to signal it at a known step.

``COSTLIB_PAUSE_AT=NAME=MARKER`` in a command's environment makes :func:`pause_point` ``NAME``
write ``MARKER`` (the process id) and sleep until a signal ends the sleep (at most
:data:`LIMIT` seconds, then the command goes on). The interrupt tests use it to send SIGINT or
SIGTERM while the lock is held, inside a pipeline step, or just before a run is published,
without depending on timing. Without the variable a pause point is one dictionary lookup.
"""

from __future__ import annotations

import os
import time

__all__ = ["ENV", "LIMIT", "pause_point"]

ENV = "COSTLIB_PAUSE_AT"
#: Longest pause (seconds): a forgotten variable delays a command, never hangs it.
LIMIT = 60.0


def pause_point(name: str) -> None:
    """Pause here if ``COSTLIB_PAUSE_AT`` names ``name`` (see the module docstring)."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    point, _, marker = spec.partition("=")
    if point != name or not marker:
        return
    with open(marker, "w") as fh:
        fh.write(str(os.getpid()))
    deadline = time.monotonic() + LIMIT
    while time.monotonic() < deadline:
        time.sleep(0.05)
