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

import json
import re
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.runners.runner import PipelineResult

from costlib_pipelines import interrupts
from costlib_pipelines.flags import FLINK_JOB_FLAGS, check_runner, resolve_runner

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
_FLINK_ENDED = ("FINISHED", "FAILED", "CANCELED")


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
               graph_only: Callable[[], bool] = lambda: False) -> PipelineResult | None:
    """Run ``pipeline`` and wait for it to finish; None when the runner only wrote a job graph
    (``graph_only()`` true after submitting).

    On a runner outside this process the job is recorded for the interrupt message
    (:mod:`costlib_pipelines.interrupts`), and if SIGINT or SIGTERM arrives while it is
    submitted or runs, it is cancelled (:func:`cancel_after_interrupt`) before the interrupt
    propagates.
    """
    remote = runner not in IN_PROCESS_RUNNERS
    result = None
    try:
        if remote:
            interrupts.job_submitted(runner, None)
        result = pipeline.run()
        if remote:
            interrupts.job_submitted(runner, _job_id(result))
        if graph_only():
            return None
        result.wait_until_finish()
        return result
    except BaseException:
        if remote and interrupts.received() is not None:
            cancel_after_interrupt(result, pipeline.options, runner)
        raise


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
    master = str(all_options.get("flink_master") or "")
    name = all_options.get("job_name")
    if master and not master.startswith("[") and name:
        url = master if re.match(r"^https?://", master) else f"http://{master}"
        text, ended = _cancel_flink_jobs(url.rstrip("/"), str(name))
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


def _flink_rest_url(options: PipelineOptions) -> str | None:
    """The Flink REST address ``--flink_master`` gives (``http://host:port``), or None."""
    master = str(options.get_all_options(drop_default=True).get("flink_master") or "")
    if not master or master.startswith("["):  # [auto], [local], [collection]
        return None
    return (master if re.match(r"^https?://", master) else f"http://{master}").rstrip("/")


def find_flink_job(options: PipelineOptions, wait: float = 120.0) -> dict[str, Any]:
    """The submitted job as an operator finds it: ``{"name", "flink_rest", "flink_job_id",
    "note"}``. ``name`` is ``--job_name``; with a Flink REST address (``--flink_master``) the
    newest job of that name that has not ended is looked up (``GET /jobs/overview``, for up to
    ``wait`` s: Flink lists a job after the job server has translated and submitted it, which
    took over 30 s for the first job of a fresh cluster on a busy machine). ``note``
    says why there is no id (None when there is one)."""
    name = options.get_all_options(drop_default=True).get("job_name")
    url = _flink_rest_url(options)
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
            named = [j for j in _flink_jobs(url)
                     if j.get("name") == name and j.get("state") not in _FLINK_ENDED]
            if named:
                found["flink_job_id"] = max(named, key=lambda j: j.get("start-time", 0))["jid"]
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


def _flink_jobs(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/jobs/overview", timeout=10) as response:
        return list(json.load(response)["jobs"])


def _cancel_flink_jobs(url: str, name: str, wait: float = 30.0) -> tuple[str, bool]:
    """Cancel the Flink jobs named ``name`` that have not ended; (what happened, ended)."""
    try:
        running = [j["jid"] for j in _flink_jobs(url)
                   if j.get("name") == name and j.get("state") not in _FLINK_ENDED]
        for jid in running:
            request = urllib.request.Request(f"{url}/jobs/{jid}?mode=cancel", method="PATCH")
            urllib.request.urlopen(request, timeout=10).close()
        deadline = time.monotonic() + wait
        left = list(running)
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            states = {j["jid"]: j.get("state") for j in _flink_jobs(url)}
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
