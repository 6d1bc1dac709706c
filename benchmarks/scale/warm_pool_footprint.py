#!/usr/bin/env python
"""What the warm pool holds in memory before any candidate runs: `jobs` idle workers, each having imported the
libraries (and, where CUDA is visible and bitsandbytes 0.50 initializes it at import, a CUDA context each). A reduce
holds up to twice that (a replacement warms while each worker runs) per env, the good env's pool beside it.

    python benchmarks/scale/warm_pool_footprint.py --python ENV/bin/python [--jobs 4 8]

Prints a Markdown table: jobs, workers, RSS in all and of the largest worker, and GPU memory where nvidia-smi
answers."""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from minrepro.harness.executors import WarmPoolExecutor

PRELOAD = ["torch", "transformers", "accelerate", "peft", "bitsandbytes"]


def rss_of(pid: int) -> int:
    """Resident bytes of one process (Linux /proc; 0 once it is gone)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")), 0)


def settled_rss(pids: list[int], poll: float = 3.0, rounds: int = 100) -> list[int]:
    """The workers' RSS once it stops growing (they import in the background)."""
    last, rss = -1, []
    for _ in range(rounds):
        rss = [rss_of(pid) for pid in pids]
        if rss and abs(sum(rss) - last) < 20e6:
            return rss
        last = sum(rss)
        time.sleep(poll)
    return rss


def gpu_mib() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.split()
    except (OSError, subprocess.TimeoutExpired):
        return "-"
    return "+".join(out) or "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True)
    parser.add_argument("--jobs", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args()
    print("| jobs | workers | RSS in all (GB) | largest worker (GB) | GPU memory used (MiB) | seconds to settle |")
    print("|---|---|---|---|---|---|")
    for jobs in args.jobs:
        began = time.monotonic()
        pool = WarmPoolExecutor(args.python, PRELOAD, jobs)
        try:
            rss = settled_rss([proc.pid for proc, _ in pool._idle])
            print(
                f"| {jobs} | {len(rss)} | {sum(rss) / 1e9:.2f} | {max(rss) / 1e9:.2f} | {gpu_mib()} | "
                f"{time.monotonic() - began:.0f} |",
                flush=True,
            )
        finally:
            pool.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
