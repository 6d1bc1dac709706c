#!/usr/bin/env python3
"""minrepro's GPU work on a GPU box: the catalog, the patch proofs, the two-GPU rows and the real-scale reduce round.

    python benchmarks/gpu_box.py                                  # every step this box can run
    python benchmarks/gpu_box.py catalog patched --record         # record into results/ and regenerate the docs
    python benchmarks/gpu_box.py --wheelhouse wheelhouse          # an offline box (`nox -s wheelhouse` made it)
    python benchmarks/gpu_box.py reduce-round --gpus 2 --time-limit 3600 --dry-run

Steps, in this order:
  catalog       `nox -s "minrepro(SET)"` for each set: every case, two-GPU ones where the box has two GPUs
  patched       `nox -s "patched(SET)"` for each set: the patch proofs, with the controls and the no-harm runs
  two-gpu-rows  (two GPUs or more) explore's two-GPU findings under `minrepro signature --placement`, and the
                two-GPU probes in benchmarks/public/, in an env per set
  reduce-round  `benchmarks/scale/bench.py` on each GPU case and set: a real-scale reduce, one per GPU at a time

Logs go to WORKDIR/logs/, envs and the reduce round's checkpoints to WORKDIR; nox's results to .minrepro/results/, or
with --record to results/ (and the generated pages are regenerated from them). --time-limit bounds the whole run: a
command still running at the limit is stopped (SIGTERM: a reduce writes its best script so far), and a step that would
start with less than a minute left is skipped and said so. Needs only the checkout, Python 3.11 and, for the nox
steps, nox (installed from the wheelhouse or the index when missing)."""

from __future__ import annotations

import argparse
import ast
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("catalog", "patched", "two-gpu-rows", "reduce-round")
BENCH = ROOT / "benchmarks" / "scale" / "bench.py"
MIN_START_SECONDS = 60  # a command that would get less than this is not started
GRACE_SECONDS = 30  # after SIGTERM at the time limit, before SIGKILL


@dataclass
class Command:
    argv: list[str]
    log: str  # file name under the step's log folder
    env: dict[str, str] = field(default_factory=dict)
    unless_exists: str | None = None  # skipped when this path exists (an env made by an earlier run)


@dataclass
class Step:
    name: str
    lanes: list[list[Command]]  # lanes run side by side; the commands of a lane one after another


def version_sets() -> list[str]:
    data = tomllib.loads((ROOT / "minrepro" / "envs" / "sets.toml").read_text(encoding="utf-8"))
    return list(data["sets"])


def bench_cases(names: str = "CASES") -> list[str]:
    """The cases of benchmarks/scale/bench.py: the keys of its `CASES` (or of `OLD_NAMES`, the names it still takes),
    read, not imported: it needs no torch here."""
    tree = ast.parse(BENCH.read_text(encoding="utf-8"))
    for node in tree.body:
        named = isinstance(node, ast.Assign) and any(getattr(t, "id", None) == names for t in node.targets)
        if named and isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return []


def bench_gpu_cases() -> list[str]:
    """The GPU cases of benchmarks/scale/bench.py: those whose name starts with `gpu-`."""
    return [case for case in bench_cases() if case.startswith("gpu-")]


def detect_gpus() -> int:
    """GPUs `nvidia-smi -L` lists (0 where there is no nvidia-smi)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    proc = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return sum(line.startswith("GPU ") for line in proc.stdout.splitlines())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 2)[2],
    )
    parser.add_argument("steps", nargs="*", metavar="STEP", help=f"what to run (default: all): {', '.join(STEPS)}")
    parser.add_argument("--gpus", type=int, help="GPUs to use, the first N (default: all that nvidia-smi lists)")
    parser.add_argument(
        "--workdir",
        default=str(ROOT / ".minrepro" / "gpu-box"),
        help="logs, envs and the reduce round's checkpoints (default: .minrepro/gpu-box)",
    )
    parser.add_argument("--time-limit", type=float, metavar="SECONDS", help="stop everything after this long")
    parser.add_argument("--wheelhouse", metavar="DIR", help="install every library from DIR only (an offline box)")
    parser.add_argument("--sets", help="version sets, comma-separated (default: every set in minrepro/envs/sets.toml)")
    parser.add_argument(
        "--record",
        action="store_true",
        help="catalog and patched record into results/ and regenerate the docs (default: .minrepro/results/)",
    )
    parser.add_argument(
        "--reduce-case",
        action="append",
        metavar="CASE",
        help="bench.py cases for the reduce round (repeat, or separate with commas; default: bench.py's gpu-* cases)",
    )
    parser.add_argument(
        "--reduce-sets",
        default="newest,pinned",
        help="sets the reduce round runs each case on (default: newest,pinned)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="cases at a time in nox's sessions")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)

    unknown = [s for s in args.steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown step {', '.join(unknown)} (steps: {', '.join(STEPS)})")
    if args.gpus is None:
        args.gpus = detect_gpus()
    if args.gpus < 1:
        parser.error("no GPU: nvidia-smi lists none; give --gpus N on a GPU box (or with --dry-run to see the plan)")
    if args.time_limit is not None and args.time_limit <= 0:
        parser.error("--time-limit must be a positive number of seconds")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.wheelhouse and not args.dry_run and not Path(args.wheelhouse).is_dir():
        parser.error(f"--wheelhouse {args.wheelhouse} is not a directory")
    known = version_sets()
    args.sets = _names(parser, args.sets, known, "--sets") if args.sets else known
    args.reduce_sets = _names(parser, args.reduce_sets, known, "--reduce-sets")
    if "two-gpu-rows" in args.steps and args.gpus < 2:
        parser.error(f"two-gpu-rows needs two GPUs; this box has {args.gpus} (--gpus)")
    if not args.steps:
        args.steps = [s for s in STEPS if s != "two-gpu-rows" or args.gpus >= 2]
    if "reduce-round" in args.steps:
        given = ",".join(args.reduce_case or [])
        args.reduce_case = (
            _names(parser, given, bench_cases() + bench_cases("OLD_NAMES"), "--reduce-case", "case")
            if given
            else bench_gpu_cases()
        )
        if not args.reduce_case:
            parser.error(f"no gpu-* case found in {BENCH.relative_to(ROOT)}: name them with --reduce-case")
    return args


def _names(parser: argparse.ArgumentParser, text: str, known: list[str], flag: str, what: str = "set") -> list[str]:
    """Comma-separated names, each one of `known`, in the order given (each once)."""
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    bad = [n for n in names if n not in known]
    if bad or not names:
        parser.error(f"{flag}: unknown {what} {', '.join(bad) or '(none given)'} (known: {', '.join(known)})")
    return names


# --- the plan -----------------------------------------------------------------------------------------------


def plan(args: argparse.Namespace) -> list[Step]:
    work = Path(args.workdir)
    builders = {"catalog": _catalog, "patched": _patched, "two-gpu-rows": _two_gpu_rows, "reduce-round": _reduce_round}
    return [builders[name](args, work) for name in STEPS if name in args.steps]


def _nox(args: argparse.Namespace, session: str, vset: str) -> Command:
    """A nox session of one set; with --record it writes results/ and regenerates the generated pages itself."""
    posargs = [*(["--record"] if args.record else []), "--jobs", str(args.jobs)]
    return Command([sys.executable, "-m", "nox", "-s", f"{session}({vset})", "--", *posargs], f"{session}-{vset}.log")


def _catalog(args: argparse.Namespace, work: Path) -> Step:
    return Step("catalog", [[_nox(args, "minrepro", s) for s in args.sets]])


def _patched(args: argparse.Namespace, work: Path) -> Step:
    return Step("patched", [[_nox(args, "patched", s) for s in args.sets]])


def _minrepro(*argv: str) -> list[str]:
    return [sys.executable, "-m", "minrepro", *argv]


def _env(args: argparse.Namespace, work: Path, vset: str) -> Command:
    target = work / "envs" / vset
    wheelhouse = ["--wheelhouse", str(Path(args.wheelhouse).resolve())] if args.wheelhouse else []
    return Command(
        _minrepro("env", "create", str(target), "--set", vset, *wheelhouse),
        f"env-{vset}.log",
        unless_exists=str(target / "bin" / "python"),
    )


def two_gpu_rows() -> list[Path]:
    """Explore's two-GPU findings (their reduced scripts) and the two-GPU probes."""
    found = sorted(ROOT.glob("results/explore/cuda2-*/candidates/*.min.py"))
    return found + sorted((ROOT / "benchmarks" / "public").glob("two_gpu_*.py"))


def _two_gpu_rows(args: argparse.Namespace, work: Path) -> Step:
    lane = [_env(args, work, s) for s in args.sets]
    for row in two_gpu_rows():
        name = row.relative_to(ROOT).as_posix()
        label = name.replace("/", "_").removesuffix(".py")
        for vset in args.sets:
            python = str(work / "envs" / vset / "bin" / "python")
            argv = (
                _minrepro("signature", name, "--placement", "--python", python)
                if row.name.endswith(".min.py")
                else [python, name]
            )
            lane.append(Command(argv, f"{label}-{vset}.log"))
    return Step("two-gpu-rows", [lane])


def _reduce_round(args: argparse.Namespace, work: Path) -> Step:
    """Each case on each set with `minrepro reduce`'s defaults, one reduction per GPU at a time, each on its GPU's
    share of the cores (as if it had a box of its own). The output is then run where the bug is fixed: the set's env
    with every catalog patch (`{set}-fixed`)."""
    setup = [_env(args, work, s) for s in args.reduce_sets] + [_fixed_env(args, work, s) for s in args.reduce_sets]
    jobs = [(case, vset) for case in args.reduce_case for vset in args.reduce_sets]
    lanes: list[list[Command]] = [[] for _ in range(min(args.gpus, len(jobs)))]
    cores = _core_shares(len(lanes))
    # what a row must say of a box it shared (a GPU and a share of the cores each)
    beside = {1: "", 2: "one of two GPUs, beside another reduce"}.get(len(lanes), f"one of {len(lanes)} GPUs")
    for i, (case, vset) in enumerate(jobs):
        gpu = i % len(lanes)
        where = work / "reduce" / vset  # a checkpoint per set: one saved by a newer transformers may not load
        argv = [
            *cores[gpu],
            sys.executable,
            str(BENCH.relative_to(ROOT)),
            "--case",
            case,
            "--python",
            str(work / "envs" / vset / "bin" / "python"),
            "--fixed-python",
            str(work / "envs" / f"{vset}-fixed" / "bin" / "python"),
            "--label",
            vset,
            "--workdir",
            str(where),
            "--results",
            str(where / "rows.jsonl"),
            *(["--box-note", beside] if beside else []),
        ]
        lanes[gpu].append(Command(argv, f"{case}-{vset}.log", {"CUDA_VISIBLE_DEVICES": str(gpu)}))
    # the envs first, in the first lane: the others wait for them (see run_step)
    return Step("reduce-round", [setup, *lanes])


def _fixed_env(args: argparse.Namespace, work: Path, vset: str) -> Command:
    """The set's env with every catalog patch that applies: where the GPU cases' bugs are fixed."""
    target = work / "envs" / f"{vset}-fixed"
    wheelhouse = ["--wheelhouse", str(Path(args.wheelhouse).resolve())] if args.wheelhouse else []
    make = " && ".join(
        shlex.join(argv)
        for argv in (
            _minrepro("env", "create", str(target), "--set", vset, *wheelhouse),
            _minrepro("patch", "apply", "--set", vset, "--into", str(target)),
        )
    )
    return Command(["sh", "-c", make], f"env-{vset}-fixed.log", unless_exists=str(target / "bin" / "python"))


def _core_shares(lanes: int) -> list[list[str]]:
    """A `taskset` prefix per lane giving it an equal share of this process's cores (none where there is one lane
    or no taskset)."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if lanes < 2 or not shutil.which("taskset") or len(cores) < lanes:
        return [[] for _ in range(lanes)]
    share = len(cores) // lanes
    return [["taskset", "-c", ",".join(map(str, cores[i * share : (i + 1) * share]))] for i in range(lanes)]


def base_env(args: argparse.Namespace) -> dict[str, str]:
    env = {
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(args.gpus)),
    }
    if args.wheelhouse:
        env.update(MINREPRO_WHEELHOUSE=str(Path(args.wheelhouse).resolve()), HF_HUB_OFFLINE="1")
    return env


def show(steps: list[Step], env: dict[str, str]) -> str:
    """The plan as shell lines: what --dry-run prints."""
    lines = ["# environment: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())]
    for step in steps:
        lines.append(f"# {step.name}")
        for n, lane in enumerate(step.lanes):
            if len(step.lanes) > 1:
                lines.append(f"#   lane {n + 1}" + (" (first: the others start after it)" if n == 0 else ""))
            for command in lane:
                prefix = "".join(f"{k}={shlex.quote(v)} " for k, v in command.env.items())
                guard = f"[ -e {shlex.quote(command.unless_exists)} ] || " if command.unless_exists else ""
                lines.append(guard + prefix + shlex.join(command.argv))
    return "\n".join(lines)


# --- running it ---------------------------------------------------------------------------------------------


class Clock:
    def __init__(self, limit: float | None):
        self.deadline = None if limit is None else time.monotonic() + limit

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()


def run_command(command: Command, env: dict[str, str], logs: Path, clock: Clock) -> str:
    """Run one command (its own process group, so a stop reaches nox's children too); its outcome in a word."""
    if command.unless_exists and Path(command.unless_exists).exists():
        return "kept"
    left = clock.left()
    if left is not None and left < MIN_START_SECONDS:
        return f"skipped ({left:.0f} s left)"
    log = logs / command.log
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            command.argv,
            cwd=ROOT,
            env={**os.environ, **env, **command.env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return "stopped at the time limit"
    return "ok" if rc == 0 else f"exit {rc}"


def run_step(step: Step, env: dict[str, str], work: Path, clock: Clock) -> list[tuple[str, str]]:
    logs = work / "logs" / step.name
    logs.mkdir(parents=True, exist_ok=True)
    outcomes: list[tuple[str, str]] = []

    def lane_runner(lane: list[Command]) -> None:
        for command in lane:
            began = time.monotonic()
            outcome = run_command(command, env, logs, clock)
            outcomes.append((command.log, outcome))
            print(f"[{step.name}] {command.log}: {outcome} ({time.monotonic() - began:.0f} s)", flush=True)

    lanes = step.lanes
    if step.name == "reduce-round":  # its first lane makes the envs every other lane runs in, side by side
        setup = [threading.Thread(target=lane_runner, args=([command],)) for command in lanes[0]]
        for thread in setup:
            thread.start()
        for thread in setup:
            thread.join()
        lanes = lanes[1:]
    threads = [threading.Thread(target=lane_runner, args=(lane,)) for lane in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def ensure_nox(args: argparse.Namespace, env: dict[str, str]) -> None:
    if subprocess.run([sys.executable, "-m", "nox", "--version"], capture_output=True, check=False).returncode == 0:
        return
    source = ["--no-index", "--find-links", str(Path(args.wheelhouse).resolve())] if args.wheelhouse else []
    pip = [sys.executable, "-m", "pip", "install", "--quiet", *source, "nox"]
    subprocess.run(pip, check=True, env={**os.environ, **env})


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    steps = plan(args)
    env = base_env(args)
    if args.dry_run:
        print(show(steps, env))
        return 0
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    if {"catalog", "patched"} & set(args.steps):
        ensure_nox(args, env)
    clock = Clock(args.time_limit)
    summary = []
    for step in steps:
        summary += [(step.name, name, outcome) for name, outcome in run_step(step, env, work, clock)]
    (work / "summary.txt").write_text("".join(f"{s}\t{n}\t{o}\n" for s, n, o in summary), encoding="utf-8")
    failed = [f"{s}/{n}: {o}" for s, n, o in summary if o not in ("ok", "kept")]
    print(
        f"{len(summary)} commands, {len(failed)} not ok"
        + (": " + "; ".join(failed) if failed else "")
        + f"; logs in {work / 'logs'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
