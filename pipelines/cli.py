"""The ``costlib`` command line.

Subcommands import their implementation lazily so that ``costlib --help`` is fast and the
library parts stay usable without Apache Beam being imported.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: ``costlib reproduce NAME`` -> module with a ``main(argv) -> int`` function.
REPRODUCTIONS: dict[str, str] = {
    "robles2020": "costlib.experiments.robles2020",
    "natarajan2016": "costlib.experiments.natarajan2016",
    "sooklal_benefit": "costlib.experiments.sooklal_benefit",
}

#: ``costlib SUBCOMMAND`` -> module with ``add_arguments(parser)`` and ``run(args) -> int``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("pipelines.commands.demo", "Run the main job on a built-in generated sample."),
    "publish": (
        "pipelines.commands.publish",
        "Point OUTPUT/LATEST at a complete run (rollback, or release a held run).",
    ),
    "recalibrate": (
        "pipelines.commands.recalibrate",
        "Operating points per group from Parquet score streams (Beam pipeline).",
    ),
    "decide": (
        "pipelines.commands.decide",
        "Threshold and optimal top-k decisions per row of a Parquet score stream.",
    ),
    "report": ("pipelines.commands.report", "Self-contained HTML report of a recalibration run."),
}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="costlib",
        description="Cost-sensitive decisions on classifier scores.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
        module.add_arguments(command_parser)
        command_parser.set_defaults(_module=module)
    reproduce = sub.add_parser(
        "reproduce",
        help="Reproduce a source paper's experiment protocol and print its table.",
    )
    reproduce.add_argument("name", choices=sorted(REPRODUCTIONS))
    reproduce.add_argument(
        "rest", nargs=argparse.REMAINDER, help="options passed to the experiment"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``costlib`` console script.

    A subcommand module that sets ``PASSES_BEAM_ARGS = True`` receives the arguments it does
    not declare (Beam flags such as ``--runner=FlinkRunner``) in ``args.beam_args``; for the
    other subcommands an unknown argument is an error.
    """
    parser = _build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "reproduce":
        module = importlib.import_module(REPRODUCTIONS[args.name])
        return int(module.main(args.rest) or 0)
    if unknown and not getattr(args._module, "PASSES_BEAM_ARGS", False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.beam_args = unknown
    try:
        return int(args._module.run(args) or 0)
    except _user_errors() as exc:  # bad config or input: one clear line, no traceback
        print(f"costlib {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except _held_for_review() as exc:  # complete, but the publish guard held it back
        print(f"costlib {args.command}: held for review: {exc}", file=sys.stderr)
        return 3


def _held_for_review() -> tuple[type[BaseException], ...]:
    from pipelines.publish import PublishRefused

    return (PublishRefused,)


def _user_errors() -> tuple[type[BaseException], ...]:
    """Errors caused by the user's config or input files (reported without a traceback)."""
    from pipelines.batches import SchemaError
    from pipelines.config import ConfigError
    from pipelines.files import InputError

    return (ConfigError, SchemaError, InputError)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
