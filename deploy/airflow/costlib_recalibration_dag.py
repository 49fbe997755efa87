"""Daily costlib recalibration on Dataflow, scheduled by Airflow.

Each day the DAG runs ``costlib recalibrate`` over the last ``LOOKBACK_DAYS`` daily input
partitions ending on the run's logical date (``ds``), into a new run
``OUTPUT/runs/daily-<YYYYMMDD>/`` next to the previous days' runs. The publish guard decides
whether ``OUTPUT/LATEST`` moves to it:

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

Airflow Variables (Admin -> Variables), read when the task runs:
``costlib_src`` (a checkout of this repository at the deployed commit, on the Airflow workers),
``costlib_image`` (deploy/build_image.sh's image), ``costlib_project``, ``costlib_region``,
``costlib_temp_location`` (gs://), ``costlib_config`` (gs:// run config),
``costlib_input_pattern`` (a glob with ``{date}`` for YYYY-MM-DD, e.g.
``gs://bucket/scores/dt={date}/*.parquet``), ``costlib_output`` (gs:// output directory).
"""

from __future__ import annotations

import datetime as dt
import os

from airflow import DAG
from airflow.exceptions import AirflowException, AirflowFailException
from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator

DAG_ID = "costlib_recalibration"
LOOKBACK_DAYS = 7
MAX_THRESHOLD_CHANGE = 0.2
MIN_RATED = 50
#: The full class path keeps the provider from detaching once the Dataflow job id is known.
RUNNER = "apache_beam.runners.dataflow.dataflow_runner.DataflowRunner"
#: Exit codes of ``costlib recalibrate``.
BAD_INPUT, HELD_FOR_REVIEW = 2, 3

SRC = "{{ var.value.costlib_src }}"


def lookback_input(variable: str = "costlib_input_pattern", days: int = LOOKBACK_DAYS) -> str:
    """Comma-separated globs of the ``days`` daily partitions ending on ``ds``, oldest first.

    A template: the Airflow Variable ``variable`` holds a glob with ``{date}`` (YYYY-MM-DD),
    which Jinja's ``replace`` filter fills with ``ds`` minus 0 .. days-1 days when the task
    runs.
    """
    return ",".join(
        "{{ var.value." + variable + " | replace('{date}', macros.ds_add(ds, " + str(-back)
        + ")) }}"
        for back in range(days - 1, -1, -1)
    )


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
    schedule="@daily",
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
            "run_id": "daily-{{ ds_nodash }}",
            "max_threshold_change": MAX_THRESHOLD_CHANGE,
            "min_rated": MIN_RATED,
            "project": "{{ var.value.costlib_project }}",
            "region": "{{ var.value.costlib_region }}",
            "temp_location": "{{ var.value.costlib_temp_location }}",
            "sdk_container_image": "{{ var.value.costlib_image }}",
            "sdk_location": "container",
            "job_name": "costlib-recalibrate-{{ ds_nodash }}",
        },
    )
