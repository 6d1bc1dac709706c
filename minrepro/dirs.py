"""Where minrepro writes what it makes: never over tracked files of a checkout, never into the current
directory unasked. `MINREPRO_CACHE` overrides the cache (venvs, checkpoints, reduction work directories)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache root: $MINREPRO_CACHE, else $XDG_CACHE_HOME/minrepro, else ~/.cache/minrepro."""
    explicit = os.environ.get("MINREPRO_CACHE")
    if explicit:
        return Path(explicit).expanduser().absolute()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser().absolute() / "minrepro"


def cache(*parts: str) -> Path:
    return cache_dir().joinpath(*parts)
