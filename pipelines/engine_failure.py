"""A job that failed on its engine (Flink): one line on the terminal, the details in a file.

When a run's job fails on the cluster — a TaskManager lost for good, no slot within the slot
timeout, a JVM out of memory — neither the input nor costlib is at fault, and Beam's traceback
(thirty lines of Java ending ``RuntimeError: Pipeline BeamApp-... failed in state FAILED``)
tells an operator neither what happened nor what to do. :func:`costlib_pipelines.runner.
run_to_end` raises :class:`EngineFailed` instead, and the command line's edge
(:func:`costlib_pipelines.commands.cli.main`) prints :func:`report`'s line and exits with
:data:`~costlib_pipelines.commands.exit_codes.ENGINE_FAILED` (4). The line names

- the Flink job (its id and name) and Flink's root cause (REST ``/jobs/<id>/exceptions``);
- what was left: whether anything was published (``LATEST`` of each output the run locked,
  compared with what it named when the run took the lock) and whether the lock was released;
- what to check: the cluster's processes (``tools/flink_cluster.py status`` for the local
  cluster), the TaskManager log and the job's exceptions in Flink's web UI;
- that re-running is safe, and the file holding the full traceback and Beam's job messages
  (``failure.log`` in the run's directory; a temporary file when that cannot be written).

A job whose failure is a Python error in costlib's code (a traceback from the SDK workers) is
not an engine failure: it stays a bug (exit 1, traceback) or, for costlib's input errors, exit 2.
"""

from __future__ import annotations

import os
import re
import tempfile
import traceback
from dataclasses import dataclass, field
from urllib.parse import urlparse

from costlib_pipelines import interrupts

__all__ = ["LOG_NAME", "EngineFailed", "engine_error", "report", "write_log"]

#: The file in the run directory that receives a failed job's traceback.
LOG_NAME = "failure.log"

#: Beam's text for a job that ended in a state other than DONE.
_BEAM_FAILED = re.compile(r"Pipeline (\S+) failed in state (\w+): ?(.*)", re.DOTALL)


@dataclass
class EngineFailed(RuntimeError):
    """The run's job failed on its engine (not costlib's input, not a Python error in it).

    Attributes hold what the message names; ``details`` (Beam's job messages, the Flink
    stack trace) and the exception's ``__cause__`` go to the failure log.
    """

    runner: str
    job_name: str | None = None
    flink_job_id: str | None = None
    beam_job_id: str | None = None
    state: str = "FAILED"
    root_cause: str | None = None
    rest_url: str | None = None
    log_dir: str | None = None
    details: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.summary())

    def summary(self) -> str:
        """Which job failed and why, in a clause."""
        if self.flink_job_id:
            job = f"Flink job {self.flink_job_id}" + (f" ({self.job_name})" if self.job_name
                                                      else "")
        else:
            job = f"job {self.beam_job_id or self.job_name or '(no id)'} on {self.runner}"
        cause = self.root_cause or "no root cause was reported"
        source = "Flink's root cause" if self.flink_job_id and self.root_cause else "cause"
        return f"{job} ended {self.state}; {source}: {cause}"


def engine_error(exc: BaseException) -> tuple[str, str, str] | None:
    """``(Beam job id, state, cause)`` when ``exc`` is Beam's report of a job that ended in a
    state other than DONE with no Python traceback in it (a Python error in the workers is
    costlib's, or its input's); None otherwise."""
    text = str(exc)
    if "Traceback (most recent call last)" in text:
        return None
    found = _BEAM_FAILED.search(text)
    if found is None:
        return None
    job, state, cause = found.groups()
    first = next((line.strip() for line in cause.splitlines() if line.strip()), "")
    return job, state, first


def write_log(exc: EngineFailed) -> str:
    """Write the full traceback and the job's details; returns where (the run directory's
    :data:`LOG_NAME`, else a temporary file)."""
    text = "".join(traceback.format_exception(exc))
    if exc.details:
        text += "\nJob messages and Flink's exceptions:\n" + "\n".join(exc.details) + "\n"
    if exc.log_dir:
        path = f"{exc.log_dir.rstrip('/')}/{LOG_NAME}"
        try:
            from apache_beam.io.filesystems import FileSystems  # a job ran: Beam is loaded

            with FileSystems.create(path) as fh:
                fh.write(text.encode())
            return path
        except Exception:  # an unwritable run directory: the temporary file below
            pass
    fd, path = tempfile.mkstemp(prefix="costlib-failure-", suffix=".log")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return path


def _left() -> str:
    """What the failed run left: publication and locks, as read now."""
    moved = interrupts.moved_outputs()
    parts = [("published before the job failed: " + "; ".join(moved)) if moved
             else "nothing was published"]
    for held in interrupts.held_outputs():
        try:
            holder = held.holder(held.output)
        except Exception:
            parts.append(f"the lock of {held.output} could not be read")
            continue
        mine = holder is not None and holder.get("pid") == os.getpid()
        parts.append(f"the lock of {held.output} was {'NOT released' if mine else 'released'}")
    return ", ".join(parts)


def _checks(exc: EngineFailed) -> str:
    """What an operator checks next."""
    if not exc.rest_url:
        return ("check the engine's workers and their logs (on Flink, the TaskManagers; give "
                "--flink_master=HOST:PORT to have Flink's job id and root cause named here)")
    url = urlparse(exc.rest_url)
    jid = exc.flink_job_id
    web = f"{exc.rest_url}/#/job/completed/{jid}/exceptions" if jid else exc.rest_url
    text = f"check the job's exceptions at {web} and the TaskManagers"
    if url.hostname in ("localhost", "127.0.0.1", "::1"):
        port = url.port or 8081
        flag = "" if port == 8081 else f" --port-base {port}"
        text += (f" (local cluster: tools/flink_cluster.py status{flag}; TaskManager logs "
                 f"~/.cache/costlib/flink/cluster-{port}/log/taskmanager-*.out, or --state-dir's "
                 "log/)")
    else:
        text += " and their logs (Flink's web UI, Task Managers; on Kubernetes: kubectl logs)"
    return text


def report(exc: EngineFailed, command: str) -> str:
    """The one line for a failed engine job (see the module docstring); writes the log."""
    log = write_log(exc)
    return (f"{command}: {exc.summary()}; {_left()}; {_checks(exc)}; re-running is safe once "
            f"the cluster is healthy; full traceback in {log}")
