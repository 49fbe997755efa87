"""Headless Chromium for the tests that look at rendered pages (report, docs site).

Debian's ``chromium`` (``.ci/run`` installs it); tests skip without it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)


def chromium() -> str:
    """The Chromium binary, or skip the test."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("chromium is not installed (apt-get install chromium; .ci/run installs it)")


def browse(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess:
    """Run headless Chromium with its console log on stderr."""
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr",
         "--v=0", *args],
        capture_output=True, text=True, timeout=180, check=False,
    )


def page_errors(stderr: str) -> list[str]:
    """Uncaught script errors and failed loads in Chromium's log."""
    return [line for line in stderr.splitlines()
            if "Uncaught" in line or "Failed to load" in line]
