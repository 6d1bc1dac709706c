"""What a run costs and how many such runs fit side by side: timeouts and parallelism follow the original's
measured cold run (a real-size checkpoint's load and a tiny script are orders of magnitude apart in time and
memory), never a fixed guess."""

from __future__ import annotations

import os
import shutil
import subprocess

from .runner import DEFAULT_TIMEOUT, RunResult

FIRST_RUN_TIMEOUT = 1800.0  # the original's first run, before anything is known of its cost
TIMEOUT_FACTOR = 3.0  # a later run may take this multiple of the slowest cold run of the original
HEADROOM = 0.8  # the share of free memory that runs side by side may fill
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def timeout_for(runs: list[RunResult], given: float | None) -> float:
    """The given timeout, else a multiple of the slowest run, never below the default."""
    if given is not None:
        return given
    return max(DEFAULT_TIMEOUT, TIMEOUT_FACTOR * max((r.seconds for r in runs), default=0.0))


def available_ram_mb() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def free_gpu_mb() -> float | None:
    """The least free memory over the visible GPUs (nvidia-smi), or None where there is none to ask."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        return min(float(v) for v in out.split()) if out.split() else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def fits(per_run: float, free: float | None) -> int | None:
    return None if not per_run or free is None else max(1, int(HEADROOM * free // per_run))


def parallel_runs(runs: list[RunResult], wanted: int) -> int:
    """How many runs like these may go at once: `wanted`, fewer where RAM or GPU memory would not hold them."""
    limits = [
        wanted,
        fits(max((r.peak_rss_mb for r in runs), default=0.0), available_ram_mb()),
        fits(max((r.peak_gpu_mb for r in runs), default=0.0), free_gpu_mb()),
    ]
    return max(1, min(n for n in limits if n is not None))


def cores() -> int:
    """The cores this process may run on (its affinity: a `taskset` share of a box counts, not the whole box)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def thread_cap(jobs: int) -> dict[str, str]:
    """The environment that gives each of `jobs` runs at once its share of the cores. Unset, every torch process
    starts one intra-op thread per core: eight candidates on 16 cores run 128 threads, and runs side by side that
    contend for the cores are no faster than one after another. A share the user set (OMP_NUM_THREADS) is theirs and
    stays."""
    if jobs <= 1 or any(name in os.environ for name in THREAD_VARIABLES):
        return {}
    share = max(1, cores() // jobs)
    return {name: str(share) for name in THREAD_VARIABLES}
