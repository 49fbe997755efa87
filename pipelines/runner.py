"""Creating a Beam pipeline from command-line style options, offline by default.

With no ``--runner`` flag the pipeline runs on Beam's ``FnApiRunner`` directly: in-process, no
attempt to download the Prism runner (which the default DirectRunner of Beam 2.77 makes), and
it honours ``--direct_running_mode`` (``in_memory``, ``multi_threading``,
``multi_processing``) and ``--direct_num_workers``. Any other runner flag (``--runner
FlinkRunner --flink_master ...``, ``--runner DataflowRunner --project ...``, ``--runner
PortableRunner --job_endpoint ...``) is passed through to Beam unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner

from costlib_pipelines.flags import check_runner

__all__ = ["make_pipeline", "runner_name"]


def runner_name(beam_args: Sequence[str]) -> str:
    """The runner ``beam_args`` select (``FnApiRunner`` by default), checked to be known.

    Raises
    ------
    costlib_pipelines.flags.UsageError
        An unknown ``--runner`` (before any input is read).
    """
    return check_runner(beam_args) or "FnApiRunner"


def make_pipeline(beam_args: Sequence[str] = ()) -> beam.Pipeline:
    """A pipeline for the given Beam flags; ``FnApiRunner`` when no ``--runner`` is given."""
    options = PipelineOptions(list(beam_args))
    if options.view_as(StandardOptions).runner is None:
        return beam.Pipeline(runner=FnApiRunner(), options=options)
    return beam.Pipeline(options=options)
