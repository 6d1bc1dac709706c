"""`minrepro reduce`: establish the original failure, scale it down, choose the guard, run the search, report the
triggers, verify, write a script a maintainer accepts as is. `PHASES` is that order, as data; each phase is a module
of `phases/`, a function from the earlier phases' frozen results (`results.Results`) to its own. The time budget
(`budget.Budget`) is the one every phase asks; the background work and the executors have one owner each
(`background.Background`, `workers.Workers`), opened and closed here.

The search lives in `minrepro.reducers` and sees only an `Oracle` (`reducers/oracle.py`); this package is the execution
side of that seam: the oracle (differential when a guard exists, answering ahead where the box holds it, within the
budget, counted in the progress), the work directory (answers cache and best-so-far state, so an interrupted run
resumes), the final cold check and the output's form.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace

from ..errors import MinreproError
from ..harness.runner import resolve_python, stop_live_runs
from ..reducers.source import code_lines
from . import output
from .background import Background
from .budget import Budget
from .options import ReduceOptions
from .phases.establish import OTHER_GUARD_ENVS, establish
from .phases.guard import guard
from .phases.oracle import command_oracle
from .phases.scale_down import scale_down
from .phases.search import open_search, search, trigger_report
from .phases.verify import verify
from .progress import Progress
from .results import Context, Established, Phase, Results, Twin, TwinWithdrawn
from .summary import ReduceSummary
from .workers import Workers


def _signature_path(ctx: Context, done: Results) -> bool:
    return not ctx.opts.oracle


def _can_scale_down(est: Established) -> bool:
    """A twin is planned from the traced run, or remembered from an earlier run of this reduction; a trace the plain
    runs disagreed with was forgotten, with its twin."""
    return est.scale_dir is not None and (est.traced is not None or est.remembered_twin is not None)


def _searching(ctx: Context, done: Results) -> bool:
    return not done.ending


PHASES: list[Phase] = [
    Phase("oracle", "opened", command_oracle, applies=lambda ctx, done: bool(ctx.opts.oracle)),
    Phase(
        "establish",
        "established",
        establish,
        lambda done: "cold runs of the original (after the first, beside the scale-down)",
        applies=_signature_path,
    ),
    Phase(
        "scale-down",
        "twin",
        scale_down,
        lambda done: "a tiny twin of each loaded model, judged where the script fails and where the bug is fixed",
        applies=lambda ctx, done: _signature_path(ctx, done) and _can_scale_down(done.established),
    ),
    Phase(
        "guard",
        "guard",
        guard,
        lambda done: ("the tiny twin" if done.scaled else "the original") + " where the bug is fixed",
        applies=_signature_path,
    ),
    Phase(
        "search set-up",
        "opened",
        open_search,
        lambda done: "the oracle over the warm executors",
        applies=lambda ctx, done: _signature_path(ctx, done) and _searching(ctx, done),
    ),
    Phase("search", "searched", search, applies=_searching),
    Phase(
        "trigger report",
        "triggers",
        trigger_report,
        applies=lambda ctx, done: (
            ctx.opts.triggers and not ctx.opts.oracle and not ctx.budget.passed() and _searching(ctx, done)
        ),
    ),
    Phase(
        "verify",
        "verified",
        verify,
        lambda done: "the result cold, in the bad and the good environments",
        applies=lambda ctx, done: _signature_path(ctx, done) and _searching(ctx, done),
    ),
]
SAID_BY_ITSELF = {"search"}  # phases whose progress names their own steps (the search names each pass)


class Interrupted(MinreproError):
    """Ctrl-C during a reduction: the best script so far is written, with the command that resumes."""


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


def _reduce_script(opts: ReduceOptions, log: Callable[[str], None], say: Callable[[str], None]) -> ReduceSummary:
    start = time.monotonic()
    script = opts.script.resolve()
    from ..catalog.targets import read_source  # the one rule for a script given on the command line

    source = read_source(script)
    given = opts.prepared.original if opts.prepared else script  # a prepared script's user file is never written
    out = (opts.out or (opts.prepared.out if opts.prepared else script.with_name(f"{script.stem}.min.py"))).resolve()
    if out in (script, given.resolve()):
        raise MinreproError("the output path is the input script; minrepro never overwrites it")
    budget = Budget(start, opts.max_seconds)
    if not opts.oracle:
        say(budget.describe())
    done, notes = Results(), []
    with Background() as background, Workers(opts, source, notes, background) as workers:
        ctx = Context(
            opts,
            log,
            say,
            script,
            source,
            out,
            opts.home,
            resolve_python(opts.python),
            budget,
            Progress(code_lines(source), log, say=say),
            background,
            workers,
            notes=notes,
            best=source,
        )
        try:
            done = run_phases(ctx, done)
        except KeyboardInterrupt as stop:  # anywhere, Ctrl-C or SIGTERM/SIGHUP: the best so far is written
            ctx.progress.close()
            output.write(ctx, ctx.done, verified=False)
            cause = f" by {stop.args[0]}" if stop.args else ""
            # every phase's work is cached by content (the original's runs, the twin, the answers, the best so far):
            # the same command picks up where this one stopped
            raise Interrupted(
                f"interrupted{cause}: the best script so far ({code_lines(ctx.best)} code lines, not "
                f"verified) is in {out}; resume with: {_resume_command(opts.argv)}"
            ) from None
        describe_reuse = getattr(done.opened.executor if done.opened else None, "describe_reuse", str)
        workers_said = describe_reuse()
        if background.running(OTHER_GUARD_ENVS):  # nobody waited for them: the command's exit does
            say("the other version sets' environments are still being made (once, for later reductions)")
    text = output.write(ctx, done, verified=not opts.oracle)
    return summarize(ctx, done, text, round(time.monotonic() - start, 1), workers_said)


def run_phases(ctx: Context, done: Results) -> Results:
    """Each phase that applies, in order, its result stored in `Results`; per phase, its time and candidates. A twin
    withdrawn after the search began on it (`TwinWithdrawn`) sends the reduction back to the guard, on the original."""
    ctx.done = done  # what an interruption writes from
    index = 0
    while index < len(PHASES):
        phase, index = PHASES[index], index + 1
        if not phase.applies(ctx, done):
            continue
        began, tried = time.monotonic(), ctx.progress.tries
        if phase.name not in SAID_BY_ITSELF:
            ctx.progress.phase(phase.name, phase.detail(done))
        try:
            done = ctx.done = replace(done, **{phase.field: phase.run(ctx, done)})
        except TwinWithdrawn as withdrawn:
            done = ctx.done = without_twin(ctx, done, withdrawn, time.monotonic() - began)
            index = next(i for i, p in enumerate(PHASES) if p.field == "guard")
        record = {
            "phase": phase.name,
            "seconds": round(time.monotonic() - began, 1),
            "candidates": ctx.progress.tries - tried,
            "jobs": done.jobs[0],
        }
        if phase.field == "searched" and done.searched and done.searched.run_seconds is not None:  # slots kept busy
            record["run_seconds"] = round(done.searched.run_seconds, 1)
        ctx.phases.append(record)
    ctx.progress.close()
    return done


def without_twin(ctx: Context, done: Results, withdrawn: TwinWithdrawn, seconds: float) -> Results:
    """The results as the scale-down left them, with no twin and the original as its plain runs established it: the
    phases from the guard on run again. The twin's executors close; its answers stay in their own work dir."""
    twin = done.scaled
    if twin is not None and twin.description in ctx.notes:  # said where the twin stood: it stands no more
        ctx.notes.remove(twin.description)
    ctx.note(f"the search on the tiny twin was withdrawn after {seconds:.0f} s; the original is reduced at real scale")
    ctx.workers.withdraw()
    ctx.best = ctx.source
    return Results(established=withdrawn.established, twin=Twin(None, done.refused))


def summarize(ctx: Context, done: Results, text: str, seconds: float, workers: str) -> ReduceSummary:
    opened = done.opened
    oracle = opened.oracle if opened else None
    stats = oracle.stats if oracle is not None else None
    executor = opened.executor if opened else None
    chosen = done.chosen
    jobs, jobs_why = done.jobs
    return ReduceSummary(
        input_lines=code_lines(ctx.source),
        output_lines=code_lines(text),
        oracle_calls=stats.calls if stats else 0,
        cache_hits=stats.cache_hits if stats else 0,
        seconds=seconds,
        signature=done.headline,
        output=str(ctx.out),
        executor=executor.name if executor else "command",
        resumed=bool(done.searched and done.searched.resumed),
        guard=chosen.kind,
        guard_why=chosen.why,
        passes_in_good_env=done.good_pass,
        triggers=[asdict(t) for t in done.found],
        notes=list(dict.fromkeys(ctx.notes)),  # a phase run again (a twin withdrawn) says its notes once
        snapshot_runs=getattr(executor, "snapshot_runs", 0),
        good_runs=oracle.good_runs if oracle is not None and chosen.pythons else 0,
        jobs=jobs,
        jobs_why=jobs_why,
        budget_seconds=ctx.opts.max_seconds,
        maybe_not_minimal=done.searching_cut or bool(done.ending),
        good_run=done.good_said,
        phases=ctx.phases,
        passes=[asdict(record) for record in done.searched.pass_records.values()] if done.searched else [],
        timeline=ctx.progress.timeline,
        workers=workers,
        twin=done.scaled.rung if done.scaled is not None else "",
        twin_refused=[str(refusal) for refusal in done.refused],
    )


def _resume_command(argv: list[str] | None = None) -> str:
    return " ".join(shlex.quote(a) for a in ["minrepro", *(sys.argv[1:] if argv is None else argv)])
