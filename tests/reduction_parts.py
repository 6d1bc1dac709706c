"""A reduction's context and established failure, built by hand, for tests of one phase at a time."""

from __future__ import annotations

import time
from pathlib import Path

from minrepro.harness.runner import RunResult
from minrepro.reduction.background import Background
from minrepro.reduction.budget import Budget
from minrepro.reduction.options import ReduceOptions
from minrepro.reduction.progress import Progress
from minrepro.reduction.results import Context, Established
from minrepro.reduction.workers import Workers


def context(opts: ReduceOptions, source: str = "a = 1\n", python: str = "python", say=print) -> Context:
    notes: list[str] = []
    background = Background()
    return Context(
        opts,
        say,
        say,
        opts.script,
        source,
        opts.script.with_name("out.min.py"),
        opts.home,
        python,
        Budget(time.monotonic(), None),
        Progress(1, say, live=False),
        background,
        Workers(opts, source, notes, background),
        notes=notes,
        best=source,
    )


def established(
    scale_dir: Path | None,
    traced: RunResult | None = None,
    timeout: float = 60.0,
    first: RunResult | None = None,
) -> Established:
    first = first or RunResult(1, "", "", 1.0, None, "")
    return Established(None, first, (first,), traced, timeout, 1, "", None, None, scale_dir=scale_dir)
