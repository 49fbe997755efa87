"""Command-line flags: costlib's own spellings, and Beam flags checked before anything runs.

A Beam pipeline silently *discards* a flag it does not know (it logs "Discarding unparseable
args"). For costlib that turned a misspelt guard flag (``--max-threshhold-change=0.001``) into a
published run. So every argument a command does not declare must be a pipeline option some Beam
options class defines, or the command stops with exit 2, naming the flag and its closest match.

costlib's own multi-word flags are accepted in both spellings (``--max-threshold-change`` and
``--max_threshold_change``, as Airflow operators and Flex Template launchers write them): the
underscore spelling is rewritten to the hyphenated one before parsing, for the flags the command
declares only, so Beam's own underscore flags (``--direct_num_workers``) pass through untouched.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
from collections.abc import Iterable, Sequence

__all__ = [
    "UsageError",
    "check_beam_flags",
    "check_runner",
    "closest_flag",
    "declared_flags",
    "normalise_spellings",
]


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
    """A parser holding every option of every imported Beam ``PipelineOptions`` class."""
    from apache_beam.options.pipeline_options import PipelineOptions, _BeamArgumentParser

    class Parser(_RefusingParser, _BeamArgumentParser):
        pass

    parser = Parser(allow_abbrev=False, add_help=False)
    seen: dict[str, type] = {}
    for cls in PipelineOptions.__subclasses__():  # as PipelineOptions.get_all_options does
        seen.setdefault(str(cls), cls)
    for cls in seen.values():
        cls._add_argparse_args(parser)
    return parser


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
    if "." in runner:
        module_name, _, class_name = runner.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"--runner={runner}: cannot import it ({exc})") from exc
        if isinstance(cls, type) and issubclass(cls, PipelineRunner):
            return runner
        raise UsageError(f"--runner={runner}: not an Apache Beam PipelineRunner class")
    suggestion = difflib.get_close_matches(runner.lower(), list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {known[suggestion[0]]}?" if suggestion else ""
    raise UsageError(f"--runner={runner}: unknown runner{hint} (Beam knows "
                     f"{', '.join(sorted(StandardOptions.KNOWN_RUNNER_NAMES))})")
