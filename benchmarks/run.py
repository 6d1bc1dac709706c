"""Benchmark: `minrepro reduce` against Shrink Ray and pysource-minimize, with one oracle, and the
per-candidate overhead of each executor against a cold start, measured in the same run.

    python benchmarks/run.py --python VENV/bin/python [--shrinkray PATH] [--pysource-python PATH]
                             [--cap SECONDS] [--scripts NAME,...] [--overhead-runs N] [--json FILE]

--python is the environment the scripts fail in (e.g. the pinned set's venv: `nox -s "minrepro(pinned)"`
leaves one in .nox/minrepro-pinned). Every tool gets the same oracle: the candidate's failure signature,
from a cold run, must equal the original's (`minrepro matches`). Shrink Ray (Python >= 3.12, from its
repository) and pysource-minimize (`pip install "pysource-minimize[cli]"`) are optional; a tool that is
not given is reported as not run. Each external tool is stopped at --cap seconds and its best result so
far is measured. Prints Markdown tables (last), suitable for the README.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minrepro.catalog.manifest import code_lines  # noqa: E402
from minrepro.harness.executors import ForkServerExecutor, WarmPoolExecutor  # noqa: E402
from minrepro.harness.oracle import Cache, SignatureOracle  # noqa: E402
from minrepro.harness.runner import run_script  # noqa: E402

SCRIPTS = ROOT / "benchmarks" / "scripts"
LIBRARIES = ["torch", "transformers", "accelerate", "peft", "bitsandbytes"]
PROBE = "import torch, transformers, accelerate, peft, bitsandbytes\nraise ValueError('probe')\n"

# pysource-minimize's API in its own interpreter: the checker calls the shared oracle command and keeps
# the smallest interesting source on disk, so a capped run still leaves its best result.
PYSOURCE_DRIVER = r"""
import json, os, subprocess, sys
from pysource_minimize import minimize
source, oracle, best, count = open(sys.argv[1]).read(), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
smallest = [len(source)]
def keep(text):
    with open(best + ".tmp", "w") as fh:
        fh.write(text)
    os.replace(best + ".tmp", best)  # atomic: a kill at the cap never leaves a half-written file
def checker(candidate):
    with open(best + ".candidate.py", "w") as fh:
        fh.write(candidate)
    with open(count, "a") as fh:
        fh.write("x")
    ok = subprocess.run(oracle + [best + ".candidate.py"], capture_output=True).returncode == 0
    if ok and len(candidate) < smallest[0]:
        smallest[0] = len(candidate)
        keep(candidate)
    return ok
keep(source)
keep(minimize(source, checker))
"""

def overhead(python: str, runs: int) -> list[tuple[str, float, float]]:
    """(approach, seconds per candidate, setup seconds), all on the same failing probe script."""
    tmp = Path(tempfile.mkdtemp(prefix="minrepro-overhead-"))
    probes = []
    for i in range(runs):
        path = tmp / f"probe{i}.py"
        path.write_text(PROBE + f"# {i}\n")
        probes.append(path)
    rows = []
    start = time.monotonic()
    for probe in probes:
        run_script(probe, python=python)
    rows.append(("cold subprocess", (time.monotonic() - start) / runs, 0.0))
    for name, make in (("fork server", ForkServerExecutor), ("pre-warmed spawned pool", WarmPoolExecutor)):
        begin = time.monotonic()
        executor = make(python, LIBRARIES, 1)
        setup = time.monotonic() - begin
        start = time.monotonic()
        for probe in probes:
            executor.run_many([probe], 60)
        rows.append((name, (time.monotonic() - start) / runs, setup))
        executor.close()
    begin = time.monotonic()
    executor = ForkServerExecutor(python, LIBRARIES, 2)
    setup = time.monotonic() - begin
    start = time.monotonic()
    executor.run_many(probes, 60)
    rows.append(("fork server, --jobs 2", (time.monotonic() - start) / runs, setup))
    original = executor.run_many([probes[0]], 60)[0].signature
    oracle = SignatureOracle(Cache(tmp / "cache.jsonl", "k"), tmp, 60, executor=executor, original=original)
    oracle.test_many([PROBE])
    start = time.monotonic()
    for _ in range(runs):
        oracle.test_many([PROBE])
    rows.append(("content-hash cache hit", (time.monotonic() - start) / runs, 0.0))
    executor.close()
    shutil.rmtree(tmp, ignore_errors=True)
    return rows


def _stop(proc: subprocess.Popen, cap: float) -> bool:
    try:
        proc.wait(cap)
        return False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return True


def run_minrepro(script: Path, python: str, work: Path) -> dict:
    out = work / f"{script.stem}.min.py"
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "minrepro", "reduce", str(script), "-o", str(out), "--python",
                           python, "--json", "--fresh", "--workdir", str(work / "minrepro-work")],
                          capture_output=True, text=True, cwd=ROOT)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        return {"error": proc.stderr.strip().splitlines()[-1], "seconds": seconds}
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"lines": summary["output_lines"], "calls": summary["oracle_calls"], "seconds": seconds,
            "output": out, "capped": False}


def run_shrinkray(script: Path, oracle: list[str], shrinkray: str, work: Path, cap: float) -> dict:
    target = work / script.name
    shutil.copy(script, target)
    counter = work / "shrinkray.calls"
    test = work / "interesting.sh"
    test.write_text("#!/bin/sh\nprintf x >> %s\nexec %s \"$1\"\n" % (counter, " ".join(map(_quote, oracle))))
    test.chmod(0o755)
    start = time.monotonic()
    proc = subprocess.Popen([shrinkray, "--ui", "basic", "--input-type", "arg", "--parallelism", "1",
                             "--timeout", "120", str(test), str(target)], cwd=work, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    capped = _stop(proc, cap)
    calls = len(counter.read_text()) if counter.exists() else 0
    return {"lines": code_lines(target.read_text()), "calls": calls, "seconds": time.monotonic() - start,
            "output": target, "capped": capped}


def run_pysource(script: Path, oracle: list[str], python: str, work: Path, cap: float) -> dict:
    best, counter = work / f"{script.stem}.pysource.py", work / "pysource.calls"
    start = time.monotonic()
    proc = subprocess.Popen([python, "-c", PYSOURCE_DRIVER, str(script), json.dumps(oracle), str(best), str(counter)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    capped = _stop(proc, cap)
    calls = len(counter.read_text()) if counter.exists() else 0
    return {"lines": code_lines(best.read_text()), "calls": calls, "seconds": time.monotonic() - start,
            "output": best, "capped": capped}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="interpreter of the environment the scripts fail in")
    parser.add_argument("--shrinkray", help="path to the shrinkray executable")
    parser.add_argument("--pysource-python", help="interpreter that has pysource-minimize installed")
    parser.add_argument("--cap", type=float, default=600, help="wall-clock cap per external tool run (s)")
    parser.add_argument("--scripts", help="comma-separated script stems (default: all in benchmarks/scripts)")
    parser.add_argument("--overhead-runs", type=int, default=10)
    parser.add_argument("--json", help="also write the raw numbers here")
    parser.add_argument("--tools", default="minrepro,shrinkray,pysource-minimize",
                        help="comma-separated subset of: minrepro, shrinkray, pysource-minimize")
    args = parser.parse_args()

    rows = overhead(args.python, args.overhead_runs)
    scripts = sorted(SCRIPTS.glob("*.py"))
    if args.scripts:
        scripts = [SCRIPTS / f"{stem}.py" for stem in args.scripts.split(",")]
    results = []
    for script in scripts:
        original = run_script(script, python=args.python).signature
        work = Path(tempfile.mkdtemp(prefix=f"bench-{script.stem}-"))
        expect = work / "signature.json"
        expect.write_text(json.dumps(original.to_dict()))
        oracle = [sys.executable, "-m", "minrepro", "matches", "--expect", str(expect), "--python", args.python]
        os.environ["PYTHONPATH"] = str(ROOT)
        wanted = set(args.tools.split(","))
        tools = {"minrepro reduce": lambda: run_minrepro(script, args.python, work)} if "minrepro" in wanted else {}
        if args.shrinkray and "shrinkray" in wanted:
            tools["Shrink Ray"] = lambda: run_shrinkray(script, oracle, args.shrinkray, work, args.cap)
        if args.pysource_python and "pysource-minimize" in wanted:
            tools["pysource-minimize"] = lambda: run_pysource(script, oracle, args.pysource_python, work, args.cap)
        for tool, run in tools.items():
            print(f"  {script.stem}: {tool} ...", file=sys.stderr, flush=True)
            outcome = run()
            if "output" in outcome:
                final = run_script(outcome["output"], python=args.python).signature
                outcome["same"] = final == original
                outcome["output"] = str(outcome["output"])
            results.append({"script": script.stem, "tool": tool, "input": code_lines(script.read_text()), **outcome})
    if args.json:
        Path(args.json).write_text(json.dumps({"overhead": rows, "results": results}, indent=2))
    _print(rows, results)
    return 0


def _print(rows, results) -> None:
    cold = rows[0][1]
    print("\n| candidate execution | s per candidate | setup s | vs cold |\n|---|---|---|---|")
    for name, per, setup in rows:
        print(f"| {name} | {per:.3f} | {setup:.1f} | {cold / per:.0f}x faster |" if per else f"| {name} | 0 | | |")
    print("\n| script | tool | code lines | oracle calls | wall s | same signature |\n|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['script']} | {r['tool']} | error: {r['error']} | | {r['seconds']:.0f} | |")
            continue
        capped = " (capped)" if r.get("capped") else ""
        print(f"| {r['script']} | {r['tool']} | {r['input']} → {r['lines']} | {r['calls']} | "
              f"{r['seconds']:.0f}{capped} | {'yes' if r['same'] else 'NO'} |")


if __name__ == "__main__":
    sys.exit(main())
