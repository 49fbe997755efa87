"""The docs site: a strict build, a strict build that fails on a broken API reference, and the
index and one API page looked at in headless Chromium (skipped without chromium, like the
report's browser tests; .ci/run installs it)."""

from __future__ import annotations

import functools
import http.server
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from browser import browse, chromium, page_errors

pytest.importorskip("mkdocs")
pytest.importorskip("mkdocstrings")

ROOT = Path(__file__).resolve().parent.parent
QUIET = {"NO_MKDOCS_2_WARNING": "1"}


def _mkdocs(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "mkdocs", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600, env={**os.environ, **QUIET})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    result = _mkdocs("build", "--strict", "--site-dir", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_strict_build_writes_every_page_and_the_api_reference(site):
    for page in ("index.html", "install/index.html", "estimators/index.html",
                 "decoding/index.html", "reproduction/index.html", "deployment/index.html",
                 "api/estimators/index.html", "api/decoding/index.html",
                 "api/sample/index.html", "reference/config/index.html",
                 "reference/cli/index.html"):
        assert (site / page).exists(), page
    api = (site / "api/estimators/index.html").read_text()
    # Objects rendered from the code, with their anchors.
    for anchor in ("costlib.costs.benefit_scorer",
                   "costlib.costs.expected_benefit",
                   "costlib.estimators.HierarchicalCostSensitiveClassifier"):
        assert f'id="{anchor}"' in api, anchor
    # The generated references: one anchor per config key and per command.
    config = (site / "reference/config/index.html").read_text()
    for key in ("columns.group", "grid.edges", "audit.strata.weights", "min_risk.fn.column"):
        assert f'id="{key}"' in config, key
    assert 'id="recalibrate"' in (site / "reference/cli/index.html").read_text()
    # The deployment page includes the runbook itself.
    assert "IAM and service accounts" in (site / "deployment/index.html").read_text()


def test_strict_build_fails_on_a_reference_to_a_missing_name(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Broken\n\n::: costlib.costs._benefit.no_such_function\n")
    (tmp_path / "mkdocs.yml").write_text(
        "site_name: broken\nstrict: true\nplugins:\n  - mkdocstrings:\n      handlers:\n"
        f"        python:\n          paths: [{str(ROOT)!r}]\n"
    )
    result = _mkdocs("build", "--strict", "--site-dir", str(tmp_path / "site"), cwd=tmp_path)
    assert result.returncode != 0
    assert "no_such_function" in result.stderr


@pytest.mark.parametrize(("path", "texts"), [
    ("/", ("Where to start", "Optimal top-k decoding", "TunedThresholdClassifierCV")),
    ("/api/estimators/", ("benefit_scorer", "HierarchicalCostSensitiveClassifier",
                          "TunedThresholdClassifierCV")),
])
def test_pages_render_in_chromium(served, tmp_path, path, texts):
    binary = chromium()
    result = browse(binary, tmp_path / "profile-dom", "--dump-dom", served + path)
    assert result.returncode == 0, result.stderr[-2000:]
    for text in texts:
        assert text in result.stdout, text
    # Material's scripts ran: the header and the search box were built in the DOM.
    assert 'class="md-header' in result.stdout and "md-search" in result.stdout
    assert page_errors(result.stderr) == []


@pytest.mark.parametrize("path", ["/", "/api/estimators/"])
def test_screenshots_are_not_blank(served, tmp_path, path):
    from PIL import Image

    binary = chromium()
    shot = tmp_path / "page.png"
    result = browse(binary, tmp_path / "profile-shot", f"--screenshot={shot}",
                     "--window-size=1280,1600", served + path)
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    image = np.asarray(Image.open(shot).convert("RGB"), dtype=int)
    assert image.shape == (1600, 1280, 3)
    # The Material header bar is coloured (indigo): a band of saturated pixels at the top.
    header = image[:48]
    assert ((header.max(axis=2) - header.min(axis=2)) > 80).mean() > 0.5
    # Below it, text: many dark pixels on a light page (a blank or unstyled-error page fails).
    body = image[100:1600]
    dark = (body.max(axis=2) < 100).mean()
    light = (body.min(axis=2) > 200).mean()
    assert dark > 0.005 and light > 0.5, (dark, light)
    assert page_errors(result.stderr) == []
