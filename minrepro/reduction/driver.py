"""`minrepro reduce`: establish the original failure, pick an executor, run the search, verify, write.

The search itself lives in `reducers/`; this module is the execution side of the seam: it owns the
oracle, the work directory (cache + state, so an interrupted run resumes) and the final cold check.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from minrepro.reducers import FINAL_PASSES, PASSES, reduce_source

from minrepro.reducers.source import code_lines, module_imports
from minrepro.errors import MinreproError
from minrepro.harness.executors import ColdExecutor, Executor, make_executor
from minrepro.harness.oracle import Cache, CommandOracle, SignatureOracle
from minrepro.harness.runner import DEFAULT_TIMEOUT, RunResult, resolve_python
from minrepro.harness.signature import Signature

CONFIRM_RUNS = 2  # the original runs this many times to establish (and check the stability of) its failure
# A candidate may not run slower than SLOWDOWN x the original (or the original + GRACE_SECONDS): dropping
# `num_hidden_layers=2` keeps the bug but makes every later candidate, and the final repro, slow.
SLOWDOWN, GRACE_SECONDS = 3.0, 2.0


@dataclass
class ReduceOptions:
    script: Path
    out: Path | None = None
    signature: str | None = None
    oracle: str | None = None
    python: str | None = None
    jobs: int = 1
    timeout: float = DEFAULT_TIMEOUT
    seed: int = 0
    executor: str = "forkserver"
    workdir: Path | None = None
    fresh: bool = False


@dataclass
class ReduceSummary:
    input_lines: int
    output_lines: int
    oracle_calls: int
    cache_hits: int
    seconds: float
    signature: str
    output: str
    executor: str
    resumed: bool
    notes: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {k: getattr(self, k) for k in ("input_lines", "output_lines", "oracle_calls", "cache_hits", "seconds",
                                              "signature", "output", "executor", "resumed", "notes")}


def _read_script(path: Path) -> str:
    if not path.is_file():
        raise MinreproError(f"no such script: {path}")
    source = path.read_text(encoding="utf-8")
    try:
        ast.parse(source)
    except SyntaxError as exc:
        raise MinreproError(f"{path} is not valid Python: {exc.msg} (line {exc.lineno})") from None
    return source


def establish(script: Path, python: str, timeout: float, home: Path) -> tuple[Signature, RunResult]:
    """Run the original CONFIRM_RUNS times, cold: its signature, or a one-line error."""
    runs = ColdExecutor(python, CONFIRM_RUNS).run_many([script] * CONFIRM_RUNS, timeout, home)
    failing = [r for r in runs if r.signature is not None]
    if not failing:
        raise MinreproError(f"nothing to reduce: {script} does not fail (passed {len(runs)} of {len(runs)} runs)")
    first = failing[0].signature
    same = sum(r.signature == first for r in runs)
    if same < len(runs):
        raise MinreproError(f"{script} fails flakily: '{first.headline}' in {same} of {len(runs)} runs")
    return first, failing[0]


def reduce_script(opts: ReduceOptions, log: Callable[[str], None] = lambda _: None) -> ReduceSummary:
    start = time.monotonic()
    script = opts.script.resolve()
    source = _read_script(script)
    out = (opts.out or script.with_name(f"{script.stem}.min.py")).resolve()
    if out == script:
        raise MinreproError("the output path is the input script; minrepro never overwrites it")
    python = resolve_python(opts.python)
    key = json.dumps([opts.oracle or "signature", opts.signature, python, opts.timeout])
    workdir = (opts.workdir or Path(".minrepro") / f"{script.stem}-{_digest(source + key)[:10]}").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    state_path = workdir / "state.json"
    if opts.fresh:
        for stale in (state_path, workdir / "cache.jsonl"):
            stale.unlink(missing_ok=True)
    cache = Cache(workdir / "cache.jsonl", key)
    notes: list[str] = []

    executor: Executor | None = None
    if opts.oracle:
        oracle = CommandOracle(cache, workdir, opts.timeout, script.parent, command=shlex.split(opts.oracle),
                               jobs=opts.jobs)
        if not oracle.test_many([source])[0]:
            raise MinreproError(f"nothing to reduce: the oracle does not accept {script.name} itself")
        headline = f"oracle: {opts.oracle}"
        owner = ""
    else:
        log(f"running {script.name} {CONFIRM_RUNS}x to establish its failure signature")
        original, first_run = establish(script, python, opts.timeout, script.parent)
        if opts.signature and not _search(opts.signature, first_run.raw_headline):
            raise MinreproError(f"{script.name} fails with '{first_run.raw_headline.splitlines()[0]}', "
                                f"which does not match --signature {opts.signature!r}")
        executor, baseline = _warm_executor(opts, python, source, original, script, first_run, notes, log)
        budget = max(SLOWDOWN * baseline, baseline + GRACE_SECONDS)
        # a candidate past the budget is uninteresting anyway: stop it there, not at --timeout
        oracle = SignatureOracle(cache, workdir, min(opts.timeout, budget + 1), script.parent, executor=executor,
                                 original=original, regex=opts.signature, max_seconds=budget)
        headline, owner = original.headline, str(original.owner or "")
        log(f"signature: {original.headline}  (owner: {original.owner})")

    state = _load_state(state_path, _digest(source))
    resumed = state is not None
    begin = state["best"] if state else source
    if resumed:
        log(f"resuming from {state_path} ({code_lines(begin)} code lines so far)")

    def save(best: str) -> None:
        state_path.write_text(json.dumps({"original": _digest(source), "best": best}), encoding="utf-8")
        log(f"  accepted: {code_lines(best)} code lines")

    try:
        result = reduce_source(begin, oracle.test_many, PASSES, FINAL_PASSES, opts.jobs, opts.seed, save,
                               on_pass=lambda name: log(f"pass {name}"))
    finally:
        if executor is not None:
            executor.close()

    if not opts.oracle and not _verify_cold(result, oracle, python, opts.timeout, workdir, script.parent):
        raise MinreproError(f"the reduced script does not reproduce in a fresh interpreter; kept in {state_path}")
    header = (f"# Reduced by minrepro from {script.name}: {code_lines(source)} -> {code_lines(result)} code lines.\n"
              f"# Failure: {headline}" + (f"  (in {owner})" if owner else "") + "\n")
    out.write_text(header + result, encoding="utf-8")
    return ReduceSummary(code_lines(source), code_lines(result), oracle.stats.calls, oracle.stats.cache_hits,
                         round(time.monotonic() - start, 1), headline, str(out),
                         executor.name if executor else "command", resumed, notes)


def _warm_executor(opts: ReduceOptions, python: str, source: str, original: Signature, script: Path,
                   cold: RunResult, notes: list[str], log: Callable[[str], None]) -> tuple[Executor, float]:
    """The requested executor and the original's run time under it, if it reproduces the original
    signature; otherwise cold runs."""
    if opts.executor == "cold":
        return ColdExecutor(python, opts.jobs), cold.seconds
    try:
        executor = make_executor(opts.executor, python, module_imports(source), opts.jobs)
    except MinreproError as exc:
        notes.append(f"{opts.executor} unavailable ({exc}); cold runs used")
        return ColdExecutor(python, opts.jobs), cold.seconds
    warm = executor.run_many([script], opts.timeout, script.parent)[0]
    if warm.signature != original:
        executor.close()
        notes.append(f"{opts.executor} changes the failure ({warm.signature.headline if warm.signature else 'passes'}); "
                     "cold runs used")
        return ColdExecutor(python, opts.jobs), cold.seconds
    if getattr(executor, "skipped", None):
        notes.append(f"fork server: {', '.join(executor.skipped)} imported by each candidate (it initializes CUDA)")
    log(f"executor: {executor.name} (original runs in {warm.seconds:.2f} s there)")
    return executor, warm.seconds


def _verify_cold(result: str, oracle: SignatureOracle, python: str, timeout: float, workdir: Path,
                 home: Path) -> bool:
    path = workdir / "verify.py"
    path.write_text(result, encoding="utf-8")
    run = ColdExecutor(python, 1).run_many([path], timeout, home)[0]
    return oracle.matches(run)  # no run-time budget here: a cold run pays the imports the budget excludes


def _load_state(path: Path, original: str) -> dict | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state if state.get("original") == original and state.get("best") else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _search(regex: str, text: str) -> bool:
    try:
        return re.search(regex, text) is not None
    except re.error as exc:
        raise MinreproError(f"--signature is not a valid regex: {exc}") from None


def print_summary(summary: ReduceSummary, as_json: bool) -> None:
    print(f"{summary.input_lines} -> {summary.output_lines} code lines, {summary.oracle_calls} oracle calls "
          f"({summary.cache_hits} cache hits), {summary.seconds:.1f} s, executor {summary.executor}"
          + (" (resumed)" if summary.resumed else ""))
    print(f"signature: {summary.signature}")
    print(f"written to {summary.output}")
    for note in summary.notes:
        print(f"note: {note}")
    if as_json:
        print(json.dumps(summary.as_json()))
    sys.stdout.flush()
