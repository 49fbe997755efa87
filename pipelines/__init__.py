"""Apache Beam pipelines of costlib: IO, validation, composite transforms, the CLI.

Importing Beam without its optional Google Cloud client libraries logs "apitools not found, and
bigquery client libraries are not available" on the root logger at import time; it is about
GCP connectors these pipelines do not use, so that one message is filtered out. Everything else
Beam logs is left alone.
"""

import logging


class _WithoutOptionalGcpNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "apitools not found" not in record.getMessage()


logging.getLogger().addFilter(_WithoutOptionalGcpNotice())
