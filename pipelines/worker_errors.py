"""costlib's input errors as they reach the launcher from worker processes.

Runners with worker processes (``multi_processing``, portable, Flink, Dataflow) raise a
``RuntimeError`` whose text is the worker's traceback; a costlib input error in it is a line
``costlib_pipelines.io.files.InputError: <message>`` (or one of the other classes in
:data:`USER_ERROR_NAMES`). :func:`remote_user_error` finds the last such message, so the
command line's edge (:func:`costlib_pipelines.commands.exit_codes.classify`) reports it as
bad input and the runner (:func:`costlib_pipelines.runner.run_to_end`) never takes it for a
failure of the engine. Classes are named, not imported: this module imports nothing of
costlib's.
"""

from __future__ import annotations

import re

__all__ = ["USER_ERROR_NAMES", "remote_user_error"]

#: The exception classes that mean bad input, config or command line (exit 2), by name.
USER_ERROR_NAMES = (
    "costlib_pipelines.io.files.InputError",
    "costlib_pipelines.io.schema.SchemaError",
    "costlib_pipelines.config.ConfigError",
    "costlib_pipelines.flags.UsageError",
)
_REMOTE_ERROR = re.compile(
    r"^(?:" + "|".join(re.escape(n) for n in USER_ERROR_NAMES) + r"): (.*?)"
    r"(?=\n\s*\n|\nTraceback |\nDuring handling |\nThe above exception |\Z)",
    re.MULTILINE | re.DOTALL,
)


def remote_user_error(text: str) -> str | None:
    """The message of the last costlib input error in a worker's traceback ``text`` (None:
    there is none)."""
    found = _REMOTE_ERROR.findall(text)
    return found[-1] if found else None
