"""Apache Beam pipelines of costlib: IO, validation, composite transforms, the CLI.

Importing Beam without its optional Google Cloud client libraries logs "apitools not found, and
bigquery client libraries are not available" on the root logger at import time; it is about
GCP connectors these pipelines do not use, so that one message is filtered out. Everything else
Beam logs is left alone.

Subpackages by stage: :mod:`.io` (files, runs, lock, records), :mod:`.recalibrate`,
:mod:`.decide`, :mod:`.report`, :mod:`.commands` (the command line); :mod:`.config` (the run
configuration) and :mod:`.runner` (creating a Beam pipeline) serve them all.

Installed as ``costlib_pipelines`` (the repository keeps the directory ``pipelines/``; see
docs/install.md). These modules need the ``pipelines`` extra
(``pip install 'costlib[pipelines]'``: Apache Beam, pyarrow, PyYAML, jsonschema, matplotlib,
Jinja2).
Without it, importing this package raises one :class:`ImportError` naming that command, and
the ``costlib`` command prints it and exits 2.
"""

import logging
import os
import sys
from importlib.util import find_spec

#: Import name -> distribution of everything the pipelines import beyond costlib's core.
EXTRA_MODULES = {"apache_beam": "apache-beam", "pyarrow": "pyarrow", "yaml": "PyYAML",
                 "jsonschema": "jsonschema", "matplotlib": "matplotlib", "jinja2": "Jinja2"}


def missing_extra_message() -> str | None:
    """One line naming the missing distributions and the install command, or None."""
    missing = [dist for module, dist in EXTRA_MODULES.items() if find_spec(module) is None]
    if not missing:
        return None
    return (f"costlib's pipelines and command line need {', '.join(missing)} (not installed); "
            "install them with: pip install 'costlib[pipelines]'")


if __name__ != "costlib_pipelines":  # loaded under the directory's bare name (a checkout's root)
    raise ImportError(
        f"the pipelines/ directory is the package costlib_pipelines; import costlib_pipelines, "
        f"not {__name__} (a second name would load every module twice)"
    )

_MISSING = missing_extra_message()
if _MISSING is not None:
    if os.path.basename(sys.argv[0]).removesuffix(".exe") == "costlib":  # the console script
        print(f"costlib: {_MISSING}", file=sys.stderr)
        raise SystemExit(2)
    raise ImportError(_MISSING)


class _WithoutOptionalGcpNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


logging.getLogger().addFilter(_WithoutOptionalGcpNotice())
