#!/usr/bin/env python
"""What one candidate of a script costs under each executor, side by side in one run: a fresh interpreter (cold),
the fork server, and the warm pool, each running the script RUNS times, JOBS at once. Prints a Markdown table: the
executor's start, seconds per run (median, slowest), and whether every run gave the signature of the first cold run.

    python benchmarks/scale/executor_cost.py SCRIPT --python ENV/bin/python [--jobs 8] [--runs 8] [--profile]

--profile adds one cold run alone with its module-level statements timed (the reducer's own profile): where a
candidate's seconds go (imports, the twin's build and save, the load, the failing call).

For a GPU box: on a twin that loads bitsandbytes, the fork server leaves every import after bitsandbytes (which
initializes CUDA at import) to each forked child, and the warm pool's workers import everything before they are
needed; this says which costs less there, measured, before a reduce's default is changed."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from minrepro.harness.executors import ColdExecutor, make_executor  # noqa: E402
from minrepro.reducers.source import module_imports  # noqa: E402


def measure(name: str, script: Path, python: str, jobs: int, runs: int, timeout: float, reference) -> list[str]:
    began = time.monotonic()
    preload = module_imports(script.read_text(encoding="utf-8"))
    executor = make_executor(name, python, preload, jobs)  # a warm pool's workers start in the background
    start = time.monotonic() - began
    try:
        results = executor.run_many([script] * runs, timeout, script.parent)
    finally:
        executor.close()
    seconds = [r.seconds for r in results]
    same = all(r.signature == reference for r in results)
    note = ", ".join(getattr(executor, "skipped", [])) or ""
    return [
        name,
        f"{start:.1f}",
        f"{statistics.median(seconds):.1f}",
        f"{max(seconds):.1f}",
        str(same),
        f"left to each run: {note}" if note else "",
    ]


def profile_table(script: Path, python: str, timeout: float, top: int = 12) -> list[str]:
    """The slowest module-level lines of one cold run, alone: seconds and the line's text."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "profile.json"
        run = ColdExecutor(python).profile(script, out, timeout, script.parent)
        seconds = json.loads(out.read_text())["line_seconds"] if out.is_file() else {}
    lines = script.read_text(encoding="utf-8").splitlines()
    rows = sorted(((float(s), int(n)) for n, s in seconds.items()), reverse=True)[:top]
    return [
        f"one cold run alone, profiled: {run.seconds:.1f} s, "
        f"of which the script's lines {sum(map(float, seconds.values())):.1f} s",
        "",
        "| s | line | text |",
        "|---|---|---|",
        *[f"| {s:.2f} | {n} | `{lines[n - 1].strip()[:90]}` |" for s, n in rows],
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("script", type=Path)
    parser.add_argument("--python", required=True)
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--executors", default="cold,forkserver,warm-pool")
    parser.add_argument("--profile", action="store_true", help="also one profiled cold run: its slowest lines")
    args = parser.parse_args()
    script = args.script.resolve()
    reference = ColdExecutor(args.python).run_many([script], args.timeout, script.parent)[0].signature
    rows = [
        measure(name, script, args.python, args.jobs, args.runs, args.timeout, reference)
        for name in args.executors.split(",")
    ]
    print(f"{script.name}: {reference.headline if reference else 'passes'}; {args.runs} runs, {args.jobs} at once\n")
    print("| executor | start s | s per run (median) | slowest s | same signature | note |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.profile:
        print("\n" + "\n".join(profile_table(script, args.python, args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
