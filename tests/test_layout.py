"""The layout of docs/development.md: the package list and the layers.

- The subpackages are exactly the ones the map describes (a new folder updates both).
- The subpackages of ``costlib`` import each other along one order (no cycle): ``audit`` below
  ``thresholds``, nothing below ``decoding`` but itself; read from the source with :mod:`ast`,
  lazy imports inside functions included.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent

COSTLIB_PACKAGES = {"costlib", "costlib.audit", "costlib.costs", "costlib.decoding",
                    "costlib.estimators", "costlib.experiments", "costlib.thresholds",
                    "costlib.experiments.robles2020"}
PIPELINES_PACKAGES = {"costlib_pipelines", "costlib_pipelines.commands", "costlib_pipelines.decide",
                      "costlib_pipelines.io", "costlib_pipelines.recalibrate",
                      "costlib_pipelines.report"}


def _packages(directory: Path, name: str) -> set[str]:
    return {name + "".join("." + part for part in init.parent.relative_to(directory).parts)
            for init in directory.rglob("__init__.py")}


def test_the_packages_are_those_of_the_map():
    assert _packages(ROOT / "costlib", "costlib") == COSTLIB_PACKAGES
    assert _packages(ROOT / "pipelines", "costlib_pipelines") == PIPELINES_PACKAGES
    development = (ROOT / "docs" / "development.md").read_text()
    for package in COSTLIB_PACKAGES | PIPELINES_PACKAGES:
        folder = package.replace("costlib_pipelines", "pipelines").replace(".", "/")
        assert f"`{folder}/`" in development, folder


def _imported(path: Path, package: str) -> set[str]:
    """Absolute module names ``path`` imports (relative imports resolved against ``package``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                names.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                names.add(node.module)
    return names


def _subpackage_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in (ROOT / "costlib").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if len(parts) < 3:  # costlib/<module>.py: helpers every subpackage may use
            continue
        source = f"costlib.{parts[1]}"
        package = ".".join(parts[:-1])
        graph.add_node(source)
        for name in _imported(path, package):
            target = name.split(".")
            if target[0] == "costlib" and len(target) > 1 and f"costlib.{target[1]}" in \
                    COSTLIB_PACKAGES and f"costlib.{target[1]}" != source:
                graph.add_edge(source, f"costlib.{target[1]}")
    return graph


def test_costlib_subpackages_import_each_other_without_cycles():
    graph = _subpackage_graph()
    assert set(graph) == {package for package in COSTLIB_PACKAGES if package.count(".") == 1}
    assert nx.is_directed_acyclic_graph(graph), list(nx.simple_cycles(graph))
    # The layers the map states: the engine builds on the audit weights, never the reverse.
    assert graph.has_edge("costlib.thresholds", "costlib.audit")
    assert not nx.has_path(graph, "costlib.audit", "costlib.thresholds")
    assert not nx.has_path(graph, "costlib.decoding", "costlib.thresholds")


def test_the_cycle_check_sees_a_cycle(tmp_path):
    """The graph reader finds imports of both kinds (absolute and relative, inside functions)."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from costlib.audit import _weights\n"
                      "from ..thresholds import _grid\nimport costlib.costs._benefit\n")
    assert _imported(module, "costlib.decoding") == {
        "costlib.audit", "costlib.thresholds", "costlib.costs._benefit"}


#: The stages of costlib_pipelines, bottom up; the top-level modules (config, runner, flags)
#: serve them all and import no stage.
STAGES = ("io", "recalibrate", "decide", "report", "commands")


def _stage_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in (ROOT / "pipelines").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        source = parts[1] if len(parts) > 2 else "top"
        package = "costlib_pipelines" + "".join("." + part for part in parts[1:-1])
        graph.add_node(source)
        for name in _imported(path, package):
            target = name.split(".")
            if target[0] != "costlib_pipelines" or len(target) < 2:
                continue
            stage = target[1] if target[1] in STAGES else "top"
            if stage != source:
                graph.add_edge(source, stage)
    return graph


def test_pipeline_stages_import_each_other_without_cycles():
    graph = _stage_graph()
    assert set(graph) == {"top", *STAGES}
    assert nx.is_directed_acyclic_graph(graph), list(nx.simple_cycles(graph))
    assert not any(graph.has_edge("top", stage) for stage in STAGES)
    order = {stage: i for i, stage in enumerate(STAGES)}
    upward = [(a, b) for a, b in graph.edges if a != "top" and b != "top" and order[b] > order[a]]
    assert not upward, upward


def test_no_pipeline_module_is_over_550_lines():
    sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines())
             for path in (ROOT / "pipelines").rglob("*.py")}
    assert len(sizes) > 30
    assert {path: n for path, n in sizes.items() if n > 550} == {}


#: Dotted names the text may mention although they do not exist (a test of a broken link).
NOT_REFERENCES = {"costlib.costs._benefit.no_such_function", "costlib.no_such_module",
                  "costlib_pipelines.no_such_module"}

REFERENCE_CHECK = """
import importlib, json, re, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
pattern = re.compile(r"(?<![\\w./-])((?:costlib_pipelines|costlib_schemas|costlib)"
                     r"(?:\\.[A-Za-z_][A-Za-z_0-9]*)+)")
def resolves(name):
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            if hasattr(found, part):
                found = getattr(found, part)
            elif part in getattr(found, "__dataclass_fields__", ()) or \
                    part in getattr(found, "__annotations__", ()):
                return True  # a field declared on the class: nothing below it to check
            else:
                return False
        return True
    return False
missing = {}
for file in sys.argv[1:]:
    for number, line in enumerate(Path(file).read_text().splitlines(), 1):
        for match in pattern.finditer(line):
            name = match.group(1)
            if name.rsplit(".", 1)[-1] in {"py", "json", "yaml", "j2", "md"}:
                continue
            if name not in missing and not resolves(name):
                missing[name] = f"{file}:{number}"
print(json.dumps(missing))
"""


def test_every_dotted_name_in_code_docs_and_deploy_files_exists():
    """After the move, every ``costlib...`` / ``costlib_pipelines...`` name the docstrings,
    comments, docs, templates and deploy files mention is a module or an attribute of one."""
    files = [str(path) for pattern in ("costlib/**/*.py", "pipelines/**/*.py", "schemas/*",
                                       "tests/**/*.py", "docs/**/*.md", "deploy/**/*",
                                       "pipelines/report/templates/*", "*.md", "*.toml")
             for path in ROOT.glob(pattern) if path.is_file()]
    result = subprocess.run([sys.executable, "-c", REFERENCE_CHECK, *files], capture_output=True,
                            text=True, timeout=300, check=False, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    missing = json.loads(result.stdout.splitlines()[-1])
    assert len(files) > 200
    assert {name: where for name, where in missing.items() if name not in NOT_REFERENCES} == {}


def test_each_public_package_docstring_names_every_export():
    """A user reads ``help(costlib.thresholds)``: every name of ``__all__`` is listed there, and
    every name listed is importable."""
    import importlib
    import re

    for package in ("costlib.thresholds", "costlib.audit", "costlib.costs", "costlib.decoding",
                    "costlib.estimators"):
        module = importlib.import_module(package)
        assert set(module.__all__) <= set(vars(module)), package
        unlisted = [name for name in module.__all__
                    if not re.search(rf"\b{re.escape(name)}\b", module.__doc__)]
        assert unlisted == [], (package, unlisted)


def test_the_api_reference_shows_every_private_module_of_the_core_packages():
    """Each module's docstring states its math; the API pages render all of them."""
    pages = "".join(path.read_text() for path in (ROOT / "docs" / "api").glob("*.md"))
    for package in ("thresholds", "audit", "costs"):
        for path in (ROOT / "costlib" / package).glob("_*.py"):
            if path.name != "__init__.py":
                assert f"::: costlib.{package}.{path.stem}\n" in pages, path
