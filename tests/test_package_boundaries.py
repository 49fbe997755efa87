"""costlib is usable without Beam: importing every costlib module never imports apache_beam."""

import subprocess
import sys

SCRIPT = """
import importlib, pkgutil, sys
import costlib
names = [m.name for m in pkgutil.walk_packages(costlib.__path__, "costlib.")]
for name in names:
    importlib.import_module(name)
pipeline_names = ("apache_beam", "pipelines", "costlib_pipelines")
leaked = sorted(m for m in sys.modules if m.split(".")[0] in pipeline_names)
print(len(names), leaked)
assert not leaked, leaked
"""


def test_importing_all_of_costlib_does_not_import_beam_or_pipelines():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    count = int(result.stdout.split()[0])
    assert count >= 20  # every module was imported, not an empty walk
