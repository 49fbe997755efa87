"""The layout of docs/development.md: the package list and the layers.

- The subpackages are exactly the ones the map describes (a new folder updates both).
- The subpackages of ``costlib`` import each other along one order (no cycle): ``audit`` below
  ``thresholds``, nothing below ``decoding`` but itself; read from the source with :mod:`ast`,
  lazy imports inside functions included.
- The wings of ``costlib.thresholds`` import each other downward only, in the order of
  :data:`WINGS`, and never through ``costlib.thresholds`` itself.
- No module of ``costlib`` or ``costlib_pipelines`` imports itself back through another (no
  import circle at module level, lazy imports included).
- No module under ``costlib/`` or ``pipelines/`` is over 550 lines.
- The pipelines import the library through its public faces only: no ``costlib.<pkg>._module``
  (nor a private name of a face) under ``pipelines/``.
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
                    "costlib.experiments.robles2020", "costlib.thresholds.binning",
                    "costlib.thresholds.grid", "costlib.thresholds.point",
                    "costlib.thresholds.loop", "costlib.thresholds.capacity",
                    "costlib.thresholds.plots"}

#: The wings of the engine, bottom up: each imports only wings before it.
WINGS = ("binning", "grid", "point", "loop", "capacity", "plots")
PIPELINES_PACKAGES = {"costlib_pipelines", "costlib_pipelines.commands", "costlib_pipelines.decide",
                      "costlib_pipelines.follow", "costlib_pipelines.io",
                      "costlib_pipelines.recalibrate", "costlib_pipelines.report"}


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
STAGES = ("io", "recalibrate", "decide", "follow", "report", "commands")


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


def test_decide_and_recalibrate_are_siblings():
    """What both stages need (row accounting, dead letters, the preflight, per-row costs) is
    in ``io``: neither stage imports the other."""
    graph = _stage_graph()
    assert not graph.has_edge("decide", "recalibrate")
    assert not graph.has_edge("recalibrate", "decide")


def test_no_module_is_over_550_lines():
    for folder in ("costlib", "pipelines"):
        sizes = {str(path.relative_to(ROOT)): len(path.read_text().splitlines())
                 for path in (ROOT / folder).rglob("*.py")}
        assert len(sizes) > 30, folder
        assert {path: n for path, n in sizes.items() if n > 550} == {}


def _private_imports(path: Path) -> list[str]:
    """The private parts of ``costlib`` that ``path`` imports: modules or names with a leading
    underscore (``costlib._messages`` and the like, helpers of every subpackage, included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            modules, names = [node.module], [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] != "costlib":
                continue
            if any(part.startswith("_") for part in parts[1:]):
                found.append(module)
            found.extend(f"{module}.{name}" for name in names if name.startswith("_"))
    return found


def test_the_pipelines_import_the_library_through_its_public_faces():
    private = {str(path.relative_to(ROOT)): _private_imports(path)
               for path in (ROOT / "pipelines").rglob("*.py")}
    assert len(private) > 30
    assert {path: names for path, names in private.items() if names} == {}


def test_the_public_face_check_sees_private_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from costlib.thresholds.grid._grid import ThresholdGrid\n"
                      "def f():\n    from costlib.thresholds.point import _optimize, optimize\n"
                      "import costlib.audit._weights\nfrom costlib.audit import audit_weights\n"
                      "from costlib_pipelines.io.records import _private\n")
    assert sorted(_private_imports(module)) == ["costlib.audit._weights",
                                                "costlib.thresholds.grid._grid",
                                                "costlib.thresholds.point._optimize"]


def _wing_graph() -> nx.DiGraph:
    """Wing -> wings its modules import (``top`` for ``costlib.thresholds`` itself)."""
    graph = nx.DiGraph()
    for path in (ROOT / "costlib" / "thresholds").rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if len(parts) < 4:  # costlib/thresholds/__init__.py: the face over all wings
            continue
        source = parts[2]
        graph.add_node(source)
        for name in _imported(path, ".".join(parts[:-1])):
            target = name.split(".")
            if target[:2] != ["costlib", "thresholds"]:
                continue
            wing = target[2] if len(target) > 2 else "top"
            if wing != source:
                graph.add_edge(source, wing)
    return graph


def test_the_wings_of_the_engine_import_downward_only():
    graph = _wing_graph()
    assert set(graph) == set(WINGS)
    order = {wing: i for i, wing in enumerate(WINGS)}
    upward = [(a, b) for a, b in graph.edges if b == "top" or order[b] > order[a]]
    assert upward == []
    # The order is not wider than it must be: every wing but the first builds on binning.
    assert all(graph.has_edge(wing, "binning") for wing in WINGS[1:] if wing != "plots")


def _module_graph(directory: Path, name: str) -> nx.DiGraph:
    """Module -> modules it imports explicitly (``from package import module`` counts as the
    module; a package is its ``__init__``), for every ``*.py`` under ``directory``."""
    modules = {}
    for path in directory.rglob("*.py"):
        parts = path.relative_to(directory).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join((name, *parts))] = path
    graph = nx.DiGraph()
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        graph.add_node(module)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module or ""
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            else:
                continue
            graph.add_edges_from((module, target) for target in targets
                                 if target in modules and target != module)
    return graph


def test_no_module_imports_itself_back():
    for folder, name in (("costlib", "costlib"), ("pipelines", "costlib_pipelines")):
        graph = _module_graph(ROOT / folder, name)
        assert graph.number_of_nodes() > 70, folder
        assert nx.is_directed_acyclic_graph(graph), list(nx.simple_cycles(graph))[:5]


def test_the_module_graph_sees_a_circle_through_a_lazy_import(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_a.py").write_text("from pkg._b import g\n")
    (package / "_b.py").write_text("def g():\n    from pkg import _a\n")
    (package / "_c.py").write_text("from . import _b\n")
    graph = _module_graph(package, "pkg")
    assert set(graph.edges) == {("pkg._a", "pkg._b"), ("pkg._b", "pkg._a"), ("pkg._c", "pkg._b")}
    assert not nx.is_directed_acyclic_graph(graph)



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
             for path in ROOT.glob(pattern)
             if path.is_file()]
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
                    "costlib.estimators", *(f"costlib.thresholds.{wing}" for wing in WINGS)):
        module = importlib.import_module(package)
        assert set(module.__all__) <= set(vars(module)), package
        unlisted = [name for name in module.__all__
                    if not re.search(rf"\b{re.escape(name)}\b", module.__doc__)]
        assert unlisted == [], (package, unlisted)


def test_the_api_reference_shows_every_private_module_of_the_core_packages():
    """Each module's docstring states its math; the API pages render all of them."""
    pages = "".join(path.read_text() for path in (ROOT / "docs" / "api").glob("*.md"))
    for package in ("thresholds", "audit", "costs", *(f"thresholds/{wing}" for wing in WINGS)):
        for path in (ROOT / "costlib" / package).glob("_*.py"):
            if path.name != "__init__.py":
                dotted = package.replace("/", ".")
                assert f"::: costlib.{dotted}.{path.stem}\n" in pages, path
