"""Run ``costlib recalibrate`` from ``--name=value`` pipeline options.

Two launchers call a Python *file* with options spelt ``--name=value``, names in snake_case:

* the Dataflow Flex Template launcher (``FLEX_TEMPLATE_PYTHON_PY_FILE``), which passes every
  template parameter of ``deploy/dataflow/metadata.json`` as ``--<parameter>=<value>`` (an
  optional parameter that was not given as an empty value) plus the Dataflow options
  (``--runner``, ``--project``, ``--region``, ``--temp_location``, ``--template_location``...);
* Airflow's ``BeamRunPythonPipelineOperator``, which runs ``python FILE --runner=R`` followed by
  its ``pipeline_options`` as ``--key=value`` (booleans as a bare ``--key``).

The CLI accepts its own flags in the underscore spelling (``--run_id``) and checks every other
argument against Beam's pipeline options (exit 2 for an unknown one), so :func:`translate` only
does what the launchers need beyond that: an empty value of a costlib flag is dropped, and the
boolean ``--override_guard=true|false`` becomes ``--override-guard`` or nothing. Exit codes are
the CLI's (pipelines/commands/exit_codes.py): 0 published, 2 bad input/config/command line, 3
complete but held for review by the publish guard, 1 a bug or an infrastructure failure.

Flex Template launches pass ``--template_location``: Beam's DataflowRunner then writes the job
graph and returns at once. The job still publishes itself: in a batch run the pipeline's last
stage checks the row accounting, applies the publish guard, writes ``manifest.json`` and moves
``LATEST`` (or holds the run), on every runner.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

TRUE = ("true", "1", "yes")


def option_to_flag(name: str) -> str:
    """Option name -> ``costlib recalibrate`` flag (``run_id`` -> ``--run-id``)."""
    return "--" + name.replace("_", "-")


def flag_to_option(flag: str) -> str:
    """``costlib recalibrate`` flag -> option name (``--run-id`` -> ``run_id``)."""
    return flag.removeprefix("--").replace("-", "_")


def recalibrate_parser() -> argparse.ArgumentParser:
    """The ``costlib recalibrate`` argument parser, as the CLI builds it."""
    from costlib_pipelines.commands.cli import _subparser, build_parser

    return _subparser(build_parser(), "recalibrate")


#: The always-on worker's flags (``--follow`` runs on Flink only): not template parameters.
FOLLOW_FLAGS = ("--follow", "--upgrade", "--poll-seconds", "--settle-seconds")


def cli_options(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.Action]:
    """Option name -> argparse action for every flag ``costlib recalibrate`` itself declares
    (not ``--help``, the common ``--log-level``, or the always-on worker's :data:`FOLLOW_FLAGS`:
    a template launches one bounded job)."""
    parser = parser or recalibrate_parser()
    options = {}
    for action in parser._actions:
        for flag in action.option_strings:
            if flag.startswith("--") and flag not in ("--help", "--log-level", *FOLLOW_FLAGS):
                options[flag_to_option(flag)] = action
    return options


def translate(argv: Sequence[str]) -> list[str]:
    """Launcher options -> ``costlib recalibrate`` arguments (see the module docstring)."""
    options = cli_options()
    out: list[str] = []
    for arg in argv:
        name, sep, value = arg.removeprefix("--").partition("=")
        action = options.get(name) if arg.startswith("--") else None
        if action is None:
            out.append(arg)  # a Beam option, or --log_level: the CLI checks it
        elif action.nargs == 0:  # --override_guard[=true|false]
            if not sep or value.strip().lower() in TRUE:
                out.append(option_to_flag(name))
        elif sep and value != "":
            out.append(arg)
        # an empty value: a parameter the launcher passes although it was not set
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = translate(list(sys.argv[1:] if argv is None else argv))
    # Dataflow's job messages go to the job's log, not to the launcher's stdout: after the
    # Airflow provider has the job id it stops reading this process's output.
    logging.getLogger("apache_beam.runners.dataflow.dataflow_runner").setLevel(logging.WARNING)
    from costlib_pipelines.commands.cli import main as costlib_main

    print("costlib recalibrate " + " ".join(argv), flush=True)
    return costlib_main(["recalibrate", *argv])


if __name__ == "__main__":
    sys.exit(main())
