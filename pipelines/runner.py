"""Creating a Beam pipeline from command-line style options, offline by default.

With no ``--runner`` flag the pipeline runs on Beam's ``FnApiRunner`` directly: in-process, no
attempt to download the Prism runner (which the default DirectRunner of Beam 2.77 makes), and
it honours ``--direct_running_mode`` (``in_memory``, ``multi_threading``,
``multi_processing``) and ``--direct_num_workers``. Any other runner flag (``--runner
FlinkRunner --flink_master ...``, ``--runner DataflowRunner --project ...``, ``--runner
PortableRunner --job_endpoint ...``) is passed through to Beam unchanged, except that a runner
Beam ships but knows only by class path (``--runner DaskRunner``) is handed to Beam by that path
(:data:`costlib_pipelines.flags.SHIPPED_RUNNERS`).

Graph construction is part of every run's fixed cost, so the options are made to be cheap:
:class:`CachedViewOptions` parses the flags once per options class (Beam re-parses them, with a
new ``argparse`` parser of some 150 flags, on every ``view_as``, which pipeline construction
calls twice per transform), and ``type_check=False`` turns off Beam's construction-time type
inference and checks (``--no_pipeline_type_check``) for pipelines whose elements are untyped
Python objects anyway.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any, TypeVar

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.runner import PipelineResult

from costlib_pipelines import flink_rest, interrupts
from costlib_pipelines.engine_failure import EngineFailed, engine_error
from costlib_pipelines.flags import FLINK_JOB_FLAGS, check_runner, resolve_runner
from costlib_pipelines.worker_errors import remote_user_error

__all__ = ["CachedViewOptions", "FlinkJobOptions", "cancel_after_interrupt", "find_flink_job",
           "job_name_flags", "make_pipeline", "run_to_end", "runner_name", "stop_instructions"]

OptionsT = TypeVar("OptionsT", bound=PipelineOptions)


class CachedViewOptions(PipelineOptions):
    """:class:`PipelineOptions` whose ``view_as(cls)`` is made once per ``cls`` and reused.

    Every view of one options object shares its values (``_all_options``), so a view made
    once is the same as a fresh one; only the argument parsing is saved. The cache is left
    out of pickles and copies (Beam deep-copies the options of every pipeline).
    """

    def view_as(self, cls: type[OptionsT]) -> OptionsT:
        views = self.__dict__.get("_views")
        if views is None:
            views = self.__dict__["_views"] = {}
        view = views.get(cls)
        if view is None:
            view = views[cls] = super().view_as(cls)
        return view

    def __getstate__(self) -> dict[str, Any]:
        state = dict(super().__getstate__())
        state.pop("_views", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


class FlinkJobOptions(PipelineOptions):
    """The options of Beam's Java ``FlinkPipelineOptions`` that costlib's streaming jobs pass
    (:data:`~costlib_pipelines.flags.FLINK_JOB_FLAGS`: checkpoints, restarts, savepoints) and
    the Python SDK does not declare. Declared here so that Beam parses them instead of
    warning "Unparseable argument" for each when a pipeline runs; a flag Beam itself declares
    is left to Beam. None when not given, so nothing is passed on then (the job server's
    defaults hold); given, they reach the job server as before (numbers as text, switches as
    true)."""

    @classmethod
    def _add_argparse_args(cls, parser) -> None:
        declared = {s for action in parser._actions for s in action.option_strings}
        for flag, kind in FLINK_JOB_FLAGS.items():
            if flag in declared:
                continue
            if kind is None:
                parser.add_argument(flag, action="store_true", default=None,
                                    help="Flink job option (Beam's FlinkPipelineOptions)")
            else:
                parser.add_argument(flag, type=kind, default=None,
                                    help="Flink job option (Beam's FlinkPipelineOptions)")


def runner_name(beam_args: Sequence[str]) -> str:
    """The runner ``beam_args`` select (``FnApiRunner`` by default), checked to be known.

    Raises
    ------
    costlib_pipelines.flags.UsageError
        An unknown ``--runner`` (before any input is read).
    """
    return check_runner(beam_args) or "FnApiRunner"


def make_pipeline(beam_args: Sequence[str] = (), *, type_check: bool = True) -> beam.Pipeline:
    """A pipeline for the given Beam flags; ``FnApiRunner`` when no ``--runner`` is given.

    ``type_check=False`` sets ``pipeline_type_check`` off (as ``--no_pipeline_type_check``
    does): no type inference or type checks while the graph is built, and every PCollection
    gets Beam's default coder for untyped elements.
    """
    overrides = {} if type_check else {"pipeline_type_check": False}
    options = CachedViewOptions(list(beam_args), **overrides)
    standard = options.view_as(StandardOptions)
    if standard.runner is None:
        return beam.Pipeline(runner=FnApiRunner(), options=options)
    if isinstance(standard.runner, str):  # DaskRunner -> apache_beam.runners.dask...DaskRunner
        standard.runner = resolve_runner(standard.runner)
    return beam.Pipeline(options=options)


#: Runners that execute the pipeline inside this process: an interrupt stops them with it.
IN_PROCESS_RUNNERS = ("FnApiRunner",)

#: Flink job states after which the job runs no more.
_FLINK_ENDED = flink_rest.ENDED


def job_name_flags(beam_args: Sequence[str], command: str, run_id: str) -> list[str]:
    """``beam_args`` with ``--job_name=costlib-<command>-<run id>`` added for a Flink or portable
    runner that was given no job name: the job on the cluster is then found by its name (to
    cancel it after an interrupt, and by an operator in the Flink web UI)."""
    runner = runner_name(beam_args)
    named = any(a == "--job_name" or a.startswith("--job_name=") for a in beam_args)
    if named or runner not in ("FlinkRunner", "PortableRunner"):
        return list(beam_args)
    name = re.sub(r"[^a-z0-9-]", "-", f"costlib-{command}-{run_id}".lower())[:63]
    return [*beam_args, f"--job_name={name}"]


def run_to_end(pipeline: beam.Pipeline, runner: str, *,
               graph_only: Callable[[], bool] = lambda: False,
               record_job: Callable[[dict[str, Any]], None] | None = None,
               log_dir: str | None = None) -> PipelineResult | None:
    """Run ``pipeline`` and wait for it to finish; None when the runner only wrote a job graph
    (``graph_only()`` true after submitting).

    On a runner outside this process the job is recorded for the interrupt message
    (:mod:`costlib_pipelines.interrupts`), and if SIGINT or SIGTERM arrives while it is
    submitted or runs, it is cancelled (:func:`cancel_after_interrupt`) before the interrupt
    propagates.

    With Flink's REST address (``--flink_master``) and a job name, the Flink job is watched
    through the REST API while Beam's job service is waited for (:class:`_FlinkWatch`): it is
    passed to ``record_job`` (the caller records it in the output's lock:
    :func:`costlib_pipelines.io.lock.record_job`), and Flink's state is
    trusted over the job service's, which can say RUNNING after Flink said FAILED. A job that
    fails on its engine raises :class:`~costlib_pipelines.engine_failure.EngineFailed` (with
    Flink's root cause; the traceback goes to ``log_dir``'s failure log). A failure that is a
    Python error in the workers is not the engine's: it propagates as it came, or as a
    ``RuntimeError`` that adds Flink's exceptions when only they hold the Python traceback (the
    command line's edge tells costlib's input error, exit 2, from a bug). Beam's job messages
    are held back while the job runs (:class:`_JobMessages`).
    """
    remote = runner not in IN_PROCESS_RUNNERS
    result = None
    watch = _FlinkWatch.start(pipeline.options, runner, record_job) if remote else None
    try:
        if remote:
            interrupts.job_submitted(runner, None)
        with _JobMessages() if remote else nullcontext() as messages:
            result = pipeline.run()
            if remote:
                interrupts.job_submitted(runner, _job_id(result))
            if graph_only():
                return None
            try:
                if watch is None:
                    result.wait_until_finish()
                else:
                    watch.wait(result)
            except Exception as exc:
                failed = _engine_failure(exc, runner, result, watch, log_dir, messages)
                if failed is None or interrupts.received() is not None:
                    raise
                raise failed from exc
        return result
    except BaseException:
        if remote and interrupts.received() is not None:
            cancel_after_interrupt(result, pipeline.options, runner)
        raise


class _JobMessages(logging.Filter):
    """Beam's job messages (the job service's log, as ``logging.log`` on the root logger from
    the portable runner) held back while a remote job runs: a failed job's go to its failure
    log instead of the terminal; when the job ends otherwise they are logged as they came."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.failed = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.pathname.replace("\\", "/").endswith("portability/portable_runner.py"):
            self.records.append(record)
            return False
        return True

    def lines(self) -> list[str]:
        return [f"{r.levelname} {r.getMessage()}" for r in self.records]

    def __enter__(self) -> _JobMessages:
        logging.getLogger().addFilter(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        root = logging.getLogger()
        root.removeFilter(self)
        if not self.failed:
            for record in self.records:
                if record.levelno >= root.getEffectiveLevel():
                    root.handle(record)


class _FlinkWatch:
    """A Flink job followed through the REST API while Beam's job service is waited for."""

    #: Seconds between two questions to Flink.
    POLL = 2.0
    #: Seconds the job service may lag behind Flink's end of the job before Flink is trusted.
    LAG = 20.0

    def __init__(self, url: str, name: str, runner: str,
                 record_job: Callable[[dict[str, Any]], None] | None,
                 before: set[str]) -> None:
        self.url, self.name, self.runner, self.record_job = url, name, runner, record_job
        self.before = before
        self.jid: str | None = None
        self.state: str | None = None

    @classmethod
    def start(cls, options: PipelineOptions, runner: str,
              record_job: Callable[[dict[str, Any]], None] | None) -> _FlinkWatch | None:
        """A watch for the job these options submit (None without a REST address or a job
        name); the jobs of that name that exist now are not this run's, and ``record_job``
        is given the REST address and the name before the job is submitted."""
        all_options = options.get_all_options(drop_default=True)
        url, name = flink_rest.rest_url(all_options), all_options.get("job_name")
        if url is None or not name:
            return None
        try:
            before = {str(j["jid"]) for j in flink_rest.jobs(url) if j.get("name") == name}
        except (flink_rest.RestError, KeyError):
            before = set()
        watch = cls(url, str(name), runner, record_job, before)
        watch.record()
        return watch

    def record(self) -> None:
        if self.record_job is not None:
            self.record_job({"runner": self.runner, "flink_rest": self.url,
                                   "job_name": self.name, "flink_job_id": self.jid})

    def poll(self) -> None:
        """Find this run's Flink job (recording its id) and read its state."""
        try:
            if self.jid is None:
                found = flink_rest.find_job(self.url, self.name, exclude=self.before)
                if found is None:
                    return
                self.jid = str(found["jid"])
                self.record()
                interrupts.job_submitted(self.runner, self.jid)
            self.state = flink_rest.job_state(self.url, self.jid) or "UNKNOWN"
        except (flink_rest.RestError, KeyError):  # busy or gone: Beam's job service decides
            return

    def wait(self, result: PipelineResult) -> None:
        """Wait for the job service, asking Flink every :data:`POLL` s; once Flink says the
        job ended and the service has not followed within :data:`LAG` s, trust Flink."""
        done = threading.Event()
        outcome: dict[str, BaseException] = {}

        def waiter() -> None:
            try:
                result.wait_until_finish()
            except BaseException as exc:
                outcome["error"] = exc
            finally:
                done.set()

        threading.Thread(target=waiter, name="costlib-job-service", daemon=True).start()
        ended_at = None
        while not done.wait(self.POLL):
            self.poll()
            if self.state in _FLINK_ENDED or self.state == "UNKNOWN":
                ended_at = ended_at or time.monotonic()
                if time.monotonic() - ended_at >= self.LAG:
                    break
        if done.is_set():
            self.poll()
            if "error" in outcome:
                raise outcome["error"]
            return
        if self.state == "FINISHED":
            return
        raise RuntimeError(f"Pipeline {_job_id(result)} failed in state {self.state}: Flink "
                           f"says job {self.jid} ended {self.state} while Beam's job service "
                           "still reported it running")


def _engine_failure(exc: Exception, runner: str, result: PipelineResult | None,
                    watch: _FlinkWatch | None, log_dir: str | None,
                    messages: _JobMessages | None) -> Exception | None:
    """:class:`EngineFailed` for a job that failed on its engine; a ``RuntimeError`` holding
    Flink's exceptions when they show a Python error in the workers (costlib's input error or
    a bug: the command line's edge tells which); None for anything else (raised as it came)."""
    if remote_user_error(str(exc)) is not None:  # costlib's input error, reported by a worker
        return None
    beam = engine_error(exc)
    if beam is None:
        return None
    beam_job, state, cause = beam
    details: list[str] = messages.lines() if messages is not None else []
    root = None
    if watch is not None and watch.jid is not None:
        try:
            root = flink_rest.root_cause(watch.url, watch.jid)
            trace = flink_rest.exceptions_text(watch.url, watch.jid)
        except flink_rest.RestError as rest_error:
            trace = f"(Flink's exceptions could not be read: {rest_error})"
        if "Traceback (most recent call last)" in trace:  # a Python error in the workers
            return RuntimeError(f"{exc}\n\nFlink's exceptions of job {watch.jid}:\n{trace}")
        details.append(trace)
        state = watch.state if watch.state in _FLINK_ENDED else state
    if messages is not None:
        messages.failed = True
    return EngineFailed(
        runner=runner, job_name=watch.name if watch else None,
        flink_job_id=watch.jid if watch else None,
        beam_job_id=beam_job or (_job_id(result) if result is not None else None),
        state=state, root_cause=root or cause or None,
        rest_url=watch.url if watch else None, log_dir=log_dir, details=details)


def _job_id(result: Any) -> str | None:
    for name in ("job_id", "_job_id"):
        value = getattr(result, name, None)
        value = value() if callable(value) else value
        if isinstance(value, str) and value:
            return value
    return None


def cancel_after_interrupt(result: PipelineResult | None, options: PipelineOptions,
                           runner: str) -> None:
    """Cancel the interrupted job and record what became of it
    (:func:`costlib_pipelines.interrupts.job_outcome`).

    The job service is asked first (``result.cancel()``). Beam's Flink job server does not
    cancel a job already running on the cluster that way, so with a Flink REST address
    (``--flink_master``) the jobs named ``--job_name`` that have not ended are cancelled through
    Flink's REST API and watched for up to 30 s. Without one, the message says the job may
    still be running and how to cancel it.
    """
    state = None
    if result is not None:
        try:
            result.cancel()
            state = str(result.state)
        except Exception:  # the job server may be gone or refuse: the checks below decide
            state = None
    all_options = options.get_all_options(drop_default=True)
    url = flink_rest.rest_url(all_options)
    name = all_options.get("job_name")
    if url and name:
        text, ended = _cancel_flink_jobs(url, str(name))
        interrupts.job_outcome(text, ended=ended)
        return
    job = _job_id(result) if result is not None else None
    ended = state is not None and state.rsplit(".", 1)[-1] in ("CANCELLED", "DONE", "FAILED")
    if ended:
        interrupts.job_outcome(f"its job {job} on {runner} was cancelled ({state})", ended=True)
        return
    how = ("in the Flink web UI, or with flink cancel JOB_ID (flink list shows its id; "
           f"job name {name})" if runner in ("FlinkRunner", "PortableRunner")
           else "with the runner's own tools")
    interrupts.job_outcome(f"its job {job or '(no id yet)'} on {runner} may still be running and "
                           f"may still publish: cancel it {how}", ended=False)


def find_flink_job(options: PipelineOptions, wait: float = 120.0) -> dict[str, Any]:
    """The submitted job as an operator finds it: ``{"name", "flink_rest", "flink_job_id",
    "note"}``. ``name`` is ``--job_name``; with a Flink REST address (``--flink_master``) the
    newest job of that name that has not ended is looked up (``GET /jobs/overview``, for up to
    ``wait`` s: Flink lists a job after the job server has translated and submitted it, which
    took over 30 s for the first job of a fresh cluster on a busy machine). ``note``
    says why there is no id (None when there is one)."""
    all_options = options.get_all_options(drop_default=True)
    name, url = all_options.get("job_name"), flink_rest.rest_url(all_options)
    found: dict[str, Any] = {"name": name, "flink_rest": url, "flink_job_id": None,
                             "note": None}
    if url is None or not name:
        runner = str(options.view_as(StandardOptions).runner or "FnApiRunner")
        found["note"] = ("no Flink REST address (--flink_master): find the job by its name in "
                         "the Flink web UI or with flink list"
                         if "Flink" in runner or "Portable" in runner
                         else f"on {runner}: stop it with the runner's own tools")
        return found
    deadline = time.monotonic() + wait
    try:
        while True:
            newest = flink_rest.running_job(url, name)
            if newest is not None:
                found["flink_job_id"] = newest["jid"]
                return found
            if time.monotonic() >= deadline:
                break
            time.sleep(0.5)
    except (OSError, ValueError, KeyError) as exc:
        found["note"] = f"the Flink REST API at {url} failed: {exc}"
        return found
    found["note"] = f"no job named {name} listed at {url} after {wait:g} s"
    return found


def stop_instructions(job: dict[str, Any]) -> str:
    """How to stop the job :func:`find_flink_job` found, in one line."""
    jid, url, name = job.get("flink_job_id"), job.get("flink_rest"), job.get("name")
    if jid:
        return (f"Flink job {jid} ({name}); stop it with curl -X PATCH "
                f"'{url}/jobs/{jid}?mode=cancel', flink cancel {jid}, or Cancel Job in the "
                f"web UI {url}")
    return f"job {name or job.get('job_service_id') or '(no name)'} ({job.get('note')})"


def _cancel_flink_jobs(url: str, name: str, wait: float = 30.0) -> tuple[str, bool]:
    """Cancel the Flink jobs named ``name`` that have not ended; (what happened, ended)."""
    try:
        running = [j["jid"] for j in flink_rest.jobs(url)
                   if j.get("name") == name and j.get("state") not in _FLINK_ENDED]
        for jid in running:
            flink_rest.cancel(url, jid)
        deadline = time.monotonic() + wait
        left = list(running)
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            states = {j["jid"]: j.get("state") for j in flink_rest.jobs(url)}
            left = [jid for jid in left if states.get(jid) not in _FLINK_ENDED]
    except (OSError, ValueError, KeyError) as exc:
        return (f"its Flink job {name} may still be running and may still publish (the Flink "
                f"REST API at {url} failed: {exc}): cancel it in the web UI {url} or with "
                "flink cancel JOB_ID", False)
    if left:
        return (f"its Flink job {', '.join(left)} ({name}) may still be running and may still "
                f"publish: cancel it with flink cancel {left[0]} or in the web UI {url}", False)
    if running:
        return f"its Flink job {', '.join(running)} ({name}) was cancelled", True
    return f"no Flink job named {name} is running at {url}", True
