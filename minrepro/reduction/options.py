"""What a reduce is asked to do (`ReduceOptions`, the command line's flags) and the counts every phase reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..harness.signature import Signature
from ..reducers.search import seeding_calls

CONFIRM_RUNS = 3  # the original runs this many times, cold, to establish its failure: all must agree
# Runs of each candidate in each good env that must all pass. A library's crash is a code path, not a value: one run
# tells. The script's own check reads values, and a candidate that lost a seed may pass where the bug is fixed by
# chance; every seeding call stays (`Problem.keep_seeds`), so a seeded script needs one run and one that seeds nothing
# gets two (rows: benchmarks/results/scale/defaults.jsonl). The cold verification runs GOOD_RUNS either way.
GOOD_RUNS = 2
MAX_AUTO_JOBS = 8  # runs side by side when --jobs is not given (cores, RAM and GPU memory permitting)


def default_good_runs(original: Signature, source: str) -> int:
    return GOOD_RUNS if original.raised_by == "script" and not seeding_calls(source) else 1


@dataclass
class ReduceOptions:
    script: Path
    out: Path | None = None
    signature: str | None = None
    oracle: str | None = None
    python: str | None = None
    jobs: int | None = None  # None: as many as the machine holds (choose_jobs)
    timeout: float | None = None  # None: from the original's cold runs (see harness.resources.timeout_for)
    seed: int = 0
    executor: str = "auto"
    workdir: Path | None = None
    fresh: bool = False
    good_pythons: list[str] = field(default_factory=list)
    guard: str = "auto"  # "auto" | "none"
    confirm_runs: int = CONFIRM_RUNS
    good_runs: int | None = None  # None: default_good_runs
    triggers: bool = True
    scale_down: bool = True  # rebuild loaded checkpoints as tiny twins before the text passes
    reuse_workers: bool = True  # a warm worker may run more than one candidate (see `workers.start_executor`)
    # the whole reduce's time budget: no candidate runs past it less the verification's share; the best is verified
    max_seconds: float | None = None
    argv: list[str] | None = None  # the command line as given (default: this process's): what a resume repeats
    # what the user gave, prepared as a plain script (minrepro.inputs.Prepared: arguments, a notebook, -m MODULE);
    # `script` is then its path in the cache. None for a plain script.
    prepared: Any = None

    @property
    def home(self) -> Path:
        """Where the script's runs import from: the user's folder, not the cache's copy of a prepared input."""
        return self.prepared.home if self.prepared else self.script.resolve().parent
