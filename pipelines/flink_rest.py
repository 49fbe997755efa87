"""What costlib asks Flink's REST API about its jobs (stdlib ``urllib``; no Flink client).

A Flink job submitted through Beam (``FlinkRunner``, or ``PortableRunner`` to a Flink job
server) is named ``--job_name`` on the cluster (:func:`costlib_pipelines.runner.job_name_flags`
gives every costlib job ``costlib-<command>-<run id>``), and its Flink job id is not the id Beam
returns. With the REST address (``--flink_master=HOST:PORT``) costlib finds the job by its name
(``GET /jobs/overview``), asks its state (``GET /jobs/<id>``) and the root cause of a failure
(``GET /jobs/<id>/exceptions``), and cancels it (``PATCH /jobs/<id>?mode=cancel``). To upgrade
a streaming job it stops the job with a savepoint (``POST /jobs/<id>/stop``, then ``GET
/jobs/<id>/savepoints/<trigger id>`` until it completes) and asks a new job which savepoint it
was restored from (``GET /jobs/<id>/checkpoints``).

Flink's answer is trusted over Beam's job server, whose job state can lag behind it (it said
RUNNING after Flink said FAILED).
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ENDED", "RestError", "SavepointFailed", "cancel", "checkpoints", "describe_trace",
           "exceptions_text", "failures", "find_job", "job_details", "job_state", "jobs",
           "rest_url", "restarts", "restored_from", "root_cause", "running_job",
           "stop_with_savepoint"]

#: Flink job states after which the job runs no more (globally terminal).
ENDED = ("FINISHED", "FAILED", "CANCELED")
#: Seconds one REST request may take (a JobManager busy with a lost TaskManager is slow).
TIMEOUT = 10.0
#: Longest root cause quoted in a message (characters).
ROOT_CAUSE_CHARS = 300


class RestError(OSError):
    """Flink's REST API did not answer, or answered something unexpected."""


def rest_url(options: Mapping[str, Any]) -> str | None:
    """``http://HOST:PORT`` from a ``flink_master`` option; None without one (or ``[auto]``)."""
    master = str(options.get("flink_master") or "").strip()
    if not master or master.startswith("["):
        return None
    url = master if re.match(r"^https?://", master) else f"http://{master}"
    return url.rstrip("/")


def _get(url: str, timeout: float = TIMEOUT) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise RestError(f"{url}: HTTP {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise RestError(f"{url}: {exc}") from exc


def jobs(url: str, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
    """Every job the JobManager knows (``jid``, ``name``, ``state``, ``start-time`` ...)."""
    answer = _get(f"{url}/jobs/overview", timeout)
    if not isinstance(answer, dict) or not isinstance(answer.get("jobs"), list):
        raise RestError(f"{url}/jobs/overview: no job list in the answer")
    return list(answer["jobs"])


def find_job(url: str, name: str, exclude: Iterable[str] = (),
             timeout: float = TIMEOUT) -> dict[str, Any] | None:
    """The newest job named ``name`` whose id is not in ``exclude`` (the jobs of that name that
    existed before this run submitted its own), or None."""
    skip = set(exclude)
    named = [j for j in jobs(url, timeout) if j.get("name") == name and j.get("jid") not in skip]
    return max(named, key=lambda j: j.get("start-time") or 0, default=None)


def running_job(url: str, name: str) -> dict[str, Any] | None:
    """The newest job named ``name`` that has not ended, or None."""
    named = [j for j in jobs(url) if j.get("name") == name and j.get("state") not in ENDED]
    return max(named, key=lambda j: j.get("start-time") or 0, default=None)


def job_details(url: str, jid: str, timeout: float = TIMEOUT) -> dict[str, Any] | None:
    """``GET /jobs/<jid>``: the job's ``state``, ``start-time``, ``end-time`` (ms since the
    epoch, -1 while it runs), ``vertices`` (each with its subtasks per state, ``tasks``) ...;
    None: the cluster does not know the job (it never ran there, or the JobManager restarted
    without it)."""
    answer = _get(f"{url}/jobs/{jid}", timeout)
    if answer is None:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get("state"), str):
        raise RestError(f"{url}/jobs/{jid}: no state in the answer")
    return answer


def job_state(url: str, jid: str) -> str | None:
    """Flink's state of job ``jid`` (``RUNNING``, ``FAILED`` ...); None: unknown job."""
    details = job_details(url, jid)
    return None if details is None else str(details["state"])


def cancel(url: str, jid: str) -> None:
    """Ask Flink to cancel job ``jid`` (it answers at once; the job ends soon after)."""
    request = urllib.request.Request(f"{url}/jobs/{jid}?mode=cancel", method="PATCH")
    try:
        urllib.request.urlopen(request, timeout=TIMEOUT).close()
    except OSError as exc:
        raise RestError(f"{url}/jobs/{jid}?mode=cancel: {exc}") from exc


def restarts(url: str, jid: str, timeout: float = TIMEOUT) -> int | None:
    """How many times job ``jid`` restarted (the job metric ``numRestarts``, counted from
    its submission); None when the JobManager does not report it."""
    answer = _get(f"{url}/jobs/{jid}/metrics?get=numRestarts", timeout)
    for metric in answer if isinstance(answer, list) else []:
        if isinstance(metric, dict) and metric.get("id") == "numRestarts":
            try:
                return int(float(metric["value"]))
            except (KeyError, TypeError, ValueError):
                return None
    return None


def checkpoints(url: str, jid: str, timeout: float = TIMEOUT) -> dict[str, Any]:
    """``GET /jobs/<jid>/checkpoints``: ``counts`` (``completed``, ``failed`` ...) and
    ``latest`` (``completed``: the last completed checkpoint, with ``latest_ack_timestamp``
    in ms since the epoch; None before the first); empty for a job without checkpoints."""
    answer = _get(f"{url}/jobs/{jid}/checkpoints", timeout)
    return answer if isinstance(answer, dict) else {}


def failures(url: str, jid: str, timeout: float = TIMEOUT) -> list[dict[str, Any]]:
    """Job ``jid``'s exception history (``GET /jobs/<jid>/exceptions``), newest first: each
    failure's ``timestamp`` (ms since the epoch) and ``stacktrace``. Flink keeps the last few
    (``web.exception-history-size``, default 16); a job failed before its tasks ran has only
    a ``root-exception``, returned as the one entry."""
    answer = _get(f"{url}/jobs/{jid}/exceptions", timeout)
    if not isinstance(answer, dict):
        return []
    entries = [e for e in (answer.get("exceptionHistory") or {}).get("entries") or []
               if isinstance(e, dict)]
    if not entries and isinstance(answer.get("root-exception"), str):
        entries = [{"timestamp": answer.get("timestamp"),
                    "stacktrace": answer["root-exception"]}]
    return sorted(entries, key=lambda e: -(e.get("timestamp") or 0))


class SavepointFailed(RuntimeError):
    """Flink did not complete a stop-with-savepoint (``cause``: Flink's reason, one line)."""

    def __init__(self, jid: str, cause: str):
        super().__init__(f"Flink could not stop job {jid} with a savepoint: {cause}")
        self.jid, self.cause = jid, cause


def _post(url: str, body: Mapping[str, Any]) -> Any:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:ROOT_CAUSE_CHARS]
        raise RestError(f"{url}: HTTP {exc.code} {detail}") from exc
    except (OSError, ValueError) as exc:
        raise RestError(f"{url}: {exc}") from exc


def stop_with_savepoint(url: str, jid: str, target: str | None, *, timeout: float = 300.0,
                        poll: float = 0.5) -> str:
    """Stop job ``jid`` with a savepoint in directory ``target`` (a URI; None: the cluster's
    ``state.savepoints.dir``) and return the savepoint's location once Flink has written it.

    ``POST /jobs/<jid>/stop`` (no drain: event time does not jump to the end of time, so the
    state stays as it is) answers with a trigger id; ``GET /jobs/<jid>/savepoints/<id>`` says
    ``IN_PROGRESS`` until the savepoint is written and the job FINISHED, then ``COMPLETED``
    with its ``location`` or its ``failure-cause``. When the savepoint fails, Flink keeps the
    job running.

    Raises
    ------
    SavepointFailed
        Flink reported a failure, or gave no answer within ``timeout`` seconds.
    RestError
        The REST API did not answer the trigger.
    """
    body: dict[str, Any] = {"drain": False}
    if target is not None:
        body["targetDirectory"] = target
    answer = _post(f"{url}/jobs/{jid}/stop", body)
    trigger = answer.get("request-id") if isinstance(answer, dict) else None
    if not trigger:
        raise SavepointFailed(jid, f"no trigger id in Flink's answer {answer!r}")
    deadline = time.monotonic() + timeout
    while True:
        try:
            status = _get(f"{url}/jobs/{jid}/savepoints/{trigger}") or {}
        except RestError:  # a JobManager busy writing the savepoint: ask again
            status = {}
        if (status.get("status") or {}).get("id") == "COMPLETED":
            operation = status.get("operation") or {}
            if operation.get("location"):
                return str(operation["location"])
            failure = operation.get("failure-cause") or {}
            trace = failure.get("stack-trace") or failure.get("class") or str(operation)
            raise SavepointFailed(jid, describe_trace(str(trace)))
        if time.monotonic() >= deadline:
            raise SavepointFailed(jid, f"no savepoint after {timeout:g} s (trigger {trigger})")
        time.sleep(poll)


def restored_from(url: str, jid: str) -> str | None:
    """The savepoint or checkpoint job ``jid`` restored its state from
    (``GET /jobs/<jid>/checkpoints``: ``latest.restored.external_path``); None while it has
    restored nothing (a job starts, then restores, then runs)."""
    restored = (checkpoints(url, jid).get("latest") or {}).get("restored")
    if not isinstance(restored, dict) or not restored.get("external_path"):
        return None
    return str(restored["external_path"])


def root_cause(url: str, jid: str) -> str | None:
    """Flink's root cause of job ``jid``'s last failure, on one line; None when it has none.

    From ``GET /jobs/<id>/exceptions``: the newest entry of the exception history (else the
    ``root-exception`` text). The stack trace's first line names the exception Flink failed
    the job with; its innermost ``Caused by:`` line, when there is one and it differs, is
    added as what caused it.
    """
    answer = _get(f"{url}/jobs/{jid}/exceptions")
    if not isinstance(answer, dict):
        return None
    entries = (answer.get("exceptionHistory") or {}).get("entries") or []
    newest = max(entries, key=lambda e: e.get("timestamp") or 0, default=None)
    trace = (newest or {}).get("stacktrace") or answer.get("root-exception")
    if not isinstance(trace, str) or not trace.strip():
        return None
    return describe_trace(trace)


def exceptions_text(url: str, jid: str) -> str:
    """Every stack trace of job ``jid``'s exception history, newest first (for a log)."""
    answer = _get(f"{url}/jobs/{jid}/exceptions")
    if not isinstance(answer, dict):
        return f"Flink has no exceptions of job {jid}"
    entries = (answer.get("exceptionHistory") or {}).get("entries") or []
    traces = [f"Flink job {jid}, exception at {e.get('timestamp')} in {e.get('taskName')} "
              f"({e.get('location')}):\n{e.get('stacktrace')}"
              for e in sorted(entries, key=lambda e: -(e.get("timestamp") or 0))]
    if not traces and answer.get("root-exception"):
        traces = [f"Flink job {jid}, root exception:\n{answer['root-exception']}"]
    return "\n\n".join(traces) or f"Flink has no exceptions of job {jid}"


def describe_trace(trace: str) -> str:
    """A Java stack trace as one line: its first line, and its innermost cause if different;
    exceptions that only wrap the next one named on their line are left out."""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    first = lines[0]
    causes = [line[len("Caused by:"):].strip() for line in lines if line.startswith("Caused by:")]
    text = _short(first)
    if causes and _short(causes[-1]) != text:  # (a wrapper of the cause: named once)
        text += f", caused by {_short(causes[-1])}"
    return text


#: Exception names that only wrap the one named after them (``CompletionException: X: ...``).
_WRAPPERS = re.compile(r"^(?:[\w.$]+(?:Exception|Error): )+(?=[\w.$]+(?:Exception|Error)\b)")


def _short(line: str) -> str:
    line = _WRAPPERS.sub("", " ".join(line.split()))
    return line if len(line) <= ROOT_CAUSE_CHARS else line[:ROOT_CAUSE_CHARS - 3] + "..."
