"""The one exit-code contract of every ``costlib`` command.

====  ============================================================================
code  meaning
====  ============================================================================
0     done (for ``recalibrate``: complete and published)
2     bad input, config or command line: one line on stderr, no traceback; nothing
      was published (fix the input, do not retry unchanged)
3     needs a person: the run is complete but the publish guard held it
      (``recalibrate``), or ``status`` found a held or stale ``LATEST`` or a
      ``--follow`` job that does not run
1     a bug in costlib: a traceback on stderr; safe to retry, report it if it repeats
4     the engine failed: the run's job failed on its cluster (Flink: a TaskManager
      lost, no slot, a JVM out of memory), neither costlib's input nor its code at
      fault; one line on stderr naming the job, the engine's root cause, what was
      left and what to check (:mod:`costlib_pipelines.engine_failure`); nothing was
      published; re-run once the cluster is healthy
130   interrupted by SIGINT (143: SIGTERM): one line on stderr
      (:mod:`costlib_pipelines.interrupts`)
====  ============================================================================

Why a code of its own for a failed engine job: 1 tells the on-call person "a bug: report it",
2 "fix the input, a retry fails again"; a job that failed on its cluster needs neither, but a
look at the cluster, after which the same command succeeds. Schedulers retry it as they retry
1 (the Airflow DAGs and the CronJob treat only 2 and 3 as final).

Errors raised inside a Beam pipeline reach the launcher in two forms: the in-process
FnApiRunner re-raises the DoFn's exception (same type, message augmented with the step name);
runners with worker processes (``multi_processing``, portable, Flink, Dataflow) raise a
``RuntimeError`` whose text is the worker's traceback. :func:`classify` recognises costlib's
input errors in both forms, so a bad row group is exit 2 on every runner.
"""

from __future__ import annotations

import re

from costlib_pipelines.worker_errors import remote_user_error

__all__ = ["BAD_INPUT", "BUG", "ENGINE_FAILED", "HELD", "OK", "classify", "one_line",
           "user_error_types"]

OK = 0
BUG = 1
BAD_INPUT = 2
HELD = 3
#: Not 1: an operator's next step differs (the cluster, not a bug report), and not 2: the
#: same command succeeds once the cluster is healthy.
ENGINE_FAILED = 4

#: Fully qualified names of the user-error classes, as they appear in a worker's traceback.
def user_error_types() -> tuple[type[BaseException], ...]:
    """Exception classes that mean bad input, config or command line (exit 2)."""
    from costlib_pipelines.config import ConfigError
    from costlib_pipelines.flags import UsageError
    from costlib_pipelines.io.files import InputError
    from costlib_pipelines.io.schema import SchemaError

    return (ConfigError, SchemaError, InputError, UsageError)


#: The suffix Beam appends to an error raised in a step (the step name means nothing to users).
_STEP_SUFFIX = re.compile(r"\s*\[while running '[^\]]*'\]\s*$")
#: A line that only points at a column of the line above (``^``, as in parser errors).
_POINTER_LINE = re.compile(r"^\s*[\^~]+\s*$")


def one_line(message: str) -> str:
    """A message on one line: Beam's step suffix dropped, blanks folded, pointer lines (``^``)
    dropped, line breaks ``; `` (a space after a line that ends with ``:``, which introduces
    the lines after it)."""
    message = _STEP_SUFFIX.sub("", str(message))
    text = ""
    for line in message.splitlines():
        part = " ".join(line.split())
        if not part or _POINTER_LINE.match(part):
            continue
        text = f"{text}{' ' if text.endswith(':') else '; '}{part}" if text else part
    return text


def classify(exc: BaseException) -> tuple[int, str] | None:
    """``(exit code, one-line message)`` for an expected failure; None for a bug.

    Parameters
    ----------
    exc : BaseException
        What the command raised.
    """
    from costlib_pipelines.recalibrate.publish import PublishRefused

    if isinstance(exc, PublishRefused):
        return HELD, str(exc)
    if isinstance(exc, user_error_types()):
        return BAD_INPUT, one_line(str(exc))
    if isinstance(exc, RuntimeError):  # a worker's traceback as text
        found = remote_user_error(str(exc))
        if found is not None:
            return BAD_INPUT, one_line(found)
    return None
