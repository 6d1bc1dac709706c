"""`minrepro reduce`: establish the original failure, choose the guard, run the search, report the triggers,
verify, write a script a maintainer accepts as is.

The search lives in `minrepro.reducers` and sees only `test_many`; this module is the execution side of the seam:
it owns the oracle (differential when a guard exists), the work directory (answers cache + best-so-far state, so
an interrupted run resumes), the final cold check and the output's form.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import json
import re
import shlex
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..dirs import cache
from ..errors import MinreproError
from ..harness.executors import ColdExecutor, Executor, make_executor
from ..harness.oracle import Cache, CommandOracle, SignatureOracle, same_failure
from ..harness.probe import probe
from ..harness.resources import FIRST_RUN_TIMEOUT, TIMEOUT_FACTOR, parallel_runs, timeout_for
from ..harness.runner import DEFAULT_TIMEOUT, RunResult, resolve_python, stop_live_runs
from ..harness.signature import Signature
from ..reducers import FINAL_PASSES, PASSES, reduce_source
from ..reducers.search import seeding_calls
from ..reducers.source import code_lines, imported_modules, module_imports, normalize
from . import output, triggers
from .guard import UNGUARDED, Guard, GuardSearch, choose_guard, neutralise_library_call
from .progress import Progress
from .scale import ScaleDown, traced_run, try_scale_down

CONFIRM_RUNS = 3  # the original runs this many times, cold, to establish its failure: all must agree
# Runs of each candidate in each good env (guard) that must all pass. A library's crash is a code path, not a
# value: one run tells (a second cost lowmem_chat_server a third of its runs in 300 s). The script's own check reads
# values: a candidate that lost a seed passed where the bug is fixed by chance (eval_then_export's did, once in two).
# Every seeding call of the script now stays (`Problem.keep_seeds`), so a seeded script needs one run too
# (eval_then_export: 41 lines at 300 s with one, 49 with two, faithful in 6 of 6 cold good runs); a script that
# seeds nothing gets two. The cold verification of the result runs GOOD_RUNS either way.
GOOD_RUNS = 2
# A candidate may not run slower than SLOWDOWN x the original (or the original + GRACE_SECONDS): dropping
# `num_hidden_layers=2` keeps the bug but makes every later candidate, and the final repro, slow.
SLOWDOWN, GRACE_SECONDS = 2.0, 2.0
UNDER_TEST = {"torch", "transformers", "accelerate", "peft", "bitsandbytes"}


def default_good_runs(original: Signature, source: str) -> int:
    return GOOD_RUNS if original.raised_by == "script" and not seeding_calls(source) else 1


@dataclass
class ReduceOptions:
    script: Path
    out: Path | None = None
    signature: str | None = None
    oracle: str | None = None
    python: str | None = None
    jobs: int = 1
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
    max_seconds: float | None = None  # after this long (from the start) no candidate is run; the best is verified


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
    guard: str = "none"
    guard_why: str = ""
    passes_in_good_env: bool | None = None
    triggers: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    snapshot_runs: int = 0  # candidates served from a prefix snapshot: whether that path was taken at all
    good_runs: int = 0  # runs of each interesting candidate in each good env (see default_good_runs)

    def as_json(self) -> dict:
        return asdict(self)


class Interrupted(MinreproError):
    """Ctrl-C during a reduction: the best script so far is written, with the command that resumes."""


def refuse_missing_libraries(result: RunResult, source: str, python: str) -> None:
    """A failure to import the libraries under test is the environment's, not a bug to reduce."""
    sig = result.signature
    if sig is None or sig.type not in ("ModuleNotFoundError", "ImportError"):
        return
    missing = re.search(r"No module named '([\w.]+)'", result.raw_headline)
    name = missing[1].split(".")[0] if missing else ""
    if name and name in imported_modules(source) and (name in UNDER_TEST or sig.raised_by == "script"):
        raise MinreproError(f"the script cannot import {name} under {python}: give --python with the environment "
                            "it fails in (a failing import is not a bug to reduce)")


def establish(script: Path, python: str, timeout: float | None, home: Path, runs: int,
              log: Callable[[str], None] = lambda _: None, beside: Callable[[float], Any] | None = None,
              ) -> tuple[Signature, RunResult, list[RunResult], Any]:
    """Run the original `runs` times, cold: its signature if every run agrees, else a one-line error. The first run
    goes alone (under --timeout, or FIRST_RUN_TIMEOUT: nothing is known of its cost yet); the others as many at
    once as its memory allows, under a timeout that follows its time. `beside(timeout)` (the scale-down's traced
    run) goes with them where memory holds one run more, else after them: at E4B it is a 40 s load of its own."""
    results = ColdExecutor(python, 1).run_many([script], timeout or FIRST_RUN_TIMEOUT, home)
    at_once = parallel_runs(results, runs - 1 + (beside is not None))
    log(f"establish: run 1 of {runs} took {results[0].seconds:.1f} s"
        + (f" ({results[0].peak_rss_mb:.0f} MB RAM" + (f", {results[0].peak_gpu_mb:.0f} MB GPU" if results[0].peak_gpu_mb
                                                          else "") + ")" if results[0].peak_rss_mb else "")
        + f"; {runs - 1} more, {min(at_once, runs - 1)} at once"
        + (", the traced run beside them" if beside is not None and at_once >= runs else ""))
    later = timeout_for(results, timeout)
    with ThreadPoolExecutor(1) as pool:
        extra = pool.submit(beside, later) if beside is not None and at_once >= runs else None
        results += ColdExecutor(python, min(at_once, runs - 1)).run_many([script] * (runs - 1), later, home)
        beside_result = extra.result() if extra is not None else None
    failing = [r for r in results if r.signature is not None]
    if not failing:
        raise MinreproError(f"nothing to reduce: {script} does not fail (passed {runs} of {runs} runs)")
    first = failing[0].signature
    same = sum(r.signature == first for r in results)
    if same < runs:
        raise MinreproError(f"{script} fails flakily: '{first.headline}' in {same} of {runs} runs (n={runs}, "
                            "all must agree); make it deterministic, or reduce with --oracle and your own retries")
    if beside is not None and extra is None:
        beside_result = beside(later)
    return first, failing[0], results, beside_result


def default_workdir(script: Path, source: str, key: str) -> Path:
    return cache("reductions", f"{script.stem}-{_digest(source + key)[:10]}")


def reduce_script(opts: ReduceOptions, log: Callable[[str], None] = lambda _: None,
                  say: Callable[[str], None] | None = None) -> ReduceSummary:
    """`log` gets every step (-v); `say` the phases, runs and time per run (default: `log`)."""
    with interrupts_as_ctrl_c():
        return _reduce_script(opts, log, say or log)


@contextlib.contextmanager
def interrupts_as_ctrl_c():
    """SIGTERM and SIGHUP (`timeout`, a job scheduler, CI, a closed terminal) stop a reduction as Ctrl-C does:
    the best script so far is written with the command that resumes. Main thread only (signal's rule)."""
    import signal
    import threading

    def stop(number: int, _frame) -> None:
        stop_live_runs()  # the worker threads' runs end now; the pools then return at once
        raise KeyboardInterrupt(signal.Signals(number).name)

    wanted = [sig for sig in (signal.SIGINT, getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
              if sig is not None]
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, stop) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _reduce_script(opts: ReduceOptions, log: Callable[[str], None], say: Callable[[str], None]) -> ReduceSummary:
    start = time.monotonic()
    script = opts.script.resolve()
    from ..catalog.targets import read_source  # the one rule for a script given on the command line

    source = read_source(script)
    out = (opts.out or script.with_name(f"{script.stem}.min.py")).resolve()
    if out == script:
        raise MinreproError("the output path is the input script; minrepro never overwrites it")
    python = resolve_python(opts.python)
    notes: list[str] = []
    executor: Executor | None = None
    guard_executors: list[Executor] = []
    guard, versions, loaded = UNGUARDED, {}, ()
    keep_seeds = False  # a failure the script's own check raises keeps every seeding call (see `Problem`)
    headline, owner = "not established (stopped before the original's runs agreed)", ""
    best = [source]
    progress = Progress(code_lines(source), log, say=say)
    state_path: Path | None = None
    timeout = opts.timeout or DEFAULT_TIMEOUT
    scaled: ScaleDown | None = None
    started: list[Future] = []  # executors started in the background
    measured_on = source  # the program the time budget was measured on

    try:
        if opts.oracle:
            key = json.dumps(["command", opts.oracle, python, timeout])
            workdir = _workdir(opts, script, source, key)
            oracle = CommandOracle(Cache(workdir / "cache.jsonl", key), workdir, timeout, script.parent,
                                   command=shlex.split(opts.oracle), jobs=opts.jobs)
            if not oracle.test_many([source])[0]:
                raise MinreproError(f"nothing to reduce: the oracle does not accept {script.name} itself")
            headline, owner = f"oracle: {opts.oracle}", ""
        else:
            progress.phase("establish", f"{opts.confirm_runs} cold runs of the original")
            scale_dir, memo = _scale_workdir(opts, script, source, python) if opts.scale_down else (None, None)
            trace = None if scale_dir is None or memo is not None else functools.partial(
                traced_run, normalize(source), python, workdir=scale_dir, home=script.parent)
            original, first_run, cold, traced = establish(script, python, opts.timeout, script.parent,
                                                          opts.confirm_runs, say, beside=trace)
            timeout = timeout_for(cold, opts.timeout)
            if opts.timeout is None:
                say(f"timeout per run: {timeout:.0f} s ({TIMEOUT_FACTOR:g}x the slowest cold run, at least "
                    f"{DEFAULT_TIMEOUT:.0f} s)")
            refuse_missing_libraries(first_run, source, python)
            if opts.signature and not _search(opts.signature, first_run.raw_headline):
                raise MinreproError(f"{script.name} fails with '{first_run.raw_headline.splitlines()[0]}', "
                                    f"which does not match --signature {opts.signature!r}")
            headline, owner = original.headline, str(original.owner or "")
            env = probe(python)
            versions, loaded = env.versions, first_run.loaded
            matcher = functools.partial(same_failure, original, opts.signature)
            jobs = parallel_runs(cold, opts.jobs)
            if jobs < opts.jobs:
                notes.append(f"--jobs {opts.jobs} lowered to {jobs} at first: {opts.jobs} runs of the original "
                             "would not fit in this machine's free memory")
            # Scale down before the guard: where the bug is fixed the script runs to its end (688 s at E4B with
            # every patch, against 36 s to fail), so the good env judges the twin, not the checkpoint. Its few
            # candidates run cold: the warm executor is tried on what the search will stand on (two more loads of
            # the checkpoint would cost as much as the whole search on the twin).
            if scale_dir is not None:
                progress.phase("scale-down", "a tiny twin of each loaded model, judged where the script fails")
                scaled = memo or _scale_down(opts, scale_dir, script, source, python, timeout,
                                             ColdExecutor(python, jobs), original, first_run, traced, progress, say)
            subject, subject_path = (scaled.source, scaled.path) if scaled else (source, script)
            progress.phase("guard", ("the tiny twin" if scaled else "the original") + " where the bug is fixed")
            # the search's executors start while the guard runs: each fork server imports the libraries first
            starting = ThreadPoolExecutor(1 + len(opts.good_pythons))
            started.append(starting.submit(_start_executor, opts, python, source, first_run.modules, jobs, notes))
            started += [starting.submit(_start_executor, opts, py, source, first_run.modules, jobs, notes,
                                        f"guard env {py}: ") for py in opts.good_pythons]
            starting.shutdown(wait=False)
            # the good run goes to the end: its cost is not known yet (FIRST_RUN_TIMEOUT)
            search = GuardSearch(subject_path, subject, original, first_run.raw_headline, matcher, env,
                                 opts.timeout or FIRST_RUN_TIMEOUT, log, notes=notes, jobs=parallel_runs(cold, 2),
                                 home=script.parent, known=scaled.good_runs if scaled else {})
            guard = _choose_guard(search, opts, (script, source) if scaled else None)
            if scaled is not None and search.script != subject_path:  # the twin lost the bug: real scale after all
                notes.append("the tiny twin does not pass where the bug is fixed: reduced at real scale")
                say(notes[-1])
                scaled = None
            elif scaled is not None:
                notes.append(scaled.description)
            good_timeout = opts.timeout or max(timeout, TIMEOUT_FACTOR * search.passing_seconds)
            say(f"guard: {guard.why}" + (f" (a passing run took {search.passing_seconds:.0f} s)"
                                         if search.passing_seconds else ""))
            good_runs = opts.good_runs or default_good_runs(original, source)
            key = json.dumps(["signature", opts.signature, python, opts.timeout, guard.key(), good_runs,
                              "twin" if scaled else "original"])  # a resumed state is of one or the other
            workdir = _workdir(opts, script, source, key)
            early = dict(zip(opts.good_pythons, started[1:]))
            guard_executors = [early[py].result() if py in early else
                               _start_executor(opts, py, source, first_run.modules, jobs, notes, f"guard env {py}: ")
                               for py in guard.pythons]
            stand_on = (scaled.source, scaled.path) if scaled else (source, script)
            executor, baseline = _warm_executor(started[0].result(), original, stand_on[1], notes, log, timeout)
            measured_on = stand_on[0] if baseline is not None else source
            budget = _budget(baseline if baseline is not None else first_run.seconds)
            # a candidate past the budget is uninteresting anyway: stop it there, not at the timeout
            oracle = SignatureOracle(Cache(workdir / "cache.jsonl", key), workdir, min(timeout, budget + 1),
                                     script.parent, executor=executor, original=original, regex=opts.signature,
                                     max_seconds=budget, good=guard_executors, good_runs=good_runs,
                                     cwd_writes_allowed=bool(first_run.cwd_writes), good_timeout=good_timeout,
                                     neutralise=neutralise_library_call if guard.kind == "necessity" else None)
            # a good env was chosen by two passing runs of the original itself; a necessity control has not run yet
            if guard.kind == "necessity" and not oracle.test_many([normalize(source)])[0]:
                notes.append(f"the original does not pass its guard ({guard.why}); reduced unguarded")
                guard = UNGUARDED
                oracle.good, oracle.neutralise = (), None
            if not guard.guarded:
                notes.append("UNGUARDED: nothing checks that the reduction still holds the library's bug; values the "
                             "script's own checks read are frozen")
            keep_seeds = original.raised_by == "script"
            log(f"signature: {original.headline}  (owner: {original.owner})")

        state_path = workdir / "state.json"
        state = _load_state(state_path, _digest(source))
        resumed = state is not None
        begin = state["best"] if state else source
        if resumed:
            say(f"resuming from {state_path} ({code_lines(begin)} code lines so far)")
        best[0] = begin

        def save(candidate: str) -> None:
            best[0] = candidate
            state_path.write_text(json.dumps({"original": _digest(source), "best": candidate}), encoding="utf-8")
            progress.accepted(code_lines(candidate))

        if not opts.oracle and not resumed and scaled is not None:
            begin = scaled.source
            save(begin)
        if not opts.oracle and begin != measured_on:  # a twin (or a resumed state): the budget follows what it costs now
            _rebudget(oracle, executor, begin, workdir, script.parent, timeout)

        measure = None if opts.oracle else _facts(python, oracle.timeout, workdir, script.parent, executor)
        unjudged = [0]
        until = None if opts.max_seconds is None else start + opts.max_seconds
        test_many = _within(_counted(oracle.test_many, progress), until, unjudged)
        result = reduce_source(begin, test_many, PASSES, FINAL_PASSES, opts.jobs,
                               opts.seed, save, on_pass=progress.phase, freeze_check_data=not guard.guarded,
                               facts=measure, keep_seeds=keep_seeds)
        if unjudged[0]:
            notes.append(f"the search stopped at --max-seconds {opts.max_seconds:g}: {unjudged[0]} proposals were left "
                         "unjudged, so a smaller script may exist (resume with a larger budget)")
        if getattr(executor, "snapshots_refused", ""):
            notes.append("prefix snapshots stopped: a prefix initialized CUDA, which forked children cannot use; "
                         "candidates ran whole")
        found: list[triggers.Trigger] = []
        if opts.triggers and not opts.oracle and (until is None or time.monotonic() < until):
            progress.phase("trigger report")
            found = triggers.trigger_report(source, result, oracle.outcomes)
            explicit = triggers.make_explicit(result, found)
            if explicit != result and oracle.test_many([explicit])[0]:
                result = explicit
        progress.close()
        good_pass = None
        if not opts.oracle:
            say("verifying the result cold, in the bad and the good environments")
            verified, good_pass, why, loaded = _verify_cold(result, oracle, python, guard, timeout, workdir,
                                                            script.parent, jobs)
            if not verified:
                raise MinreproError(f"the reduced script {why}; kept in {state_path}")
    except KeyboardInterrupt as stop:  # anywhere, Ctrl-C or SIGTERM/SIGHUP: the best so far is written
        progress.close()
        _write(out, best[0], source, script, headline, owner, guard, versions, verified=False, loaded=loaded)
        where = f"; resume with: {_resume_command()}" if state_path else " (stopped before the search began)"
        cause = f" by {stop.args[0]}" if stop.args else ""
        raise Interrupted(f"interrupted{cause}: the best script so far ({code_lines(best[0])} code lines, not "
                          f"verified) is in {out}{where}") from None
    finally:
        for future in started:  # one that started while the guard ran (closed below if in use, and only once)
            with contextlib.suppress(Exception):
                guard_executors.append(future.result())
        for used in {id(e): e for e in [executor, *guard_executors] if e is not None}.values():
            used.close()

    text = _write(out, result, source, script, headline, owner, guard, versions, verified=not opts.oracle,
                  found=found, loaded=loaded, budget=opts.max_seconds if unjudged[0] else None)
    return ReduceSummary(code_lines(source), code_lines(text), oracle.stats.calls, oracle.stats.cache_hits,
                         round(time.monotonic() - start, 1), headline, str(out),
                         executor.name if executor else "command", resumed, guard.kind, guard.why, good_pass,
                         [asdict(t) for t in found], notes, getattr(executor, "snapshot_runs", 0),
                         oracle.good_runs if guard.pythons else 0)


def _scale_workdir(opts: ReduceOptions, script: Path, source: str, python: str) -> tuple[Path, ScaleDown | None]:
    """The scale-down's own work dir, and the twin found there by an earlier run of this script (a resumed reduction
    skips the traced run and the search for it)."""
    workdir = _workdir(opts, script, source, json.dumps(["scale", opts.signature, python]))
    if opts.workdir:  # the user's one work dir holds the search's state too: the twin's goes in a folder of its own
        workdir = workdir / "scale"
        workdir.mkdir(exist_ok=True)
    memo = workdir / "twin.json"
    if opts.fresh:
        for stale in (memo, workdir / "cache.jsonl"):
            stale.unlink(missing_ok=True)
    if memo.exists():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            found = ScaleDown.from_json(memo.read_text(encoding="utf-8"), workdir / "twin.py")
            if found.original == _digest(source):  # the memo of this script, not of an earlier edit of it
                return workdir, found
    return workdir, None


def _scale_down(opts: ReduceOptions, workdir: Path, script: Path, source: str, python: str, timeout: float,
                executor: Executor,
                original: Signature, first_run: RunResult, traced: RunResult, progress: Progress,
                say: Callable[[str], None]) -> ScaleDown | None:
    """The tiny twin, judged where the script fails (same signature, same time rules, no guard yet). Each candidate
    also runs twice in each --good-python env, at the same time: those are the guard's two runs of the twin, which
    the guard then takes as they are (at E4B they were a third run of 91 s, after the judge's own)."""
    key = json.dumps(["scale", opts.signature, python])
    oracle = SignatureOracle(Cache(workdir / "cache.jsonl", key), workdir, timeout, script.parent, executor=executor,
                             original=original, regex=opts.signature, cwd_writes_allowed=bool(first_run.cwd_writes))
    good_runs: dict[str, dict[str, list[RunResult]]] = {}  # candidate -> good python -> its runs there
    jobs = getattr(executor, "jobs", 1)

    def judge(sources: list[str]) -> list[bool]:
        """Fails the same where the script fails, and (where --good-python names the fixed world) runs to its end
        there: a twin that crashes otherwise where the bug is fixed (E4B's per-layer vocabulary shrunk below the
        prompt's ids: an IndexError) is an artifact of the shrink, not a faithful twin."""
        # no more runs at once than `jobs`, which the original's memory allowed (a twin that keeps real-size fields is
        # as large): the good runs take the slots the bad runs leave, one each at the least
        spare = max(1, (jobs - min(jobs, len(sources))) // max(1, len(opts.good_pythons)))
        with ThreadPoolExecutor(1 + len(opts.good_pythons)) as pool:
            bad = pool.submit(oracle.test_many, sources)
            good = {py: pool.submit(_run_sources, [s for s in sources for _ in range(2)], py, workdir / "good",
                                    timeout, script.parent, spare) for py in opts.good_pythons}
            answers = bad.result()
            for python_, runs in ((py, future.result()) for py, future in good.items()):
                for i, text in enumerate(sources):
                    pair = runs[2 * i: 2 * i + 2]
                    good_runs.setdefault(text, {})[python_] = pair
                    answers[i] = answers[i] and all(run.signature is None for run in pair)
        return answers

    scaled = try_scale_down(normalize(source), traced, _counted(judge, progress), say)
    if scaled is None:
        return None
    scaled.path, scaled.original = workdir / "twin.py", _digest(source)
    scaled.good_runs = good_runs.get(scaled.source, {})
    scaled.path.write_text(scaled.source, encoding="utf-8")
    (workdir / "twin.json").write_text(scaled.to_json(), encoding="utf-8")
    say(scaled.description)
    return scaled


def _choose_guard(search: GuardSearch, opts: ReduceOptions, original: tuple[Path, str] | None) -> Guard:
    """The guard, judged on the twin when there is one (`original`: the user's script and source to fall back on);
    where the twin does not pass in a good env that the original passes in, the twin lost the bug: the search then
    stands on the original (`search.script` says which)."""
    if original is None:
        return choose_guard(search, opts.good_pythons, opts.guard)
    try:
        guard = choose_guard(search, opts.good_pythons, opts.guard)
    except MinreproError:  # --good-python refused the twin
        guard = None
    if guard is not None and (guard.kind == "good-env" or opts.guard == "none"):
        return guard
    search.script, search.source, search.known = *original, {}
    return choose_guard(search, opts.good_pythons, opts.guard)


def _budget(seconds: float) -> float:
    return max(SLOWDOWN * seconds, seconds + GRACE_SECONDS)


def _rebudget(oracle: SignatureOracle, executor: Executor, current: str, workdir: Path, home: Path,
              timeout: float) -> None:
    """The time budget from the program the search starts from (a tiny twin runs in seconds where its original took
    a minute: a candidate that grew back to real size must not pass as 'within 2x'), measured as the search runs
    candidates: as many at once as it does. The CPU bench's twin took 0.5 s alone and 2.6 s two at once on 2 cores;
    a budget from the lone run refused 43 candidates that failed the same way, and which were refused depended on
    what ran beside them."""
    paths = [workdir / f"rebudget-{i}.py" for i in range(max(1, getattr(executor, "jobs", 1)))]
    for path in paths:
        path.write_text(current, encoding="utf-8")
    runs = executor.run_many(paths, timeout, home)
    if all(oracle.matches(run) for run in runs):
        oracle.max_seconds = min(oracle.max_seconds or float("inf"), _budget(max(run.seconds for run in runs)))
        oracle.timeout = min(timeout, oracle.max_seconds + 1)


def _workdir(opts: ReduceOptions, script: Path, source: str, key: str) -> Path:
    workdir = (opts.workdir or default_workdir(script, source, key)).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    if opts.fresh:
        for stale in ("state.json", "cache.jsonl"):
            (workdir / stale).unlink(missing_ok=True)
    return workdir


HEAVY_SECONDS = 0.5  # a top-level statement this slow is worth running once for many candidates (prefix snapshots)


def _facts(python: str, timeout: float, workdir: Path, home: Path, executor: Executor | None):
    """What one profiled cold run of the current program shows, for the fact-driven passes: the top-level statement
    the failure went through, the literal values of `name.attr` reads, and the slow statements (which the fork
    server then runs once per shared prefix). Cached by content, like the answers."""
    store = workdir / "facts.jsonl"
    known = {}
    if store.exists():
        for line in store.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                known[record["digest"]] = record["facts"]

    def measure(current: str) -> dict:
        digest = _digest(current)
        if digest not in known:
            path, profile = workdir / "facts.py", workdir / "facts.profile.json"
            path.write_text(current, encoding="utf-8")
            profile.unlink(missing_ok=True)
            # in the warm executor when there is one: a cold run pays the imports again (8 of nightly's 10 s)
            run = (executor or ColdExecutor(python)).profile(path, profile, timeout, home)
            data = json.loads(profile.read_text(encoding="utf-8")) if profile.is_file() else {}
            known[digest] = statement_facts(current, run, data)
            with store.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"digest": digest, "facts": known[digest]}) + "\n")
        facts = known[digest]
        if hasattr(executor, "set_heavy"):
            executor.set_heavy(facts["heavy"])
        return facts

    return measure


def statement_facts(source: str, run: RunResult, profile: dict) -> dict:
    body = ast.parse(source).body
    seconds = {int(line): t for line, t in profile.get("line_seconds", {}).items()}
    total = sum(seconds.values()) or 1.0

    def cost(stmt: ast.stmt) -> float:
        return sum(t for line, t in seconds.items() if stmt.lineno <= line <= (stmt.end_lineno or stmt.lineno))

    outer = run.script_lines[0] if run.script_lines else None
    failing = next((ast.unparse(s) for s in body if outer and s.lineno <= outer <= (s.end_lineno or s.lineno)), None)
    heavy = [ast.unparse(s) for s in body if cost(s) >= max(HEAVY_SECONDS, 0.1 * total)]
    return {"failing_statement": failing, "values": profile.get("values", {}), "heavy": heavy,
            "executed": sorted(seconds)}  # the module-level lines that ran


def _run_sources(sources: list[str], python: str, folder: Path, timeout: float, home: Path,
                 jobs: int | None = None) -> list[RunResult]:
    """Each source, cold under `python`: `jobs` at a time (default: all at once)."""
    folder.mkdir(exist_ok=True)
    paths = [folder / f"{_digest(text)[:16]}.py" for text in sources]
    for path, text in zip(paths, sources):
        path.write_text(text, encoding="utf-8")
    return ColdExecutor(python, jobs or len(paths)).run_many(paths, timeout, home)


def _within(test_many, until: float | None, unjudged: list[int]):
    """Past `until` (--max-seconds) every proposal is answered "not interesting" without a run: the search runs out of
    proposals at once and its best goes to verification like one that ended by itself (the seam: no pass knows)."""
    def run(sources: list[str]) -> list[bool]:
        if until is not None and time.monotonic() >= until:
            unjudged[0] += len(sources)
            return [False] * len(sources)
        return test_many(sources)

    return run


def _counted(test_many, progress: Progress):
    def run(sources: list[str]) -> list[bool]:
        began = time.monotonic()
        answers = test_many(sources)
        progress.tried(len(sources), time.monotonic() - began)
        return answers

    return run


def _write(out: Path, result: str, source: str, script: Path, headline: str, owner: str, guard: Guard,
           versions: dict, verified: bool, found: list[triggers.Trigger] = (), loaded: tuple[str, ...] = (),
           budget: float | None = None) -> str:
    body = triggers.annotate(output.layout(result), list(found))
    status = "" if verified else "INTERRUPTED, NOT VERIFIED: "
    header = (output.pep723(body, versions, loaded) if versions else "") + (
        f"# {status}reduced by minrepro from {script.name}: {code_lines(source)} -> {code_lines(body)} code lines.\n"
        f"# Fails with: {headline}" + (f"  (in {owner})" if owner else "") + "\n"
        f"# Guard: {guard.why}\n" + output.needs(body)
        + (f"# The search stopped at its time budget (--max-seconds {budget:g}): maybe not minimal.\n"
           if budget is not None else ""))
    text = header + body
    out.write_text(text, encoding="utf-8")
    return text


def _resume_command() -> str:
    return " ".join(shlex.quote(a) for a in ["minrepro", *sys.argv[1:]])


def _start_executor(opts: ReduceOptions, python: str, source: str, recorded: tuple[str, ...], jobs: int,
                    notes: list[str], where: str = "") -> Executor:
    """The requested executor, started (a fork server imports the libraries first: 25 s on the GPU box), or cold
    runs where it cannot start. `recorded`: the bad env's modules (one the env lacks is skipped by the server)."""
    if opts.executor == "cold":
        return ColdExecutor(python, jobs)
    try:
        return make_executor(opts.executor, python, module_imports(source), jobs, recorded)
    except MinreproError as exc:
        notes.append(f"{where}{opts.executor} unavailable ({exc}); cold runs used" + (" there" if where else ""))
        return ColdExecutor(python, jobs)


def _warm_executor(executor: Executor, original: Signature, script: Path, notes: list[str],
                   log: Callable[[str], None], timeout: float) -> tuple[Executor, float | None]:
    """The started executor and the script's run time under it (as many runs at once as the search makes: the time
    budget follows that), if every run reproduces the original signature (a warm executor that disagrees with
    itself is not trusted either); otherwise cold runs, their time not measured here (None)."""
    if executor.name == "cold":
        return executor, None
    warm = executor.run_many([script] * max(2, executor.jobs), timeout, script.parent)
    if any(run.signature != original for run in warm):
        executor.close()
        seen = "; ".join(sorted({run.signature.headline if run.signature else "passes" for run in warm}))
        notes.append(f"under {executor.name} the script gives [{seen}] where {CONFIRM_RUNS} cold runs agree on "
                     f"'{original.headline}' (it depends on a fresh interpreter: imports done before it, threads, "
                     "seeds); cold runs used")
        return ColdExecutor(executor.python, executor.jobs), None
    if getattr(executor, "skipped", None):
        notes.append(f"fork server: {', '.join(executor.skipped)} imported by each candidate (it initializes CUDA)")
    if getattr(executor, "chosen_because", ""):
        notes.append(f"warm pool: {executor.chosen_because}")
    log(f"executor: {executor.name} (original runs in {warm[0].seconds:.2f} s there)")
    return executor, max(run.seconds for run in warm)


def _verify_cold(result: str, oracle: SignatureOracle, python: str, guard: Guard, timeout: float, workdir: Path,
                 home: Path, jobs: int = 1) -> tuple[bool, bool | None, str, tuple[str, ...]]:
    """The result fails with the signature in a fresh interpreter; and (None when unguarded) it does not in the
    good environments. No run-time budget here: a cold run pays the imports the budget excludes. Then: what
    went wrong, for the error, and the packages the bad run loaded (what the output's pins must name).
    The bad run and the good runs go side by side, `jobs` at once (what memory allows for what the search ran): one
    after another, the good runs of E4B's pinned twin, which runs to its end where the bug is fixed, did not end in
    the 90 s a GPU call had left."""
    path = workdir / "verify.py"
    path.write_text(result, encoding="utf-8")
    runs = [(python, timeout)] + [(py, oracle.good_timeout or timeout) for py in guard.pythons
                                  for _ in range(max(GOOD_RUNS, oracle.good_runs))]  # the search may have run fewer
    at_once = max(1, min(jobs, len(runs)))  # also each run's share of the cores (thread_cap)
    with ThreadPoolExecutor(at_once) as pool:
        results = list(pool.map(lambda run: ColdExecutor(run[0], at_once).run_many([path], run[1], home)[0], runs))
    bad = results[0]
    if not oracle.matches(bad):
        ended = bad.signature.headline if bad.signature else "passed"
        return False, None, f"does not reproduce in a fresh interpreter ({ended} after {bad.seconds:.0f} s)", ()
    if why := oracle.litters(bad):
        return False, None, f"{why} (cold)", ()
    if not guard.pythons:
        return True, None, "", bad.loaded
    also = sorted({py for (py, _), run in zip(runs[1:], results[1:]) if oracle.matches(run)})
    return not also, not also, f"also fails the same way where the bug is fixed ({', '.join(also)})", bad.loaded


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
          + (f", {summary.snapshot_runs} from prefix snapshots" if summary.executor == "forkserver" else "")
          + (" (resumed)" if summary.resumed else ""))
    print(f"signature: {summary.signature}")
    print(f"guard: {summary.guard_why or summary.guard}"
          + (f" ({summary.good_runs} good-env run{'s' if summary.good_runs > 1 else ''} per candidate)"
             if summary.good_runs else "")
          + ("" if summary.passes_in_good_env is None else
             f"; the result passes in the good env: {'yes' if summary.passes_in_good_env else 'NO'}"))
    if summary.triggers:
        print("trigger report:")
        print(triggers.format_table([triggers.Trigger(**t) for t in summary.triggers]))
    print(f"written to {summary.output}")
    for note in summary.notes:
        print(f"note: {note}")
    if as_json:
        print(json.dumps(summary.as_json()))
    sys.stdout.flush()
