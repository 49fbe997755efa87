"""One run at a time per output directory: the lock file ``OUTPUT/.costlib-lock``.

Two runs writing into one output would race on ``LATEST`` and on the publish guard's baseline
(each compares with the run ``LATEST`` named when it started). A run therefore takes the lock
before it reads any data, and a second run into the same output stops at once with exit 2,
naming the run that holds it. Taking the lock is also the check that the output is writable,
made before any input is read.

- **Local paths**: the lock file is created with ``O_CREAT | O_EXCL`` (atomic). A lock left by
  a process that no longer runs on this host (killed) is taken over; one held by a live
  process, or by another host, is not.
- **Other Beam filesystems** (``gs://`` ...): Beam's filesystem API has no create-if-absent, so
  the lock is check, write, then read back: it refuses every run that starts after another
  run's lock is visible, but two runs starting within the same second can both pass. Schedulers
  must not start overlapping runs (Airflow ``max_active_runs=1``, CronJob
  ``concurrencyPolicy: Forbid``). Independently of the lock, the publish stage holds a run when
  ``LATEST`` moved while it ran (see :mod:`costlib_pipelines.recalibrate.pipeline`), on every
  filesystem.
- **A job submitted to a Flink cluster** is recorded in the lock (:func:`record_job`: the Flink
  REST address, the job name and, once Flink shows it, the Flink job id). The job can outlive
  its submitter, so such a lock is judged by the job (:func:`job_verdict`): while Flink says the
  job has not ended (or cannot be asked), the next run is refused with one line naming the job
  and how to cancel it, even if the submitting process is gone; once it has ended, the lock of
  a process that no longer runs on this host is taken over, and so is the lock of another host
  whose job ended more than :data:`FOREIGN_GRACE` seconds ago (its submitter had time to
  finish), on every filesystem.
- A job launched as a template (``--template_location``) runs after its launcher returned: the
  launcher's lock covers only the launch; the publish stage's ``LATEST`` check covers the job.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from costlib_pipelines import interrupts
from costlib_pipelines.io.files import (
    InputError,
    make_local_directory,
    unwritable_reason,
    write_bytes_atomically,
)
from costlib_pipelines.io.filesystems import FileSystems, is_local

__all__ = [
    "FOREIGN_GRACE",
    "LOCK_NAME",
    "JobVerdict",
    "OutputLock",
    "OutputLocked",
    "break_lock",
    "hold_output",
    "job_verdict",
    "latest_text",
    "read_lock",
    "record_job",
]

LOCK_NAME = ".costlib-lock"
#: Seconds after its Flink job ended that the lock of a run on another host is taken over.
FOREIGN_GRACE = 600.0


class OutputLocked(InputError):
    """Another run holds the output directory (or the output is not writable)."""


@dataclass(frozen=True)
class OutputLock:
    """A held lock: where, and the token that proves it is ours."""

    path: str
    token: str
    local: bool


def _is_local(path: str) -> bool:
    return is_local(path)


def read_lock(output: str) -> dict[str, Any] | None:
    """The holder record of ``OUTPUT``'s lock, or None when it is not locked."""
    path = f"{output.rstrip('/')}/{LOCK_NAME}"
    if not FileSystems.exists(path):
        return None
    try:
        with FileSystems.open(path) as fh:
            return json.loads(fh.read().decode())
    except (OSError, ValueError):
        return {"unreadable": True}


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _describe(holder: dict[str, Any] | None) -> str:
    if not holder or holder.get("unreadable"):
        return "an unreadable lock"
    return (f"run {holder.get('run_id')!r} ({holder.get('command')}, pid {holder.get('pid')} "
            f"on {holder.get('host')}, since {holder.get('started_utc')})")


def _stale_here(holder: dict[str, Any] | None) -> bool:
    """True for a lock of a process of this host that no longer runs."""
    if not holder or holder.get("host") != socket.gethostname():
        return False
    pid = holder.get("pid")
    return isinstance(pid, int) and not _process_alive(pid)


def _job_text(job: dict[str, Any]) -> str:
    jid, name = job.get("flink_job_id"), job.get("job_name")
    return f"{jid} ({name})" if jid and name else str(jid or name)


@dataclass(frozen=True)
class JobVerdict:
    """What Flink says of the job a lock records.

    ``state``: ``"none"`` (the lock records no Flink job), ``"ended"`` (Flink says it ended, or
    does not know it: a job the JobManager forgot runs no more), ``"running"`` (not ended) or
    ``"unchecked"`` (Flink's REST API did not answer). ``refusal``: the one-line error for the
    next run unless the job ended; ``ended_seconds_ago``: since when (infinite: unknown job).
    """

    state: str
    refusal: OutputLocked | None = None
    ended_seconds_ago: float = 0.0


def job_verdict(path: str, holder: dict[str, Any] | None) -> JobVerdict:
    """Ask Flink about the job recorded in the lock at ``path`` (see :class:`JobVerdict`)."""
    from costlib_pipelines import flink_rest

    job = (holder or {}).get("job")
    if not isinstance(job, dict) or not job.get("flink_rest"):
        return JobVerdict("none")
    url, jid, name = str(job["flink_rest"]), job.get("flink_job_id"), job.get("job_name")
    output = path.rsplit("/", 1)[0]
    run_id = str((holder or {}).get("run_id"))
    try:
        if jid:
            details = flink_rest.job_details(url, str(jid))
        else:  # the submitter died before Flink showed the job: the newest of its name
            found = flink_rest.find_job(url, str(name)) if name else None
            details = flink_rest.job_details(url, found["jid"]) if found else None
            jid = found["jid"] if found else None
    except flink_rest.RestError as exc:
        return JobVerdict("unchecked", OutputLocked(
            f"{path}: the output is locked by {_describe(holder)}, whose Flink job "
            f"{_job_text(job)} could not be checked ({exc}); once the job has ended (Flink's "
            f"web UI {url}), remove the lock with: costlib unlock --output "
            f"{shlex.quote(output)} --run-id {shlex.quote(run_id)}"))
    state = (details or {}).get("state")
    if details is None or state in flink_rest.ENDED:
        return JobVerdict("ended", ended_seconds_ago=_ended_seconds_ago(details))
    return JobVerdict("running", OutputLocked(
        f"{path}: the output is locked by {_describe(holder)}, whose Flink job {jid} ({name}) "
        f"is still {state} at {url} and may still publish; wait for it to end, or cancel it "
        f"(curl -X PATCH '{url}/jobs/{jid}?mode=cancel', or flink cancel {jid}): the next run "
        "then takes the lock over"))


def _ended_seconds_ago(details: dict[str, Any] | None) -> float:
    """Seconds since Flink says the job ended (infinite: the cluster does not know it)."""
    end = (details or {}).get("end-time")
    if not isinstance(end, (int, float)) or end <= 0:
        return float("inf")
    return max(0.0, time.time() - end / 1000.0)


def _may_take_over(path: str, holder: dict[str, Any] | None) -> bool:
    """Whether a held lock may be taken over; raises the refusal of a job still running.

    A lock that records a Flink job: only once the job has ended, and then if its process no
    longer runs here, or it is another host's and the job ended :data:`FOREIGN_GRACE` seconds
    ago. A lock without one: only a dead process's of this host, on a local path (as before
    jobs were recorded; the caller passes ``local``).
    """
    verdict = job_verdict(path, holder)
    if verdict.refusal is not None:
        raise verdict.refusal
    if verdict.state != "ended":
        return False
    if (holder or {}).get("host") == socket.gethostname():
        return _stale_here(holder)
    return verdict.ended_seconds_ago >= FOREIGN_GRACE


def _refuse(path: str, holder: dict[str, Any] | None) -> OutputLocked:
    output = path.rsplit("/", 1)[0]
    run_id = (holder or {}).get("run_id")
    if isinstance(run_id, str) and run_id:
        remedy = (f"if that run is no longer active, remove its lock with: costlib unlock "
                  f"--output {shlex.quote(output)} --run-id {shlex.quote(run_id)}")
    else:  # costlib unlock removes only the lock of a named run
        remedy = f"if no run is active, delete {path} (the lock names no run to unlock)"
    return OutputLocked(
        f"{path}: the output is locked by {_describe(holder)}; two runs must not write into "
        f"one output. Wait for it, or, {remedy}"
    )


def _acquire_local(path: str, record: bytes) -> None:
    directory = os.path.dirname(path)
    make_local_directory(directory, OutputLocked)
    for _ in range(2):  # a second try after taking over a stale lock
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = read_lock(directory)
            recorded = isinstance((holder or {}).get("job"), dict)
            if not (_may_take_over(path, holder) if recorded else _stale_here(holder)):
                raise _refuse(path, holder) from None
            try:  # rename, not delete: of two runs taking over, only one succeeds
                os.rename(path, f"{path}.stale-{uuid.uuid4().hex[:8]}")
            except FileNotFoundError:
                pass
            continue
        except OSError as exc:
            raise OutputLocked(f"{directory}: cannot write the output "
                               f"({unwritable_reason(exc)})") from exc
        with os.fdopen(fd, "wb") as fh:
            fh.write(record)
        return
    raise _refuse(path, read_lock(directory))


def _acquire_remote(path: str, record: bytes, token: str) -> None:
    output = path.rsplit("/", 1)[0]
    if FileSystems.exists(path):
        holder = read_lock(output)
        if not isinstance((holder or {}).get("job"), dict) or not _may_take_over(path, holder):
            raise _refuse(path, holder)
        FileSystems.delete([path])  # its job ended: taken over (check-write-readback below)
    try:
        write_bytes_atomically(path, record)
    except Exception as exc:
        raise OutputLocked(f"{output}: cannot write the output ({exc})") from exc
    holder = read_lock(output)
    if not holder or holder.get("token") != token:
        raise _refuse(path, holder)


def acquire(output: str, *, run_id: str, command: str) -> OutputLock:
    """Take ``OUTPUT``'s lock for a run; :class:`OutputLocked` if held or not writable."""
    path = f"{output.rstrip('/')}/{LOCK_NAME}"
    token = uuid.uuid4().hex
    record = json.dumps({
        "run_id": run_id, "command": command, "host": socket.gethostname(),
        "pid": os.getpid(), "started_utc": dt.datetime.now(dt.UTC).isoformat(),
        "token": token,
    }).encode()
    local = _is_local(path)
    if local:
        _acquire_local(path, record)
    else:
        _acquire_remote(path, record, token)
    return OutputLock(path=path, token=token, local=local)


def release(lock: OutputLock) -> None:
    """Remove the lock file if it still holds our token (never someone else's lock)."""
    holder = read_lock(lock.path.rsplit("/", 1)[0])
    if holder and holder.get("token") == lock.token:
        FileSystems.delete([lock.path])


def record_job(lock: OutputLock, job: dict[str, Any]) -> None:
    """Add the remote job a run submitted to its lock (``job``: ``runner``, ``flink_rest``,
    ``job_name`` and, once known, ``flink_job_id``); the record is replaced atomically, and
    only while the lock is still ours."""
    output = lock.path.rsplit("/", 1)[0]
    holder = read_lock(output)
    if not holder or holder.get("token") != lock.token:
        return
    holder["job"] = dict(job)
    record = json.dumps(holder).encode()
    if lock.local:
        temporary = f"{lock.path}.{uuid.uuid4().hex[:8]}.tmp"
        with open(temporary, "wb") as fh:
            fh.write(record)
        os.replace(temporary, lock.path)
    else:
        write_bytes_atomically(lock.path, record)


def break_lock(output: str, run_id: str) -> dict[str, Any] | None:
    """Remove a lock its run left behind (e.g. a driver killed with its worker machine).

    Only the lock of the run named ``run_id`` is removed, never one whose process still runs
    on this host, and never one whose recorded Flink job Flink says is still running; returns
    the removed holder record (None: the output was not locked).

    Raises
    ------
    OutputLocked
        The lock belongs to another run, to a live process of this host, or to a run whose
        Flink job has not ended.
    """
    path = f"{output.rstrip('/')}/{LOCK_NAME}"
    holder = read_lock(output)
    if holder is None:
        return None
    if holder.get("run_id") != run_id:
        raise OutputLocked(f"{path} is held by {_describe(holder)}, not by run {run_id!r}; "
                           "nothing removed")
    pid = holder.get("pid")
    if holder.get("host") == socket.gethostname() and isinstance(pid, int) and (
            _process_alive(pid)):
        raise OutputLocked(f"{path}: run {run_id!r} is still running (pid {pid} on this host); "
                           "nothing removed")
    verdict = job_verdict(path, holder)
    if verdict.state == "running":  # unchecked: the operator checked it, as the message asks
        raise OutputLocked(f"{verdict.refusal}; nothing removed")
    FileSystems.delete([path])
    return holder


@contextmanager
def hold_output(output: str, *, run_id: str, command: str) -> Iterator[OutputLock]:
    """Hold ``OUTPUT``'s lock for the duration of a ``with`` block.

    A local output directory the lock created (with any missing parents) is removed again
    when the block fails and leaves it empty: a run refused for a misspelt column leaves no
    empty directory behind. Only empty directories are removed (``os.rmdir``), deepest first.
    """
    created = _missing_directories(output)
    lock = acquire(output, run_id=run_id, command=command)
    try:
        interrupts.output_held(output, run_id, latest_text, read_lock)  # what a message checks
        yield lock
    except BaseException:
        release(lock)
        _remove_if_empty(created)
        raise
    else:
        release(lock)


def _missing_directories(output: str) -> list[str]:
    """The local directories, deepest first, that creating ``output`` would make."""
    if not _is_local(output):
        return []
    missing = []
    path = os.path.abspath(output)
    while not os.path.exists(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def _remove_if_empty(directories: list[str]) -> None:
    for directory in directories:
        try:
            os.rmdir(directory)
        except OSError:  # not empty (the run wrote something), or gone: keep the rest
            return


def latest_text(output: str) -> str | None:
    """What ``OUTPUT/LATEST`` holds, stripped (None: no such file)."""
    path = f"{output}/LATEST"
    if not FileSystems.exists(path):
        return None
    with FileSystems.open(path) as fh:
        return fh.read().decode(errors="replace").strip()
