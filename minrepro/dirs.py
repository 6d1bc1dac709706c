"""Where minrepro writes what it makes: never over tracked files of a checkout, never into the current
directory unasked. `MINREPRO_CACHE` overrides the cache (venvs, checkpoints, reduction work directories).
What it records for others to read (results, reports, kits) names no path of the machine it ran on."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any


def cache_dir() -> Path:
    """The cache root: $MINREPRO_CACHE, else $XDG_CACHE_HOME/minrepro, else ~/.cache/minrepro."""
    explicit = os.environ.get("MINREPRO_CACHE")
    if explicit:
        return Path(explicit).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser().absolute() / "minrepro"


def cache(*parts: str) -> Path:
    return cache_dir().joinpath(*parts)


def bytecode_cache() -> Path:
    """Where runs keep their compiled bytecode when the environment turns it off (`harness.bytecode`): a
    mirror of each source's absolute path, as Python's PYTHONPYCACHEPREFIX lays it out."""
    return cache("pycache")


def bytecode_mirrors(path: Path) -> list[Path]:
    """Where `bytecode_cache` keeps what was compiled from `path` (a file or a folder), under each name an import may
    have given it (as found on sys.path, and resolved). A library file minrepro replaces drops what is kept there: one
    of the same size and second (a patch, a commit laid over the wheel) would otherwise keep its stale bytecode."""
    names = {Path(os.path.abspath(path)), Path(path).resolve()}
    names |= {twin for name in names for twin in _lib_twins(name)}
    return [bytecode_cache() / name.relative_to(name.anchor) for name in sorted(names)]


def _lib_twins(path: Path) -> list[Path]:
    """`path` under the other name of a venv's `lib` folder, where `lib64` links to it (Fedora's, RHEL's system
    Pythons list `lib64/.../site-packages` first on sys.path, so that is the name its imports use)."""
    twins = []
    for index, part in enumerate(path.parts):
        other = {"lib": "lib64", "lib64": "lib"}.get(part)
        if other is None:
            continue
        here, there = Path(*path.parts[: index + 1]), Path(*path.parts[:index], other)
        if there.exists() and there.resolve() == here.resolve():
            twins.append(Path(*path.parts[:index], other, *path.parts[index + 1 :]))
    return twins


CHECKOUT = Path(__file__).resolve().parent.parent  # the checkout (or site-packages) this minrepro runs from
# an interpreter's packages, wherever the env lives: `/any/env/lib/python3.11/site-packages/` -> `site-packages/`
_SITE_PACKAGES = re.compile(r"(?:<cache>|<tmp>|~|\.)?/[^\s'\"\\]*?/(?:site|dist)-packages/")


def without_local_paths(text: str) -> str:
    """Text as a record keeps it, read on another machine: the paths of this one (an interpreter's site-packages, the
    cache, the checkout, the home, the temp directory) become placeholders. A file under a temp directory keeps its
    name: `'/tmp/run-x/tmp/y/index.json'` -> `'<tmp>/index.json'`."""
    text = _SITE_PACKAGES.sub("site-packages/", text)
    for local, placeholder in ((str(cache_dir()), "<cache>"), (str(CHECKOUT), "."), (str(Path.home()), "~")):
        if len(local) > 1:  # a path ends at a separator, a quote, a space or the end: "/root" is not "/root-entry"
            text = re.sub(r"(?<![\w.-])" + re.escape(local) + r"(?=[/'\"\s\\]|$)", placeholder, text)
    temp = re.escape(tempfile.gettempdir().rstrip("/"))
    return re.sub(temp + r"(?:/[^\s'\"\\/]+)*/", "<tmp>/", text)


def scrubbed(value: Any) -> Any:
    """A JSON-like document with `without_local_paths` applied to every string in it (keys included)."""
    if isinstance(value, str):
        return without_local_paths(value)
    if isinstance(value, dict):
        return {scrubbed(k): scrubbed(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrubbed(v) for v in value]
    return value
