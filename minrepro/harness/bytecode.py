"""Compiled bytecode for the interpreters minrepro starts. Where the environment turns bytecode off
(PYTHONDONTWRITEBYTECODE, which container images set) and the interpreter's libraries were installed without it
(uv's default), every run compiles each library module it imports from source again: half of a cold run's imports
on such a GPU image (`docs/benchmarks.md`, "Bytecode kept where the environment turns it off"). There the runs keep
theirs under minrepro's cache (PYTHONPYCACHEPREFIX), never beside a library's sources. Where the libraries carry
their bytecode (pip compiles it at install) nothing changes: a prefix would only compile them all once more."""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Mapping

from minrepro.dirs import bytecode_cache

# what a run of this domain imports first and longest: one of them installed without bytecode costs every run seconds
HEAVY = ("torch", "transformers", "numpy")
_WITHOUT = (
    "import importlib.util as u, json, os, sys\n"
    "tag = sys.implementation.cache_tag\n"
    "specs = [u.find_spec(n) for n in sys.argv[1:]]\n"
    "paths = [s.origin for s in specs if s is not None and s.origin and s.origin.endswith('__init__.py')]\n"
    "print(json.dumps([os.path.join(os.path.dirname(p), '__pycache__', f'__init__.{tag}.pyc') for p in paths]))\n"
)


def keeps_bytecode(environ: Mapping[str, str], python: str) -> bool:
    """Whether runs of `python` under `environ` keep their bytecode under the cache: `environ` turns bytecode off,
    names no PYTHONPYCACHEPREFIX of its own (a prefix the user chose is theirs), and one of `python`'s HEAVY libraries
    has no bytecode beside its sources."""
    if not environ.get("PYTHONDONTWRITEBYTECODE") or environ.get("PYTHONPYCACHEPREFIX"):
        return False
    return installed_without_bytecode(python, environ.get("PYTHONPATH", ""))


@functools.cache
def installed_without_bytecode(python: str, pythonpath: str = "") -> bool:
    """Whether one of `python`'s HEAVY libraries (located, not imported, on `pythonpath` first as the runs see them)
    has no compiled `__init__` beside it."""
    environ = {**os.environ, "PYTHONPATH": pythonpath}
    try:
        found = subprocess.run(
            [python, "-c", _WITHOUT, *HEAVY], capture_output=True, text=True, timeout=60, env=environ
        )
        # the last line: a .pth or sitecustomize may print before it
        return any(not os.path.exists(path) for path in json.loads(found.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return False


def child_environ(environ: Mapping[str, str], python: str) -> dict[str, str]:
    """`environ` for a run of `python`: where `keeps_bytecode`, without the variable that turns bytecode off and with
    the cache as its PYTHONPYCACHEPREFIX. Bytecode changes nothing a script does."""
    if not keeps_bytecode(environ, python):
        return dict(environ)
    kept = {key: value for key, value in environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    return {**kept, "PYTHONPYCACHEPREFIX": str(bytecode_cache())}
