"""`minrepro reduce`: establish the original failure, scale it down, choose the guard, run the search, report the
triggers, verify, write a script a maintainer accepts as is. `PHASES` is that order, as data: each phase is a function
over one `Reduction` state, which also holds the time budget (`Deadline`) every phase answers to.

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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

from ..dirs import cache
from ..errors import MinreproError
from ..harness.executors import ColdExecutor, Executor, make_executor
from ..harness.oracle import Cache, CommandOracle, SignatureOracle, same_failure
from ..harness.probe import UNDER_TEST, probe
from ..harness.resources import (
    cores,
    FIRST_RUN_TIMEOUT,
    TIMEOUT_FACTOR,
    available_ram_mb,
    fits,
    free_gpu_mb,
    parallel_runs,
    timeout_for,
)
from ..harness.runner import DEFAULT_TIMEOUT, RunResult, resolve_python, run_from_dict, run_to_dict, stop_live_runs
from ..harness.signature import Signature
from ..inputs import refuse_own_failure
from ..reducers import FINAL_PASSES, PASSES, PassRecord, reduce_source
from ..reducers.search import seeding_calls
from ..reducers.source import code_lines, imported_modules, module_imports, normalize, patches_imports
from . import output, triggers
from .guard import (
    UNDECIDED,
    UNGUARDED,
    OutOfTime,
    Guard,
    GuardSearch,
    choose_guard,
    family_fix_env,
    first_good_env,
    neutralise_library_call,
)
from .budget import Budget, per_candidate, within
from .progress import Progress
from .scale import Refusal, ScaleDown, TwinJudge, traced_run, try_scale_down

CONFIRM_RUNS = 3  # the original runs this many times, cold, to establish its failure: all must agree
# Runs of each candidate in each good env (guard) that must all pass. A library's crash is a code path, not a
# value: one run tells (a second cost lowmem_chat_server a third of its runs in 300 s). The script's own check reads
# values: a candidate that lost a seed passed where the bug is fixed by chance (eval_then_export's did, once in two).
# Every seeding call of the script now stays (`Problem.keep_seeds`), so a seeded script needs one run too
# (eval_then_export: 41 lines at 300 s with one, 49 with two, faithful in 6 of 6 cold good runs); a script that
# seeds nothing gets two. The cold verification of the result runs GOOD_RUNS either way.
GOOD_RUNS = 2
MAX_AUTO_JOBS = 8  # runs side by side when --jobs is not given (cores, RAM and GPU memory permitting)


def default_good_runs(original: Signature, source: str) -> int:
    return GOOD_RUNS if original.raised_by == "script" and not seeding_calls(source) else 1


@dataclass
class ReduceOptions:
    script: Path
    out: Path | None = None
    signature: str | None = None
    oracle: str | None = None
    python: str | None = None
    jobs: int | None = None  # None: as many as the machine holds (choose_jobs)
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
    reuse_workers: bool = True  # a warm worker may run more than one candidate (see `_start_executor`)
    # the whole reduce's time budget: no candidate runs past it less the verification's share; the best is verified
    max_seconds: float | None = None
    argv: list[str] | None = None  # the command line as given (default: this process's): what a resume repeats
    # what the user gave, prepared as a plain script (minrepro.inputs.Prepared: arguments, a notebook, -m MODULE);
    # `script` is then its path in the cache. None for a plain script.
    prepared: Any = None


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
    jobs: int = 1  # runs side by side in the search
    jobs_why: str = ""  # why that many
    budget_seconds: float | None = None  # the time budget it ran under
    maybe_not_minimal: bool = False  # the search stopped at the budget, not at a fixpoint
    good_run: str = ""  # what the result did where the bug is fixed (the cold verification's good runs)
    phases: list[dict] = field(default_factory=list)  # per phase: seconds, candidates, runs side by side
    passes: list[dict] = field(default_factory=list)  # per pass: turns, seconds, candidates, lines removed
    # (seconds since the start, code lines) at each accepted candidate: how soon the script was how small
    timeline: list[tuple[float, int]] = field(default_factory=list)
    workers: str = ""  # the warm pool's reuse of its workers: runs in a reused worker, why workers retired
    twin: str = ""  # the step of the twin's ladder the search stood on ("" where it stood on the original)
    twin_refused: list[str] = field(default_factory=list)  # the steps refused where the bug is fixed, and why

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
        raise MinreproError(
            f"the script cannot import {name} under {python}: give --python with the environment "
            "it fails in (a failing import is not a bug to reduce)"
        )


def first_run(
    script: Path, python: str, timeout: float | None, home: Path, traced: Callable[[float], RunResult] | None
) -> RunResult:
    """The original's first run, alone (under --timeout, or FIRST_RUN_TIMEOUT: nothing is known of its cost yet). With
    `traced` it is the scale-down's traced run: the trace only observes (at E4B on an H100 a traced run took 39.6 s,
    a plain one 41.7 s), and the scale-down can start as soon as it ends."""
    if traced is not None:
        return traced(timeout or FIRST_RUN_TIMEOUT)
    return ColdExecutor(python, 1).run_many([script], timeout or FIRST_RUN_TIMEOUT, home)[0]


def confirm(
    script: Path,
    python: str,
    timeout: float | None,
    home: Path,
    runs: int,
    done: list[RunResult],
    log: Callable[[str], None] = lambda _: None,
    stand_in: bool = False,
) -> list[RunResult]:
    """The runs after `done` (the first), cold, as many at once as its memory allows, under a timeout that follows
    its time: all `runs` must fail the same way, else a one-line error ("does not fail", "fails flakily"). With
    `stand_in` the first is a traced run: where it alone disagrees, one more plain run takes its place in the count
    (it is still returned first: `runs` + 1 results then say so)."""
    left = runs - len(done)
    at_once = max(1, min(parallel_runs(done, left), left))
    if left > 0:
        log(
            f"establish: run 1 of {runs} took {done[0].seconds:.1f} s"
            + (
                f" ({done[0].peak_rss_mb:.0f} MB RAM"
                + (f", {done[0].peak_gpu_mb:.0f} MB GPU" if done[0].peak_gpu_mb else "")
                + ")"
                if done[0].peak_rss_mb
                else ""
            )
            + f"; {left} more, {at_once} at once"
        )
    later = timeout_for(done, timeout)
    more = ColdExecutor(python, at_once).run_many([script] * left, later, home) if left > 0 else []
    results = done + more  # what must agree
    agree = bool(more) and more[0].signature is not None and all(m.signature == more[0].signature for m in more)
    if stand_in and agree and done[0].signature != more[0].signature:
        # the traced run alone may disagree (a trace is no plain run): one more plain run takes its place
        more += ColdExecutor(python, 1).run_many([script], later, home)
        results = more
    failing = [r for r in results if r.signature is not None]
    if not failing:
        raise MinreproError(f"nothing to reduce: {script} does not fail (passed {runs} of {runs} runs)")
    first = failing[0].signature
    same = sum(r.signature == first for r in results)
    if same < runs:
        raise MinreproError(
            f"{script} fails flakily: '{first.headline}' in {same} of {runs} runs (n={runs}, "
            "all must agree); make it deterministic, or reduce with --oracle and your own retries"
        )
    return done + more


def default_workdir(script: Path, source: str, key: str) -> Path:
    return cache("reductions", f"{script.stem}-{_digest(source + key)[:10]}")


def reduce_script(
    opts: ReduceOptions, log: Callable[[str], None] = lambda _: None, say: Callable[[str], None] | None = None
) -> ReduceSummary:
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

    wanted = [
        sig
        for sig in (signal.SIGINT, getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
        if sig is not None
    ]
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, stop) for sig in wanted}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


@dataclass
class Reduction:
    """One reduction as it goes through the phases: what each phase found, for the next ones. The phases read and
    write it; nothing else carries state between them."""

    opts: ReduceOptions
    log: Callable[[str], None]
    say: Callable[[str], None]
    script: Path
    source: str
    out: Path
    home: Path
    python: str
    budget: Budget
    progress: Progress
    notes: list[str] = field(default_factory=list)
    headline: str = "not established (stopped before the original's runs agreed)"
    owner: str = ""
    # establish
    original: Signature | None = None
    first_run: RunResult | None = None
    cold: list[RunResult] = field(default_factory=list)
    traced: RunResult | None = None
    timeout: float = DEFAULT_TIMEOUT
    jobs: int = 1
    jobs_why: str = ""
    env: Any = None  # the bad env's probe
    versions: dict = field(default_factory=dict)
    loaded: tuple[str, ...] = ()
    matcher: Callable[[RunResult], bool] | None = None
    good_envs: Future | None = None  # the guard's first candidate env, made while the original's runs go
    confirming: Future | None = None  # the original's confirming runs, going while the scale-down does
    # scale-down
    scale_dir: Path | None = None
    scaled: ScaleDown | None = None
    # guard and search set-up
    guard: Guard = UNDECIDED
    good_timeout: float | None = None
    started: list[Future] = field(default_factory=list)
    warming: Future | None = None  # the bad env's executor, started and measured on the twin beside the guard
    family_pool: FamilyPool | None = None  # the fix's warm pool, started and checked beside the guard's judgement
    dropped: list[Future] = field(default_factory=list)  # the closing of a fix's pool the guard did not choose
    executor: Executor | None = None
    guard_executors: list[Executor] = field(default_factory=list)
    oracle: Any = None
    workdir: Path | None = None
    state_path: Path | None = None
    resumed: bool = False
    measured_on: str = ""
    keep_seeds: bool = False
    # search and after
    best: str = ""
    result: str = ""
    pass_records: dict[str, PassRecord] = field(default_factory=dict)
    unjudged: int = 0
    found: list[triggers.Trigger] = field(default_factory=list)
    good_pass: bool | None = None
    good_said: str = ""  # what the good runs of the result did
    phases: list[dict] = field(default_factory=list)
    ending: str = ""  # why the reduction ended on the original without a search (the time budget)
    refused: list[Refusal] = field(default_factory=list)  # steps of the twin's ladder refused where the bug is fixed

    @property
    def searching_cut(self) -> bool:
        return self.unjudged > 0


@dataclass
class FamilyPool:
    """The warm pool of the catalog's fix for this failure (the guard's first env), started while the guard's cold
    runs judge it, and its reuse check made on `subject`: the search takes it where the guard chooses that env."""

    python: str
    subject: Path
    started: Future  # of the executor, checked
    notes: list[str]  # what the start and the check said, for the summary where the search takes it


@dataclass(frozen=True)
class Phase:
    name: str
    run: Callable[[Reduction], None]
    detail: Callable[[Reduction], str] = lambda r: ""
    applies: Callable[[Reduction], bool] = lambda r: True


def _reduce_script(opts: ReduceOptions, log: Callable[[str], None], say: Callable[[str], None]) -> ReduceSummary:
    start = time.monotonic()
    script = opts.script.resolve()
    from ..catalog.targets import read_source  # the one rule for a script given on the command line

    source = read_source(script)
    given = opts.prepared.original if opts.prepared else script  # a prepared script's user file is never written
    out = (opts.out or (opts.prepared.out if opts.prepared else script.with_name(f"{script.stem}.min.py"))).resolve()
    if out in (script, given.resolve()):
        raise MinreproError("the output path is the input script; minrepro never overwrites it")
    home = opts.prepared.home if opts.prepared else script.parent  # where the run imports from
    r = Reduction(
        opts,
        log,
        say,
        script,
        source,
        out,
        home,
        resolve_python(opts.python),
        Budget(start, opts.max_seconds),
        Progress(code_lines(source), log, say=say),
        best=source,
    )
    r.timeout = opts.timeout or DEFAULT_TIMEOUT
    if not opts.oracle:
        r.say(r.budget.describe())
    try:
        for phase in PHASES:
            if not phase.applies(r):
                continue
            began, tried = time.monotonic(), r.progress.tries
            if phase.name != "search":  # the search names each pass itself
                r.progress.phase(phase.name, phase.detail(r))
            phase.run(r)
            r.phases.append(
                {
                    "phase": phase.name,
                    "seconds": round(time.monotonic() - began, 1),
                    "candidates": r.progress.tries - tried,
                    "jobs": r.jobs,
                }
            )
        r.progress.close()
    except KeyboardInterrupt as stop:  # anywhere, Ctrl-C or SIGTERM/SIGHUP: the best so far is written
        r.progress.close()
        _write(r, verified=False)
        cause = f" by {stop.args[0]}" if stop.args else ""
        # every phase's work is cached by content (the original's runs, the twin, the answers, the best so far):
        # the same command picks up where this one stopped
        raise Interrupted(
            f"interrupted{cause}: the best script so far ({code_lines(r.best)} code lines, not "
            f"verified) is in {out}; resume with: {_resume_command(opts.argv)}"
        ) from None
    finally:
        early = [r.family_pool.started] if r.family_pool else []  # taken by the search, or not yet judged
        for future in [*r.started, *early]:  # one that started while the guard ran (closed below, once each)
            with contextlib.suppress(Exception):
                r.guard_executors.append(future.result())
        for used in {id(e): e for e in [r.executor, *r.guard_executors] if e is not None}.values():
            used.close()
        for closing in r.dropped:
            closing.result()
    text = _write(r, verified=not opts.oracle)
    stats = r.oracle.stats if r.oracle is not None else None
    return ReduceSummary(
        code_lines(source),
        code_lines(text),
        stats.calls if stats else 0,
        stats.cache_hits if stats else 0,
        round(time.monotonic() - start, 1),
        r.headline,
        str(out),
        r.executor.name if r.executor else "command",
        r.resumed,
        r.guard.kind,
        r.guard.why,
        r.good_pass,
        [asdict(t) for t in r.found],
        r.notes,
        getattr(r.executor, "snapshot_runs", 0),
        r.oracle.good_runs if r.oracle is not None and r.guard.pythons else 0,
        r.jobs,
        r.jobs_why,
        opts.max_seconds,
        r.searching_cut or bool(r.ending),
        r.good_said,
        r.phases,
        [asdict(record) for record in r.pass_records.values()],
        r.progress.timeline,
        getattr(r.executor, "describe_reuse", str)(),
        r.scaled.rung if r.scaled is not None else "",
        [str(refusal) for refusal in r.refused],
    )


# --- the phases, in order ---------------------------------------------------------------------------------------


def command_oracle(r: Reduction) -> None:
    """--oracle CMD: the user's own interestingness test decides; nothing to establish or guard."""
    opts = r.opts
    r.jobs = opts.jobs or 1
    key = json.dumps(["command", opts.oracle, r.python, r.timeout])
    r.workdir = _workdir(opts, r.script, r.source, key)
    r.oracle = CommandOracle(
        Cache(r.workdir / "cache.jsonl", key),
        r.workdir,
        r.timeout,
        r.home,
        command=shlex.split(opts.oracle),
        jobs=r.jobs,
    )
    if not r.oracle.test_many([r.source])[0]:
        raise MinreproError(f"nothing to reduce: the oracle does not accept {r.script.name} itself")
    r.headline = f"oracle: {opts.oracle}"


def establish_failure(r: Reduction) -> None:
    """The original's first cold run (traced, where a scale-down follows) fails; the runs that confirm it go in the
    background while the scale-down proposes its twin (`confirmed` waits for them before the guard). The bad env's
    probe and the envs the guard will try are made meanwhile; the parallelism and the timeouts follow what the first
    run cost. A resumed reduction takes all of this from its earlier start."""
    opts = r.opts
    r.scale_dir, memo = _scale_workdir(opts, r.script, r.source, r.python) if opts.scale_down else (None, None)
    r.scaled = memo
    # the bad env's probe (a process that imports torch) goes while the original runs, and serves the guard's envs too
    background = ThreadPoolExecutor(1)
    probing = background.submit(probe, r.python)
    if not opts.good_pythons and opts.guard == "auto":
        r.good_envs = background.submit(_make_guard_envs, probing, r.source, r.notes)
    background.shutdown(wait=False)
    remembered = _remembered_runs(r)
    if remembered is not None:
        r.cold, r.traced = remembered
        r.say(f"establish: the original's {len(r.cold)} cold runs from an earlier run of this reduction")
    else:
        trace = (
            None
            if r.scale_dir is None or memo is not None
            else functools.partial(traced_run, normalize(r.source), r.python, workdir=r.scale_dir, home=r.home)
        )
        first = first_run(r.script, r.python, opts.timeout, r.home, trace)
        _say_estimate(r, first)
        r.cold, r.traced = [first], first if trace is not None else None
        confirming = functools.partial(
            confirm, r.script, r.python, opts.timeout, r.home, opts.confirm_runs, [first], r.say, trace is not None
        )
        if first.signature is None:  # nothing to overlap: "does not fail", or "fails flakily", now
            _take_confirmed(r, confirming())
        else:
            pool = ThreadPoolExecutor(1)
            r.confirming = pool.submit(confirming)
            pool.shutdown(wait=False)
    _take_first(r, next((run for run in r.cold if run.signature is not None), r.cold[0]))
    r.env = probing.result()
    r.versions = r.env.versions
    r.jobs, r.jobs_why = choose_jobs(opts.jobs, r.cold, "the original")
    r.say(f"parallel runs: {r.jobs} ({r.jobs_why})")


def _take_first(r: Reduction, run: RunResult) -> None:
    """The run the reduction stands on: its signature is the one to keep; refused here if it is no library's."""
    opts = r.opts
    r.first_run, r.original = run, run.signature
    r.timeout = timeout_for(r.cold, opts.timeout)
    if opts.timeout is None:
        r.say(
            f"timeout per run: {r.timeout:.0f} s ({TIMEOUT_FACTOR:g}x the slowest cold run, at least "
            f"{DEFAULT_TIMEOUT:.0f} s)"
        )
    refuse_missing_libraries(run, r.source, r.python)
    # a traced run ran the normalized copy: its line numbers are not the user's
    given = opts.prepared.name if opts.prepared else r.script.name
    refuse_own_failure(run if run is not r.traced else replace(run, script_lines=()), given)
    if opts.signature and not _search(opts.signature, run.raw_headline):
        raise MinreproError(
            f"{r.script.name} fails with '{run.raw_headline.splitlines()[0]}', "
            f"which does not match --signature {opts.signature!r}"
        )
    r.headline, r.owner = r.original.headline, str(r.original.owner or "")
    r.loaded = run.loaded
    r.matcher = functools.partial(same_failure, r.original, opts.signature)


def confirmed(r: Reduction) -> None:
    """Wait for the original's confirming runs (started by `establish_failure`): all agree, or a one-line error. Where
    only the traced run disagrees with the plain ones, the trace is no ground to stand on: the twin goes, and the
    reduction stands on a plain run at real scale."""
    if r.confirming is None:
        return
    confirming, r.confirming = r.confirming, None
    _take_confirmed(r, confirming.result())


def _take_confirmed(r: Reduction, runs: list[RunResult]) -> None:
    first = runs[0]
    r.cold = runs
    if len(runs) > r.opts.confirm_runs:  # `confirm`: the traced run alone disagreed, a plain run took its place
        r.notes.append(
            f"the traced run failed otherwise ({first.signature.headline if first.signature else 'passed'}) than "
            "the plain runs: no tiny twin, reduced at real scale"
        )
        r.say(r.notes[-1])
        r.cold, r.traced, r.scaled = runs[1:], None, None
        _take_first(r, runs[1])
        r.jobs, r.jobs_why = choose_jobs(r.opts.jobs, r.cold, "the original")
    else:
        r.timeout = timeout_for(r.cold, r.opts.timeout)
    _remember_runs(r)


def _say_estimate(r: Reduction, first: RunResult) -> None:
    """Right after the first run: where the original's own cost makes the budget impossible, say so now."""
    # two more cold runs (side by side) and a cold verification cannot be avoided, whatever the search does
    floor = r.budget.establishing_fits(first.seconds)
    if floor is not None:
        r.say(
            f"the time budget ({r.budget.seconds:.0f} s, --max-seconds) cannot hold this reduction: one run of "
            f"the original takes {first.seconds:.0f} s, so establishing and verifying alone need about "
            f"{floor:.0f} s; the result will be verified, and may be far from minimal"
        )
        r.notes.append(
            f"the original's own cost (about {floor:.0f} s to establish and verify) exceeds the time "
            f"budget of {r.budget.seconds:.0f} s"
        )


def scale_down_phase(r: Reduction) -> None:
    """Before the guard: where the bug is fixed the script runs to its end (688 s at E4B with every patch, against
    36 s to fail), so the good env judges the twin, not the checkpoint. Its few candidates run cold: the warm executor
    is tried on what the search will stand on."""
    if r.scaled is None:
        refused = r.refused
        r.scaled = _scale_down(
            r.opts,
            r.scale_dir,
            r.script,
            r.source,
            r.python,
            r.timeout,
            # the original's confirming runs go meanwhile: the twin's candidates take the slots they leave
            ColdExecutor(r.python, max(1, r.jobs - (r.opts.confirm_runs - 1 if r.confirming else 0))),
            r.original,
            r.first_run,
            r.traced,
            r.progress,
            r.say,
            r.budget.scale_down_until(r.first_run.seconds),
            _twin_judges(r),
            r.matcher,
            refused,
        )
        r.notes += [str(refusal) for refusal in refused]
        if r.scaled is None and refused:
            r.notes.append("no twin holds where the bug is fixed: reduced at real scale")
            r.say(r.notes[-1])
    elif r.scaled is not None:  # a twin found by an earlier run of this reduction
        r.refused = list(r.scaled.refused)
    if r.scaled is not None:
        twin_runs = list(r.scaled.good_runs.values())
        r.jobs, r.jobs_why = choose_jobs(
            r.opts.jobs,
            [run for runs in twin_runs for run in runs] + ([r.scaled.bad_run] if r.scaled.bad_run else []),
            "the twin",
        )
        r.say(f"parallel runs: {r.jobs} ({r.jobs_why})")


def _twin_judges(r: Reduction) -> dict[str, bool]:
    """Where the scale-down judges a twin with the bug fixed, python -> named by the user: the --good-python envs, else
    the env the guard will judge first (made while the original ran)."""
    if r.opts.good_pythons:
        return {py: True for py in r.opts.good_pythons}
    if r.good_envs is not None:
        r.good_envs.result()
    search = GuardSearch(
        r.script, r.source, r.original, r.first_run.raw_headline, r.matcher, r.env, r.timeout, r.log, notes=r.notes
    )
    first = first_good_env(search, r.opts.good_pythons, r.opts.guard)
    return {first: False} if first else {}


def guard_phase(r: Reduction) -> None:
    """Where the bug is fixed the subject (the twin, else the original) must pass; the search's executors start
    meanwhile (each warm worker imports the libraries first)."""
    opts = r.opts
    if r.scaled is None:  # the guard judges the original: its runs must agree first
        confirmed(r)
    subject, subject_path = (r.scaled.source, r.scaled.path) if r.scaled else (r.source, r.script)
    _start_executors(r)
    if r.good_envs is not None:
        r.good_envs.result()  # made while the original ran; the guard finds them ready
    # the good run goes to the end: its cost is not known yet (FIRST_RUN_TIMEOUT)
    search = GuardSearch(
        subject_path,
        subject,
        r.original,
        r.first_run.raw_headline,
        r.matcher,
        r.env,
        opts.timeout or FIRST_RUN_TIMEOUT,
        r.log,
        notes=r.notes,
        jobs=r.jobs if r.scaled else parallel_runs(r.cold, 2),  # a twin is small: the box's share
        home=r.home,
        known=r.scaled.good_runs if r.scaled else {},
        until=r.budget.end(),
        least=r.first_run.seconds,
    )
    _start_family_pool(r, search)
    try:
        r.guard = _choose_guard(search, opts, (r.script, r.source) if r.scaled else None)
        # the original's confirming runs went beside the twin's guard; where the traced run alone disagreed, the
        # twin goes, and the guard is chosen again on the original
        if r.scaled is not None:
            confirmed(r)
            if r.scaled is None:  # and what was sized on the twin with it: the executors start again for the original
                _restart_executors(r)
                if search.script != r.script:
                    r.guard = choose_guard(_on_original(search, r.script, r.source), opts.good_pythons, opts.guard)
    except OutOfTime as spent:
        confirmed(r)
        r.guard = replace(UNDECIDED, why=f"not decided within the time budget: {spent}")
        _end_on_original(r, f"the guard could not be decided within the time budget ({spent})")
        return
    if r.scaled is not None and search.script != subject_path:  # the twin lost the bug: real scale after all
        r.notes.append("the tiny twin does not pass where the bug is fixed: reduced at real scale")
        r.say(r.notes[-1])
        r.scaled = None
    elif r.scaled is not None:
        r.notes.append(r.scaled.description)
    r.good_timeout = opts.timeout or max(r.timeout, TIMEOUT_FACTOR * search.passing_seconds)
    r.say(
        f"guard: {r.guard.why}"
        + (f" (a passing run took {search.passing_seconds:.0f} s)" if search.passing_seconds else "")
    )
    # the cold verification's time is kept from the search: a bad run and the good runs, side by side
    twin = r.scaled.bad_run if r.scaled is not None else None
    bad_seconds = twin.seconds if twin is not None else r.first_run.seconds
    r.budget.keep_for_verification(bad_seconds, search.passing_seconds if r.guard.pythons else 0.0)
    left = r.budget.left()
    if r.scaled is None and not r.budget.search_fits(r.first_run.seconds):
        # at real scale a search that cannot run one candidate and then verify its result is no search: said now
        original_runs = search.known.get(r.guard.pythons[0], []) if r.guard.pythons else []
        if r.guard.kind == "necessity":  # chosen, but its control has not run on the original: not decided
            r.guard = replace(UNDECIDED, why="not decided within the time budget: the necessity control was not run")
        _end_on_original(
            r,
            f"the time budget cannot hold a search and its cold verification: verifying takes about "
            f"{r.budget.reserve:.0f} s (a run where the bug is fixed took {search.passing_seconds:.0f} s), one "
            f"candidate about {r.first_run.seconds:.0f} s, and {left:.0f} s are left",
            original_runs,
        )
        return
    _open_search(r)


def _end_on_original(r: Reduction, why: str, good: Sequence[RunResult] = ()) -> None:
    """The reduction ends on what it established: the original, which failed with the signature in each cold run,
    and passed in the guard's runs where it had them. The search and the verification are not run."""
    r.ending = why
    r.notes.append(f"not reduced: {why}; the result is the original, as established")
    r.say(r.notes[-1])
    r.scaled = None
    r.best = r.result = r.source
    r.good_pass = True if good and all(run.signature is None for run in good) else None
    if r.good_pass:
        seconds = ", ".join(f"{run.seconds:.0f}" for run in good)
        r.good_said = f"passes: exit 0 in {len(good)} of {len(good)} cold runs ({seconds} s)"


def _start_executors(r: Reduction) -> None:
    """The search's executors, started in the background (each warm worker imports the libraries first): the bad
    env's, its warm workers kept one batch ahead where the cores allow, then measured on the twin; and one per
    --good-python."""
    opts = r.opts
    starting = ThreadPoolExecutor(1 + len(opts.good_pythons))
    spares = min(r.jobs, max(0, cores() - r.jobs))
    cuda = getattr(r.env, "cuda", None)
    modules = r.first_run.modules
    r.started.append(
        starting.submit(_start_executor, opts, r.python, r.source, modules, r.jobs, r.notes, "", spares, cuda)
    )
    r.started += [
        starting.submit(_start_executor, opts, py, r.source, modules, r.jobs, r.notes, f"guard env {py}: ")
        for py in opts.good_pythons
    ]
    starting.shutdown(wait=False)
    if r.scaled is not None:
        # the twin's warm runs need no guard: they go beside its runs where the bug is fixed, not after them
        bad, twin = r.started[0], r.scaled.path
        warming = ThreadPoolExecutor(1)
        r.warming = warming.submit(
            lambda: _warm_executor(bad.result(), r.original, twin, r.notes, r.log, r.timeout, r.home)
        )
        warming.shutdown(wait=False)


def _start_family_pool(r: Reduction, search: GuardSearch) -> None:
    """Where the guard judges a twin and its first env is the catalog's fix of this failure, that env's warm pool
    starts, and gets its reuse check on the twin, while the guard's cold runs judge the env: on a GPU box that start
    and check took 29-41 s after the judgement. Not for a subject at real scale: its runs beside the guard's would
    share the GPU's memory with them. Where the guard chooses otherwise, or the twin goes, the pool is closed unused."""
    python = family_fix_env(search, r.opts.good_pythons, r.opts.guard)
    if python is None or r.scaled is None or r.opts.executor == "cold":
        return
    notes: list[str] = []
    where, subject, timeout = f"guard env {python}: ", search.script, r.opts.timeout or r.timeout

    def start() -> Executor:
        executor = _start_executor(r.opts, python, r.source, r.first_run.modules, r.jobs, notes, where)
        try:
            return _reuse_agrees(executor, subject, None, timeout, r.home, notes, where, True)[0]
        except BaseException:
            executor.close()
            raise

    starting = ThreadPoolExecutor(1)
    r.family_pool = FamilyPool(python, subject, starting.submit(start), notes)
    starting.shutdown(wait=False)


def _take_family_pool(r: Reduction, subject: Path) -> dict[str, Executor]:
    """The fix's pool started beside the guard, where the guard chose its env for this same subject: {python: the
    executor, checked on it already}. Otherwise (another env, or the twin dropped since) it is closed once its start
    ends: its check was of the twin."""
    pool = r.family_pool
    if pool is None:
        return {}
    if pool.python not in r.guard.pythons or pool.subject != subject:
        r.notes.append("the fix's warm pool, started beside the guard's judgement, closed unused")
        _drop_family_pool(r)
        return {}
    try:  # kept in `r.family_pool` all the same: the reduction's end closes it once, with the guard's executors
        executor = pool.started.result()
    except Exception:  # a start that broke: the search starts that env's pool itself
        return {}
    r.notes += [*pool.notes, "the fix's warm pool started and was checked beside the guard's judgement"]
    return {pool.python: executor}


def _drop_family_pool(r: Reduction) -> None:
    """The fix's pool, not wanted: a thread of its own closes it once its start ends (the reduction's end waits for
    that thread; nothing else closes the pool)."""
    if r.family_pool is not None:
        closer = ThreadPoolExecutor(1)
        r.dropped.append(closer.submit(_close_started, r.family_pool.started))
        closer.shutdown(wait=False)
        r.family_pool = None


def _close_started(started: Future) -> None:
    with contextlib.suppress(Exception):  # a start that broke closed what it had started
        started.result().close()


def _restart_executors(r: Reduction) -> None:
    """The executors started for the twin closed (once the twin's warm runs are done with the bad env's), and started
    again for the original."""
    if r.warming is not None:
        with contextlib.suppress(Exception):
            r.warming.result()
    for future in r.started:
        with contextlib.suppress(Exception):
            future.result().close()
    r.started, r.warming = [], None
    _drop_family_pool(r)  # sized and checked for the twin
    _start_executors(r)


def _open_search(r: Reduction) -> None:
    """The oracle over the chosen guard, its warm executors, and the state a resumed run continues from."""
    opts = r.opts
    good_runs = opts.good_runs or default_good_runs(r.original, r.source)
    key = json.dumps(
        [
            "signature",
            opts.signature,
            r.python,
            opts.timeout,
            r.guard.key(),
            good_runs,
            "twin" if r.scaled else "original",
        ]
    )  # a resumed state is of one or the other
    r.workdir = _workdir(opts, r.script, r.source, key)
    stand_on = (r.scaled.source, r.scaled.path) if r.scaled else (r.source, r.script)
    early = dict(zip(opts.good_pythons, r.started[1:], strict=False))
    family = _take_family_pool(r, stand_on[1])
    r.guard_executors = [
        family[py]
        if py in family
        else early[py].result()
        if py in early
        else _start_executor(opts, py, r.source, r.first_run.modules, r.jobs, r.notes, f"guard env {py}: ")
        for py in r.guard.pythons
    ]

    def checked(executor: Executor, py: str) -> Executor:
        """A reusing pool where the bug is fixed: the subject passes in its reused workers too (checked beside the bad
        env's, unless the fix's pool was checked on it beside the guard already)."""
        if py in family:
            return executor
        where = f"guard env {py}: "
        return _reuse_agrees(executor, stand_on[1], None, r.good_timeout or r.timeout, r.home, r.notes, where, True)[0]

    checking = ThreadPoolExecutor(max(1, len(r.guard_executors)))
    checks = [
        checking.submit(checked, executor, py) for executor, py in zip(r.guard_executors, r.guard.pythons, strict=False)
    ]
    checking.shutdown(wait=False)
    if r.warming is not None and r.scaled is not None:
        r.executor, baseline = r.warming.result()
    else:  # no twin, or the guard refused it: measured on the original (an executor the twin disagreed with is cold)
        executor = r.warming.result()[0] if r.warming is not None else r.started[0].result()
        r.executor, baseline = _warm_executor(executor, r.original, stand_on[1], r.notes, r.log, r.timeout, r.home)
    r.guard_executors = [check.result() for check in checks]
    r.measured_on = stand_on[0] if baseline is not None else r.source
    budget = per_candidate(baseline if baseline is not None else r.first_run.seconds)
    # a candidate past the budget is uninteresting anyway: stop it there, not at the timeout
    r.oracle = SignatureOracle(
        Cache(r.workdir / "cache.jsonl", key),
        r.workdir,
        min(r.timeout, budget + 1),
        r.home,
        executor=r.executor,
        original=r.original,
        regex=opts.signature,
        max_seconds=budget,
        good=r.guard_executors,
        good_runs=good_runs,
        cwd_writes_allowed=bool(r.first_run.cwd_writes),
        good_timeout=r.good_timeout,
        neutralise=neutralise_library_call if r.guard.kind == "necessity" else None,
    )
    # a good env was chosen by two passing runs of the original itself; a necessity control has not run yet
    if r.guard.kind == "necessity" and not r.oracle.test_many([normalize(r.source)])[0]:
        r.notes.append(f"the original does not pass its guard ({r.guard.why}); reduced unguarded")
        r.guard = UNGUARDED
        r.oracle.good, r.oracle.neutralise = (), None
    if not r.guard.guarded:
        r.notes.append(
            "UNGUARDED: nothing checks that the reduction still holds the library's bug; values the "
            "script's own checks read are frozen"
        )
    r.keep_seeds = r.original.raised_by == "script"
    r.log(f"signature: {r.original.headline}  (owner: {r.original.owner})")


def search_phase(r: Reduction) -> None:
    """The passes over the program, from the best state so far (a resumed run's) or the twin, until a round changes
    nothing or the deadline (which keeps the verification's time) comes."""
    opts = r.opts
    r.state_path = r.workdir / "state.json"
    state = _load_state(r.state_path, _digest(r.source))
    r.resumed = state is not None
    begin = state["best"] if state else r.source
    # a best taken ahead of its runs where the bug is fixed (`optimistic`) and stopped before they answered: judged
    # now, and where refused, the one before it (settled: a yes is settled before the next is given)
    if state and state.get("before") and not r.oracle.cache.answers.get(r.oracle.cache.hash(begin)):
        begin = begin if r.oracle.outcomes([begin])[0][0] else state["before"]
    if r.resumed:
        r.say(f"resuming from {r.state_path} ({code_lines(begin)} code lines so far)")
    r.best = begin

    def save(candidate: str, start: bool = False) -> None:
        before, r.best = (None if start else r.best), candidate
        state = {"original": _digest(r.source), "best": candidate, "before": before}
        r.state_path.write_text(json.dumps(state), encoding="utf-8")
        r.progress.accepted(code_lines(candidate))

    if not opts.oracle and not r.resumed and r.scaled is not None:
        begin = r.scaled.source
        save(begin, start=True)
    if not opts.oracle and begin != r.measured_on:  # a twin (or a resumed state): the budget follows its cost now
        _rebudget(r.oracle, r.executor, begin, r.workdir, r.home, r.timeout)
    measure = None if opts.oracle else _facts(r.python, r.oracle.timeout, r.workdir, r.home, r.executor)
    unjudged = [0]
    sent: set[str] = set()  # a candidate screened, then judged, counts once
    test_many, screen_many = (
        within(_counted(judge, r.progress, sent), r.budget.search_until(), unjudged)
        for judge in (r.oracle.test_many, r.oracle.screen_many)
    )
    guarded = r.guard.guarded or bool(opts.oracle)
    # each yes where the script fails goes on at once; its runs where the bug is fixed overlap the next candidates',
    # where memory holds those runs beside a batch (`jobs` was sized to what it holds)
    optimistic = isinstance(r.oracle, SignatureOracle) and bool(r.oracle.good)
    if optimistic:
        beside = r.jobs + r.oracle.good_runs * len(r.oracle.good)
        sized_on = [r.scaled.bad_run] if r.scaled is not None and r.scaled.bad_run else r.cold
        optimistic = parallel_runs(sized_on, beside) >= beside
    if optimistic:
        r.oracle.optimistic = True
    try:
        r.result = reduce_source(
            begin,
            test_many,
            PASSES,
            FINAL_PASSES,
            r.jobs,
            opts.seed,
            save,
            on_pass=r.progress.phase,
            freeze_check_data=not guarded,
            facts=measure,
            keep_seeds=r.keep_seeds,
            records=r.pass_records,
            screen_many=screen_many,
            settle=r.oracle.settle,
        )
    finally:
        if optimistic:  # the phases after the search read settled answers
            r.oracle.optimistic = False
            r.oracle.close()
    if getattr(r.oracle, "retractions", 0):
        r.notes.append(
            f"{r.oracle.retractions} candidate(s) taken back: refused where the bug is fixed after the search had "
            "gone on from them"
        )
    r.unjudged = unjudged[0]
    if r.unjudged:
        r.notes.append(
            f"the search stopped at the time budget (--max-seconds {opts.max_seconds:g}, less "
            f"{r.budget.reserve:.0f} s kept for the verification): {r.unjudged} proposals were left "
            "unjudged, so a smaller script may exist (the same command with a larger budget resumes)"
        )
    if hasattr(r.executor, "describe_reuse"):
        r.log(f"warm pool: {r.executor.describe_reuse()}")
    if getattr(r.executor, "snapshots_refused", ""):
        r.notes.append(
            "prefix snapshots stopped: a prefix initialized CUDA, which forked children cannot use; "
            "candidates ran whole"
        )


def trigger_phase(r: Reduction) -> None:
    r.found = triggers.trigger_report(r.source, r.result, r.oracle.outcomes)
    explicit = triggers.make_explicit(r.result, r.found)
    if explicit != r.result and r.oracle.test_many([explicit])[0]:
        r.result = explicit
    r.best = r.result


def verify_phase(r: Reduction) -> None:
    """Cold, in a fresh interpreter: the result fails with the signature, and passes (exit 0) where the bug is
    fixed."""
    r.best = r.result
    verified, r.good_pass, why, loaded, r.good_said = _verify_cold(
        r.result, r.oracle, r.python, r.guard, r.timeout, r.workdir, r.home, r.jobs
    )
    if not verified:
        reused = any(getattr(e, "reused", 0) for e in [r.executor, *r.guard_executors])
        hint = "; the search reused warm workers: --fresh-workers gives each candidate its own" if reused else ""
        raise MinreproError(f"the reduced script {why}; kept in {r.state_path}{hint}")
    r.loaded = loaded


PHASES: list[Phase] = [
    Phase("oracle", command_oracle, applies=lambda r: bool(r.opts.oracle)),
    Phase(
        "establish",
        establish_failure,
        lambda r: f"{r.opts.confirm_runs} cold runs of the original (after the first, beside the scale-down)",
        applies=lambda r: not r.opts.oracle,
    ),
    Phase(
        "scale-down",
        scale_down_phase,
        lambda r: "a tiny twin of each loaded model, judged where the script fails",
        applies=lambda r: not r.opts.oracle and r.scale_dir is not None,
    ),
    Phase(
        "guard",
        guard_phase,
        lambda r: ("the tiny twin" if r.scaled else "the original") + " where the bug is fixed",
        applies=lambda r: not r.opts.oracle,
    ),
    Phase("search", search_phase, applies=lambda r: not r.ending),
    Phase(
        "trigger report",
        trigger_phase,
        applies=lambda r: r.opts.triggers and not r.opts.oracle and not r.budget.passed() and not r.ending,
    ),
    Phase(
        "verify",
        verify_phase,
        lambda r: "the result cold, in the bad and the good environments",
        applies=lambda r: not r.opts.oracle and not r.ending,
    ),
]


def choose_jobs(given: int | None, runs: list[RunResult], what: str) -> tuple[int, str]:
    """Runs side by side: `given` (--jobs) where memory holds them, else as many as the cores, the RAM and the GPU
    memory hold for runs like `runs` (at most MAX_AUTO_JOBS: the passes take the first interesting candidate of each
    batch, so a wider batch is mostly spent). What was chosen and why, in words."""
    available = cores()
    measured = [run for run in runs if run.peak_rss_mb or run.peak_gpu_mb]
    peak_ram = max((run.peak_rss_mb for run in measured), default=0.0)
    peak_gpu = max((run.peak_gpu_mb for run in measured), default=0.0)
    ram, gpu = fits(peak_ram, available_ram_mb()), fits(peak_gpu, free_gpu_mb())
    held = [f"RAM holds {ram}" if ram is not None else "", f"GPU memory {gpu}" if gpu is not None else ""]
    why_memory = (
        f"{what}'s run peaks at {peak_ram / 1024:.1f} GB RAM"
        + (f", {peak_gpu / 1024:.1f} GB GPU" if peak_gpu else "")
        + ": "
        + ", ".join(h for h in held if h)
        if measured
        else f"{what}'s memory was not measured"
    )
    if given is not None:
        jobs = max(1, min([given] + [n for n in (ram, gpu) if n is not None]))
        return jobs, f"--jobs {given}" + ("" if jobs == given else f", lowered: {why_memory}")
    limits = [n for n in (available, MAX_AUTO_JOBS, ram, gpu) if n is not None]
    jobs = max(1, min(limits))
    return jobs, f"{available} cores, at most {MAX_AUTO_JOBS}; {why_memory}"


def _make_guard_envs(probing: Future, source: str, notes: list[str]) -> None:
    """The envs the guard may try, made in the cache while the original's cold runs go (a minute or more each, the
    first time)."""
    from .guard import make_guard_envs

    with contextlib.suppress(Exception):  # the guard makes them itself, and says why, if this fails
        make_guard_envs(probing.result().versions, source, notes.append)


def _remembered_runs(r: Reduction) -> tuple[list[RunResult], RunResult | None] | None:
    """The original's cold runs (and the traced run) from an earlier, interrupted run of this same reduction."""
    path = _established_path(r)
    if path is None or r.opts.fresh or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("original") != _digest(r.source) or data.get("python") != r.python:
            return None
        cold = [run_from_dict(run) for run in data["cold"]]
        return cold, run_from_dict(data["traced"]) if data.get("traced") else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _remember_runs(r: Reduction) -> None:
    path = _established_path(r)
    if path is None:
        return
    path.write_text(
        json.dumps(
            {
                "original": _digest(r.source),
                "python": r.python,
                "cold": [run_to_dict(run) for run in r.cold],
                "traced": run_to_dict(r.traced) if r.traced is not None else None,
            }
        ),
        encoding="utf-8",
    )


def _established_path(r: Reduction) -> Path | None:
    if r.scale_dir is not None:
        return r.scale_dir / "established.json"
    workdir = _workdir(r.opts, r.script, r.source, json.dumps(["establish", r.python, r.opts.confirm_runs]))
    return workdir / "established.json"


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


def _scale_down(
    opts: ReduceOptions,
    workdir: Path,
    script: Path,
    source: str,
    python: str,
    timeout: float,
    executor: Executor,
    original: Signature,
    first_run: RunResult,
    traced: RunResult,
    progress: Progress,
    say: Callable[[str], None],
    until: float | None = None,
    goods: dict[str, bool] | None = None,
    matches: Callable[[RunResult], bool] | None = None,
    refused: list[Refusal] | None = None,
) -> ScaleDown | None:
    """The tiny twin, judged in both worlds, step by step from the most shrunk (`TwinJudge`): the same signature
    where the script fails (the same time rules, no guard yet), and a run to its end where the bug is fixed (`goods`:
    python -> named by the user; default the --good-python envs). Those runs are the guard's two runs of the twin,
    which it then takes as they are; the steps refused there are added to `refused`. Past `until` (the time budget
    less the verification's share) no twin is tried: the search stands on the original."""
    key = json.dumps(["scale", opts.signature, python])
    home = opts.prepared.home if opts.prepared else script.parent
    oracle = SignatureOracle(
        Cache(workdir / "cache.jsonl", key),
        workdir,
        timeout,
        home,
        executor=executor,
        original=original,
        regex=opts.signature,
        cwd_writes_allowed=bool(first_run.cwd_writes),
    )
    goods = {py: True for py in opts.good_pythons} if goods is None else goods

    def run_good(sources: list[str], py: str, jobs: int) -> list[RunResult]:
        return _run_sources(sources, py, workdir / "good", timeout, home, jobs)

    judge = TwinJudge(
        oracle.test_many,
        goods,
        run_good,
        matches or functools.partial(same_failure, original, opts.signature),
        # no more runs at once than `jobs`, which the original's memory allowed (a twin that keeps real-size fields
        # is as large): the good runs take the slots the bad runs leave
        getattr(executor, "jobs", 1),
        say,
        room=cores(),
    )
    scaled = try_scale_down(
        normalize(source), traced, within(_counted(judge, progress), until, [0]), say, judge.on_rung
    )
    if refused is not None:
        refused += judge.refused
    if scaled is None:
        return None
    scaled.path, scaled.original = workdir / "twin.py", _digest(source)
    scaled.good_runs = judge.good_runs.get(scaled.source, {})
    scaled.refused, scaled.rung = list(judge.refused), judge.rung
    runs = getattr(oracle, "runs", None)  # what the chosen twin cost cold (a stand-in oracle may not say)
    if runs:
        scaled.bad_run = runs.get(oracle.cache.hash(scaled.source)[:16])
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
    return choose_guard(_on_original(search, *original), opts.good_pythons, opts.guard)


def _on_original(search: GuardSearch, script: Path, source: str) -> GuardSearch:
    """The guard's search turned to the original at real scale: its good runs are as large as it is, two at a time at
    most."""
    search.script, search.source, search.known, search.jobs = script, source, {}, min(search.jobs, 2)
    return search


def _rebudget(
    oracle: SignatureOracle, executor: Executor, current: str, workdir: Path, home: Path, timeout: float
) -> None:
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
        oracle.max_seconds = min(oracle.max_seconds or float("inf"), per_candidate(max(run.seconds for run in runs)))
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
    return {
        "failing_statement": failing,
        "values": profile.get("values", {}),
        "heavy": heavy,
        "executed": sorted(seconds),
    }  # the module-level lines that ran


def _run_sources(
    sources: list[str], python: str, folder: Path, timeout: float, home: Path, jobs: int | None = None
) -> list[RunResult]:
    """Each source, cold under `python`: `jobs` at a time (default: all at once)."""
    folder.mkdir(exist_ok=True)
    paths = [folder / f"{_digest(text)[:16]}.py" for text in sources]
    for path, text in zip(paths, sources, strict=False):
        path.write_text(text, encoding="utf-8")
    return ColdExecutor(python, jobs or len(paths)).run_many(paths, timeout, home)


def _counted(test_many, progress: Progress, sent: set[str] | None = None):
    """`test_many`, each candidate counted in the progress; with `sent` (shared), each at most once."""
    sent = set() if sent is None else sent

    def run(sources: list[str]) -> list[bool]:
        began = time.monotonic()
        answers = test_many(sources)
        fresh = set(sources) - sent
        sent.update(fresh)
        progress.tried(len(fresh), time.monotonic() - began)
        return answers

    return run


def _write(r: Reduction, verified: bool) -> str:
    """The output: PEP 723 pins, a header that says what it fails with, what guards it and what the verification
    saw, then the reduced program."""
    body = triggers.annotate(output.layout(r.best), list(r.found))
    status = "" if verified else "INTERRUPTED, NOT VERIFIED: "
    prepared = r.opts.prepared
    lines = [
        f"# {status}reduced by minrepro from {prepared.name if prepared else r.script.name}: "
        f"{code_lines(r.source)} -> {code_lines(body)} code lines.",
        *(f"# {line}" for line in (prepared.header(body) if prepared else ())),
        f"# Fails with: {r.headline}" + (f"  (in {r.owner})" if r.owner else ""),
        f"# Guard: {r.guard.why}",
        *output.needs(body).splitlines(),
    ]
    if verified and r.good_said:
        lines.append(f"# Where the bug is fixed it {r.good_said}.")
    if r.ending:
        lines.append(f"# Not reduced: {r.ending}.")
    if verified and r.searching_cut:
        lines.append(
            f"# The search stopped at its time budget (--max-seconds {r.opts.max_seconds:g}): maybe not minimal."
        )
    header = (output.pep723(body, r.versions, r.loaded) if r.versions else "") + "\n".join(lines) + "\n"
    text = header + body
    r.out.write_text(text, encoding="utf-8")
    return text


def _resume_command(argv: list[str] | None = None) -> str:
    return " ".join(shlex.quote(a) for a in ["minrepro", *(sys.argv[1:] if argv is None else argv)])


def _start_executor(
    opts: ReduceOptions,
    python: str,
    source: str,
    recorded: tuple[str, ...],
    jobs: int,
    notes: list[str],
    where: str = "",
    spares: int = 0,
    cuda: bool | None = None,
) -> Executor:
    """The requested executor, started (a fork server imports the libraries first: 25 s on the GPU box), or cold
    runs where it cannot start. `recorded`: the bad env's modules (one the env lacks is skipped by the server);
    `spares`: warm-pool workers kept warming beyond `jobs`; `cuda`: whether the env sees a GPU, where known."""
    if opts.executor == "cold":
        return ColdExecutor(python, jobs)
    # a warm worker runs the next candidate where the last left it as fresh, unless the script patches a library
    home = opts.prepared.home if opts.prepared else opts.script.resolve().parent
    patch = patches_imports(source, home) if opts.reuse_workers and opts.executor in ("auto", "warm-pool") else ""
    reuse = opts.reuse_workers and not patch
    try:
        executor = make_executor(opts.executor, python, module_imports(source), jobs, recorded, spares, cuda, reuse)
    except MinreproError as exc:
        notes.append(f"{where}{opts.executor} unavailable ({exc}); cold runs used" + (" there" if where else ""))
        return ColdExecutor(python, jobs)
    if patch and not where and executor.name == "warm-pool":  # a fork server's children never run twice anyway
        notes.append(f"a warm worker runs one candidate: the script patches what would outlive a run ({patch})")
    return executor


def _warm_executor(
    executor: Executor,
    original: Signature,
    script: Path,
    notes: list[str],
    log: Callable[[str], None],
    timeout: float,
    home: Path | None = None,
) -> tuple[Executor, float | None]:
    """The started executor and the script's run time under it (as many runs at once as the search makes: the time
    budget follows that), if every run reproduces the original signature (a warm executor that disagrees with
    itself is not trusted either); otherwise cold runs, their time not measured here (None)."""
    if executor.name == "cold":
        return executor, None
    # in workers that have run nothing yet: a reused worker's answer is checked apart (`_reuse_agrees`)
    first = getattr(executor, "run_fresh", executor.run_many)
    warm = first([script] * max(2, executor.jobs), timeout, home or script.parent)
    if any(run.signature != original for run in warm):
        executor.close()
        seen = _answers(warm)
        notes.append(
            f"under {executor.name} the script gives [{seen}] where {CONFIRM_RUNS} cold runs agree on "
            f"'{original.headline}' (it depends on a fresh interpreter: imports done before it, threads, "
            "seeds); cold runs used"
        )
        return ColdExecutor(executor.python, executor.jobs), None
    executor, again = _reuse_agrees(
        executor, script, original, timeout, home, notes, seconds=max(run.seconds for run in warm)
    )
    warm += again
    if getattr(executor, "skipped", None):
        notes.append(f"fork server: {', '.join(executor.skipped)} imported by each candidate (it initializes CUDA)")
    if getattr(executor, "chosen_because", ""):
        notes.append(f"warm pool: {executor.chosen_because}")
    log(f"executor: {executor.name} (original runs in {warm[0].seconds:.2f} s there)")
    return executor, max(run.seconds for run in warm)


def _answers(runs: list[RunResult]) -> str:
    """What the runs gave, each answer once: their failures' headlines, or "passes"."""
    return "; ".join(sorted({run.signature.headline if run.signature else "passes" for run in runs}))


# a subject whose run takes longer than this: its workers are not reused (a check would cost two such rounds, and a
# worker's 15-20 s of imports is then a small share of each candidate's cost)
REUSE_CHECK_SECONDS = 20.0


def _reuse_agrees(
    executor: Executor,
    script: Path,
    expected: Signature | None,
    timeout: float,
    home: Path | None,
    notes: list[str],
    where: str = "",
    fresh_first: bool = False,
    seconds: float = 0.0,
) -> tuple[Executor, list[RunResult]]:
    """A reusing warm pool runs `script` once more in each worker its last round kept (with `fresh_first`, after a
    round in workers that have run nothing); where one answers otherwise than `expected` (None: it passes), the pool
    goes on with a worker per candidate. So it does, unchecked, where a run of the subject took over
    REUSE_CHECK_SECONDS (`seconds`, or the fresh round's). The executor to search with, and the runs."""
    if not getattr(executor, "reuse", False):
        return executor, []
    home = home or script.parent
    runs = executor.run_fresh([script] * executor.jobs, timeout, home) if fresh_first else []
    slowest = max([seconds, *(run.seconds for run in runs)])
    if slowest > REUSE_CHECK_SECONDS:
        executor.stop_reuse()
        notes.append(f"{where}warm pool: workers run one candidate each (a run took {slowest:.0f} s)")
        return executor, runs
    runs += executor.run_many([script] * executor.jobs, timeout, home)
    if all(run.signature == expected for run in runs) and executor.reused:
        return executor, runs
    if executor.reused:  # a worker answered otherwise once reused
        seen = _answers(runs)
        notes.append(f"{where}warm pool: workers run one candidate each (in a reused worker the script gives [{seen}])")
    else:  # none was kept: nothing to reuse, and nothing checked
        notes.append(f"{where}warm pool: no worker was kept after a run, so each runs one candidate")
    executor.stop_reuse()
    return executor, runs


def _verify_cold(
    result: str,
    oracle: SignatureOracle,
    python: str,
    guard: Guard,
    timeout: float,
    workdir: Path,
    home: Path,
    jobs: int = 1,
) -> tuple[bool, bool | None, str, tuple[str, ...], str]:
    """The result fails with the signature in a fresh interpreter; and (None when unguarded) it passes, exit 0, in
    the good environments, as the original does there. No run-time budget here: a cold run pays the imports the
    budget excludes. Then: what went wrong, for the error; the packages the bad run loaded (what the output's pins
    must name); what the good runs did, in words.
    The bad run and the good runs go side by side, `jobs` at once (what memory allows for what the search ran): one
    after another, the good runs of E4B's pinned twin, which runs to its end where the bug is fixed, took longer than
    the bad run by far."""
    path = workdir / "verify.py"
    path.write_text(result, encoding="utf-8")
    runs = [(python, timeout)] + [
        (py, oracle.good_timeout or timeout) for py in guard.pythons for _ in range(max(GOOD_RUNS, oracle.good_runs))
    ]  # the search may have run fewer
    at_once = max(1, min(jobs, len(runs)))  # also each run's share of the cores (thread_cap)
    with ThreadPoolExecutor(at_once) as pool:
        results = list(pool.map(lambda run: ColdExecutor(run[0], at_once).run_many([path], run[1], home)[0], runs))
    bad = results[0]
    if not oracle.matches(bad):
        ended = bad.signature.headline if bad.signature else "passed"
        return False, None, f"does not reproduce in a fresh interpreter ({ended} after {bad.seconds:.0f} s)", (), ""
    if why := oracle.litters(bad):
        return False, None, f"{why} (cold)", (), ""
    if not guard.pythons:
        return True, None, "", bad.loaded, ""
    good = list(zip((py for py, _ in runs[1:]), results[1:], strict=False))
    failing = [(py, run) for py, run in good if run.signature is not None]
    if failing:
        what = "; ".join(sorted({f"{oracle.not_passing(run)} under {py}" for py, run in failing}))
        return False, False, f"does not pass where the bug is fixed: {what}", bad.loaded, ""
    seconds = ", ".join(f"{run.seconds:.1f}" for _, run in good)
    said = f"passes: exit 0 in {len(good)} of {len(good)} cold runs ({seconds} s)"
    return True, True, "", bad.loaded, said


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
    print(
        f"{summary.input_lines} -> {summary.output_lines} code lines, {summary.oracle_calls} oracle calls "
        f"({summary.cache_hits} cache hits), {summary.seconds:.1f} s, executor {summary.executor}, "
        f"{summary.jobs} at once"
        + (f", {summary.snapshot_runs} from prefix snapshots" if summary.executor == "forkserver" else "")
        + (" (resumed)" if summary.resumed else "")
    )
    print(f"signature: {summary.signature}")
    print(
        f"guard: {summary.guard_why or summary.guard}"
        + (
            f" ({summary.good_runs} good-env run{'s' if summary.good_runs > 1 else ''} per candidate)"
            if summary.good_runs
            else ""
        )
        + (
            ""
            if summary.passes_in_good_env is None
            else f"; the result passes in the good env: {'yes' if summary.passes_in_good_env else 'NO'}"
            + (f" ({summary.good_run})" if summary.good_run else "")
        )
    )
    if summary.phases:
        print(
            "phases: "
            + ", ".join(
                f"{p['phase']} {p['seconds']:.0f} s" + (f" ({p['candidates']} candidates)" if p["candidates"] else "")
                for p in summary.phases
            )
        )
    if summary.executor == "warm-pool" and summary.workers:
        print(f"warm pool: {summary.workers}")
    if summary.twin or summary.twin_refused:
        print(f"twin: {summary.twin or 'none: reduced at real scale'}")
        for refused in summary.twin_refused:
            print(f"  refused: {refused}")
    if summary.maybe_not_minimal:
        print(f"stopped at the time budget ({summary.budget_seconds:g} s): verified, maybe not minimal")
    if summary.triggers:
        print("trigger report:")
        print(triggers.format_table([triggers.Trigger(**t) for t in summary.triggers]))
    print(f"written to {summary.output}")
    for note in summary.notes:
        print(f"note: {note}")
    if as_json:
        print(json.dumps(summary.as_json()))
    sys.stdout.flush()
