"""Benchmark: `minrepro reduce` against Shrink Ray, pysource-minimize, Lithium and picire on realistic scripts,
side by side in one run, every tool with the same interestingness test; and the per-candidate cost of each
executor against a cold start.

    python benchmarks/run.py --python BAD/bin/python --good-python GOOD/bin/python
        [--tools minrepro,shrinkray,pysource-minimize,lithium,picire] [--cap 300] [--scripts a,b] [--jobs 2]
        [--shrinkray PATH] [--peers-python PATH] [--overhead-runs 5] [--json FILE]

--python is the environment the scripts fail in (e.g. ~/.cache/minrepro/envs/pinned, made by `minrepro check
SCRIPT --set pinned`), --good-python one where the bug is fixed (the patched set: ~/.cache/minrepro/envs/
pinned-patched). The shared interestingness test is `minrepro matches` (a cold run whose signature equals the
original's and, with --good-python, a cold run in the good env that does not: the differential test `minrepro
reduce` itself uses, so every tool searches under the same rule). Each tool is stopped at --cap seconds and its best
result so far is measured; minrepro gets the same cap. Every output is then judged cold: the same signature in the
bad env ("same"), and no such failure in the good env ("faithful": it still holds the library's bug, not just its
symptom). Prints Markdown tables, last.

Peers are installed from the package index: `pip install "pysource-minimize[cli]" lithium-reducer picire` into
--peers-python's venv; Shrink Ray (`pip install shrinkray`) needs Python >= 3.12, hence its own --shrinkray path.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from minrepro.harness.executors import ForkServerExecutor, WarmPoolExecutor  # noqa: E402
from minrepro.harness.oracle import Cache, SignatureOracle  # noqa: E402
from minrepro.harness.runner import run_script  # noqa: E402
from minrepro.reducers.source import code_lines  # noqa: E402

SCRIPTS = ROOT / "benchmarks" / "scripts"
LIBRARIES = ["torch", "transformers", "accelerate", "peft", "bitsandbytes"]
PROBE = "import torch, transformers, accelerate, peft, bitsandbytes\nraise ValueError('probe')\n"
TOOLS = ("minrepro", "shrinkray", "pysource-minimize", "lithium", "picire")

# Drivers that run inside the peers' interpreter. Each keeps its best-so-far file atomically, so a run stopped at
# the cap still leaves a result to measure; each counts its oracle calls in a file.
PYSOURCE_DRIVER = r"""
import json, os, subprocess, sys
from pysource_minimize import minimize
source, oracle, best, count = open(sys.argv[1]).read(), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
smallest = [len(source)]
def keep(text):
    with open(best + ".tmp", "w") as fh:
        fh.write(text)
    os.replace(best + ".tmp", best)
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
LITHIUM_CONDITION = r'''
"""Lithium interestingness: the shared oracle; counts calls and keeps the smallest interesting file."""
import json, os, subprocess
ORACLE, COUNT, BEST = json.loads(os.environ["BENCH_ORACLE"]), os.environ["BENCH_COUNT"], os.environ["BENCH_BEST"]
def interesting(cond_args, prefix):
    path = cond_args[-1]
    with open(COUNT, "a") as fh:
        fh.write("x")
    ok = subprocess.run(ORACLE + [path], capture_output=True).returncode == 0
    if ok:
        text = open(path).read()
        if not os.path.exists(BEST) or len(text) <= len(open(BEST).read()):
            with open(BEST + ".tmp", "w") as fh:
                fh.write(text)
            os.replace(BEST + ".tmp", BEST)
    return ok
'''


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
    executor = ForkServerExecutor(python, LIBRARIES, 1)
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


def _calls(counter: Path) -> int:
    return len(counter.read_text()) if counter.exists() else 0


@dataclass(frozen=True)
class Lane:
    """One tool's run on one script: the folder it works in, its wall-clock cap (s), its parallel candidates."""

    work: Path
    cap: float
    jobs: int


def run_minrepro(script: Path, bad: str, good: str | None, lane: Lane, extra: Sequence[str] = ()) -> dict:
    work, cap, jobs = lane.work, lane.cap, lane.jobs
    out = work / f"{script.stem}.min.py"
    command = [
        sys.executable,
        "-m",
        "minrepro",
        "reduce",
        str(script),
        "-o",
        str(out),
        "--python",
        bad,
        "--json",
        "--fresh",
        "--workdir",
        str(work / "minrepro-work"),
        "--jobs",
        str(jobs),
        *extra,
    ]
    command += ["--good-python", good] if good else []
    start = time.monotonic()
    # a benchmark started in the background inherits SIGINT ignored, and Python then keeps it ignored: the cap's
    # Ctrl-C would never arrive (a capped run went on for 8 minutes). Restore it for the child.
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        stdout, stderr = proc.communicate(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: minrepro writes its best so far
        stdout, stderr = proc.communicate()
        cache = work / "minrepro-work" / "cache.jsonl"  # one line per distinct candidate answered
        calls = sum(1 for _ in cache.open(encoding="utf-8")) if cache.exists() else None
        return {"calls": calls, "seconds": time.monotonic() - start, "output": out, "capped": True}
    if proc.returncode != 0:
        return {"error": (stderr.strip().splitlines() or ["?"])[-1], "seconds": time.monotonic() - start}
    summary = json.loads(stdout.strip().splitlines()[-1])
    return {
        "calls": summary["oracle_calls"],
        "seconds": time.monotonic() - start,
        "output": out,
        "capped": False,
        "guard": summary["guard"],
    }


def run_shrinkray(script: Path, oracle: list[str], shrinkray: str, lane: Lane) -> dict:
    work, cap, jobs = lane.work, lane.cap, lane.jobs
    target = work / script.name
    shutil.copy(script, target)
    counter = work / "shrinkray.calls"
    test = work / "interesting.sh"
    test.write_text('#!/bin/sh\nprintf x >> {}\nexec {} "$1"\n'.format(counter, " ".join(map(_quote, oracle))))
    test.chmod(0o755)
    start = time.monotonic()
    proc = subprocess.Popen(
        [
            shrinkray,
            "--ui",
            "basic",
            "--input-type",
            "arg",
            "--parallelism",
            str(jobs),
            "--timeout",
            "120",
            str(test),
            str(target),
        ],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    capped = _stop(proc, cap)
    return {"calls": _calls(counter), "seconds": time.monotonic() - start, "output": target, "capped": capped}


def run_pysource(script: Path, oracle: list[str], python: str, lane: Lane) -> dict:
    work, cap = lane.work, lane.cap
    best, counter = work / f"{script.stem}.pysource.py", work / "pysource.calls"
    start = time.monotonic()
    proc = subprocess.Popen(
        [python, "-c", PYSOURCE_DRIVER, str(script), json.dumps(oracle), str(best), str(counter)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    capped = _stop(proc, cap)
    return {"calls": _calls(counter), "seconds": time.monotonic() - start, "output": best, "capped": capped}


def run_lithium(script: Path, oracle: list[str], python: str, lane: Lane) -> dict:
    work, cap = lane.work, lane.cap
    target, best, counter = (
        work / f"{script.stem}.lithium.py",
        work / f"{script.stem}.lithium.best.py",
        work / "lithium.calls",
    )
    shutil.copy(script, target)
    shutil.copy(script, best)
    condition = work / "bench_condition.py"
    condition.write_text(LITHIUM_CONDITION)
    env = {
        **os.environ,
        "BENCH_ORACLE": json.dumps(oracle),
        "BENCH_COUNT": str(counter),
        "BENCH_BEST": str(best),
        "PYTHONPATH": os.pathsep.join([str(work), str(ROOT)]),
    }  # the condition module, and minrepro for the oracle
    start = time.monotonic()
    proc = subprocess.Popen(
        [str(Path(python).with_name("lithium")), "bench_condition", str(target)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    capped = _stop(proc, cap)
    return {"calls": _calls(counter), "seconds": time.monotonic() - start, "output": best, "capped": capped}


def run_picire(script: Path, oracle: list[str], python: str, lane: Lane) -> dict:
    work, cap, jobs = lane.work, lane.cap, lane.jobs
    counter, best, out_dir = work / "picire.calls", work / f"{script.stem}.picire.best.py", work / "picire-out"
    shutil.copy(script, best)
    test = work / "picire_test.sh"  # picire: exit 0 means the input is interesting ("FAIL")
    test.write_text(
        '#!/bin/sh\nprintf x >> {}\n{} "$1" || exit 1\n'
        'if [ ! -s {} ] || [ $(wc -c < "$1") -le $(wc -c < {}) ]; then cp "$1" {}; fi\n'.format(
            counter, " ".join(map(_quote, oracle)), best, best, best
        )
    )
    test.chmod(0o755)
    start = time.monotonic()
    proc = subprocess.Popen(
        [
            str(Path(python).with_name("picire")),
            "-i",
            str(script),
            "--test",
            str(test),
            "-j",
            str(jobs),
            "-o",
            str(out_dir),
        ],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    capped = _stop(proc, cap)
    return {"calls": _calls(counter), "seconds": time.monotonic() - start, "output": best, "capped": capped}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def judge(output: Path, original, bad: str, good: str | None) -> dict:
    """Cold runs of a tool's output: the same signature in the bad env, and (faithful) not in the good env."""
    if not output.exists():
        return {"lines": None, "same": False, "faithful": None}
    try:
        lines = code_lines(output.read_text())
    except SyntaxError:
        return {"lines": None, "same": False, "faithful": None}
    same = run_script(output, python=bad).signature == original
    faithful = None if good is None else (same and run_script(output, python=good).signature != original)
    return {"lines": lines, "same": same, "faithful": faithful}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", help="interpreter of the environment the scripts fail in (required to run)")
    parser.add_argument(
        "--table",
        nargs="+",
        metavar="JSON",
        help="run nothing: print the table from recorded "
        "--json files, the latest row per script and tool (files in date order)",
    )
    parser.add_argument("--good-python", help="interpreter of an environment where the bugs are fixed (patched)")
    parser.add_argument("--shrinkray", help="path to the shrinkray executable (Python >= 3.12)")
    parser.add_argument("--peers-python", help="interpreter with pysource-minimize, lithium-reducer and picire")
    parser.add_argument("--cap", type=float, default=300, help="wall-clock cap per tool and script (s)")
    parser.add_argument("--jobs", type=int, default=2, help="parallel candidates, for every tool that has them")
    parser.add_argument("--scripts", help="comma-separated script stems (default: all in benchmarks/scripts)")
    parser.add_argument("--overhead-runs", type=int, default=5, help="probe runs per executor (0: skip that table)")
    parser.add_argument("--json", help="also write the raw numbers here")
    parser.add_argument(
        "--minrepro-args", default="", help="more arguments for `minrepro reduce` (e.g. '--good-runs 1')"
    )
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated subset of: {', '.join(TOOLS)}")
    args = parser.parse_args()
    if args.table:
        return print_recorded(args.table)
    if not args.python:
        parser.error("--python is required to run the benchmark")

    rows = overhead(args.python, args.overhead_runs) if args.overhead_runs else []
    scripts = sorted(SCRIPTS.glob("*.py"))
    if args.scripts:
        scripts = [SCRIPTS / f"{stem}.py" for stem in args.scripts.split(",")]
    wanted = set(args.tools.split(","))
    results = []
    for script in scripts:
        original = run_script(script, python=args.python).signature
        if original is None:  # eval_then_export's merge error depends on the CPU (it passes without AVX-512)
            print(f"  {script.stem}: skipped, it passes under {args.python} on this machine", flush=True)
            results.append({"script": script.stem, "skipped": "passes under --python on this machine"})
            continue
        work = Path(tempfile.mkdtemp(prefix=f"bench-{script.stem}-"))
        expect = work / "signature.json"
        expect.write_text(json.dumps(original.to_dict()))
        oracle = [sys.executable, "-m", "minrepro", "matches", "--expect", str(expect), "--python", args.python]
        oracle += ["--good-python", args.good_python] if args.good_python else []  # minrepro's differential test
        os.environ["PYTHONPATH"] = str(ROOT)
        tools, lane = {}, Lane(work, args.cap, args.jobs)
        if "minrepro" in wanted:
            tools["minrepro reduce"] = lambda: run_minrepro(
                script, args.python, args.good_python, lane, shlex.split(args.minrepro_args)
            )
        if args.shrinkray and "shrinkray" in wanted:
            tools["Shrink Ray"] = lambda: run_shrinkray(script, oracle, args.shrinkray, lane)
        for tool, run in (("pysource-minimize", run_pysource), ("Lithium", run_lithium), ("picire", run_picire)):
            if args.peers_python and tool.lower() in wanted:
                tools[tool] = lambda run=run: run(script, oracle, args.peers_python, lane)
        for tool, run in tools.items():
            print(f"  {script.stem}: {tool} ...", file=sys.stderr, flush=True)
            outcome = run()
            if "output" in outcome:
                outcome.update(judge(outcome["output"], original, args.python, args.good_python))
                outcome["output"] = outcome["output"].name  # in a temp dir of this machine: the name says enough
            results.append({"script": script.stem, "tool": tool, "input": code_lines(script.read_text()), **outcome})
            print(f"    {results[-1]}", file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"overhead": rows, "results": results, "cap": args.cap, "jobs": args.jobs}, indent=2)
        )
    _print(rows, results, args.cap)
    return 0


def print_recorded(files: list[str]) -> int:
    """The latest recorded row of each (script, tool) over the given --json files, taken in name order (their names
    start with the date), with the file each row came from."""
    latest: dict[tuple[str, str], dict] = {}
    for name in sorted(files, key=lambda f: Path(f).name):
        doc = json.loads(Path(name).read_text(encoding="utf-8"))
        for row in doc["results"]:
            if "error" in row or "skipped" in row or row.get("lines") is None:
                continue  # a row that measured nothing does not replace one that did
            latest[(row["script"], row["tool"])] = {**row, "cap": doc["cap"], "file": Path(name).name}
    print("| script | tool | code lines | oracle calls | wall s | same signature | faithful | recorded in |")
    print("|---|---|---|---|---|---|---|---|")
    for (script, tool), r in sorted(latest.items(), key=lambda item: (item[0][0], item[0][1] != "minrepro reduce")):
        capped = f" (cap {r['cap']:.0f})" if r.get("capped") else ""
        faithful = "—" if r.get("faithful") is None else ("yes" if r["faithful"] else "NO")
        print(
            f"| {script} | {tool} | {r['input']} → {r['lines']} | {r['calls'] if r['calls'] is not None else '?'} | "
            f"{r['seconds']:.0f}{capped} | {'yes' if r['same'] else 'NO'} | {faithful} | `{r['file']}` |"
        )
    return 0


def _print(rows, results, cap) -> None:
    if rows:
        cold = rows[0][1]
        print("\n| candidate execution | s per candidate | setup s | vs cold |\n|---|---|---|---|")
        for name, per, setup in rows:
            print(f"| {name} | {per:.3f} | {setup:.1f} | {cold / per:.0f}x faster |" if per else f"| {name} | 0 | | |")
    print("\n| script | tool | code lines | oracle calls | wall s | same signature | faithful (passes where fixed) |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        if "skipped" in r:
            print(f"| {r['script']} | | skipped: {r['skipped']} | | | | |")
            continue
        if "error" in r:
            print(f"| {r['script']} | {r['tool']} | error: {r['error'][:60]} | | {r['seconds']:.0f} | | |")
            continue
        capped = f" (capped at {cap:.0f})" if r.get("capped") else ""
        faithful = "—" if r.get("faithful") is None else ("yes" if r["faithful"] else "NO")
        lines = f"{r['input']} → {r['lines']}" if r.get("lines") is not None else f"{r['input']} → (no result)"
        print(
            f"| {r['script']} | {r['tool']} | {lines} | {r['calls'] if r['calls'] is not None else '?'} | "
            f"{r['seconds']:.0f}{capped} | {'yes' if r['same'] else 'NO'} | {faithful} |"
        )


if __name__ == "__main__":
    sys.exit(main())
