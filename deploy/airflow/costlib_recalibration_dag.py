"""Daily costlib recalibration on Dataflow, scheduled by Airflow.

Each day at 02:30 UTC the DAG runs ``costlib recalibrate`` over the last ``LOOKBACK_DAYS``
complete days of daily input partitions: the ``LOOKBACK_DAYS`` days before the run's
``data_interval_end`` (the scheduled time, in Airflow 2 and 3 alike; ``ds`` is not used because
Airflow 3's cron schedules make it the run's own, still incomplete, day). The run goes into
``OUTPUT/runs/daily-<YYYYMMDD of the window's last day>/``, next to the previous days' runs, as
the CronJob's do. The publish guard decides whether ``OUTPUT/LATEST`` moves to it:

* exit 0: published;
* exit 3: complete but *held for review* (thresholds moved more than ``--max-threshold-change``
  or rest on fewer than ``--min-rated`` rated rows): the task fails at once, without retries,
  with a message saying so; a person releases the run or keeps the old one (deploy/README.md);
* exit 2: bad config or input: fails at once, without retries;
* anything else (a worker or service failure): retried once; the retry re-uses the day's run
  id, so it replaces that run's directory instead of adding a second run.

The operator is the Apache Beam provider's ``BeamRunPythonPipelineOperator``. It runs
``deploy/recalibrate_entrypoint.py`` (which maps ``--run_id=X`` to ``--run-id=X`` and calls
``costlib recalibrate``) in a virtualenv it creates with the pinned set of
``requirements/runtime.txt``, the project and Beam's GCP extra, so Airflow's own dependencies
never meet the pins. The runner is named by its full class path: the provider treats the name
``DataflowRunner`` specially and stops waiting for the process once the Dataflow job id is
known, which would cut off what ``costlib recalibrate`` does after the job (row accounting,
manifest, publish guard, ``LATEST``). With the class path the task waits for the whole command
and sees its exit code. Workers run the costlib image (``sdk_container_image``).

Needs on the Airflow workers: ``apache-airflow-providers-apache-beam`` and
``apache-airflow-providers-google`` (the Beam operator refuses to start without the Google
provider), ``python3.11``, and a checkout of this repository at the deployed commit, named by
the environment variable ``COSTLIB_SRC`` (read when the DAG is parsed: the operator's
``py_requirements`` is not a template field).

Airflow Variables (Admin -> Variables), read when the task runs: ``costlib_image``
(deploy/build_image.sh's image), ``costlib_project``, ``costlib_region``,
``costlib_temp_location`` (gs://), ``costlib_config`` (gs:// run config),
``costlib_input_pattern`` (a glob with ``{date}`` for YYYY-MM-DD, e.g.
``gs://bucket/scores/dt={date}/*.parquet``), ``costlib_output`` (gs:// output directory).
"""

from __future__ import annotations

import datetime as dt
import os

from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator

try:  # Airflow 3
    from airflow.sdk import DAG
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # Airflow 2
    from airflow import DAG
    from airflow.exceptions import AirflowException, AirflowFailException

DAG_ID = "costlib_recalibration"
LOOKBACK_DAYS = 7
MAX_THRESHOLD_CHANGE = 0.2
MIN_RATED = 50
#: The full class path keeps the provider from detaching once the Dataflow job id is known.
RUNNER = "apache_beam.runners.dataflow.dataflow_runner.DataflowRunner"
#: Exit codes of ``costlib recalibrate``.
BAD_INPUT, HELD_FOR_REVIEW = 2, 3

#: This repository on the Airflow workers (the deployed commit).
SRC = os.environ.get("COSTLIB_SRC", "/opt/airflow/costlib")


def day_before_end(days: int) -> str:
    """Jinja expression: the date ``days`` days before the run's ``data_interval_end``."""
    return "macros.ds_add(data_interval_end | ds, " + str(-days) + ")"


def lookback_input(variable: str = "costlib_input_pattern", days: int = LOOKBACK_DAYS) -> str:
    """Comma-separated globs of the ``days`` complete days before the run, oldest first.

    A template: the Airflow Variable ``variable`` holds a glob with ``{date}`` (YYYY-MM-DD),
    which Jinja's ``replace`` filter fills in for each day when the task runs.
    """
    return ",".join(
        "{{ var.value." + variable + " | replace('{date}', " + day_before_end(back) + ") }}"
        for back in range(days, 0, -1)
    )


#: YYYYMMDD of the window's last day (yesterday, relative to the scheduled time).
WINDOW_LAST_DAY = "{{ " + day_before_end(1) + " | replace('-', '') }}"


class CostlibRecalibrateOperator(BeamRunPythonPipelineOperator):
    """``BeamRunPythonPipelineOperator`` that reads costlib's exit codes.

    The provider raises ``AirflowException("Apache Beam process failed with return code N")``
    for any non-zero exit; codes 3 (held for review) and 2 (bad config or input) become
    ``AirflowFailException`` (no retries) with a message that says what happened.
    """

    def execute(self, context):
        try:
            return super().execute(context)
        except AirflowException as exc:
            code = _return_code(exc)
            if code == HELD_FOR_REVIEW:
                output = self.pipeline_options.get("output")
                run_id = self.pipeline_options.get("run_id")
                raise AirflowFailException(
                    f"HELD FOR REVIEW: run {run_id} is complete but the publish guard kept "
                    f"{output}/LATEST where it was (violations in the log above and in "
                    f"{output}/runs/{run_id}/manifest.json). After review either publish it: "
                    f"costlib publish --output {output} --run-id {run_id} --by NAME --reason "
                    f"TEXT, or leave LATEST as it is. Not retried."
                ) from exc
            if code == BAD_INPUT:
                raise AirflowFailException(
                    f"costlib recalibrate rejected its config or input (exit 2, message in the "
                    f"log above); not retried: {exc}"
                ) from exc
            raise


def _return_code(exc: BaseException) -> int | None:
    words = str(exc).rsplit("return code", 1)
    if len(words) == 2 and words[1].strip().isdigit():
        return int(words[1].strip())
    return None


with DAG(
    dag_id=DAG_ID,
    description="Daily costlib recalibration over a 7-day look-back window, with publish guard",
    schedule="30 2 * * *",  # 02:30 UTC, like the CronJob: yesterday's partition is complete
    start_date=dt.datetime(2026, 11, 1, tzinfo=dt.UTC),
    catchup=False,
    max_active_runs=1,  # the guard compares with LATEST: one day at a time, in order
    default_args={
        "owner": "costlib",
        "retries": 1,
        "retry_delay": dt.timedelta(minutes=30),
        "execution_timeout": dt.timedelta(hours=6),
    },
    tags=["costlib", "beam", "dataflow"],
) as dag:
    recalibrate = CostlibRecalibrateOperator(
        task_id="recalibrate",
        runner=RUNNER,
        py_file=f"{SRC}/deploy/recalibrate_entrypoint.py",
        py_interpreter=os.environ.get("COSTLIB_PYTHON", "python3.11"),
        py_requirements=[
            "-r", f"{SRC}/requirements/runtime.txt",
            "apache-beam[gcp]==2.77.0",  # the DataflowRunner and gs:// for the driver
            SRC,
        ],
        py_system_site_packages=False,
        pipeline_options={
            "config": "{{ var.value.costlib_config }}",
            "input": lookback_input(),
            "output": "{{ var.value.costlib_output }}",
            "run_id": "daily-" + WINDOW_LAST_DAY,
            "max_threshold_change": MAX_THRESHOLD_CHANGE,
            "min_rated": MIN_RATED,
            "project": "{{ var.value.costlib_project }}",
            "region": "{{ var.value.costlib_region }}",
            "temp_location": "{{ var.value.costlib_temp_location }}",
            "sdk_container_image": "{{ var.value.costlib_image }}",
            "job_name": "costlib-recalibrate-" + WINDOW_LAST_DAY,
        },
    )
