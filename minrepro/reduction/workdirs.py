"""Where a reduction keeps its work: one folder per script, content and options (the answers' cache, the best so far,
the twin), so that the same command picks up where an interrupted one stopped."""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..dirs import cache
from .options import ReduceOptions


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def default_workdir(script: Path, source: str, key: str) -> Path:
    return cache("reductions", f"{script.stem}-{digest(source + key)[:10]}")


def workdir(opts: ReduceOptions, script: Path, source: str, key: str) -> Path:
    """--workdir, or the cache's folder for this script and `key`; --fresh forgets its answers and its best so far."""
    folder = (opts.workdir or default_workdir(script, source, key)).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    if opts.fresh:
        for stale in ("state.json", "cache.jsonl"):
            (folder / stale).unlink(missing_ok=True)
    return folder
