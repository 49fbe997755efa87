"""Run ``costlib recalibrate`` from ``--name=value`` pipeline options.

Two launchers call a Python *file* with options spelt ``--name=value`` and names in snake_case:

* the Dataflow Flex Template launcher (``FLEX_TEMPLATE_PYTHON_PY_FILE``), which passes every
  template parameter of ``deploy/dataflow/metadata.json`` as ``--<parameter>=<value>`` plus the
  Dataflow options (``--runner``, ``--project``, ``--region``, ``--temp_location``, ...);
* Airflow's ``BeamRunPythonPipelineOperator``, which runs ``python FILE --runner=R`` followed by
  its ``pipeline_options`` dict as ``--key=value``.

This file maps the CLI's own flags from their option names (``run_id`` -> ``--run-id``, see
:func:`option_to_flag`), keeps every other option as a Beam flag, and calls
``pipelines.cli.main(["recalibrate", ...])``, so the exit codes are the CLI's: 0 published,
2 bad config or input, 3 complete but held for review by the publish guard.

Flex Template launches pass ``--template_location``: Beam's DataflowRunner then writes the job
graph and returns at once, and the CLI says so. The job still publishes itself: in a batch run
the pipeline's last stage checks the row accounting, applies the publish guard, writes
``manifest.json`` and moves ``LATEST`` (or holds the run), on every runner.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

#: Exit code of ``costlib recalibrate`` when the publish guard holds a complete run.
HELD_FOR_REVIEW = 3



def option_to_flag(name: str) -> str:
    """Option name -> ``costlib recalibrate`` flag (``run_id`` -> ``--run-id``)."""
    return "--" + name.replace("_", "-")


def flag_to_option(flag: str) -> str:
    """``costlib recalibrate`` flag -> option name (``--run-id`` -> ``run_id``)."""
    return flag.removeprefix("--").replace("-", "_")


def recalibrate_parser() -> argparse.ArgumentParser:
    """The ``costlib recalibrate`` argument parser, built by the command module itself."""
    from pipelines.commands import recalibrate

    parser = argparse.ArgumentParser(prog="costlib recalibrate", allow_abbrev=False)
    recalibrate.add_arguments(parser)
    return parser


def cli_options(parser: argparse.ArgumentParser | None = None) -> dict[str, argparse.Action]:
    """Option name -> argparse action for every flag ``costlib recalibrate`` declares."""
    parser = parser or recalibrate_parser()
    options = {}
    for action in parser._actions:
        for flag in action.option_strings:
            if flag.startswith("--") and flag != "--help":
                options[flag_to_option(flag)] = action
    return options


def _split(arg: str) -> tuple[str, str | None]:
    name, sep, value = arg.removeprefix("--").partition("=")
    return name, (value if sep else None)


def translate(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """``--name=value`` options -> (``costlib recalibrate`` arguments, Beam arguments).

    Options named after a CLI flag become that flag (``--run_id=X`` -> ``--run-id=X``); a
    boolean flag (``--override-guard``) is set by ``--override_guard`` or a true value
    (``true``, ``1``, ``yes``) and left out for a false one. Empty values are dropped, as the
    Flex Template launcher passes optional parameters that were not given as empty. Every other
    option is a Beam flag and is passed on unchanged.
    """
    options = cli_options()
    ours: list[str] = []
    beam: list[str] = []
    for arg in argv:
        name, value = _split(arg) if arg.startswith("--") else (None, None)
        action = options.get(name) if name else None
        if action is None:
            beam.append(arg)
            continue
        flag = option_to_flag(name)
        if action.nargs == 0:  # store_true
            if value is None or value.strip().lower() in ("true", "1", "yes"):
                ours.append(flag)
        elif value is not None and value != "":
            ours.append(f"{flag}={value}")
    return ours, beam


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, beam = translate(argv)
    from pipelines.cli import main as costlib_main

    print("costlib recalibrate " + " ".join(ours + beam), flush=True)
    code = costlib_main(["recalibrate", *ours, *beam])
    if code == HELD_FOR_REVIEW:
        print("HELD FOR REVIEW: the run is complete but the publish guard kept LATEST where it "
              "was (violations above and in the run's manifest.json). Release it after review "
              "with `costlib publish --output OUT --run-id ID --by NAME --reason TEXT`.",
              file=sys.stderr, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
