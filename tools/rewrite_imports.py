#!/usr/bin/env python3
"""Rewrite references to the `pipelines` and `schemas` packages to their installed names.

The repository keeps its directories `pipelines/` and `schemas/`; setuptools installs them as
`costlib_pipelines` and `costlib_schemas` (package-dir in pyproject.toml; docs/install.md says
why). This script rewrites every *module* reference in the tree to the installed names:

- `from pipelines.x import y`, `from pipelines import y`, `import pipelines.x`, `import schemas`;
- dotted module paths anywhere in code, strings and prose: `pipelines.cli.main`,
  `"pipelines.files.InputError"`, `python -m pipelines.cli`, `schemas.load(...)`;

It never touches file paths (`pipelines/commands/cli.py`, `schemas/decision.json`), file names
(`pipelines.md`) or words in prose (`the pipelines.`). It is idempotent: run it again after
merging a branch that still uses the old names; it prints each file it changed and every line
it made longer than 100 characters (wrap those by hand). Afterwards it re-sorts imports with
ruff when ruff is installed. Not covered: the bare name as a string (`"pipelines"`, e.g.
tests/test_package_boundaries.py's sys.modules check) or as a directory; edit those by hand.

Usage: python tools/rewrite_imports.py [--check]   (--check: change nothing, exit 1 if needed)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"pipelines": "costlib_pipelines", "schemas": "costlib_schemas"}
#: Where references live. Paths relative to the repository root.
SCAN = ("costlib", "pipelines", "schemas", "tests", "deploy", "docs", "README.md")
SUFFIXES = {".py", ".pyi", ".sh", ".yaml", ".yml", ".md", ".txt", ".cfg", ".toml", ".json"}
NAMES = {"Dockerfile"}
SKIP_PARTS = {".venv", "__pycache__", "site", "build", ".git"}
#: Not rewritten: this script and the page that explains the old and new names.
SKIP_FILES = {Path("tools/rewrite_imports.py"), Path("docs/install.md")}

_NAME = "|".join(PACKAGES)
_EXT = r"(?:md|py|pyi|json|yaml|yml|txt|html|png|toml|sh|cfg|csv|parquet)\b"
RULES: list[tuple[re.Pattern[str], str]] = [
    # from pipelines import x / from pipelines.x import y
    (re.compile(rf"(?<![\w.])from ({_NAME})(?=[ \t]+import\b|\.[A-Za-z_])"), r"from costlib_\1"),
    # import pipelines / import pipelines.x ("import a, pipelines.x": the dotted rule)
    (re.compile(rf"(?<=import )({_NAME})\b(?![/\-])"), r"costlib_\1"),
    # dotted module paths: pipelines.cli, "pipelines.files.InputError", schemas.load(
    (re.compile(rf"(?<![\w./\-])({_NAME})(?=\.(?!{_EXT})[A-Za-z_])"), r"costlib_\1"),
]


def files() -> list[Path]:
    out = []
    for entry in SCAN:
        path = ROOT / entry
        candidates = [path] if path.is_file() else sorted(path.rglob("*"))
        for file in candidates:
            rel = file.relative_to(ROOT)
            if (file.is_file() and not SKIP_PARTS.intersection(rel.parts)
                    and rel not in SKIP_FILES
                    and (file.suffix in SUFFIXES or file.name in NAMES
                         or file.name.startswith("Dockerfile"))):
                out.append(file)
    return out


def rewrite(text: str) -> str:
    for pattern, replacement in RULES:
        text = pattern.sub(replacement, text)
    return text


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed: list[Path] = []
    long_lines: list[str] = []
    for file in files():
        text = file.read_text(encoding="utf-8")
        new = rewrite(text)
        if new != text:
            changed.append(file)
            old_lines = set(text.splitlines())
            for number, line in enumerate(new.splitlines(), 1):
                if len(line) > 100 and line not in old_lines:
                    long_lines.append(f"{file.relative_to(ROOT)}:{number}: {len(line)} chars")
            if not check:
                file.write_text(new, encoding="utf-8")
    for file in changed:
        print(file.relative_to(ROOT))
    for line in long_lines:
        print(f"too long now, wrap by hand: {line}", file=sys.stderr)
    if check:
        return 1 if changed else 0
    ruff = shutil.which("ruff") or str(ROOT / ".venv/bin/ruff")
    py = [str(f) for f in changed if f.suffix == ".py"]
    if py and Path(ruff).exists():
        subprocess.run([ruff, "check", "--select", "I", "--fix", "-q", *py], cwd=ROOT,
                       check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
