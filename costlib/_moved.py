"""Deprecated import paths of modules that moved, kept for one release (costlib 0.2 drops them).

The layout of 0.1 had every module at the top of its package (``costlib.grid``,
``costlib_pipelines.decide``); they now live in subpackages by concept (``costlib.thresholds``,
``costlib_pipelines.decide``, ...; see docs/development.md). Importing an old path still works: a
finder on :data:`sys.meta_path` answers for the old names only, warns once per name with a
:class:`DeprecationWarning` naming the new place, and returns **the same module object** as the
new path (so ``costlib.edges.uniform_edges is costlib.thresholds.uniform_edges``, and patching one
patches the other). A module that was split in several (``costlib.grid``) is served by a module
whose names are looked up in its successors, in order: reading a name works, but setting one on
it (a test's monkeypatch) changes only that stand-in, not the module that uses the name; patch
the new module instead. Nothing else is imported until an old name is asked for.

Names that moved *inside* a module's namespace (a renamed class) are forwarded by the module's
own ``__getattr__`` (:func:`forward_renamed`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

Moved = Mapping[str, str | tuple[str, ...]]


def moved_paths(package: str, moved: Moved) -> dict[str, str | tuple[str, ...]]:
    """``moved`` (old -> new module, or the modules it was split into, both relative to
    ``package``) as absolute module paths."""

    def absolute(new: str | tuple[str, ...]) -> str | tuple[str, ...]:
        return f"{package}.{new}" if isinstance(new, str) else tuple(
            f"{package}.{n}" for n in new)

    return {f"{package}.{old}": absolute(new) for old, new in moved.items()}


#: Old module path -> new module path (or the modules it was split into), for costlib's core.
COSTLIB_MOVED = moved_paths("costlib", {
        "grid": ("thresholds._grid", "thresholds._rows", "thresholds._cells",
                 "thresholds._sparse"),
        "edges": "thresholds._edges",
        "lattice_path": "thresholds._lattice_path", "frontier": "thresholds._frontier",
        "analytic": "thresholds._analytic", "objectives": "thresholds._objectives",
        "target": "thresholds._target",
        "operating_point": ("thresholds._operating_point", "thresholds._optimize"),
        "bootstrap": "thresholds._bootstrap", "recalibration": "thresholds._recalibration",
        "move_evidence": "thresholds._move_evidence", "threshold_plots": "thresholds._plots",
        "allocation": ("thresholds._allocation", "thresholds._group_frontiers",
                       "thresholds._split_baselines"),
        "resolution": "thresholds._resolution",
        "bin_locator": "thresholds._bin_locator", "binned_sketch": "thresholds._binned_sketch",
        "score_sketch": "thresholds._score_sketch", "audit_plots": "thresholds._audit_plots",
        "audit_sampling": "audit._sampling", "audit_strata": "audit._strata",
        "audit_design": "audit._neyman", "audit_estimation": "audit._weights",
        "benefit": ("costs._matrices", "costs._benefit", "costs._binary"),
        "example_costs": "costs._example_costs",
        "losses": "decoding._losses",
})


def public_home(module: str) -> str:
    """Where a user imports a module's names from: its package when the module is private."""
    package, _, leaf = module.rpartition(".")
    return package if leaf.startswith("_") else module


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path (no second copy), or, for a module split
    in several, as a module whose names are looked up in its successors in order."""

    def __init__(self, new: str | tuple[str, ...]) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        if isinstance(self.new, tuple):
            homes = sorted({public_home(module) for module in self.new})
            where = (homes[0] if len(homes) == 1 and homes[0] not in self.new
                     else ", ".join(self.new))
            warnings.warn(f"{spec.name} was split: import from {where}; the old path goes in "
                          "costlib 0.2", DeprecationWarning, stacklevel=2)
            module = ModuleType(spec.name, f"Deprecated: the names of {', '.join(self.new)}.")
            module.__getattr__ = _first_found(spec.name, self.new)  # type: ignore[method-assign]
            return module
        home = public_home(self.new)
        where = home if home == self.new else f"{home} (module {self.new})"
        warnings.warn(f"{spec.name} moved: import from {where}; the old path goes in costlib 0.2",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was imported at its new path."""


def _first_with(name: str, modules: tuple[str, ...]) -> tuple[str, Any] | None:
    """The first of ``modules`` (absolute paths, imported in order) defining ``name``, and the
    value; None when none does."""
    for module in modules:
        found = importlib.import_module(module)
        if hasattr(found, name):
            return module, getattr(found, name)
    return None


def _first_found(name: str, modules: tuple[str, ...]) -> Callable[[str], Any]:
    def __getattr__(attribute: str) -> Any:
        hit = None if attribute.startswith("__") else _first_with(attribute, modules)
        if hit is None:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        return hit[1]

    return __getattr__


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Answers only for the old paths in ``moved`` (old -> new module path, or the modules it
    was split into)."""

    def __init__(self, moved: Moved) -> None:
        self.moved = dict(moved)

    def find_spec(self, fullname: str, path: Any = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = self.moved.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(new))


def install(moved: Moved) -> None:
    """Put a finder for ``moved`` on :data:`sys.meta_path` (once per set of names)."""
    for finder in sys.meta_path:
        if isinstance(finder, MovedModuleFinder) and finder.moved == dict(moved):
            return
    sys.meta_path.append(MovedModuleFinder(moved))


def forward_renamed(module: str, renamed: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that serves old names (``renamed``: old -> new) with a warning."""

    def __getattr__(name: str) -> Any:
        new = renamed.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(f"{module}.{name} is now {public_home(module)}.{new}; the old name goes "
                      "in costlib 0.2", DeprecationWarning, stacklevel=2)
        return getattr(sys.modules[module], new)

    return __getattr__


def forward_to_modules(package: str, modules: tuple[str, ...], current: frozenset[str]
                       ) -> Callable[[str], Any]:
    """A package ``__getattr__`` for a module that became a package of modules.

    ``costlib_pipelines.decide`` was one module and is now a package: ``from
    costlib_pipelines.decide import run_decide`` keeps working. A name in ``current`` (the stage's
    entry points) is served without a warning; any other name a module of the package defines is
    served with a :class:`DeprecationWarning` naming its module. ``modules`` are submodule names
    or, with a dot, absolute module names. Submodule names are left to the import system.
    """

    absolute = tuple(leaf if "." in leaf else f"{package}.{leaf}" for leaf in modules)

    def __getattr__(name: str) -> Any:
        hit = None if name.startswith("__") or name in modules else _first_with(name, absolute)
        if hit is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, value = hit
        if name not in current:
            warnings.warn(f"{package}.{name} moved: import it from {module}; the old path goes "
                          "in costlib 0.2", DeprecationWarning, stacklevel=2)
        return value

    return __getattr__
