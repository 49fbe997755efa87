"""Command-line flags: costlib's own spellings, and Beam flags checked before anything runs.

A Beam pipeline silently *discards* a flag it does not know (it logs "Discarding unparseable
args"). For costlib that turned a misspelt guard flag (``--max-threshhold-change=0.001``) into a
published run. So every argument a command does not declare must be a pipeline option some Beam
options class defines, or the command stops with exit 2, naming the flag and its closest match.

costlib's own multi-word flags are accepted in both spellings (``--max-threshold-change`` and
``--max_threshold_change``, as Airflow operators and Flex Template launchers write them): the
underscore spelling is rewritten to the hyphenated one before parsing, for the flags the command
declares only, so Beam's own underscore flags (``--direct_num_workers``) pass through untouched.

The check knows the options of every runner Beam ships, not only of the options classes some
earlier import happened to define: :func:`check_beam_flags` imports the modules holding them
(:data:`OPTION_MODULES`: direct, portable/Job API, Flink, Spark, Prism, Kafka Streams, Dataflow
and Google Cloud, Render). Dask's ``DaskOptions`` live in a module that imports ``dask``, an
optional extra, so unless that module is already imported its flags come from
:data:`DASK_FLAGS`, a copy of Beam's declaration (``tests/test_runner_options.py`` checks it
against Beam's source). ``--runner`` also accepts the runners Beam ships but knows only by
dotted path (:data:`SHIPPED_RUNNERS`: ``DaskRunner``, ``RenderRunner``).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
from collections.abc import Iterable, Sequence

__all__ = [
    "DASK_FLAGS",
    "OPTION_MODULES",
    "SHIPPED_RUNNERS",
    "UsageError",
    "check_beam_flags",
    "check_runner",
    "closest_flag",
    "declared_flags",
    "normalise_spellings",
    "resolve_runner",
]

#: Modules defining the ``PipelineOptions`` classes of Beam's runners that import without extras.
OPTION_MODULES = (
    "apache_beam.options.pipeline_options",  # direct, portable, Flink, Spark, Prism, Dataflow...
    "apache_beam.runners.render",  # RenderRunner
)

#: Beam's ``DaskOptions`` flags (``apache_beam/runners/dask/dask_runner.py``, Beam 2.77), used to
#: check a command line without importing ``dask``: flag -> ``type`` of its value. The last two
#: are mutually exclusive, as in Beam.
DASK_FLAGS: dict[str, type] = {
    "--dask_client_address": str,
    "--dask_connection_timeout": str,  # Beam: an int, anything else means "no timeout"
    "--dask_scheduler_file": str,
    "--dask_client_name": str,
    "--dask_connection_limit": int,
    "--dask_npartitions": int,
    "--dask_partition_size": int,
}
_DASK_EXCLUSIVE = ("--dask_npartitions", "--dask_partition_size")

#: Options of Beam's Java ``FlinkPipelineOptions`` that a streaming job on Flink needs and the
#: Python SDK does not declare (it passes them on to the job server as given): flag -> ``type``
#: of its value, None for a switch given without a value (as the job server expects them).
FLINK_JOB_FLAGS: dict[str, type | None] = {
    "--checkpointing_interval": int,
    "--checkpointing_mode": str,
    "--checkpoint_timeout_millis": int,
    "--min_pause_between_checkpoints": int,
    "--number_of_execution_retries": int,
    "--execution_retry_delay": int,
    "--externalized_checkpoints_enabled": None,
    "--retain_externalized_checkpoints_on_cancellation": None,
    "--savepoint_path": str,
    "--allow_non_restored_state": None,
    "--state_backend": str,
    "--state_backend_storage_path": str,
}

#: Runners Beam ships outside ``StandardOptions.KNOWN_RUNNER_NAMES`` (Beam itself only takes
#: them by dotted path): short name -> class path. ``--runner`` accepts either spelling.
SHIPPED_RUNNERS: dict[str, str] = {
    "DaskRunner": "apache_beam.runners.dask.dask_runner.DaskRunner",
    "RenderRunner": "apache_beam.runners.render.RenderRunner",
}

#: The pip extra a shipped runner needs, for the message when it cannot be imported.
_RUNNER_EXTRAS = {"DaskRunner": "pip install 'apache-beam[dask]'"}


class UsageError(ValueError):
    """A command line the CLI refuses (unknown flag, bad Beam flag value, unknown runner)."""


def declared_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Every ``--long`` option string a parser declares (``--help`` included)."""
    return {s for action in parser._actions for s in action.option_strings if s.startswith("--")}


def normalise_spellings(argv: Sequence[str], flags: Iterable[str]) -> list[str]:
    """Rewrite ``--some_flag[=v]`` to ``--some-flag[=v]`` where ``--some-flag`` is in ``flags``.

    Only tokens before a lone ``--`` are looked at; values are never changed.
    """
    flags = set(flags)
    out: list[str] = []
    for i, token in enumerate(argv):
        if token == "--":
            return out + list(argv[i:])
        if token.startswith("--") and "_" in token:
            name, sep, value = token.partition("=")
            hyphenated = "--" + name[2:].replace("_", "-")
            if hyphenated in flags and name not in flags:
                token = hyphenated + sep + value
        out.append(token)
    return out


class _RefusingParser(argparse.ArgumentParser):
    """Beam's options parser, raising :class:`UsageError` instead of exiting."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message)


def _beam_parser() -> argparse.ArgumentParser:
    """A parser holding every option of every Beam runner (and of any other imported class)."""
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    for module in OPTION_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:  # pragma: no cover - part of every Beam install
            pass

    class Parser(_RefusingParser, _BeamArgumentParser):
        pass

    parser = Parser(allow_abbrev=False, add_help=False)
    seen: dict[str, type] = {}
    for cls in PipelineOptions.__subclasses__():  # as PipelineOptions.get_all_options does
        seen.setdefault(str(cls), cls)
    for cls in seen.values():
        cls._add_argparse_args(parser)
    _add_dask_flags(parser)
    declared = declared_flags(parser)
    for flag, kind in FLINK_JOB_FLAGS.items():
        if flag not in declared:
            if kind is None:
                parser.add_argument(flag, action="store_true")
            else:
                parser.add_argument(flag, type=kind, default=None)
    return parser


def _add_dask_flags(parser: argparse.ArgumentParser) -> None:
    """Declare :data:`DASK_FLAGS` on ``parser`` unless Beam's ``DaskOptions`` already did.

    Only for checking the command line: Beam parses the values itself (with ``DaskOptions``)
    when the Dask runner runs.
    """
    declared = declared_flags(parser)
    if any(flag in declared for flag in DASK_FLAGS):  # dask_runner imported: Beam's own
        return
    group = parser.add_mutually_exclusive_group()
    for flag, kind in DASK_FLAGS.items():
        target = group if flag in _DASK_EXCLUSIVE else parser
        target.add_argument(flag, type=kind, default=None)


def closest_flag(flag: str, candidates: Iterable[str]) -> str | None:
    """The candidate spelt most like ``flag`` (hyphens and underscores alike), or None."""
    def key(s: str) -> str:
        return s.lstrip("-").replace("_", "-").lower()

    by_key = {key(c): c for c in candidates}
    match = difflib.get_close_matches(key(flag), list(by_key), n=1, cutoff=0.75)
    return by_key[match[0]] if match else None


def check_beam_flags(beam_args: Sequence[str], own_flags: Iterable[str]) -> None:
    """Refuse any argument that is not a known Beam pipeline option (or has a bad value).

    Parameters
    ----------
    beam_args : sequence of str
        The arguments the command itself did not declare.
    own_flags : iterable of str
        The command's own flags, for "did you mean" suggestions.

    Raises
    ------
    UsageError
        Naming the first unknown argument and its closest match among costlib's and Beam's
        flags.
    """
    if not beam_args:
        return
    parser = _beam_parser()
    _, unknown = parser.parse_known_args(list(beam_args))
    if not unknown:
        return
    first = next((u for u in unknown if u.startswith("-")), unknown[0])
    name = first.partition("=")[0]
    if not name.startswith("-"):
        raise UsageError(f"unexpected argument {first!r} (options are --name=value; quote a "
                         "glob such as --input 'dir/*.parquet' so the shell does not expand it)")
    if not name.startswith("--"):
        raise UsageError(f"unknown flag {name} (single-dash flags are not accepted)")
    suggestion = closest_flag(name, [*own_flags, *declared_flags(parser)])
    hint = f"; did you mean {suggestion}?" if suggestion else ""
    raise UsageError(
        f"unknown flag {name}: neither a costlib flag nor an Apache Beam pipeline option{hint}"
    )


def check_runner(beam_args: Sequence[str]) -> str | None:
    """The ``--runner`` named in ``beam_args`` after checking Beam knows it (None: default).

    Accepts Beam's runner names (any case, with or without the ``Runner`` suffix) and the dotted
    path of an importable ``PipelineRunner`` subclass.

    Raises
    ------
    UsageError
        An unknown runner name or a dotted path that is not a PipelineRunner.
    """
    if not beam_args:  # no flags, no runner: spare commands without Beam flags its import
        return None
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.runners.runner import PipelineRunner

    runner = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner
    if runner is None:
        return None
    if not isinstance(runner, str):  # pragma: no cover - only from Python, not a command line
        return type(runner).__name__
    known = {n.lower(): n for n in StandardOptions.KNOWN_RUNNER_NAMES}
    if runner.lower() in known or runner.lower() + "runner" in known:
        return runner
    path = resolve_runner(runner)
    if "." in path:
        module_name, _, class_name = path.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            short = _shipped_name(runner)
            extra = f"; it needs {_RUNNER_EXTRAS[short]}" if short in _RUNNER_EXTRAS else ""
            raise UsageError(f"--runner={runner}: cannot import it ({exc}){extra}") from exc
        if isinstance(cls, type) and issubclass(cls, PipelineRunner):
            return runner
        raise UsageError(f"--runner={runner}: not an Apache Beam PipelineRunner class")
    names = {**known, **{n.lower(): n for n in SHIPPED_RUNNERS}}
    suggestion = difflib.get_close_matches(runner.lower(), list(names), n=1, cutoff=0.6)
    hint = f"; did you mean {names[suggestion[0]]}?" if suggestion else ""
    every = sorted([*StandardOptions.KNOWN_RUNNER_NAMES, *SHIPPED_RUNNERS])
    raise UsageError(f"--runner={runner}: unknown runner{hint} (Beam knows {', '.join(every)})")


def _shipped_name(runner: str) -> str | None:
    """The :data:`SHIPPED_RUNNERS` name ``runner`` spells (any case, ``Runner`` optional)."""
    for name, path in SHIPPED_RUNNERS.items():
        if runner.lower() in (name.lower(), name.lower().removesuffix("runner"), path.lower()):
            return name
    return None


def resolve_runner(runner: str) -> str:
    """``runner`` with a :data:`SHIPPED_RUNNERS` short name replaced by its class path.

    Beam's own ``create_runner`` knows ``DaskRunner`` only as
    ``apache_beam.runners.dask.dask_runner.DaskRunner``; every other value is returned as is.
    """
    short = _shipped_name(runner)
    return SHIPPED_RUNNERS[short] if short is not None else runner
