"""The ``costlib`` command line.

Subcommands import their implementation lazily so that ``costlib --help`` is fast and the
library parts stay usable without Apache Beam being imported.

Every command keeps one exit-code contract (:mod:`costlib_pipelines.commands.exit_codes`): 0 ok, 2
bad input, config or command line (one line, no traceback), 3 held for review or a held/stale
``LATEST``, 4 the run's job failed on its engine (one line; the traceback in a file), 1 only
for bugs. Arguments a pipeline command does not declare must be Apache Beam
pipeline options (:mod:`costlib_pipelines.flags`); costlib's own flags are accepted with
hyphens or underscores.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from costlib_pipelines import interrupts
from costlib_pipelines.commands.exit_codes import BAD_INPUT, ENGINE_FAILED, HELD, classify

#: ``costlib reproduce NAME`` -> module with a ``main(argv) -> int`` function.
REPRODUCTIONS: dict[str, str] = {
    "robles2020": "costlib.experiments.robles2020",
    "natarajan2016": "costlib.experiments.natarajan2016",
    "sooklal_benefit": "costlib.experiments.sooklal_benefit",
    "example-costs": "costlib.experiments.example_costs",
}

#: ``costlib SUBCOMMAND`` -> module with ``add_arguments(parser)`` and ``run(args) -> int``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("costlib_pipelines.commands.demo", "Run the main job on a built-in generated sample."),
    "config": (
        "costlib_pipelines.commands.configuration",
        "Check a run config; --resolved prints it with every default.",
    ),
    "publish": (
        "costlib_pipelines.commands.publish",
        "Point OUTPUT/LATEST at a complete run (rollback, or release a held run).",
    ),
    "recalibrate": (
        "costlib_pipelines.commands.recalibrate",
        "Operating points per group from Parquet score streams (Beam pipeline).",
    ),
    "decide": (
        "costlib_pipelines.commands.decide",
        "Threshold and optimal top-k decisions per row of a Parquet score stream.",
    ),
    "report": (
        "costlib_pipelines.commands.report",
        "Self-contained HTML report of a recalibration run.",
    ),
    "status": (
        "costlib_pipelines.commands.status",
        "Check OUTPUT/LATEST and its follow jobs: exit 0 healthy, 3 held, stale or not running.",
    ),
    "clean": (
        "costlib_pipelines.commands.clean",
        "Remove incomplete runs (failed or interrupted) older than --older-than; --dry-run lists.",
    ),
    "unlock": (
        "costlib_pipelines.commands.unlock",
        "Remove the output lock a dead run left behind (only that run's lock).",
    ),
}

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

EXIT_CODES_HELP = ("exit codes: 0 ok; 2 bad input, config or command line; 3 held for review "
                   "(or, for status, a held or stale LATEST); 4 the job failed on its engine "
                   "(cluster); 1 a bug; 130/143 interrupted (SIGINT/SIGTERM)")


def version() -> str:
    """The installed costlib version (from the package metadata)."""
    from importlib import metadata  # costs more than the rest of the start-up: only here

    try:
        return metadata.version("costlib")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown (not installed)"


class OneLineParser(argparse.ArgumentParser):
    """argparse with one line on stderr for a malformed command line (the exit-code contract:
    2 with one message), pointing at ``--help`` instead of printing the whole usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")


def _common_options() -> argparse.ArgumentParser:
    common = OneLineParser(add_help=False, allow_abbrev=False)
    common.add_argument("--log-level", choices=LOG_LEVELS, type=str.upper, default=None,
                        help="log level of costlib and Beam (default WARNING)")
    return common


class _VersionAction(argparse.Action):
    """``--version``: print the installed version and exit (read only when asked for)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str = "show the version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> NoReturn:
        print(f"costlib {version()}")  # on stdout, as argparse's own version action
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The ``costlib`` parser with every subcommand (their modules are imported here)."""
    common = _common_options()
    parser = OneLineParser(
        prog="costlib", description="Cost-sensitive decisions on classifier scores.",
        epilog=EXIT_CODES_HELP, allow_abbrev=False, parents=[common],
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        epilog = (EXIT_CODES_HELP + ". Multi-word flags may also be spelt with underscores "
                  "(--run_id).")
        if getattr(module, "PASSES_BEAM_ARGS", False):
            epilog += (" Other arguments must be Apache Beam pipeline options (e.g. "
                       "--runner=FlinkRunner).")
        command_parser = sub.add_parser(
            name, help=help_text, description=help_text, allow_abbrev=False, parents=[common],
            epilog=epilog,
        )
        module.add_arguments(command_parser)
        command_parser.set_defaults(_module=module, _parser=command_parser)
    reproduce = sub.add_parser(
        "reproduce",
        help="Reproduce a source paper's experiment protocol and print its table.",
    )
    reproduce.add_argument("name", choices=sorted(REPRODUCTIONS))
    reproduce.add_argument(
        "rest", nargs=argparse.REMAINDER,
        help="options passed to the experiment (costlib reproduce NAME --help lists them)"
    )
    return parser


def parse_command_line(argv: Sequence[str]) -> argparse.Namespace:
    """Parse and check a command line without running anything.

    Unknown arguments of pipeline commands must be Beam pipeline options and ``--runner`` must
    name a runner Beam knows; the Beam arguments end up in ``args.beam_args``.

    Raises
    ------
    SystemExit
        From argparse (code 2) for a malformed command line, or 0 for ``--help``.
    costlib_pipelines.flags.UsageError
        An unknown flag or runner (the message names it and the closest match).
    """
    from costlib_pipelines.flags import (
        UsageError,
        check_beam_flags,
        check_runner,
        closest_flag,
        declared_flags,
        normalise_spellings,
    )

    parser = build_parser()
    argv = list(argv)
    command = _command_of(argv)
    if command in SUBCOMMANDS:
        position = argv.index(command)
        sub_parser = _subparser(parser, command)
        argv[position + 1:] = normalise_spellings(argv[position + 1:],
                                                  declared_flags(sub_parser))
    args, unknown = parser.parse_known_args(argv)
    args.beam_args = []
    if args.command == "reproduce":
        return args
    own = declared_flags(args._parser)
    if unknown and not getattr(args._module, "PASSES_BEAM_ARGS", False):
        first = next((u for u in unknown if u.startswith("-")), unknown[0])
        suggestion = closest_flag(first.partition("=")[0], own)
        hint = f"; did you mean {suggestion}?" if suggestion else ""
        raise UsageError(f"unrecognized argument {first}{hint}")
    check_beam_flags(unknown, own)
    check_runner(unknown)
    args.beam_args = unknown
    return args


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand word of a command line (the first token naming one), or None."""
    return next((a for a in argv if a in SUBCOMMANDS or a == "reproduce"), None)


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)  # pragma: no cover


def configure_logging(level: str | None) -> None:
    """Log at ``level`` on stderr (None: leave Python's default, WARNING and above).

    Below DEBUG, Beam's own log of a failing DoFn (the same error the command reports in one
    line, or re-raises as a bug) is silenced.
    """
    root = logging.getLogger()
    if level is not None:
        root.setLevel(level)
        if not root.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
            root.addHandler(handler)
    logging.getLogger("apache_beam.runners.common").setLevel(
        logging.DEBUG if level == "DEBUG" else logging.CRITICAL)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``costlib`` console script; returns the exit code.

    A subcommand module that sets ``PASSES_BEAM_ARGS = True`` receives the Beam flags in
    ``args.beam_args`` (checked to be Beam pipeline options; they also configure the
    filesystems, e.g. ``--impersonate_service_account`` for ``gs://``); for the other
    subcommands an unknown argument is an error. Expected failures give exit 2 or 3 with one
    message and no traceback (:func:`costlib_pipelines.commands.exit_codes.classify`); anything else
    is a bug and propagates.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_of(argv)
    prefix = "costlib" if command is None else f"costlib {command}"
    interrupts.reset(prefix)
    try:
        args = parse_command_line(argv)
    except SystemExit as exc:  # argparse: --help / --version (0) or a malformed line (2)
        return int(exc.code or 0)
    except ValueError as exc:  # UsageError
        print(f"{prefix}: error: {exc}", file=sys.stderr)
        return BAD_INPUT
    configure_logging(args.log_level)
    if args.beam_args:  # credentials of the output's filesystem (--impersonate_service_account)
        from apache_beam.io.filesystems import FileSystems
        from apache_beam.options.pipeline_options import PipelineOptions

        FileSystems.set_options(PipelineOptions(args.beam_args))
    if args.command == "reproduce":
        module = importlib.import_module(REPRODUCTIONS[args.name])
        return int(module.main(args.rest) or 0)
    try:
        return int(args._module.run(args) or 0)
    except Exception as exc:
        from costlib_pipelines.engine_failure import EngineFailed, report

        if isinstance(exc, EngineFailed) and interrupts.received() is None:
            print(report(exc, f"costlib {args.command}"), file=sys.stderr)
            return ENGINE_FAILED
        known = classify(exc)
        if known is None or interrupts.received() is not None:  # see console_main
            raise
        code, message = known
        kind = "held for review" if code == HELD else "error"
        print(f"costlib {args.command}: {kind}: {message}", file=sys.stderr)
        return code


class _StdoutReaderMayLeave:
    """``sys.stdout`` of the console script: once the reader has gone (``costlib status --json
    | head -c 100``), what the command still prints is discarded, so the command finishes and
    exits with its own code instead of a ``BrokenPipeError`` traceback (exit 1, a bug).

    As the Python docs advise (``signal``, "Note on SIGPIPE"), the file descriptor is then
    pointed at ``os.devnull``, so that output still buffered cannot raise again when flushed.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._gone = False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self._gone = True
        try:
            fileno = self._stream.fileno()
        except (OSError, ValueError, AttributeError):  # a stream without a file descriptor
            return
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fileno)
        finally:
            os.close(devnull)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def console_main() -> None:
    """The console script: :func:`main`, then exit without interpreter finalisation.

    After a pipeline the runner's worker threads (gRPC, Arrow pools) may still be winding down;
    exiting through ``os._exit`` after flushing keeps them from turning a clean exit code into
    an abort at interpreter shutdown. The ``atexit`` handlers run first (``os._exit`` skips
    them): Beam's ``FlinkRunner`` stops the job server it started in one. A reader of stdout
    that goes away early (``| head``) does not change the exit code
    (:class:`_StdoutReaderMayLeave`).

    SIGINT and SIGTERM end the command with 130 or 143 and one line on stderr
    (:mod:`costlib_pipelines.interrupts`): whatever the interrupt turned into on its way out
    (a runner wraps it in a ``RuntimeError``; a cleanup it cut short may fail), the signal
    decides the exit code and the message.
    """
    stdout = sys.stdout
    sys.stdout = _StdoutReaderMayLeave(stdout)
    interrupts.install()
    code = 1
    try:
        code = main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        if interrupts.received() is None:
            import traceback

            traceback.print_exc()
            code = 1
    if interrupts.received() is not None:
        print(interrupts.message(), file=sys.stderr, flush=True)
        code = interrupts.exit_code()
    sys.stdout.flush()
    sys.stdout = stdout
    try:  # what Beam registered to run at exit: e.g. stopping the job server FlinkRunner started
        atexit._run_exitfuncs()
    except BaseException as exc:  # an exit handler's failure does not change the exit code
        print(f"warning: at exit: {exc}", file=sys.stderr)
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    console_main()
