"""Ctrl-C (SIGINT) and SIGTERM during a ``costlib`` command: exit 130 or 143 with one line.

The console script (:func:`costlib_pipelines.commands.cli.console_main`) installs
:func:`install`'s handler for both signals. The first signal raises :class:`Interrupted` (a
``KeyboardInterrupt``) wherever the main thread is, and records which signal came. Whatever
exception then reaches the command line's edge — the ``Interrupted`` itself, or what a runner
made of it (Beam's in-process runner re-raises a ``KeyboardInterrupt`` from a step as
``RuntimeError: KeyboardInterrupt [while running 'Optimize']``), or an error of a cleanup the
interrupt cut short — the record decides: the command exits with ``128 + signal`` and
:func:`message`'s one line, which says

- what was interrupted: the command and its phase (the last :func:`doing` line, which the
  commands' progress reporter sets);
- whether anything was published: each output a run of this process locked
  (:func:`output_held`) is checked for a ``LATEST`` that moved since the run took the lock;
- for a job on a remote runner (Flink, Dataflow, a portable job server): that it was
  cancelled, or that it may still be running and how to cancel it (:func:`job_outcome`, which
  :func:`costlib_pipelines.runner.run_to_end` records);
- that re-running is safe: a re-run with the same run id replaces the incomplete run
  directory, and the lock of a process that no longer runs is taken over.

A second signal while the first one's cleanup runs (e.g. cancelling a remote job that does not
answer) ends the process at once, with the same line.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

__all__ = [
    "Interrupted",
    "doing",
    "exit_code",
    "held_outputs",
    "install",
    "job_outcome",
    "job_submitted",
    "message",
    "moved_outputs",
    "output_held",
    "received",
    "reset",
]


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by the first SIGINT or SIGTERM (a ``KeyboardInterrupt``, so
    code that treats Ctrl-C specially treats SIGTERM the same way)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass(frozen=True)
class HeldOutput:
    """An output whose lock a run of this process took, with how to read its state again
    (given by the lock, :func:`costlib_pipelines.io.lock.hold_output`: this module reads no
    files of its own)."""

    output: str
    run_id: str
    #: what ``LATEST`` named when the run took the lock (None: absent)
    latest_before: str | None
    #: ``OUTPUT`` -> what ``LATEST`` names now (None: absent)
    latest: Callable[[str], str | None]
    #: ``OUTPUT`` -> the lock's holder record now (None: no lock)
    holder: Callable[[str], dict[str, Any] | None]


@dataclass
class _State:
    signum: int | None = None
    command: str = "costlib"
    phase: str | None = None
    #: the outputs whose lock a run of this process took
    outputs: list[HeldOutput] = field(default_factory=list)
    #: the remote job of the command: runner name and job id (None: not submitted)
    job: tuple[str, str | None] | None = None
    #: what became of the remote job after the interrupt (a clause of the message)
    job_outcome: str | None = None
    job_ended: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


_state = _State()


def reset(command: str = "costlib") -> None:
    """Forget every record (a new command starts; tests)."""
    global _state
    _state = _State(command=command)


def received() -> int | None:
    """The first signal this process received (``signal.SIGINT``/``SIGTERM``), or None."""
    return _state.signum


def exit_code() -> int:
    """``128 + signal``: 130 for SIGINT, 143 for SIGTERM (0 when none came)."""
    return 128 + _state.signum if _state.signum is not None else 0


def doing(phase: str) -> None:
    """Record what the command is doing now (named by the message if it is interrupted)."""
    _state.phase = phase


def output_held(output: str, run_id: str, latest: Callable[[str], str | None],
                holder: Callable[[str], dict[str, Any] | None]) -> None:
    """Record that a run of this process took ``output``'s lock, with what ``OUTPUT/LATEST``
    holds now (``latest(output)``: its text, None when absent; ``holder(output)``: the lock's
    record; the caller reads files, this module does not): if ``LATEST`` holds something else
    when an interrupt is reported, the run published before the interrupt took effect."""
    output = output.rstrip("/")
    _state.outputs.append(HeldOutput(output, run_id, latest(output), latest, holder))
    if _state.phase is None:
        _state.phase = f"preparing run {run_id} in {output}"


def job_submitted(runner: str, job_id: str | None) -> None:
    """Record the remote job the command submitted (``job_id`` None: not known yet)."""
    _state.job = (runner, job_id)


def job_outcome(text: str, *, ended: bool) -> None:
    """Record what became of the remote job after the interrupt (e.g. ``its Flink job X was
    cancelled``; ``ended``: it is known to run no more); the message carries it."""
    _state.job_outcome = text
    _state.job_ended = ended


def _handler(signum: int, _frame: FrameType | None) -> None:
    with _state.lock:
        first = _state.signum is None
        if first:
            _state.signum = signum
    if first:
        raise Interrupted(signum)
    # A second signal: the first one's cleanup is still running; stop at once.
    print(message(again=True), file=sys.stderr, flush=True)
    os._exit(exit_code())


def install() -> dict[int, Any]:
    """Handle SIGINT and SIGTERM as described above; returns the handlers it replaced.

    Also, once a signal came, an exception that ends a thread (a runner's gRPC reader whose
    channel the interrupt closed) is not printed: it is a consequence of the interrupt, which
    the one line reports.
    """
    previous = {}
    for signum in (signal.SIGINT, signal.SIGTERM):
        previous[signum] = signal.signal(signum, _handler)
    original = threading.excepthook

    def excepthook(args: threading.ExceptHookArgs) -> None:
        if _state.signum is None:
            original(args)

    threading.excepthook = excepthook
    return previous


def held_outputs() -> list[HeldOutput]:
    """The outputs whose lock a run of this process took (:func:`output_held`)."""
    return list(_state.outputs)


def moved_outputs() -> list[str]:
    """``OUTPUT/LATEST names X (was Y)`` for each output whose ``LATEST`` moved since a run of
    this process took its lock (read now); an unreadable ``LATEST`` is named as such."""
    moved = []
    for held in _state.outputs:
        try:
            now = held.latest(held.output)
        except Exception:  # unreadable: say so rather than guess
            moved.append(f"{held.output}/LATEST could not be read to check what was published")
            continue
        if now != held.latest_before:
            moved.append(f"{held.output}/LATEST names {now} "
                         f"(was {held.latest_before or 'absent'})")
    return moved


def _publication() -> str:
    """Whether a run of this process moved an output's ``LATEST`` (read now)."""
    moved = moved_outputs()
    unreadable = [m for m in moved if m.endswith("could not be read to check what was published")]
    if unreadable:
        return unreadable[0]
    if moved:
        return "published before the interrupt took effect: " + "; ".join(moved)
    if _state.job is not None and not _state.job_ended:
        return "nothing was published yet"
    return "nothing was published"


def message(*, again: bool = False) -> str:
    """The one line an interrupted command prints (see the module docstring)."""
    name = signal.Signals(_state.signum).name if _state.signum is not None else "signal"
    what = f"{_state.command}: interrupted ({name}"
    what += ", again: exiting without waiting for cleanup)" if again else ")"
    if _state.phase:
        what += f" while {_state.phase}"
    parts = [what, _publication()]
    if _state.job is not None:
        parts.append(_state.job_outcome or _job_unknown(*_state.job))
    parts.append("re-running is safe" if _state.job is None or _state.job_ended
                 else "re-running is safe once that job has ended")
    return "; ".join(parts)


def _job_unknown(runner: str, job_id: str | None) -> str:
    job = f"job {job_id}" if job_id else "a job"
    return (f"{job} on {runner} may still be running and may still publish: cancel it with "
            "the runner's own tools")

