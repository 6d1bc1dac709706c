"""Phase `establish`: the original fails, the same way, in every cold run. The first run (traced, where a scale-down
follows) decides the signature; the runs that confirm it go on in the background (`confirming`) while the scale-down
proposes its twin, and the guard takes them (`confirmed`). The bad env's probe and the envs the guard will try are
made meanwhile. A resumed reduction takes all of this from its earlier start."""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

from ...errors import MinreproError
from ...harness.executors import ColdExecutor
from ...harness.oracle import same_failure
from ...harness.probe import UNDER_TEST, probe
from ...harness.resources import (
    FIRST_RUN_TIMEOUT,
    TIMEOUT_FACTOR,
    available_ram_mb,
    cores,
    fits,
    free_gpu_mb,
    parallel_runs,
    timeout_for,
)
from ...harness.runner import DEFAULT_TIMEOUT, RunResult, run_from_dict, run_to_dict
from ...inputs import refuse_own_failure
from ...reducers.source import imported_modules, normalize
from ..options import MAX_AUTO_JOBS, ReduceOptions
from ..results import Context, Established, Results, TwinWithdrawn
from ..scale import ScaleDown, traced_run
from ..workdirs import digest, workdir

CONFIRMING = "the original's confirming runs"
FIRST_GUARD_ENV = "the env the guard judges first"
OTHER_GUARD_ENVS = "the guard's other envs"
TWIN_MEMO = "twin.json"  # the twin found, in the scale-down's work dir: a later run of the reduction starts from it


def establish(ctx: Context, done: Results) -> Established:
    opts = ctx.opts
    scale_dir, memo = scale_workdir(opts, ctx.script, ctx.source, ctx.python) if opts.scale_down else (None, None)
    # the bad env's probe (a process that imports torch) goes while the original runs, and serves the guard's envs too
    probing = ctx.background.submit(probe, ctx.python)
    if not opts.good_pythons and opts.guard == "auto":
        # the first is what the scale-down and the guard wait for; the others are made after it, taken by nobody: the
        # guard makes (or waits for) one only where the first does not pass
        # the script's imports read here: an AST built in a background thread beside one built here can fail
        # (`workers.ScriptImports`)
        sets = ctx.background.submit(guard_env_sets, probing, imported_modules(ctx.source))
        first = ctx.background.start(FIRST_GUARD_ENV, make_guard_envs, sets, slice(0, 1), ctx.notes)
        ctx.background.start(OTHER_GUARD_ENVS, make_guard_envs, sets, slice(1, None), ctx.notes, first)
    remembered = remembered_runs(ctx, scale_dir)
    disagreed = False
    if remembered is not None:
        cold, traced = remembered
        ctx.say(f"establish: the original's {len(cold)} cold runs from an earlier run of this reduction")
    else:
        trace = (
            None
            if scale_dir is None or memo is not None
            else functools.partial(traced_run, normalize(ctx.source), ctx.python, workdir=scale_dir, home=ctx.home)
        )
        original = Original(ctx.script, ctx.python, opts.timeout, ctx.home)
        first = first_run(original, trace)
        say_estimate(ctx, first)
        cold, traced = [first], first if trace is not None else None
        if first.signature is None:  # nothing to overlap: "does not fail", or "fails flakily", now
            runs = confirm(original, opts.confirm_runs, [first], ctx.say, bool(trace))
            cold, traced, disagreed = _agreed(ctx, runs, traced, opts.confirm_runs)
            remember_runs(ctx, scale_dir, cold, traced)
        else:
            planned = original_runs(opts.confirm_runs, bool(trace))
            ctx.background.start(CONFIRMING, confirm, original, planned, [first], ctx.say, bool(trace))
            if planned < opts.confirm_runs:
                ctx.say(
                    f"establish: the last of the {opts.confirm_runs} cold runs that must agree is the tiny twin's, "
                    "where the script fails (the original's where no twin stands)"
                )
    first_failing = next((run for run in cold if run.signature is not None), cold[0])
    established = stand_on(ctx, first_failing, cold, traced)
    env = probing.result()
    jobs, why = choose_jobs(opts.jobs, cold, "the original")
    ctx.say(f"parallel runs: {jobs} ({why})")
    return replace(
        established,
        env=env,
        jobs=jobs,
        jobs_why=why,
        scale_dir=scale_dir,
        remembered_twin=None if disagreed else memo,
        trace_disagreed=disagreed,
    )


def stand_on(ctx: Context, run: RunResult, cold: list[RunResult], traced: RunResult | None) -> Established:
    """The run the reduction stands on: its signature is the one to keep; refused here if it is no library's."""
    opts = ctx.opts
    timeout = timeout_for(cold, opts.timeout)
    if opts.timeout is None:
        ctx.say(
            f"timeout per run: {timeout:.0f} s ({TIMEOUT_FACTOR:g}x the slowest cold run, at least "
            f"{DEFAULT_TIMEOUT:.0f} s)"
        )
    refuse_missing_libraries(run, ctx.source, ctx.python)
    # a traced run ran the normalized copy: its line numbers are not the user's
    given = opts.prepared.name if opts.prepared else ctx.script.name
    refuse_own_failure(run if run is not traced else replace(run, script_lines=()), given)
    if opts.signature and not matches_regex(opts.signature, run.raw_headline):
        raise MinreproError(
            f"{ctx.script.name} fails with '{run.raw_headline.splitlines()[0]}', "
            f"which does not match --signature {opts.signature!r}"
        )
    matcher = functools.partial(same_failure, run.signature, opts.signature)
    return Established(run.signature, run, tuple(cold), traced, timeout, 1, "", None, matcher)


def original_runs(confirm_runs: int, traced: bool) -> int:
    """How many of the original's cold runs `establish` makes (the first included): `--confirm-runs`, one fewer where
    the first is the scale-down's traced run. There the last run that must agree is the tiny twin's, where the script
    fails: the run the search will stand on, a few seconds where the original's may take a minute. Where no twin
    stands, `confirmed` makes that run on the original. Never fewer than one plain run beside the traced one."""
    return max(2, confirm_runs - 1) if traced else confirm_runs


def confirmed(ctx: Context, established: Established, on_twin: bool = False, spent: bool = False) -> Established:
    """The original's confirming runs (started by `establish`), taken: all agree, or a one-line error. `on_twin`: a
    tiny twin stands, its cold run where the script fails counting as the last (`original_runs`); otherwise the runs
    still missing are made now, on the original, unless the time budget is `spent`. Where only the traced run
    disagrees with the plain ones, the trace is no ground to stand on: the reduction stands on a plain run at real
    scale (`trace_disagreed`)."""
    runs = ctx.background.take(CONFIRMING)
    if runs is None:  # none started: a resumed reduction's remembered runs, which an earlier twin may have completed
        cold, traced, disagreed = list(established.cold), established.traced, False
    else:
        planned = original_runs(ctx.opts.confirm_runs, established.traced is not None)
        cold, traced, disagreed = _agreed(ctx, runs, established.traced, planned)
    missing = ctx.opts.confirm_runs - len(cold) - (1 if on_twin and not disagreed else 0)
    if missing > 0 and not spent:
        ctx.say(f"establish: no tiny twin stands: {missing} more cold run(s) of the original")
        original = Original(ctx.script, ctx.python, ctx.opts.timeout, ctx.home)
        cold = confirm(original, len(cold) + missing, cold, ctx.say)
    remember_runs(ctx, established.scale_dir, cold, traced)
    if not disagreed:
        return replace(established, cold=tuple(cold), timeout=timeout_for(cold, ctx.opts.timeout))
    if established.scale_dir is not None:  # a twin planned from that trace is no ground for a later run either
        (established.scale_dir / TWIN_MEMO).unlink(missing_ok=True)
    again = stand_on(ctx, cold[0], cold, None)
    jobs, why = choose_jobs(ctx.opts.jobs, cold, "the original")
    return replace(
        again,
        env=established.env,
        jobs=jobs,
        jobs_why=why,
        scale_dir=established.scale_dir,
        trace_disagreed=True,
    )


@dataclass
class ConfirmingBeside:
    """The original's confirming runs that the guard left going beside the search on the twin
    (`GuardChoice.confirming`): taken between passes once they have ended (`poll`), or at the search's end (`take`).
    Where the traced run alone disagreed, the twin is no ground: `TwinWithdrawn`, and the reduction goes back to the
    guard on the original."""

    ctx: Context
    established: Established
    taken: Established | None = None

    def poll(self) -> None:
        if self.taken is None and not self.ctx.background.running(CONFIRMING):
            self.taken = self._confirmed()

    def take(self) -> Established:
        if self.taken is None:
            self.taken = self._confirmed()
        return self.taken

    def _confirmed(self) -> Established:
        # no run is made here: where the twin is withdrawn, the guard on the original makes what is missing
        est = confirmed(self.ctx, self.established, on_twin=True, spent=True)
        if est.trace_disagreed:
            raise TwinWithdrawn(est)
        return est


def _agreed(
    ctx: Context, runs: list[RunResult], traced: RunResult | None, planned: int
) -> tuple[list[RunResult], RunResult | None, bool]:
    """The cold runs that agree, the traced run, and whether the traced run alone disagreed (then it is dropped):
    `confirm` made one run more than the `planned` ones."""
    if len(runs) <= planned:
        return runs, traced, False
    first = runs[0]  # `confirm`: the traced run alone disagreed, a plain run took its place
    ctx.note(
        f"the traced run failed otherwise ({first.signature.headline if first.signature else 'passed'}) than "
        "the plain runs: no tiny twin, reduced at real scale"
    )
    return runs[1:], None, True


@dataclass(frozen=True)
class Original:
    """The user's script as its establishing runs run it: cold, under `python`, within --timeout (None: not given),
    importing from `home` (its directory) first."""

    script: Path
    python: str
    timeout: float | None
    home: Path

    def runs(self, copies: int, at_once: int, timeout: float) -> list[RunResult]:
        return ColdExecutor(self.python, at_once).run_many([self.script] * copies, timeout, self.home)


def first_run(original: Original, traced: Callable[[float], RunResult] | None) -> RunResult:
    """The original's first run, alone (under --timeout, or FIRST_RUN_TIMEOUT: nothing is known of its cost yet). With
    `traced` it is the scale-down's traced run: the trace only observes, and the scale-down can start as soon as it
    ends."""
    if traced is not None:
        return traced(original.timeout or FIRST_RUN_TIMEOUT)
    return original.runs(1, 1, original.timeout or FIRST_RUN_TIMEOUT)[0]


def confirm(
    original: Original,
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
            f"establish: run 1 of {runs} took {done[0].seconds:.1f} s{_footprint(done[0])}; "
            f"{left} more, {at_once} at once"
        )
    script, later = original.script, timeout_for(done, original.timeout)
    more = original.runs(left, at_once, later) if left > 0 else []
    results = done + more  # what must agree
    agree = bool(more) and more[0].signature is not None and all(m.signature == more[0].signature for m in more)
    if stand_in and agree and done[0].signature != more[0].signature:
        # the traced run alone may disagree (a trace is no plain run): one more plain run takes its place
        more += original.runs(1, 1, later)
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


def _footprint(run: RunResult) -> str:
    if not run.peak_rss_mb:
        return ""
    gpu = f", {run.peak_gpu_mb:.0f} MB GPU" if run.peak_gpu_mb else ""
    return f" ({run.peak_rss_mb:.0f} MB RAM{gpu})"


def say_estimate(ctx: Context, first: RunResult) -> None:
    """Right after the first run: where the original's own cost makes the budget impossible, say so now."""
    # two more cold runs (side by side) and a cold verification cannot be avoided, whatever the search does
    floor = ctx.budget.establishing_fits(first.seconds)
    if floor is not None:
        ctx.say(
            f"the time budget ({ctx.budget.seconds:.0f} s, --max-seconds) cannot hold this reduction: one run of "
            f"the original takes {first.seconds:.0f} s, so establishing and verifying alone need about "
            f"{floor:.0f} s; the result will be verified, and may be far from minimal"
        )
        ctx.notes.append(
            f"the original's own cost (about {floor:.0f} s to establish and verify) exceeds the time "
            f"budget of {ctx.budget.seconds:.0f} s"
        )


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


def guard_env_sets(probing: Future, imported: set[str]) -> list[tuple[str, bool]]:
    """The envs the guard may try, in its order, once the bad env's probe says its versions."""
    from ..guard import guard_env_sets as sets

    return sets(probing.result().versions, imported)


def make_guard_envs(sets: Future, which: slice, notes: list[str], after: Future | None = None) -> None:
    """The envs the guard may try (`which` of `sets`, the future of `guard_env_sets`), made in the cache while the
    original's cold runs go (a minute or more each, the first time); `after`: the task to let finish first."""
    from ..guard import make_guard_envs as make

    with contextlib.suppress(Exception):  # the guard makes them itself, and says why, if this fails
        if after is not None:
            after.result()
        make(sets.result()[which], notes.append)


def remembered_runs(ctx: Context, scale_dir: Path | None) -> tuple[list[RunResult], RunResult | None] | None:
    """The original's cold runs (and the traced run) from an earlier, interrupted run of this same reduction."""
    path = established_path(ctx, scale_dir)
    if ctx.opts.fresh or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("original") != digest(ctx.source) or data.get("python") != ctx.python:
            return None
        cold = [run_from_dict(run) for run in data["cold"]]
        return cold, run_from_dict(data["traced"]) if data.get("traced") else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def remember_runs(ctx: Context, scale_dir: Path | None, cold: list[RunResult], traced: RunResult | None) -> None:
    established_path(ctx, scale_dir).write_text(
        json.dumps(
            {
                "original": digest(ctx.source),
                "python": ctx.python,
                "cold": [run_to_dict(run) for run in cold],
                "traced": run_to_dict(traced) if traced is not None else None,
            }
        ),
        encoding="utf-8",
    )


def established_path(ctx: Context, scale_dir: Path | None) -> Path:
    if scale_dir is not None:
        return scale_dir / "established.json"
    key = json.dumps(["establish", ctx.python, ctx.opts.confirm_runs])
    return workdir(ctx.opts, ctx.script, ctx.source, key) / "established.json"


def scale_workdir(opts: ReduceOptions, script: Path, source: str, python: str) -> tuple[Path, ScaleDown | None]:
    """The scale-down's own work dir, and the twin found there by an earlier run of this script (a resumed reduction
    skips the traced run and the search for it)."""
    folder = workdir(opts, script, source, json.dumps(["scale", opts.signature, python]))
    if opts.workdir:  # the user's one work dir holds the search's state too: the twin's goes in a folder of its own
        folder = folder / "scale"
        folder.mkdir(exist_ok=True)
    memo = folder / TWIN_MEMO
    if opts.fresh:
        for stale in (memo, folder / "cache.jsonl"):
            stale.unlink(missing_ok=True)
    if memo.exists():
        with contextlib.suppress(ValueError, KeyError, TypeError):
            found = ScaleDown.from_json(memo.read_text(encoding="utf-8"), folder / "twin.py")
            if found.original == digest(source):  # the memo of this script, not of an earlier edit of it
                return folder, found
    return folder, None


def matches_regex(regex: str, text: str) -> bool:
    try:
        return re.search(regex, text) is not None
    except re.error as exc:
        raise MinreproError(f"--signature is not a valid regex: {exc}") from None
