"""Phases `search set-up`, `search` and `trigger report`. The set-up builds the oracle the search asks (differential
where a guard exists) over the executors started beside the guard; the search runs the passes of `minrepro.reducers`
from the twin (or a resumed run's best) until a round changes nothing or the budget's search share ends; the trigger
report names what the failure needs, and makes it explicit where the result still fails so."""

from __future__ import annotations

import ast
import contextlib
import json
from pathlib import Path

from ...harness.executors import ColdExecutor, Executor
from ...harness.oracle import AnsweringAhead, Cache, CommandOracle, SignatureOracle
from ...harness.resources import parallel_runs
from ...harness.runner import RunResult
from ...reducers import FINAL_PASSES, PASSES, Observers, SearchSettings, reduce_source
from ...reducers.source import code_lines, normalize
from .. import triggers
from ..budget import WithinBudget, per_candidate
from ..guard import UNGUARDED, neutralise_library_call
from ..options import default_good_runs
from ..progress import Counted
from ..results import Context, Opened, Results, Searched, Triggered, TwinWithdrawn
from ..workdirs import digest, workdir
from ..workers import ReadyLater, Subject
from .establish import ConfirmingBeside

PROFILE_TIMEOUT_FACTOR = 3  # the facts' profiled run may take this many times a candidate's run limit
# what `statement_facts` records, as a number: facts a work dir kept in another format are measured again
FACTS_FORMAT = 2
HEAVY_SECONDS = 0.5  # a top-level statement this slow is worth running once for many candidates (prefix snapshots)


def open_search(ctx: Context, done: Results) -> Opened:
    """The oracle over the chosen guard, its warm executors, and the state a resumed run continues from."""
    opts, choice = ctx.opts, done.guard
    est, twin, chosen = choice.established, choice.twin, choice.guard
    good_runs = opts.good_runs or default_good_runs(est.original, ctx.source)
    # a resumed state is of the twin or of the original
    key = json.dumps(
        ["signature", opts.signature, ctx.python, opts.timeout, chosen.key(), good_runs, "twin" if twin else "original"]
    )
    folder = workdir(opts, ctx.script, ctx.source, key)
    stand_on = (twin.source, twin.path) if twin else (ctx.source, ctx.script)
    modules = est.first_run.modules
    checks = ctx.workers.good(
        chosen.pythons, stand_on[1], modules, choice.jobs, (choice.good_timeout or est.timeout, ctx.home)
    )
    subject = Subject(stand_on[1], est.timeout, ctx.home)
    executor, baseline = ctx.workers.bad(est.original, subject, twin is not None, ctx.log)
    good = [ReadyLater(check) for check in checks]  # the search need not wait for their checks: its first yes does
    measured_on = stand_on[0] if baseline is not None else ctx.source
    budget = per_candidate(baseline if baseline is not None else est.first_run.seconds)
    # a candidate past the budget is uninteresting anyway: stop it there, not at the timeout
    oracle = SignatureOracle(
        Cache(folder / "cache.jsonl", key),
        folder,
        min(est.timeout, budget + 1),
        ctx.home,
        executor=executor,
        original=est.original,
        regex=opts.signature,
        max_seconds=budget,
        good=good,
        good_runs=good_runs,
        cwd_writes_allowed=bool(est.first_run.cwd_writes),
        good_timeout=choice.good_timeout,
        neutralise=neutralise_library_call if chosen.kind == "necessity" else None,
    )
    # a good env was chosen by two passing runs of the original itself; a necessity control has not run yet
    if chosen.kind == "necessity" and not oracle.test_many([normalize(ctx.source)])[0]:
        ctx.notes.append(f"the original does not pass its guard ({chosen.why}); reduced unguarded")
        chosen = UNGUARDED
        oracle.good, oracle.neutralise = (), None
    if not chosen.guarded:
        ctx.notes.append(
            "UNGUARDED: nothing checks that the reduction still holds the library's bug; values the "
            "script's own checks read are frozen"
        )
    ctx.log(f"signature: {est.original.headline}  (owner: {est.original.owner})")
    keep_seeds = est.original.raised_by == "script"
    return Opened(oracle, executor, chosen, folder, choice.jobs, measured_on, keep_seeds)


def search(ctx: Context, done: Results) -> Searched:
    """The passes over the program, from the best state so far (a resumed run's) or the twin, until a round changes
    nothing or the deadline (which keeps the verification's time) comes."""
    opts, opened = ctx.opts, done.opened
    oracle, executor = opened.oracle, opened.executor
    state_path = opened.workdir / "state.json"
    twin = done.scaled
    # what the search stands on: a state of a search on another twin, or on none, is not resumed here (a given
    # --workdir holds both)
    subject = digest(twin.source) if twin is not None else "original"
    state = load_state(state_path, digest(ctx.source), subject)
    resumed = state is not None
    begin = state["best"] if state else ctx.source
    # a best taken ahead of its runs where the bug is fixed (`AnsweringAhead`) and stopped before they answered: judged
    # now, and where refused, the one before it (settled: a yes is settled before the next is given)
    if state and state.get("before") and not oracle.cache.answers.get(oracle.cache.hash(begin)):
        begin = begin if oracle.outcomes([begin])[0][0] else state["before"]
    if resumed:
        ctx.say(f"resuming from {state_path} ({code_lines(begin)} code lines so far)")
    ctx.best = begin

    def save(candidate: str, start: bool = False) -> None:
        before, ctx.best = (None if start else ctx.best), candidate
        state = {"original": digest(ctx.source), "subject": subject, "best": candidate, "before": before}
        state_path.write_text(json.dumps(state), encoding="utf-8")
        ctx.progress.accepted(code_lines(candidate))

    if not opts.oracle and not resumed and twin is not None:
        begin = twin.source
        save(begin, start=True)
    if not opts.oracle and begin != opened.measured_on:  # a twin (or a resumed state): the budget follows its cost
        rebudget(oracle, executor, begin, done.standing.timeout)
    # the profiled run traces the script's own lines: slower than a candidate's run, and not judged by its time
    profile_timeout = PROFILE_TIMEOUT_FACTOR * oracle.timeout
    measure = None if opts.oracle else facts(ctx.python, profile_timeout, opened.workdir, ctx.home, executor)
    guarded = opened.guard.guarded or bool(opts.oracle)
    ahead = AnsweringAhead(oracle) if answers_ahead(done) else None
    counted = Counted(ahead or oracle, ctx.progress)
    asked = WithinBudget(counted, ctx.budget.search_until(), jobs=opened.jobs, run_limit=lambda: screen_limit(oracle))
    settings = SearchSettings(opened.jobs, opts.seed, freeze_check_data=not guarded, keep_seeds=opened.keep_seeds)
    records: dict = {}
    confirming = ConfirmingBeside(ctx, done.guard.established) if done.guard and done.guard.confirming else None

    def on_pass(name: str) -> None:
        if confirming is not None:
            confirming.poll()
        ctx.progress.phase(name)

    runs = getattr(oracle, "runs", None)  # a --oracle command's runs are the user's: not timed here
    ran_before = set(runs or ())
    try:
        observers = Observers(save, on_pass, measure, records)
        result = reduce_source(begin, asked, PASSES, FINAL_PASSES, settings, observers)
    except TwinWithdrawn:
        if ahead is not None:  # its run where the bug is fixed ends before the executors close under it
            ahead.settle()
        raise
    finally:
        if ahead is not None:  # the phases after the search read settled answers
            ahead.close()
    established = confirming.take() if confirming is not None else None
    _say_how_it_ended(ctx, done, asked.unjudged, ahead.retractions if ahead else 0)
    run_seconds = None if runs is None else sum(run.seconds for key, run in runs.items() if key not in ran_before)
    return Searched(result, state_path, resumed, records, asked.unjudged, established, run_seconds)


def screen_limit(oracle: SignatureOracle | CommandOracle) -> float:
    """The longest one candidate's screen may take: a run where the script fails (or of `--oracle`'s command), and
    where the oracle screens by judging (no deferred good runs), its runs where the bug is fixed or its necessity
    control as well."""
    if not isinstance(oracle, SignatureOracle) or oracle.deferring or not (oracle.good or oracle.neutralise):
        return oracle.timeout
    return oracle.timeout + max(oracle.good_timeout or oracle.timeout, oracle.timeout)


def answers_ahead(done: Results) -> bool:
    """Whether each yes where the script fails goes on at once (`AnsweringAhead`): its runs where the bug is fixed then
    overlap the next candidates', which needs memory for those runs beside a batch (`jobs` was sized to a batch)."""
    oracle = done.opened.oracle
    if not (isinstance(oracle, SignatureOracle) and oracle.good):
        return False
    beside = done.opened.jobs + oracle.good_runs * len(oracle.good)
    twin = done.scaled
    sized_on = [twin.bad_run] if twin is not None and twin.bad_run else list(done.standing.cold)
    return parallel_runs(sized_on, beside) >= beside


def _say_how_it_ended(ctx: Context, done: Results, unjudged: int, retractions: int) -> None:
    executor = done.opened.executor
    if retractions:
        ctx.notes.append(
            f"{retractions} candidate(s) taken back: refused where the bug is fixed after the search had "
            "gone on from them"
        )
    if unjudged:
        ctx.notes.append(
            f"the search stopped at the time budget (--max-seconds {ctx.opts.max_seconds:g}, less "
            f"{ctx.budget.reserve:.0f} s kept for the verification): {unjudged} proposals were left "
            "unjudged, so a smaller script may exist (the same command with a larger budget resumes)"
        )
    if hasattr(executor, "describe_reuse"):
        ctx.log(f"warm pool: {executor.describe_reuse()}")
    if getattr(executor, "snapshots_refused", ""):
        ctx.notes.append(
            "prefix snapshots stopped: a prefix initialized CUDA, which forked children cannot use; "
            "candidates ran whole"
        )


def trigger_report(ctx: Context, done: Results) -> Triggered:
    oracle, result = done.opened.oracle, done.searched.result
    found = triggers.trigger_report(ctx.source, result, oracle.outcomes)
    explicit = triggers.make_explicit(result, found)
    if explicit != result and oracle.test_many([explicit])[0]:
        result = explicit
    ctx.best = result
    return Triggered(tuple(found), result)


def rebudget(oracle: SignatureOracle, executor: Executor, current: str, timeout: float) -> None:
    """The time budget from the program the search starts from (a tiny twin runs in seconds where its original took a
    minute: a candidate that grew back to real size must not pass as 'within 2x'), measured as the search runs
    candidates: as many at once as it does (a lone run's time would refuse candidates by what ran beside them)."""
    paths = [oracle.workdir / f"rebudget-{i}.py" for i in range(max(1, getattr(executor, "jobs", 1)))]
    for path in paths:
        path.write_text(current, encoding="utf-8")
    runs = executor.run_many(paths, timeout, oracle.home)
    if all(oracle.matches(run) for run in runs):
        oracle.max_seconds = min(oracle.max_seconds or float("inf"), per_candidate(max(run.seconds for run in runs)))
        oracle.timeout = min(timeout, oracle.max_seconds + 1)


def facts(python: str, timeout: float, folder: Path, home: Path, executor: Executor | None):
    """What one profiled cold run of the current program shows, for the fact-driven passes: the top-level statement
    the failure went through, the literal values of `name.attr` reads, and the slow statements (which the fork
    server then runs once per shared prefix). Cached by content, like the answers."""
    store = folder / "facts.jsonl"
    known = {}
    if store.exists():
        for line in store.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError, KeyError):
                record = json.loads(line)
                if record.get("format") == FACTS_FORMAT:  # an older minrepro's facts lack what the passes now read
                    known[record["digest"]] = record["facts"]

    def measure(current: str) -> dict:
        key = digest(current)
        if key not in known:
            path, profile = folder / "facts.py", folder / "facts.profile.json"
            path.write_text(current, encoding="utf-8")
            profile.unlink(missing_ok=True)
            # in the warm executor when there is one: a cold run pays the imports again
            run = (executor or ColdExecutor(python)).profile(path, profile, timeout, home)
            data = json.loads(profile.read_text(encoding="utf-8")) if profile.is_file() else {}
            known[key] = statement_facts(current, run, data)
            with store.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({"digest": key, "format": FACTS_FORMAT, "facts": known[key]}) + "\n")
        found = known[key]
        if hasattr(executor, "set_heavy"):
            executor.set_heavy(found["heavy"])
        return found

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
        "executed": sorted(seconds),  # the module-level lines that ran
        # the lines of the script's own functions that ran (None: a profile that did not record them)
        "function_lines": profile.get("function_lines"),
    }


def load_state(path: Path, original: str, subject: str) -> dict | None:
    """The best so far of an interrupted search of `original` (digest) standing on `subject` (the twin's digest, or
    "original"); None where there is none."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    same = state.get("original") == original and state.get("subject") == subject
    return state if same and state.get("best") else None
