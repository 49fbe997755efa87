"""What the cluster says of an output's always-on jobs, for ``costlib status``.

``costlib recalibrate --follow`` records its streaming job in the live run's manifest
(``follow.job``) and ``costlib decide --follow`` in ``OUTPUT/follow.json`` (``job``): the job's
name, Flink job id and Flink's REST address. :func:`check_job` asks that address (stdlib
``urllib`` with a short timeout, through :mod:`costlib_pipelines.flink_rest`) for

- the job's state (``GET /jobs/<id>``) and how many of its subtasks run;
- its restarts so far (the job metric ``numRestarts``) and its failures, newest first, with
  Flink's root cause (``GET /jobs/<id>/exceptions``);
- the age of its last completed checkpoint (``GET /jobs/<id>/checkpoints``).

A job needs a person (:attr:`JobHealth.problem`, one line naming the state, the restarts,
Flink's root cause and what to check) when the cluster does not answer or does not know the
job; when it ended (``FAILED``, ``CANCELED``, ``FINISHED``: the stream is followed no more);
when it is ``RESTARTING``, or has failed since its last completed checkpoint (a lost
TaskManager: each restart finds no slot); when its last checkpoint is older than
``max_checkpoint_age_minutes`` (or, before its first, the job started longer ago than that);
and when it takes no checkpoints at all. A job that restarted and runs again is healthy once
a checkpoint completed after its last failure (within a checkpoint interval): its line says
when it last restarted, and why.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlparse

from costlib.message_text import ago, human_age
from costlib_pipelines import flink_rest

__all__ = ["REST_TIMEOUT", "JobHealth", "check_job"]

#: Seconds one REST request of ``costlib status`` may take (``status`` must stay fast when
#: the cluster is down; a refused connection fails at once).
REST_TIMEOUT = 3.0

#: Flink states in which a job runs, or is about to.
_ACTIVE = ("CREATED", "INITIALIZING", "RUNNING", "RECONCILING")


@dataclass
class JobHealth:
    """One follow job as the cluster reports it; ``problem`` None means healthy."""

    role: str  #: ``recalibrate follow job`` or ``decide follow job``
    name: str | None
    flink_job_id: str | None
    flink_rest: str | None
    #: Flink's job state; ``UNREACHABLE`` (the REST API did not answer), ``UNKNOWN`` (the
    #: cluster does not know the job), None (no Flink job id was recorded)
    state: str | None = None
    restarts: int | None = None
    tasks_running: int | None = None
    tasks_total: int | None = None
    last_checkpoint_utc: str | None = None
    checkpoint_age_seconds: float | None = None
    last_failure_utc: str | None = None
    root_cause: str | None = None
    line: str = ""
    problem: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "healthy": self.problem is None}


def _utc(ms: Any) -> dt.datetime | None:
    try:
        value = float(ms)
    except (TypeError, ValueError):
        return None
    return dt.datetime.fromtimestamp(value / 1000, dt.UTC) if value > 0 else None


def _local_port(url: str) -> int | None:
    """The REST port of a cluster on this machine (``tools/flink_cluster.py``'s), else None."""
    parsed = urlparse(url)
    if parsed.hostname in ("localhost", "127.0.0.1", "::1"):
        return parsed.port or 8081
    return None


def cluster_checks(url: str, process: str = "TaskManager") -> str:
    """Where to look when ``url``'s cluster or its job is unwell: ``process``'s log (the
    ``TaskManager``'s, or the ``JobManager``'s when the REST API does not answer)."""
    port = _local_port(url)
    if port is not None:
        flag = "" if port == 8081 else f" --port-base {port}"
        return (f"tools/flink_cluster.py status{flag} and the {process} log "
                f"(~/.cache/costlib/flink/cluster-{port}/log/{process.lower()}.out, or "
                "--state-dir's log/)")
    return f"the cluster's processes and the {process} logs (on Kubernetes: kubectl logs)"


def _bring_back(url: str) -> str:
    """How a lost TaskManager is brought back."""
    port = _local_port(url)
    if port is None:
        return "a lost TaskManager back, or more slots"
    flag = "" if port == 8081 else f" --port-base {port}"
    return f"a lost TaskManager back: tools/flink_cluster.py start{flag}"


def _restart_hint(role: str) -> str:
    command = "recalibrate" if role.startswith("recalibrate") else "decide"
    return (f"start it again with costlib {command} --follow (same --config, --input, "
            "--output and flags)")


def check_job(role: str, job: Mapping[str, Any], *, max_checkpoint_age_minutes: float = 10.0,
              now: dt.datetime | None = None, timeout: float = REST_TIMEOUT) -> JobHealth:
    """Ask the cluster about the recorded follow job ``job`` (``name``, ``flink_job_id``,
    ``flink_rest``, as :func:`costlib_pipelines.runner.find_flink_job` returns it) and judge
    it (see the module docstring)."""
    now = now or dt.datetime.now(dt.UTC)
    jid, url = job.get("flink_job_id"), job.get("flink_rest")
    health = JobHealth(role=role, name=job.get("name"), flink_job_id=jid, flink_rest=url)
    what = "judged" if role.startswith("recalibrate") else "decided"
    try:
        if not jid and url and health.name:  # not listed yet when the command looked
            found = flink_rest.find_job(url, health.name, timeout=timeout)
            jid = health.flink_job_id = found["jid"] if found else None
        details = flink_rest.job_details(url, jid, timeout) if jid and url else None
    except flink_rest.RestError as exc:
        label = f"{role} {jid or health.name}"
        health.state = "UNREACHABLE"
        cause = exc.__cause__
        reason = str(getattr(cause, "reason", cause) if cause else exc)
        health.line = health.problem = (
            f"{label}: cluster unreachable at {url} ({reason}); nothing is {what} while the "
            f"cluster is down: check {cluster_checks(url, 'JobManager')}")
        return health
    label = f"{role} {jid or health.name or '(no name)'}"
    if not url or (not jid and not health.name):
        why = job.get("note") or "no REST address"
        health.line = f"{label}: no Flink job id was recorded ({why}); its state is not checked"
        return health
    if details is None:
        health.state = "UNKNOWN"
        health.line = health.problem = (
            f"{label}: the cluster at {url} does not know this job (its JobManager restarted "
            f"without it, or the job was removed); nothing is {what}: {_restart_hint(role)}")
        return health
    health.state = str(details["state"])
    running, total = 0, 0
    for vertex in details.get("vertices") or []:
        tasks = vertex.get("tasks") or {}
        running += int(tasks.get("RUNNING", 0))
        total += int(vertex.get("parallelism") or sum(int(n) for n in tasks.values()))
    health.tasks_running, health.tasks_total = running, total
    try:  # the rest is detail: a JobManager that answered once but not now loses only it
        health.restarts = flink_rest.restarts(url, jid, timeout)
        history = flink_rest.failures(url, jid, timeout)
        answer = flink_rest.checkpoints(url, jid, timeout)
        checkpointing = isinstance(answer.get("counts"), dict)  # no statistics: it is off
        latest = (answer.get("latest") or {}).get("completed")
    except flink_rest.RestError:
        history, latest, checkpointing = [], None, True
    failed_at = _utc(history[0].get("timestamp")) if history else None
    if history and isinstance(history[0].get("stacktrace"), str) \
            and history[0]["stacktrace"].strip():
        health.root_cause = flink_rest.describe_trace(history[0]["stacktrace"])
    health.last_failure_utc = failed_at.isoformat() if failed_at else None
    checkpoint_at = _utc((latest or {}).get("latest_ack_timestamp"))
    if checkpoint_at is not None:
        health.last_checkpoint_utc = checkpoint_at.isoformat()
        health.checkpoint_age_seconds = round(max(0.0, (now - checkpoint_at).total_seconds()), 1)
    _judge(health, label, what, details, failed_at, checkpoint_at if checkpointing else None,
           max_checkpoint_age_minutes if checkpointing else None, now)
    return health


def _judge(health: JobHealth, label: str, what: str, details: Mapping[str, Any],
           failed_at: dt.datetime | None, checkpoint_at: dt.datetime | None,
           max_age_minutes: float | None, now: dt.datetime) -> None:
    """Set ``health.line`` and, when it needs a person, ``health.problem``
    (``max_age_minutes`` None: the job takes no checkpoints)."""
    state, url = health.state or "", health.flink_rest or ""
    restarts = ("restarts not reported" if health.restarts is None
                else f"{health.restarts} restart{'s' if health.restarts != 1 else ''}")
    cause = f" — {health.root_cause}" if health.root_cause else ""
    checkpoint = (f"last checkpoint {human_age(health.checkpoint_age_seconds)} ago"
                  if health.checkpoint_age_seconds is not None else "no checkpoint yet")
    if state not in (*_ACTIVE, "RESTARTING", "FAILING"):  # ended, or ending (CANCELLING)
        ended = _utc(details.get("end-time"))
        when = f" {ago((now - ended).total_seconds())}" if ended else ""
        after = {None: "", 0: " with no restart"}.get(health.restarts, f" after {restarts}")
        health.line = health.problem = (
            f"{label}: {state}{when}{after}{cause}; nothing is {what} until it runs again: "
            + (f"check {cluster_checks(url)}, then " if state == "FAILED" else "")
            + _restart_hint(health.role))
        return
    tasks = f"{health.tasks_running} of {health.tasks_total} tasks running"
    all_running = state == "RUNNING" and health.tasks_running == health.tasks_total
    recovered = failed_at is None or (checkpoint_at is not None and checkpoint_at > failed_at)
    if state in ("RESTARTING", "FAILING") or (not recovered and max_age_minutes is not None):
        last = f", the last {ago((now - failed_at).total_seconds())}" if failed_at else ""
        tail = (f"its tasks run again, but no checkpoint completed since it failed: if that "
                f"lasts, check {cluster_checks(url)}" if all_running else
                f"nothing is {what} until it runs again: check {cluster_checks(url)}; it "
                f"resumes from its last checkpoint once slots are free ({_bring_back(url)})")
        health.line = health.problem = (
            f"{label}: {state} ({tasks}), {restarts} so far{last}{cause}; {checkpoint}; {tail}")
        return
    if max_age_minutes is None:
        health.line = health.problem = (
            f"{label}: {state} ({tasks}), {restarts}, but it takes no checkpoints: a restart "
            f"would start it from nothing (every landed file read again); stop it and submit "
            "it with the flags of tools/flink_cluster.py flags --streaming "
            "(--checkpointing_interval)")
        return
    started = _utc(details.get("start-time"))
    since = checkpoint_at or started
    limit = max_age_minutes * 60
    if since is not None and (now - since).total_seconds() > limit:
        why = (f"its last checkpoint completed {ago((now - checkpoint_at).total_seconds())}"
               if checkpoint_at else
               f"no checkpoint completed since it started {ago((now - since).total_seconds())}")
        health.line = health.problem = (
            f"{label}: {state} ({tasks}), {restarts}, but {why} (more than "
            f"{human_age(limit)}){cause}; a restart now would go back that far: check the "
            f"job's checkpoints in the web UI {url}/#/job/running/{health.flink_job_id}"
            f"/checkpoints and {cluster_checks(url)}")
        return
    last = (f" (the last {ago((now - failed_at).total_seconds())}{cause})"
            if failed_at and health.restarts else "")
    waiting = "" if all_running else f" ({tasks})"
    health.line = f"{label}: {state}{waiting}, {restarts} so far{last}, {checkpoint}"
