"""Daily costlib recalibration on Dataflow, scheduled by Airflow.

Each day at 02:30 UTC the DAG runs ``costlib recalibrate`` over the last ``LOOKBACK_DAYS``
complete days of daily input partitions: the days before the run's ``data_interval_end`` (the
scheduled time, in Airflow 2 and 3 alike; ``ds`` is not used because Airflow 3's cron schedules
make it the run's own, still incomplete, day). The run goes into
``OUTPUT/runs/daily-<YYYYMMDD of the window's last day>/``. Then ``costlib status`` checks the
output: it is the alert (it fails the DAG run while a run is held or ``LATEST`` is stale).

**Dataflow integration.** ``BeamRunPythonPipelineOperator`` with ``runner="DataflowRunner"`` and
a ``DataflowConfiguration``: the provider reads the job id from the driver's log (``--log_level
INFO`` makes Beam print it), shows the job link, waits for the job through the Dataflow API
(``wait_until_finished``), and on a timeout (``execution_timeout``) or a kill cancels the job
(``on_kill``; ``drain_pipeline=False``, ``cancel_timeout``), so no leftover job publishes while a
retry writes. Impersonation: the provider's ``DataflowHook`` and the Beam driver
(``--impersonate_service_account``) act as ``COSTLIB_LAUNCHER_SA``; the workers run as
``COSTLIB_WORKER_SA`` (``service_account_email``; not ``DataflowConfiguration.service_account``,
which the provider passes as ``--service_account``, a flag Beam does not define, so costlib
would refuse it with exit 2).

**Exit codes.** Once the provider has the job id it stops reading the driver and follows the
job itself, so the driver's exit code 3 never reaches it. The job's last stage publishes or
holds the run (pipelines/recalibrate/pipeline.py), so after the job finishes this operator reads the
run's ``manifest.json``: ``published: false`` is *held for review*, an ``AirflowFailException``
(no retry) naming the manifest. Before the job id (config, input, lock, flag errors) the
driver's exit code is seen: 2 fails without retry, 3 likewise, anything else is retried.

**No install per run.** The driver runs with ``COSTLIB_PYTHON``, a virtualenv baked into the
Airflow worker image (deploy/airflow/Dockerfile: the pinned set, Beam's GCP extra and costlib at
the deployed commit), and the workers run the costlib image (``sdk_container_image``), so
nothing is pip-installed at run time. (The KubernetesPodOperator with the costlib image was the
alternative; it was not chosen because the Beam provider's job tracking, cancel-on-kill and job
link only exist in the Beam operator.)

Environment of the Airflow workers (set in deploy/airflow/Dockerfile or the deployment), read
when the DAG is parsed: ``COSTLIB_SRC`` (/opt/costlib), ``COSTLIB_PYTHON``
(/opt/costlib-venv/bin/python), ``COSTLIB_IMAGE`` (the workers' image, same commit),
``COSTLIB_PROJECT``, ``COSTLIB_REGION``, ``COSTLIB_LAUNCHER_SA`` (impersonated),
``COSTLIB_WORKER_SA``. Airflow Variables, read when the task runs: ``costlib_config``,
``costlib_input_pattern`` (a glob with ``{date}``, e.g. ``gs://b/scores/dt={date}/*.parquet``),
``costlib_output``, ``costlib_temp_location`` (all gs://).

What this DAG shares with its Flink variant (costlib_recalibration_flink_dag.py): the schedule,
window and run id templates, guard limits, messages and the ``status`` alert, lives in
costlib_dag_common.py, which must sit beside it in the DAGs folder.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator
from airflow.providers.google.cloud.operators.dataflow import DataflowConfiguration
from costlib_dag_common import (
    BAD_INPUT,
    DAG,
    HELD_FOR_REVIEW,
    MAX_THRESHOLD_CHANGE,
    MIN_RATED,
    OUTPUT,
    PYTHON,
    RUN_ID,
    SRC,
    START_DATE,
    WINDOW_LAST_DAY,
    AirflowException,
    AirflowFailException,
    BashOperator,
    bad_input_message,
    held_message,
    lookback_input,
    manifest_path,
    outcome,
    status_command,
)

DAG_ID = "costlib_recalibration"
#: The provider tracks the Dataflow job only for this runner name (BeamRunnerType.DataflowRunner).
RUNNER = "DataflowRunner"
#: A run longer than this is cancelled (on_kill cancels the Dataflow job) and retried.
EXECUTION_TIMEOUT = dt.timedelta(hours=6)
#: How long on_kill waits for Dataflow to confirm the cancellation.
CANCEL_TIMEOUT_SECONDS = 600

IMAGE = os.environ.get("COSTLIB_IMAGE", "")
PROJECT = os.environ.get("COSTLIB_PROJECT", "")
REGION = os.environ.get("COSTLIB_REGION", "europe-west1")
LAUNCHER_SA = os.environ.get("COSTLIB_LAUNCHER_SA", "")
WORKER_SA = os.environ.get("COSTLIB_WORKER_SA", "")


def _return_code(exc: BaseException) -> int | None:
    words = str(exc).rsplit("return code", 1)
    if len(words) == 2 and words[1].strip().isdigit():
        return int(words[1].strip())
    return None


class CostlibRecalibrateOperator(BeamRunPythonPipelineOperator):
    """The Beam operator plus costlib's outcome: held runs and bad input are not retried."""

    def execute(self, context):
        output = self.pipeline_options["output"]
        run_id = self.pipeline_options["run_id"]
        try:
            result = super().execute(context)
        except AirflowException as exc:
            code = _return_code(exc)
            if code == HELD_FOR_REVIEW:  # the driver saw the end (no job id was printed)
                raise AirflowFailException(held_message(output, run_id, [])) from exc
            if code == BAD_INPUT:
                raise AirflowFailException(bad_input_message(output, str(exc))) from exc
            raise
        outcome(self.read_manifest(output, run_id), output, run_id)
        return result

    def read_manifest(self, output: str, run_id: str) -> dict | None:
        path = manifest_path(output, run_id)
        if not path.startswith("gs://"):
            file = Path(path)
            return json.loads(file.read_text()) if file.exists() else None
        from airflow.providers.google.cloud.hooks.gcs import GCSHook

        bucket, _, name = path.removeprefix("gs://").partition("/")
        hook = GCSHook(gcp_conn_id=self.gcp_conn_id,
                       impersonation_chain=self.dataflow_config.impersonation_chain)
        if not hook.exists(bucket, name):
            return None
        return json.loads(hook.download(bucket_name=bucket, object_name=name))


with DAG(
    dag_id=DAG_ID,
    description="Daily costlib recalibration over a 7-day look-back window, with publish guard",
    schedule="30 2 * * *",  # SCHEDULE of costlib_dag_common, literal for the deploy checks
    start_date=START_DATE,
    catchup=False,
    # One run per output (the run's lock on gs:// is not atomic): one day at a time, in order.
    max_active_runs=1,
    default_args={"owner": "costlib"},
    tags=["costlib", "beam", "dataflow"],
) as dag:
    recalibrate = CostlibRecalibrateOperator(
        task_id="recalibrate",
        runner=RUNNER,
        py_file=f"{SRC}/deploy/recalibrate_entrypoint.py",
        py_interpreter=PYTHON,
        py_requirements=None,  # the baked venv: no virtualenv, no pip install per run
        pipeline_options={
            "config": "{{ var.value.costlib_config }}",
            "input": lookback_input(),
            "output": OUTPUT,
            "run_id": RUN_ID,
            "max_threshold_change": MAX_THRESHOLD_CHANGE,
            "min_rated": MIN_RATED,
            "log_level": "INFO",  # Beam logs "Created job with id: [...]": the provider tracks it
            "temp_location": "{{ var.value.costlib_temp_location }}",
            "sdk_container_image": IMAGE,
            "service_account_email": WORKER_SA,
        },
        dataflow_config=DataflowConfiguration(
            job_name="costlib-recalibrate-" + WINDOW_LAST_DAY,
            append_job_name=True,  # a retry is a new Dataflow job with its own name
            project_id=PROJECT,
            location=REGION,
            impersonation_chain=LAUNCHER_SA or None,
            wait_until_finished=True,
            cancel_timeout=CANCEL_TIMEOUT_SECONDS,
            drain_pipeline=False,  # batch: cancel, never drain
        ),
        execution_timeout=EXECUTION_TIMEOUT,
        retries=1,
        retry_delay=dt.timedelta(minutes=30),
    )

    status = BashOperator(
        task_id="status",
        # The alert: exit 3 when a run is held or LATEST is stale or broken (fails the DAG run).
        # As the launcher SA (impersonated), so the Airflow worker needs no bucket access.
        bash_command=status_command(
            f" --impersonate_service_account={LAUNCHER_SA}" if LAUNCHER_SA else ""),
        trigger_rule="all_done",  # also after a failed or held recalibration
        retries=0,
        execution_timeout=dt.timedelta(minutes=10),
    )

    recalibrate >> status
