"""Phase `guard`: where the bug is fixed the subject (the twin, else the original) must pass (`..guard` searches the
envs). The search's executors start meanwhile, and the original's confirming runs are taken once the guard is
chosen, unless they still run where the twin stands: the search on the twin then goes on beside them. At real
scale, a search that cannot run one candidate and then its verification within the budget is not started: the
reduction ends on the original, as established."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from ...errors import MinreproError
from ...harness.resources import FIRST_RUN_TIMEOUT, TIMEOUT_FACTOR, parallel_runs
from ...harness.runner import RunResult
from ..guard import UNDECIDED, Guard, GuardSearch, OutOfTime, choose_guard, family_fix_env
from ..options import ReduceOptions
from ..results import Context, Established, GuardChoice, Results
from ..scale import ScaleDown
from ..workers import Spec, Subject, good_env_jobs
from .establish import CONFIRMING, FIRST_GUARD_ENV, confirmed


def guard(ctx: Context, done: Results) -> GuardChoice:
    opts = ctx.opts
    est, twin = done.established, done.scaled
    jobs, jobs_why = done.jobs
    if twin is None:  # the guard judges the original: its runs must agree first
        est = confirmed(ctx, est)
    subject, subject_path = (twin.source, twin.path) if twin else (ctx.source, ctx.script)
    start_executors(ctx, est, twin, jobs)
    ctx.background.take(FIRST_GUARD_ENV)  # made while the original ran; the others as the guard needs them
    # the good run goes to the end: its cost is not known yet (FIRST_RUN_TIMEOUT)
    search = GuardSearch(
        subject_path,
        subject,
        est.original,
        est.first_run.raw_headline,
        est.matcher,
        est.env,
        opts.timeout or FIRST_RUN_TIMEOUT,
        ctx.log,
        notes=ctx.notes,
        jobs=jobs if twin else parallel_runs(list(est.cold), 2),  # a twin is small: the box's share
        home=ctx.home,
        known=twin.good_runs if twin else {},
        until=ctx.budget.end(),
        least=est.first_run.seconds,
    )
    start_fix_pool(ctx, est, twin, search, jobs)

    def twin_stands() -> bool:  # the guard may turn its search to the original: the twin lost the bug
        return twin is not None and search.script == subject_path

    confirming = False
    try:
        chosen = choose_on_twin(search, opts, (ctx.script, ctx.source) if twin else None)
        # the original's confirming runs went beside the twin's guard; where they still run and the twin stands, the
        # search goes on beside them and takes them (a late disagreement withdraws the twin there); otherwise, where
        # the traced run alone disagreed, the twin goes, and the guard is chosen again on the original
        confirming = twin_stands() and ctx.background.running(CONFIRMING)
        if confirming:
            ctx.log("guard: the original's confirming run(s) go on beside the search on the twin")
        elif twin is not None:  # its run counts among the confirming runs only where the twin still stands
            est = confirmed(ctx, est, on_twin=twin_stands())
            if est.trace_disagreed:  # and what was sized on the twin with it: the executors start again
                twin, jobs, jobs_why = None, est.jobs, est.jobs_why
                cuda = getattr(est.env, "cuda", None)
                ctx.workers.restart(Spec(ctx.python, est.first_run.modules, jobs, cuda=cuda))
                if search.script != ctx.script:
                    chosen = choose_guard(on_original(search, ctx.script, ctx.source), opts.good_pythons, opts.guard)
    except OutOfTime as spent:
        est = confirmed(ctx, est, on_twin=twin_stands(), spent=True)
        chosen = replace(UNDECIDED, why=f"not decided within the time budget: {spent}")
        return end_on_original(
            ctx,
            GuardChoice(chosen, est, None, jobs, jobs_why),
            f"the guard could not be decided within the time budget ({spent})",
        )
    if twin is not None and not twin_stands():  # real scale after all
        ctx.note("the tiny twin does not pass where the bug is fixed: reduced at real scale")
        twin = None
    elif twin is not None:
        ctx.notes.append(twin.description)
    good_timeout = opts.timeout or max(est.timeout, TIMEOUT_FACTOR * search.passing_seconds)
    passing = search.passing_seconds
    ctx.say(f"guard: {chosen.why}" + (f" (a passing run took {passing:.0f} s)" if passing else ""))
    # the cold verification's time is kept from the search: a bad run and the good runs, side by side
    bad_run = twin.bad_run if twin is not None else None
    bad_seconds = bad_run.seconds if bad_run is not None else est.first_run.seconds
    ctx.budget.keep_for_verification(bad_seconds, passing if chosen.pythons else 0.0)
    left = ctx.budget.left()
    if twin is None and not ctx.budget.search_fits(est.first_run.seconds):
        # at real scale a search that cannot run one candidate and then verify its result is no search: said now
        original_runs = search.known.get(chosen.pythons[0], []) if chosen.pythons else []
        if chosen.kind == "necessity":  # chosen, but its control has not run on the original: not decided
            chosen = replace(UNDECIDED, why="not decided within the time budget: the necessity control was not run")
        why = (
            f"the time budget cannot hold a search and its cold verification: verifying takes about "
            f"{ctx.budget.reserve:.0f} s (a run where the bug is fixed took {passing:.0f} s), one "
            f"candidate about {est.first_run.seconds:.0f} s, and {left:.0f} s are left"
        )
        return end_on_original(ctx, GuardChoice(chosen, est, None, jobs, jobs_why), why, original_runs)
    return GuardChoice(chosen, est, twin, jobs, jobs_why, good_timeout, passing, confirming=confirming)


def end_on_original(ctx: Context, choice: GuardChoice, why: str, good: Sequence[RunResult] = ()) -> GuardChoice:
    """The reduction ends on what it established (`choice`: the guard, on the original): the original, which failed
    with the signature in each cold run, and passed in the guard's runs where it had them. The search and the
    verification are not run."""
    ctx.note(f"not reduced: {why}; the result is the original, as established")
    ctx.best = ctx.source
    passed = bool(good) and all(run.signature is None for run in good)
    said = ""
    if passed:
        seconds = ", ".join(f"{run.seconds:.0f}" for run in good)
        said = f"passes: exit 0 in {len(good)} of {len(good)} cold runs ({seconds} s)"
    return replace(choice, ending=why, good_pass=True if passed else None, good_said=said)


def start_executors(ctx: Context, est: Established, twin: ScaleDown | None, jobs: int) -> None:
    """The search's executors, started beside the guard; the bad env's is measured on the twin meanwhile."""
    measure_on = (est.original, Subject(twin.path, est.timeout, ctx.home)) if twin is not None else None
    cuda = getattr(est.env, "cuda", None)
    ctx.workers.start(Spec(ctx.python, est.first_run.modules, jobs, cuda=cuda), measure_on, ctx.log)


def start_fix_pool(ctx: Context, est: Established, twin: ScaleDown | None, search: GuardSearch, jobs: int) -> None:
    """Where the guard judges a twin and its first env is the catalog's fix of this failure, that env's warm pool
    starts, and gets its reuse check on the twin, while the guard's cold runs judge the env. Not for a subject at
    real scale: its runs beside the guard's would share the GPU's memory with them. Where the guard chooses
    otherwise, or the twin goes, the pool is closed unused."""
    python = family_fix_env(search, ctx.opts.good_pythons, ctx.opts.guard)
    if python is None or twin is None or ctx.opts.executor == "cold":
        return
    timeout = ctx.opts.timeout or est.timeout
    spec = Spec(python, est.first_run.modules, good_env_jobs(jobs, ctx.opts.good_runs))
    ctx.workers.start_fix_pool(spec, Subject(search.script, timeout, ctx.home))


def choose_on_twin(search: GuardSearch, opts: ReduceOptions, original: tuple[Path, str] | None) -> Guard:
    """The guard, judged on the twin when there is one (`original`: the user's script and source to fall back on);
    where the twin does not pass in a good env that the original passes in, the twin lost the bug: the search then
    stands on the original (`search.script` says which)."""
    if original is None:
        return choose_guard(search, opts.good_pythons, opts.guard)
    try:
        chosen = choose_guard(search, opts.good_pythons, opts.guard)
    except MinreproError:  # --good-python refused the twin
        chosen = None
    if chosen is not None and (chosen.kind == "good-env" or opts.guard == "none"):
        return chosen
    return choose_guard(on_original(search, *original), opts.good_pythons, opts.guard)


def on_original(search: GuardSearch, script: Path, source: str) -> GuardSearch:
    """The guard's search turned to the original at real scale: its good runs are as large as it is, two at a time at
    most."""
    search.script, search.source, search.known, search.jobs = script, source, {}, min(search.jobs, 2)
    return search
