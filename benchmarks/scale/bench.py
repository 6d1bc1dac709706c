#!/usr/bin/env python
"""Reduce at real scale, end to end, as a user would: a setup script leaves a local checkpoint, the user's own job
script (argparse, a local checkpoint directory, an eval loop) fails on it, `minrepro reduce` is run on a copy.
Prints one table row per case; `--results FILE` appends the rows as JSON lines.

    python benchmarks/scale/bench.py --case cpu-gemma3 --python .nox/minrepro-pinned/bin/python
    python benchmarks/scale/bench.py --case gpu-gemma4-e4b --python ENV/bin/python --good-python FIXED/bin/python

The checkpoint is built once per --workdir (by the case's setup, with --python). The user's script is copied, never
edited; minrepro's output goes beside the copy."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
from minrepro.harness.runner import run_script  # noqa: E402
from minrepro.reducers.source import code_lines, code_tokens  # noqa: E402

CASES = {  # case -> (setup arch, the user's script, the env var its checkpoint default reads, the user's other env)
    "cpu-gemma3": ("gemma3-100m", "eval_adapter.py", "EVAL_CKPT", {}),
    # E2B fits the script's default budget (1 GiB GPU, 8 GiB RAM) without disk: it passed 3 of 3 runs on two H200s
    # (2026-11-26). 6 GiB of RAM, the budget docs/scenarios.md measured for E2B's spill, is how its user runs it.
    "gpu-gemma4-e2b": ("gemma4-e2b", "eval_gemma4_gpu.py", "GEMMA4_CKPT", {"GEMMA4_CPU_BUDGET": "6GiB"}),
    "gpu-gemma4-e4b": ("gemma4-e4b", "eval_gemma4_gpu.py", "GEMMA4_CKPT", {}),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), required=True)
    parser.add_argument("--python", required=True, help="the env the script fails in")
    parser.add_argument("--good-python", action="append", default=[], help="passed on to reduce (default: its guard)")
    parser.add_argument("--workdir", default=str(ROOT / ".minrepro" / "scale-bench"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=float, default=None, help="stop reduce (SIGTERM) after this many seconds")
    parser.add_argument("--max-seconds", type=float, default=None, help="passed on to reduce: its search's time budget")
    parser.add_argument("--executor", help="passed on to reduce (default: reduce's own)")
    parser.add_argument("--results", help="append the row as a JSON line here")
    parser.add_argument("--resume", action="store_true", help="continue a stopped reduce (its work dir is kept)")
    parser.add_argument("--setup", action="store_true", help="only build the checkpoint and run the original (kept for "
                        "the next call on this machine: a GPU call is 10 minutes, and the reduce should have them)")
    args = parser.parse_args()
    arch, script_name, env_var, user_env = CASES[args.case]
    work = Path(args.workdir).resolve()
    checkpoint = work / arch
    if not (checkpoint / "adapter" / "adapter_config.json").exists():
        began = time.monotonic()
        subprocess.run([args.python, str(HERE / "make_checkpoint.py"), "--arch", arch, "--out", str(checkpoint)], check=True)
        print(f"checkpoint {arch} built in {time.monotonic() - began:.0f} s", file=sys.stderr)
    job = work / "jobs" / args.case
    job.mkdir(parents=True, exist_ok=True)
    script = job / script_name
    shutil.copy(HERE / script_name, script)
    os.environ.update({env_var: str(checkpoint), **user_env})
    original = _original(script, args.python, job)
    if args.setup:
        print(f"original: {original.raw_headline.splitlines()[0] if original.raw_headline else 'pass'} in {original.seconds:.0f} s")
        return 0
    command = [sys.executable, "-m", "minrepro", "reduce", str(script), "--python", args.python, "--jobs", str(args.jobs),
               "--json", *([] if args.resume else ["--fresh"]),
               *(["--max-seconds", str(args.max_seconds)] if args.max_seconds else []),
               *(["--executor", args.executor] if args.executor else []), "--workdir", str(job / "work"), *[a for g in args.good_python for a in ("--good-python", g)]]
    began = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        stdout, _ = proc.communicate(timeout=args.limit)
    except subprocess.TimeoutExpired:
        proc.terminate()  # what a scheduler does: the best so far must be written
        stdout, _ = proc.communicate()
    seconds = time.monotonic() - began
    print(stdout, end="")
    summary = next((json.loads(line) for line in reversed(stdout.splitlines()) if line.startswith("{")), {})
    out = script.with_name(f"{script.stem}.min.py")
    reduced = out.read_text() if out.exists() else ""
    rerun = run_script(out, python=args.python, timeout=1800, isolated=True) if reduced else None
    row = {"case": args.case, "python": args.python, "max_seconds": args.max_seconds,
           "executor": summary.get("executor", args.executor), "exit": proc.returncode,
           "seconds": round(seconds, 1),
           "input_lines": code_lines(script.read_text()), "output_lines": code_lines(reduced) if reduced else None,
           "input_tokens": code_tokens(script.read_text()), "output_tokens": code_tokens(reduced) if reduced else None,
           "original": original.raw_headline.splitlines()[0] if original.raw_headline else "pass",
           "original_run_s": round(original.seconds, 1), "output_run_s": round(rerun.seconds, 1) if rerun else None,
           "output_fails_same": bool(rerun and rerun.signature == original.signature),
           "verified": bool(summary) and "NOT VERIFIED" not in reduced, "guard": summary.get("guard_why"),
           "passes_in_good_env": summary.get("passes_in_good_env"), "notes": summary.get("notes", [])}
    print("| case | exit | total s | lines in -> out | tokens in -> out | run s before -> after | same failure | "
          "passes where fixed |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {row['case']} | {row['exit']} | {row['seconds']} | {row['input_lines']} -> {row['output_lines']} | "
          f"{row['input_tokens']} -> {row['output_tokens']} | {row['original_run_s']} -> {row['output_run_s']} | "
          f"{row['output_fails_same']} | {row['passes_in_good_env']} |")
    if args.results:
        with open(args.results, "a") as fh:
            fh.write(json.dumps(row) + "\n")
    return 0 if proc.returncode == 0 else 1


def _original(script: Path, python: str, job: Path):
    """The user's script run once as it is; kept beside the job for the same script and interpreter."""
    key = hashlib.sha256(f"{script.read_text()}\0{python}".encode()).hexdigest()[:16]
    kept = job / f"original-{key}.pickle"
    if kept.exists():
        return pickle.loads(kept.read_bytes())
    result = run_script(script, python=python, timeout=1800, isolated=True)
    kept.write_bytes(pickle.dumps(result))
    return result


if __name__ == "__main__":
    sys.exit(main())
