"""Daily costlib recalibration on a Flink cluster, scheduled by Airflow.

The Flink variant of ``costlib_recalibration_dag.py`` (Dataflow): same schedule, same 7-day
look-back window, same run id (``daily-<YYYYMMDD of the window's last day>``) and the same
``costlib status`` alert afterwards (costlib_dag_common.py). The pipeline goes to Flink through
Beam's Flink job server: the ``recalibrate`` task runs ``costlib recalibrate ... --runner=
PortableRunner --job_endpoint=...`` (the flags of ``COSTLIB_FLINK_BEAM_FLAGS``) on the Airflow
worker; the driver submits the job, waits for it and exits with costlib's code, which this DAG
maps:

* 0: published, the task succeeds;
* 2: bad config, input or command line (or another run holds the output's lock): an
  ``AirflowFailException``, not retried;
* 3: complete but held by the publish guard (``LATEST`` unmoved): an ``AirflowFailException``
  naming the run's ``manifest.json`` and the guard's violations, not retried;
* anything else (a crash, the job server unreachable, a failed Flink job): retried once.

A kill or timeout of the task (``on_kill``) stops the driver's process group with SIGTERM; the
Flink job itself goes on without its submitter (cancel it by its name,
``costlib-recalibrate-<YYYYMMDD>``, in the Flink UI or with ``flink cancel``) before a retry.

Environment of the Airflow workers, read when the DAG is parsed: ``COSTLIB_PYTHON`` (the
costlib venv's interpreter, see costlib_dag_common.py) and ``COSTLIB_FLINK_BEAM_FLAGS``: the Beam
flags that reach the cluster; the default is deploy/flink's job server Service and worker pool
(submit.sh's flags); for the local cluster of tools/flink_cluster.py, its ``flags`` output.
Airflow Variables, read when the task runs: ``costlib_config``, ``costlib_input_pattern`` (a
glob with ``{date}``, e.g. ``/data/scores/dt={date}/*.parquet``), ``costlib_output`` (paths the
driver and the Flink workers both reach), and optionally ``costlib_max_threshold_change`` and
``costlib_min_rated`` (the publish guard's limits; defaults as in the Dataflow DAG).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

from costlib_dag_common import (
    BAD_INPUT,
    COSTLIB,
    DAG,
    HELD_FOR_REVIEW,
    MAX_THRESHOLD_CHANGE,
    MIN_RATED,
    OUTPUT,
    RUN_ID,
    START_DATE,
    WINDOW_LAST_DAY,
    AirflowException,
    AirflowFailException,
    BaseOperator,
    BashOperator,
    bad_input_message,
    held_message,
    lookback_input,
    manifest_path,
    status_command,
    violations,
)

DAG_ID = "costlib_recalibration_flink"
#: deploy/flink: the job server's Service and the worker pool beside each task manager.
DEFAULT_BEAM_FLAGS = ("--runner=PortableRunner --job_endpoint=beam-flink-job-server:8099 "
                      "--artifact_endpoint=beam-flink-job-server:8098 "
                      "--environment_type=EXTERNAL --environment_config=localhost:50000")
BEAM_FLAGS = shlex.split(os.environ.get("COSTLIB_FLINK_BEAM_FLAGS", DEFAULT_BEAM_FLAGS))
#: A run longer than this is stopped (on_kill) and retried.
EXECUTION_TIMEOUT = dt.timedelta(hours=6)


def guard_limit(name: str, default: object) -> str:
    """Jinja: the Airflow Variable ``costlib_<name>``, else the default."""
    return "{{ var.value.get('costlib_" + name + "', '" + str(default) + "') }}"


def exit_outcome(code: int, output: str, run_id: str) -> None:
    """Map the driver's exit code to the task's outcome: return (published) or raise."""
    if code == 0:
        return
    if code == HELD_FOR_REVIEW:
        raise AirflowFailException(
            held_message(output, run_id, violations(read_manifest(output, run_id))))
    if code == BAD_INPUT:
        raise AirflowFailException(bad_input_message(output, "exit code 2"))
    raise AirflowException(f"costlib recalibrate failed with exit code {code} (log above); "
                           "retrying")


def read_manifest(output: str, run_id: str) -> dict | None:
    """The run's manifest when the output is a local (mounted) path, else None."""
    file = Path(manifest_path(output, run_id))
    if "://" in output or not file.exists():
        return None
    return json.loads(file.read_text())


class CostlibFlinkRecalibrateOperator(BaseOperator):
    """``costlib recalibrate ARGUMENTS BEAM_FLAGS`` with costlib's exit codes as the outcome."""

    template_fields = ("arguments",)

    def __init__(self, *, arguments: list[str], beam_flags: list[str], **kwargs):
        super().__init__(**kwargs)
        self.arguments = arguments
        self.beam_flags = beam_flags
        self._process: subprocess.Popen | None = None

    def execute(self, context):
        argv = [COSTLIB, "recalibrate", *self.arguments, *self.beam_flags]
        options = dict(zip(self.arguments[::2], self.arguments[1::2], strict=False))
        self.log.info("Running: %s", shlex.join(argv))
        self._process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         text=True, start_new_session=True)
        for line in self._process.stdout:
            self.log.info("%s", line.rstrip())
        code = self._process.wait()
        self.log.info("costlib recalibrate exited with %s", code)
        exit_outcome(code, options["--output"], options["--run-id"])

    def on_kill(self):
        if self._process is not None and self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)


with DAG(
    dag_id=DAG_ID,
    description="Daily costlib recalibration on Flink over a 7-day look-back window, with "
                "publish guard",
    schedule="30 2 * * *",  # SCHEDULE of costlib_dag_common, literal for the deploy checks
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,  # one run per output: one day at a time, in order
    default_args={"owner": "costlib"},
    tags=["costlib", "beam", "flink"],
) as dag:
    recalibrate = CostlibFlinkRecalibrateOperator(
        task_id="recalibrate",
        arguments=[  # flag, value pairs
            "--config", "{{ var.value.costlib_config }}",
            "--input", lookback_input(),
            "--output", OUTPUT,
            "--run-id", RUN_ID,
            "--max-threshold-change", guard_limit("max_threshold_change", MAX_THRESHOLD_CHANGE),
            "--min-rated", guard_limit("min_rated", MIN_RATED),
            "--log_level", "INFO",
            "--job_name", "costlib-recalibrate-" + WINDOW_LAST_DAY,  # the Flink job's name
        ],
        beam_flags=BEAM_FLAGS,
        execution_timeout=EXECUTION_TIMEOUT,
        retries=1,
        retry_delay=dt.timedelta(minutes=30),
    )

    status = BashOperator(
        task_id="status",
        bash_command=status_command(),
        trigger_rule="all_done",  # also after a failed or held recalibration
        retries=0,
        execution_timeout=dt.timedelta(minutes=10),
    )

    recalibrate >> status
