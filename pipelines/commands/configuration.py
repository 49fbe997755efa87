"""``costlib config CONFIG``: check a run config; ``--resolved`` prints it with every default.

A config names only the keys that matter for its stream (``costlib demo`` writes such a
file); every other key takes its default from ``schemas/run_config.schema.json``. The resolved
config printed here is exactly what a run records in its manifest (``config``) and hashes into
its config digest. Exit 0 for a valid config, 2 for a missing or invalid one (the message names
the file and the key).
"""

from __future__ import annotations

import argparse

PASSES_BEAM_ARGS = False


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the options of ``costlib config``."""
    parser.add_argument("config", metavar="CONFIG", help="YAML run config")
    parser.add_argument("--resolved", action="store_true",
                        help="print the config with every default filled in (YAML)")


def run(args: argparse.Namespace) -> int:
    """Validate ``CONFIG``; print its digest, or with ``--resolved`` the resolved config."""
    import yaml

    from costlib_pipelines.config import load_config

    config = load_config(args.config)
    if args.resolved:
        print(yaml.safe_dump(config.raw, sort_keys=False, allow_unicode=True), end="")
    else:
        print(f"{args.config}: valid run config (config digest {config.digest}); "
              "--resolved prints every default")
    return 0
