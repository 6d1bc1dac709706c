"""Phase `scale-down`: each loaded checkpoint rebuilt as a tiny twin, step by step down the ladder (`..scale`), each
step judged where the script fails and where the bug is fixed. Where the bug is fixed the script runs to its end, so
the good env judges the twin, not the checkpoint. Its few candidates run cold: the warm executor is tried on what the
search will stand on."""

from __future__ import annotations

import functools
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from ...harness.executors import ColdExecutor, Executor
from ...harness.oracle import Cache, SignatureOracle, same_failure
from ...harness.resources import cores
from ...harness.runner import RunResult
from ...reducers.oracle import PlainOracle, Verdict
from ...reducers.scale import unreached_adapter_loads
from ...reducers.source import normalize
from ..budget import WithinBudget
from ..guard import GuardSearch, family_fix_env, first_good_env
from ..progress import Counted
from ..results import Context, Established, Results, Twin
from ..scale import Refusal, ScaleDown, TwinJudge, traced_run, try_scale_down
from ..workdirs import digest
from ..workers import Spec, good_env_jobs
from .establish import CONFIRMING, FIRST_GUARD_ENV, TWIN_MEMO, choose_jobs, original_runs


def scale_down(ctx: Context, done: Results) -> Twin:
    est = done.established
    if est.remembered_twin is not None:  # a twin found by an earlier run of this reduction
        scaled = est.remembered_twin
        refused: list[Refusal] = list(scaled.refused)
    else:
        refused = []
        # the original's confirming runs go meanwhile: the twin's candidates take the slots they leave
        planned = original_runs(ctx.opts.confirm_runs, est.traced is not None)
        beside = planned - 1 if ctx.background.pending(CONFIRMING) else 0
        goods, fix = twin_judges(ctx, est)
        prestart_executors(ctx, est, fix)
        climb = Climb(
            ColdExecutor(ctx.python, max(1, est.jobs - beside)),
            ctx.budget.scale_down_until(est.first_run.seconds),
            goods,
            refused,
        )
        scaled = climbed(ctx, est, climb)
        ctx.notes.extend(str(refusal) for refusal in refused)
        if scaled is None and refused:
            ctx.note("no twin holds where the bug is fixed: reduced at real scale")
    if scaled is None:
        return Twin(None, tuple(refused))
    twin_runs = [run for runs in scaled.good_runs.values() for run in runs]
    jobs, why = choose_jobs(ctx.opts.jobs, twin_runs + ([scaled.bad_run] if scaled.bad_run else []), "the twin")
    ctx.say(f"parallel runs: {jobs} ({why})")
    return Twin(scaled, tuple(refused), jobs, why)


GOOD_PATH_EVENTS = {"token_ids", "tokenized", "tokenizer"}  # what the good path reads that a twin must hold
LOAD_EVENTS = {"from_pretrained", "peft_from_pretrained"}  # a model or adapter the good path loads besides


@dataclass(frozen=True)
class Climb:
    """One climb down the twin's ladder: the executor of the twins' runs where the script fails; no twin tried past
    `until` (the time budget less the verification's share); `goods`: where a twin is judged with the bug fixed,
    python -> named by the user (None: the --good-python envs); the steps refused there are added to `refused`;
    `traced`: the run the twins are planned from (None: the original's traced run)."""

    executor: Executor
    until: float | None = None
    goods: dict[str, bool] | None = None
    refused: list[Refusal] = field(default_factory=list)
    traced: RunResult | None = None


def climbed(ctx: Context, est: Established, climb: Climb) -> ScaleDown | None:
    """The twin, down the ladder as the failing run plans it; planned again from a run where the bug is fixed where
    every step failed there, or first where the script loads an adapter the failing run never reached (every step
    would fail there on the real adapter)."""
    later = est.traced is not None and unreached_adapter_loads(normalize(ctx.source), est.traced.trace)
    if later and climb.goods:
        scaled, planned_again = replanned(ctx, est, climb, ADAPTER_LATER)
        if planned_again:
            return scaled
    scaled = build_twin(ctx, est, climb)
    if scaled is None and climb.refused and climb.goods and not later:
        scaled, _ = replanned(ctx, est, climb, EVERY_STEP_REFUSED)
    return scaled


EVERY_STEP_REFUSED = "every step failed where the bug is fixed"
ADAPTER_LATER = "the script loads an adapter at a line the failing run never reached"


def replanned(ctx: Context, est: Established, climb: Climb, why: str) -> tuple[ScaleDown | None, bool]:
    """Where the bug is fixed the script runs past where it failed, and reads what the failing run never reached (ids,
    tokenizer calls, an adapter): every step of the ladder failed there, or an adapter load shows it would (`why`).
    One traced run of the original there records them; the ladder is tried with what both runs read
    (`merged_trace`). Only where the run fits the scale-down's time and passes (an env that fails the same way fixes
    nothing). The twin, and whether the ladder was tried again."""
    until = climb.until
    if est.traced is None or (until is not None and time.monotonic() + 2 * est.first_run.seconds > until):
        return None, False
    python = next(iter(climb.goods or {}))
    ctx.say(f"scale-down: {why}: the original traced where the bug is fixed, for what it reads")
    folder = est.scale_dir / "good-trace"
    folder.mkdir(exist_ok=True)
    good = traced_run(normalize(ctx.source), python, est.timeout, folder, ctx.home)
    if good.signature is not None:  # the ladder as planned, if not tried yet; the guard then judges that env
        ctx.say(f"scale-down: the original does not pass there either ({good.signature.headline})")
        return None, False
    scaled = build_twin(ctx, est, replace(climb, traced=merged_trace(est.traced, good)))
    if scaled is not None:
        scaled.description += "; planned again with what the original read where the bug is fixed"
    return scaled, True


def merged_trace(failing: RunResult, passing: RunResult) -> RunResult:
    """The failing run's trace with what the passing run read besides: its ids and tokenizer calls
    (`GOOD_PATH_EVENTS`), and the models and adapters it loaded at lines the failing run never reached (an adapter
    loaded after the failure: the twin rebuilds it rather than loading the real one onto a tiny model)."""
    reached = {(r.get("event"), r.get("line")) for r in failing.trace if r.get("event") in LOAD_EVENTS}
    extra = tuple(
        record
        for record in passing.trace
        if record.get("event") in GOOD_PATH_EVENTS
        or (record.get("event") in LOAD_EVENTS and (record.get("event"), record.get("line")) not in reached)
    )
    return replace(failing, trace=(*failing.trace, *extra))


def twin_judges(ctx: Context, est: Established) -> tuple[dict[str, bool], str | None]:
    """Where the scale-down judges a twin with the bug fixed, python -> named by the user: the --good-python envs, else
    the env the guard will judge first (made while the original ran); and that env's python where it is the catalog's
    fix of this failure (None otherwise)."""
    opts = ctx.opts
    if opts.good_pythons:
        return {py: True for py in opts.good_pythons}, None
    began = time.monotonic()
    ctx.background.take(FIRST_GUARD_ENV)
    if time.monotonic() - began >= 1:  # a fresh box: the env is made once, then found in the cache
        ctx.say(f"scale-down: {time.monotonic() - began:.0f} s waiting for the env where the bug is fixed to be made")
    search = GuardSearch(
        ctx.script,
        ctx.source,
        est.original,
        est.first_run.raw_headline,
        est.matcher,
        est.env,
        est.timeout,
        ctx.log,
        notes=ctx.notes,
    )
    first = first_good_env(search, opts.good_pythons, opts.guard)
    return ({first: False} if first else {}), family_fix_env(search, opts.good_pythons, opts.guard)


def prestart_executors(ctx: Context, est: Established, fix: str | None) -> None:
    """The search's executors (the bad env's, and the fix's warm pool), started while the twin is judged: a warm
    worker's imports then go beside the twin's runs, not after them. Sized as a twin's runs are (the cores' share: a
    twin's memory is no limit); the guard keeps them where the twin's size agrees, and closes them otherwise."""
    if ctx.opts.executor == "cold":
        return
    jobs, _ = choose_jobs(ctx.opts.jobs, [], "the twin")
    modules, cuda = est.first_run.modules, getattr(est.env, "cuda", None)
    fix_spec = Spec(fix, modules, good_env_jobs(jobs, ctx.opts.good_runs)) if fix else None
    ctx.workers.prestart(Spec(ctx.python, modules, jobs, cuda=cuda), fix_spec)


def build_twin(ctx: Context, est: Established, climb: Climb) -> ScaleDown | None:
    """The tiny twin, judged in both worlds, step by step from the most shrunk (`TwinJudge`): the same signature where
    the script fails (the same time rules, no guard yet), and a run to its end where the bug is fixed (`Climb`).
    Those runs are the guard's two runs of the twin, which it then takes as they are. Past the climb's `until` no
    twin is tried: the search stands on the original."""
    executor, refused = climb.executor, climb.refused
    opts, folder = ctx.opts, est.scale_dir
    key = json.dumps(["scale", opts.signature, ctx.python])
    oracle = SignatureOracle(
        Cache(folder / "cache.jsonl", key),
        folder,
        est.timeout,
        ctx.home,
        executor=executor,
        original=est.original,
        regex=opts.signature,
        cwd_writes_allowed=bool(est.first_run.cwd_writes),
    )
    goods = {py: True for py in opts.good_pythons} if climb.goods is None else climb.goods

    def run_good(sources: list[str], py: str, jobs: int) -> list[RunResult]:
        return run_sources(sources, ColdExecutor(py, jobs), folder / "good", est.timeout, ctx.home)

    judge = TwinJudge(
        oracle.test_many,
        goods,
        run_good,
        est.matcher or functools.partial(same_failure, est.original, opts.signature),
        # no more runs at once than `jobs`, which the original's memory allowed (a twin that keeps real-size fields
        # is as large): the good runs take the slots the bad runs leave
        getattr(executor, "jobs", 1),
        ctx.say,
        room=cores(),
    )
    asked = WithinBudget(Counted(PlainOracle(judge), ctx.progress), climb.until)

    def judged(sources: list[str]) -> list[bool]:
        return [verdict is Verdict.INTERESTING for verdict in asked.judge(sources).verdicts]

    scaled = try_scale_down(normalize(ctx.source), climb.traced or est.traced, judged, ctx.say, judge.on_rung)
    refused += judge.refused
    if scaled is None:
        return None
    scaled.path, scaled.original = folder / "twin.py", digest(ctx.source)
    scaled.good_runs = judge.good_runs.get(scaled.source, {})
    scaled.refused, scaled.rung = list(judge.refused), judge.rung
    runs = getattr(oracle, "runs", None)  # what the chosen twin cost cold (a stand-in oracle may not say)
    if runs:
        scaled.bad_run = runs.get(oracle.cache.hash(scaled.source)[:16])
    scaled.path.write_text(scaled.source, encoding="utf-8")
    (folder / TWIN_MEMO).write_text(scaled.to_json(), encoding="utf-8")
    ctx.say(scaled.description)
    return scaled


def run_sources(
    sources: list[str], executor: ColdExecutor, folder: Path, timeout: float, home: Path
) -> list[RunResult]:
    """Each source, cold, by `executor` (its `jobs` at a time)."""
    folder.mkdir(exist_ok=True)
    paths = [folder / f"{digest(text)[:16]}.py" for text in sources]
    for path, text in zip(paths, sources, strict=False):
        path.write_text(text, encoding="utf-8")
    return executor.run_many(paths, timeout, home)
