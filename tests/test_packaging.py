"""The core install: `pip install .` into a fresh venv, without extras, is the library and only it.

Proves the promise of docs/install.md: every `costlib` module imports, the estimator and
decoding examples of the docs run, Apache Beam (and matplotlib) are not installed, a figure
asks for `costlib[plots]`, and the `costlib` command asks for `costlib[pipelines]` with exit
code 2. The core's dependencies are installed at the versions of requirements/runtime.txt
(`-c`), so pip's cache serves them; pip may still ask the index (no network: a clear failure).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

#: What `pip install .` needs from the tree: build files and the three packages.
PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE", "costlib", "pipelines", "schemas")

IMPORT_ALL = """
import importlib, importlib.util, pkgutil, sys
import costlib
names = [m.name for m in pkgutil.walk_packages(costlib.__path__, "costlib.")]
for name in names:
    importlib.import_module(name)
from importlib import metadata
assert costlib.__version__ == metadata.version("costlib"), costlib.__version__
missing = [m for m in ("apache_beam", "matplotlib", "pyarrow", "yaml") if
           importlib.util.find_spec(m) is None]
print(len(names), costlib.__file__, ",".join(missing))
"""

#: Runs the python blocks of one docs page in one namespace, in order. A block that draws a
#: figure must fail with the message naming the plots extra (matplotlib is not installed).
RUN_PAGE = """
import sys
from costlib._optional import MissingExtraError
blocks = sys.stdin.read().split("\\n#---block---\\n")
namespace = {}
for block in blocks:
    if "plot_" in block:
        try:
            exec(block, namespace)
        except MissingExtraError as exc:
            assert "pip install 'costlib[plots]'" in str(exc), exc
            print("plots extra asked for")
            continue
        raise AssertionError("a figure was drawn without matplotlib")
    exec(block, namespace)
print("ran", len(blocks), "blocks")
"""


def python_blocks(page: str) -> list[str]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_docs_pages_hold_the_examples_this_test_runs():
    # The examples are the docs' own: if a page loses its examples this test must say so.
    assert len(python_blocks("estimators.md")) >= 2
    assert any("TunedThresholdClassifierCV" in b for b in python_blocks("estimators.md"))
    assert len(python_blocks("decoding.md")) >= 2
    assert any("plot_expected_losses(" in b for b in python_blocks("decoding.md"))


@pytest.mark.slow
def test_core_install_in_a_fresh_venv_is_the_library_without_beam(tmp_path):
    started = time.perf_counter()
    src = tmp_path / "src"
    for name in PROJECT_FILES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(path, src / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin/python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "-c", str(ROOT / "requirements/runtime.txt"), str(src)],
        capture_output=True, text=True, timeout=1200, cwd=tmp_path,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    installed = time.perf_counter()
    subprocess.run([python, "-m", "pip", "check"], check=True, timeout=300, cwd=tmp_path,
                   capture_output=True)

    # Every module imports, from the venv (cwd is tmp_path, not the checkout).
    out = subprocess.run([python, "-c", IMPORT_ALL], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    count, location, missing = out.stdout.split()
    assert int(count) >= 20
    assert location.startswith(str(venv))
    assert set(missing.split(",")) == {"apache_beam", "matplotlib", "pyarrow", "yaml"}

    # The docs' estimator and decoding examples run on the core install.
    for page in ("estimators.md", "decoding.md"):
        blocks = python_blocks(page)
        run = subprocess.run([python, "-c", RUN_PAGE], input="\n#---block---\n".join(blocks),
                             capture_output=True, text=True, timeout=600, cwd=tmp_path)
        assert run.returncode == 0, f"{page}: {run.stderr[-3000:]}"
        assert f"ran {len(blocks)} blocks" in run.stdout
    assert "plots extra asked for" in run.stdout  # decoding.md's figure

    # The command line and the pipelines say which extra they need, in one line.
    cli = subprocess.run([str(venv / "bin/costlib"), "demo"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert cli.returncode == 2
    assert cli.stdout == ""
    assert cli.stderr.strip().splitlines() == [cli.stderr.strip()]
    assert "pip install 'costlib[pipelines]'" in cli.stderr and "apache-beam" in cli.stderr
    probe = subprocess.run([python, "-c", "import costlib_pipelines.recalibrate.pipeline"],
                           capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert probe.returncode == 1
    assert probe.stderr.strip().splitlines()[-1].startswith("ImportError: ")
    assert "pip install 'costlib[pipelines]'" in probe.stderr
    print(f"\ncore install {installed - started:.1f} s, checks "
          f"{time.perf_counter() - installed:.1f} s")


def test_every_package_directory_is_installed_under_its_mapped_name():
    import tomllib

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapping = setuptools["package-dir"]
    assert mapping == {"costlib_pipelines": "pipelines", "costlib_schemas": "schemas"}
    directory_of = {**{name: name for name in ("costlib",)}, **mapping}
    expected = set()
    for name, directory in directory_of.items():
        for init in sorted((ROOT / directory).rglob("__init__.py")):
            if "__pycache__" in init.parts:
                continue
            rel = init.parent.relative_to(ROOT / directory)
            expected.add(".".join((name, *rel.parts)))
    # A new subpackage must be added to pyproject.toml, or it would be left out of the wheel.
    assert set(setuptools["packages"]) == expected


def test_the_repository_directories_cannot_be_imported_under_their_own_names():
    import tomllib

    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    for installed, bare in mapping.items():  # e.g. costlib_pipelines <- pipelines/
        result = subprocess.run([sys.executable, "-c", f"import {bare}"], cwd=ROOT,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 1
        assert f"import {installed}" in result.stderr.strip().splitlines()[-1]
