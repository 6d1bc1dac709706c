#!/usr/bin/env python
"""What one candidate of a script costs under each executor, side by side in one run: a fresh interpreter (cold),
the fork server, the warm pool with a worker per run, and the warm pool reusing its workers (`warm-pool-reused`),
each running the script RUNS times, JOBS at once; and a warm bare run (`bare`: the script run again and again in one
process that imported its libraries first, the floor of a candidate). Prints a Markdown table: the executor's
start, seconds per run (median, slowest), wall seconds per candidate (the batch's wall time over RUNS: what a search
pays), whether every run gave the signature of the first cold run, and what the reusing pool did with its workers.

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
import subprocess
import tempfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from minrepro.harness.executors import ColdExecutor, ExecutorOptions, make_executor  # noqa: E402
from minrepro.reducers.source import module_imports  # noqa: E402


# one process: the script's imports (frozen out of the collector, as a warm worker's are), then the script RUNS times
# in a row (each in a fresh __main__ namespace); after each run, what a reused worker's put-back does where CUDA
# started (a collection, the GPU's cache released), timed apart: the worker answers first, so this is off the run's
# time, not off the worker's
BARE = """
import gc, importlib, json, runpy, sys, time
for name in sys.argv[3:]:
    importlib.import_module(name)
gc.collect()
gc.freeze()
seconds, put_back = [], []
for _ in range(int(sys.argv[2])):
    began = time.monotonic()
    try:
        runpy.run_path(sys.argv[1], run_name="__main__")
    except BaseException:
        pass
    seconds.append(time.monotonic() - began)
    began = time.monotonic()
    torch = sys.modules.get("torch")
    cuda = torch is not None and torch.cuda.is_initialized()
    if cuda:
        torch.cuda.synchronize()
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    put_back.append(time.monotonic() - began)
print(json.dumps({"seconds": seconds, "put_back": put_back}))
"""


def bare(script: Path, python: str, runs: int, timeout: float) -> list[str]:
    """A warm bare run: the floor a candidate's wall time is compared with (its first run is left out: it pays
    what the script imports lazily)."""
    preload = module_imports(script.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as scratch:
        out = subprocess.run(
            [python, "-c", BARE, str(script), str(runs + 1), *preload],
            cwd=scratch,
            capture_output=True,
            text=True,
            timeout=timeout * (runs + 1),
        )
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    seconds, put_back = measured["seconds"][1:], statistics.median(measured["put_back"][1:])
    median = statistics.median(seconds)
    note = f"one process, runs in a row; after each, a collection (and CUDA's cache released) {put_back:.3f} s"
    return ["bare", "", f"{median:.2f}", f"{max(seconds):.2f}", f"{median:.2f}", "", note]


def measure(name: str, script: Path, args: argparse.Namespace, reference) -> list[str]:
    """`args`: the command line's --python, --jobs, --runs and --timeout."""
    python, jobs, runs, timeout = args.python, args.jobs, args.runs, args.timeout
    began = time.monotonic()
    preload = module_imports(script.read_text(encoding="utf-8"))
    reuse = name == "warm-pool-reused"
    # a warm pool's workers start in the background, one batch more kept warming as a reduction keeps them
    kind, spares = ("warm-pool", jobs) if name.startswith("warm-pool") else (name, 0)
    executor = make_executor(kind, python, preload, jobs, ExecutorOptions(spares=spares, reuse=reuse))
    start = time.monotonic() - began
    try:
        began = time.monotonic()
        results = executor.run_many([script] * runs, timeout, script.parent)
        wall = time.monotonic() - began
    finally:
        executor.close()
    seconds = [r.seconds for r in results]
    same = all(r.signature == reference for r in results)
    skipped = ", ".join(getattr(executor, "skipped", [])) or ""
    note = f"left to each run: {skipped}" if skipped else getattr(executor, "describe_reuse", str)() if reuse else ""
    return [
        name,
        f"{start:.1f}",
        f"{statistics.median(seconds):.2f}",
        f"{max(seconds):.2f}",
        f"{wall / runs:.2f}",
        str(same),
        note,
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
    parser.add_argument("--executors", default="bare,cold,forkserver,warm-pool,warm-pool-reused")
    parser.add_argument("--profile", action="store_true", help="also one profiled cold run: its slowest lines")
    args = parser.parse_args()
    script = args.script.resolve()
    reference = ColdExecutor(args.python).run_many([script], args.timeout, script.parent)[0].signature
    rows = [
        bare(script, args.python, args.runs, args.timeout) if name == "bare" else measure(name, script, args, reference)
        for name in args.executors.split(",")
    ]
    print(f"{script.name}: {reference.headline if reference else 'passes'}; {args.runs} runs, {args.jobs} at once\n")
    print("| executor | start s | s per run (median) | slowest s | wall s per candidate | same signature | note |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    if args.profile:
        print("\n" + "\n".join(profile_table(script, args.python, args.timeout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
